package catalog

import (
	"encoding/json"
	"errors"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The meta-tools of search mode: tools/list offers these two only.
const (
	// SearchToolsName finds tools: {query, limit?} -> structuredContent.tools.
	SearchToolsName = "search_tools"
	// CallToolName calls a tool found: {name, arguments}.
	CallToolName = "call_tool"
)

// Limits of search_tools' limit.
const (
	DefaultSearchLimit = 10
	MaxSearchLimit     = 50
)

// MetaTools returns the definitions of search_tools and call_tool, as
// tools/list shows them in search mode. Each call returns new values.
func MetaTools() []*mcp.Tool {
	return []*mcp.Tool{
		{
			Name:  SearchToolsName,
			Title: "Search tools",
			Description: "Find the tools that can do a task. Describe the task in a few words; the answer lists " +
				"the best matching tools first, each with its name, description and input schema. Call a tool " +
				"found with call_tool, or by its name.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"what you want to do, in a few words"},` +
				`"limit":{"type":"integer","minimum":1,"maximum":50,"default":10,"description":"how many tools at most"}},` +
				`"required":["query"]}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"tools":{"type":"array","items":` +
				`{"type":"object","properties":{"name":{"type":"string"},"description":{"type":"string"},` +
				`"inputSchema":{"type":"object"}},"required":["name","inputSchema"]}}},"required":["tools"]}`),
			Annotations: map[string]any{"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
		},
		{
			Name:        CallToolName,
			Title:       "Call a tool",
			Description: "Call a tool that search_tools found, by its name, with arguments that fit its input schema.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"name":{"type":"string","description":"the tool's name, as search_tools gave it"},` +
				`"arguments":{"type":"object","description":"the tool's arguments"}},` +
				`"required":["name"]}`),
		},
	}
}

// SearchArgs are search_tools' arguments.
type SearchArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

// Errors of the meta-tools' arguments; the hub answers them with -32602.
var (
	errSearchArgs = errors.New(`search_tools takes {"query": string, "limit"?: integer from 1 to 50}`)
	errCallArgs   = errors.New(`call_tool takes {"name": string, "arguments"?: object}`)
)

// ParseSearchArgs reads search_tools' arguments; Limit defaults to
// DefaultSearchLimit.
func ParseSearchArgs(raw json.RawMessage) (SearchArgs, error) {
	var a SearchArgs
	if err := json.Unmarshal(raw, &a); err != nil || a.Query == "" || a.Limit < 0 || a.Limit > MaxSearchLimit {
		return SearchArgs{}, errSearchArgs
	}
	if a.Limit == 0 {
		a.Limit = DefaultSearchLimit
	}
	return a, nil
}

// ParseCallArgs reads call_tool's arguments: the tool's name and its own
// arguments, raw (an object, or nil when absent), without decoding them.
func ParseCallArgs(raw json.RawMessage) (name string, args json.RawMessage, err error) {
	body := trimSpace(raw)
	if len(body) == 0 || body[0] != '{' {
		return "", nil, errCallArgs
	}
	for k, v := range jsonrpc.Members(body) {
		switch string(k) {
		case "name":
			s, ok := jsonrpc.Unquote(v)
			if !ok {
				return "", nil, errCallArgs
			}
			name = s
		case "arguments":
			v = trimSpace(v)
			if string(v) == "null" {
				args = nil
				continue
			}
			if len(v) == 0 || v[0] != '{' {
				return "", nil, errCallArgs
			}
			args = v
		}
	}
	if name == "" {
		return "", nil, errCallArgs
	}
	return name, args, nil
}

// Found is one tool search_tools returns.
type Found struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// SearchResult is search_tools' answer: the tools found, best first, in
// structuredContent.tools and, for clients that read text only, the same
// JSON as text.
func SearchResult(found []Found) *mcp.CallToolResult {
	found = append([]Found{}, found...)
	for i := range found {
		if len(found[i].InputSchema) == 0 {
			found[i].InputSchema = json.RawMessage(`{"type":"object"}`)
		}
	}
	body := struct {
		Tools []Found `json:"tools"`
	}{found}
	raw, _ := json.Marshal(body)
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(string(raw))}, StructuredContent: json.RawMessage(raw)}
}
