package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Sample payloads the suite's scenarios look for.
const (
	// imagePNG is a 1x1 red PNG.
	imagePNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	// audioWAV is a minimal WAV file.
	audioWAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

// jsonSchema2020 is the input schema of json_schema_2020_12_tool, which the
// json-schema-2020-12 scenario expects back unchanged: $schema, $defs and
// additionalProperties (SEP-1613), and the composition, conditional and
// $anchor keywords that 2026-07-28 allows (SEP-2106).
const jsonSchema2020 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
	`"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
	`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},` +
	`"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},` +
	`"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],` +
	`"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},` +
	`"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`

// NewServer returns the fixture: an MCP server with the tools, resources
// and prompts, under the names and with the behaviours, that the official
// conformance suite's server scenarios expect, in both eras (sessions, and
// 2026-07-28), and the tasks extension. Sessions are independent, and the
// tools that ask for input keep their state in the request, under an HMAC,
// so one Server serves every session and stateless request the suite
// sends. opts may be nil (ProtocolVersions chooses the eras it speaks;
// Tasks defaults to a store in memory). Its tasks outlive their requests:
// Shutdown stops them.
func NewServer(opts *mcp.ServerOptions) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "switchboard-conformance-fixture", Version: "1.0.0"}, withTasks(opts))
	addTools(s)
	addHeaderTools(s)
	addStatelessTools(s)
	addInputTools(s, newSealer())
	addTaskTools(s)
	addResources(s)
	addPrompts(s)
	s.SetCompletionHandler(func(ctx context.Context, ss *mcp.ServerSession, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{}}}, nil
	})
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(s)}}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func noArgs(name, description string) *mcp.Tool {
	return &mcp.Tool{Name: name, Description: description, InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
}

// addHeaderTools adds the tool of the http-custom-header-server-validation
// scenario: a parameter its schema has mirrored in a header (SEP-2243's
// x-mcp-header), Mcp-Param-Region, which the Server checks against the
// argument on a POST without a session (mcp.CheckParamHeaders).
func addHeaderTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "test_header_param", Description: "Says which region it was given, which clients mirror in the Mcp-Param-Region header",
		InputSchema: schema(`"region":{"type":"string","description":"The region to run in","x-mcp-header":"Region"}`, "region")},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Region string `json:"region"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
				return nil, err
			}
			return text("Region: " + args.Region), nil
		})
}

func addTools(s *mcp.Server) {
	s.AddTool(noArgs("test_simple_text", "Tests simple text content response"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return text("This is a simple text response for testing."), nil
		})
	s.AddTool(noArgs("test_image_content", "Tests image content response"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.ImageContent(imagePNG, "image/png")}}, nil
		})
	s.AddTool(noArgs("test_audio_content", "Tests audio content response"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.AudioContent(audioWAV, "audio/wav")}}, nil
		})
	s.AddTool(noArgs("test_embedded_resource", "Tests embedded resource content response"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.EmbeddedResource(mcp.ResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content.",
			})}}, nil
		})
	s.AddTool(noArgs("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				mcp.TextContent("Multiple content types test:"),
				mcp.ImageContent(imagePNG, "image/png"),
				mcp.EmbeddedResource(mcp.ResourceContents{
					URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
				}),
			}}, nil
		})
	s.AddTool(noArgs("test_tool_with_logging", "Tests tool that emits log messages during execution"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					if err := sleep(ctx, 50*time.Millisecond); err != nil {
						return nil, err
					}
				}
				req.Log(ctx, mcp.LevelInfo, "conformance-fixture", msg)
			}
			return text("Tool with logging executed successfully"), nil
		})
	s.AddTool(noArgs("test_tool_with_progress", "Tests tool that reports progress notifications"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			for i, p := range []float64{0, 50, 100} {
				if i > 0 {
					if err := sleep(ctx, 50*time.Millisecond); err != nil {
						return nil, err
					}
				}
				if err := req.Progress(ctx, p, 100, fmt.Sprintf("Completed step %v of 100", p)); err != nil {
					return nil, err
				}
			}
			token := "0"
			if t, ok := req.Params.Meta[mcp.MetaProgressToken]; ok {
				token = fmt.Sprint(t)
			}
			return text(token), nil
		})
	s.AddTool(noArgs("test_error_handling", "Tests error response handling"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("This tool intentionally returns an error for testing")
		})
	s.AddTool(noArgs("test_reconnection", "Tests SSE stream disconnection and client reconnection (SEP-1699): "+
		"the server closes the stream mid-call and sends the result after the client reconnects."),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			// Served directly over Streamable HTTP, the session closes the
			// call's stream; the answer waits for the client's GET with
			// Last-Event-ID. Elsewhere (dialed out to a hub) it simply answers.
			if sess := mcp.StreamSessionFromContext(ctx); sess != nil {
				sess.CloseStream(req.ID)
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
			return text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_sampling", Description: "Tests server-initiated sampling (LLM completion request)",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string","description":"The prompt to send to the LLM"}},"required":["prompt"]}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if res, ok := mcp.InputResponse[mcp.CreateMessageResult](req.InputResponses, "sample"); ok {
				return text("LLM response: " + res.Content.Text), nil
			}
			var args struct {
				Prompt string `json:"prompt"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"sample": mcp.SamplingInput(&mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent(args.Prompt)}},
				MaxTokens: 100,
			})}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "test_elicitation", Description: "Tests server-initiated elicitation (user input request)",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The message to show the user"}},"required":["message"]}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return elicit(req, "User response", args.Message,
				`{"type":"object","properties":{"response":{"type":"string","description":"User's response"}},"required":["response"]}`)
		})
	s.AddTool(noArgs("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return elicit(req, "Elicitation completed", "Please review and update the form fields with defaults", `{"type":"object","properties":{`+
				`"name":{"type":"string","description":"User name","default":"John Doe"},`+
				`"age":{"type":"integer","description":"User age","default":30},`+
				`"score":{"type":"number","description":"User score","default":95.5},`+
				`"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},`+
				`"verified":{"type":"boolean","description":"Verification status","default":true}},"required":[]}`)
		})
	s.AddTool(noArgs("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return elicit(req, "Elicitation completed", "Please select options from the enum fields", `{"type":"object","properties":{`+
				`"untitledSingle":{"type":"string","description":"Select one option","enum":["option1","option2","option3"]},`+
				`"titledSingle":{"type":"string","description":"Select one option with titles","oneOf":[`+
				`{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},`+
				`"legacyEnum":{"type":"string","description":"Select one option (legacy)","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},`+
				`"untitledMulti":{"type":"array","description":"Select multiple options","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},`+
				`"titledMulti":{"type":"array","description":"Select multiple options with titles","minItems":1,"maxItems":3,"items":{"anyOf":[`+
				`{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}},"required":[]}`)
		})
	s.AddTool(&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
		InputSchema: json.RawMessage(jsonSchema2020)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return text("JSON Schema 2020-12 tool called with: " + string(req.Params.Arguments)), nil
		})
	// The http-custom-header-server-validation scenario (SEP-2243) looks for
	// a tool with a parameter mirrored in a header (x-mcp-header): a client
	// sends it as Mcp-Param-Region, which the server is to check against the
	// arguments.
	s.AddTool(&mcp.Tool{Name: "test_header_param", Description: "Echoes its region, which clients mirror in the Mcp-Param-Region header (SEP-2243)",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Region string `json:"region"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return text("Region: " + args.Region), nil
		})
}

// elicit asks the caller's user to fill schema (an input request, which
// the Server turns into elicitation/create for a client of a session) and
// reports the answer.
func elicit(req *mcp.ToolRequest, prefix, message, schema string) (*mcp.CallToolResult, error) {
	res, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "form")
	if !ok {
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{
			"form": mcp.ElicitInput(&mcp.ElicitParams{Message: message, RequestedSchema: json.RawMessage(schema)}),
		}}, nil
	}
	content, _ := json.Marshal(res.Content)
	if res.Content == nil {
		content = []byte("{}")
	}
	return text(fmt.Sprintf("%s: action=%s, content=%s", prefix, res.Action, content)), nil
}

func addResources(s *mcp.Server) {
	s.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Title: "Static Text Resource",
		Description: "A static text resource for testing", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{
				URI: req.URI, MIMEType: "text/plain", Text: "This is the content of the static text resource.",
			}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Title: "Static Binary Resource",
		Description: "A static binary resource (image) for testing", MIMEType: "image/png"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, MIMEType: "image/png", Blob: imagePNG}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://watched-resource", Name: "watched-resource", Title: "Watched Resource",
		Description: "A resource that can be subscribed to", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, MIMEType: "text/plain", Text: "Watched resource content"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Title: "Resource Template",
		Description: "A resource template with parameter substitution", MIMEType: "application/json"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.URI, "test://template/"), "/data")
			data, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, MIMEType: "application/json", Text: string(data)}}}, nil
		})
}

func addPrompts(s *mcp.Server) {
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("This is a simple prompt for testing.")}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with required arguments",
		Arguments: []*mcp.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		}},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: mcp.TextContent(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"]))}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource",
		Description: "A prompt that includes an embedded resource",
		Arguments:   []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: mcp.EmbeddedResource(mcp.ResourceContents{
					URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing.",
				})},
				{Role: "user", Content: mcp.TextContent("Please process the embedded resource above.")},
			}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt that includes image content"},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: mcp.ImageContent(imagePNG, "image/png")},
				{Role: "user", Content: mcp.TextContent("Please analyze the image above.")},
			}}, nil
		})
}
