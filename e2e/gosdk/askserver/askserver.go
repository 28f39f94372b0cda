// Package askserver is an MCP server written with the official Go SDK and
// nothing else, as published servers are: its tool "ask" asks the calling
// client for sampling, elicitation and its roots, through the SDK's own
// ServerSession methods, which (on stdio) cannot say which call they
// belong to. The tests put it behind `hub connect`, over stdio
// (cmd/askserver) and over Streamable HTTP.
package askserver

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// New returns the server.
func New() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "go-ask-server", Version: "1.0.0"}, nil)
	s.AddTool(&sdk.Tool{
		Name:        "ask",
		Description: "Asks the calling client for a sample, a form and its roots, and says what each answered.",
		InputSchema: map[string]any{"type": "object"},
	}, ask)
	return s
}

func ask(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	sampled, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 10,
		Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "who are you?"}}}})
	if err != nil {
		return nil, fmt.Errorf("sampling: %w", err)
	}
	text, _ := sampled.Content.(*sdk.TextContent)
	if text == nil {
		return nil, fmt.Errorf("sampling: not text")
	}
	form, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
	if err != nil {
		return nil, fmt.Errorf("elicitation: %w", err)
	}
	roots, err := req.Session.ListRoots(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("roots: %w", err)
	}
	var uris []string
	for _, r := range roots.Roots {
		uris = append(uris, r.URI)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{
		Text: fmt.Sprintf("sampling=%s elicitation=%v roots=%s", text.Text, form.Content["name"], strings.Join(uris, ","))}}}, nil
}
