package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// TestAppendJSON: the params and results that splice their raw member in
// encode to what encoding/json would say, and refuse raw JSON that is not.
func TestAppendJSON(t *testing.T) {
	t.Parallel()
	values := []any{
		&mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(` {"text": "x"} `), Meta: mcp.Meta{"progressToken": "t"}},
		&mcp.CallToolParams{Name: "echo"},
		&mcp.CallToolParams{Name: "", Arguments: json.RawMessage(`[]`)},
		&mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("ok")}, StructuredContent: json.RawMessage(`{"n":1}`)},
		&mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: map[string]int{"n": 1}, IsError: true},
		&mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("a \"quoted\" <line>\n\x01 é \xff")}, IsError: true},
		&mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("t"), mcp.ImageContent("AAAA", "image/png")}, StructuredContent: json.RawMessage(`[1]`)},
		&mcp.CallToolResult{Content: []mcp.Content{{Type: "text", Text: "t", Annotations: map[string]any{"priority": 1}}}},
		&mcp.CallToolResult{Content: []mcp.Content{}, Meta: mcp.Meta{"k": "v"}},
	}
	for _, v := range values {
		got, err := jsonrpc.Marshal(v)
		require.NoError(t, err)
		want, err := json.Marshal(v)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got))
	}
	empty, err := jsonrpc.Marshal(&mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: json.RawMessage(nil)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[]}`, string(empty), "empty raw content is left out, not null")
	empty, err = jsonrpc.Marshal(&mcp.CallToolResult{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[]}`, string(empty), "no content is an empty array, as the schema wants")
	empty, err = jsonrpc.Marshal(&mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("")}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"content":[{"type":"text","text":""}]}`, string(empty), "a text block always has its text")
	for _, v := range []any{
		&mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":`)},
		&mcp.CallToolResult{StructuredContent: json.RawMessage(`{} {}`)},
	} {
		_, err := jsonrpc.Marshal(v)
		assert.ErrorContains(t, err, "not valid JSON")
	}
}
