package gosdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Protocol version 2026-07-28 between pkg/mcp and the Go SDK, both ways,
// over Streamable HTTP without sessions: discovery, input requests
// fulfilled by the client and retried, and subscriptions/listen.

// TestClient_modernAgainstGoSDK runs pkg/mcp's Client in its default mode
// against the Go SDK's stateless handler: it speaks 2026-07-28, fulfils the
// SDK tool's input requests, and hears of a resource on a listen stream.
func TestClient_modernAgainstGoSDK(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "go-sdk-server", Version: "1.8.0"}, &sdk.ServerOptions{
		SubscribeHandler:   func(ctx context.Context, req *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(ctx context.Context, req *sdk.UnsubscribeRequest) error { return nil },
	})
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Description: "asks for a name and a word"},
		func(ctx context.Context, req *sdk.CallToolRequest, _ any) (*sdk.CallToolResult, any, error) {
			el, named := req.Params.InputResponses["name"].(*sdk.ElicitResult)
			msg, sampled := req.Params.InputResponses["word"].(*sdk.CreateMessageWithToolsResult)
			if !named || !sampled || req.Params.RequestState != "state" {
				return &sdk.CallToolResult{RequestState: "state", InputRequests: sdk.InputRequestMap{
					"name": &sdk.ElicitParams{Message: "name?", RequestedSchema: map[string]any{
						"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
					"word": &sdk.CreateMessageParams{MaxTokens: 5,
						Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "a word?"}}}},
				}}, nil, nil
			}
			word := msg.Content[0].(*sdk.TextContent).Text
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprint(word, ", ", el.Content["name"])}}}, nil, nil
		})
	s.AddResource(&sdk.Resource{URI: "test://watched", Name: "watched"}, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "watched"}}}, nil
	})
	url, hc, _ := sdkURL(t, s, &sdk.StreamableHTTPOptions{Stateless: true})

	updated := make(chan string, 4)
	c, err := mcp.Connect(testCtx(t), url, &mcp.ClientOptions{
		HTTP: mcp.StreamableClientOptions{HTTPClient: hc},
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("Hello"), Model: "m"}, nil
		},
		Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		OnNotification: func(method string, params json.RawMessage) {
			if method == mcp.NotificationResourceUpdated {
				updated <- string(params)
			}
		},
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, c.Close()) }()
	ctx := testCtx(t)
	assert.Equal(t, mcp.ModernVersion, c.InitializeResult().ProtocolVersion, "no fallback")
	assert.Equal(t, "go-sdk-server", c.InitializeResult().ServerInfo.Name, "from discover's _meta")

	res, err := c.CallTool(ctx, "ask", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada", res.Content[0].Text)
	read, err := c.ReadResource(ctx, "test://watched")
	require.NoError(t, err)
	assert.Equal(t, "watched", read.Contents[0].Text)

	require.NoError(t, c.Subscribe(ctx, "test://watched"))
	require.NoError(t, s.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "test://watched"}))
	assert.Contains(t, recv(t, updated), `"uri":"test://watched"`)
	require.NoError(t, c.Unsubscribe(ctx, "test://watched"))
}

// TestGoSDKClient_modernAgainstServer runs the Go SDK's client in its
// default mode against pkg/mcp's Server over its Streamable HTTP handler:
// it negotiates 2026-07-28, its middleware fulfils the Server's input
// requests, and its listen streams carry list changes and updates.
func TestGoSDKClient_modernAgainstServer(t *testing.T) {
	s := mcp.NewServer(mcp.Implementation{Name: "switchboard-server", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", Description: "asks for a name"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		form, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name")
		if !ok || form.Action != "accept" || req.RequestState != "asked" {
			return &mcp.CallToolResult{RequestState: "asked", InputRequests: map[string]mcp.InputRequest{
				"name": mcp.ElicitInput(&mcp.ElicitParams{Message: "name?",
					RequestedSchema: []byte(`{"type":"object","properties":{"name":{"type":"string"}}}`)}),
			}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprint("Hello, ", form.Content["name"]))}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "test://watched", Name: "watched"}, func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "watched"}}}, nil
	})
	serve := func(r *http.Request, sess *mcp.StreamSession) error {
		s.Serve(sess.Context(), sess.Conn())
		return nil
	}
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{Open: serve, Stateless: serve})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)

	updated := make(chan string, 4)
	changed := make(chan string, 4)
	client := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-client", Version: "1.8.0"}, &sdk.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace"}}, nil
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			offer(updated, req.Params.URI)
		},
		ToolListChangedHandler: func(ctx context.Context, req *sdk.ToolListChangedRequest) { offer(changed, "tools") },
	})
	cs, err := client.Connect(testCtx(t), &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: srv.Client()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() }) // first: its listen streams end with it
	ctx := testCtx(t)
	assert.Equal(t, mcp.ModernVersion, cs.InitializeResult().ProtocolVersion, "no fallback")
	assert.Equal(t, "switchboard-server", cs.InitializeResult().ServerInfo.Name)
	assert.Equal(t, 0, h.Sessions(), "no session")

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask"})
	require.NoError(t, err)
	assert.Equal(t, "Hello, Grace", res.Content[0].(*sdk.TextContent).Text)
	read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://watched"})
	require.NoError(t, err)
	assert.Equal(t, "watched", read.Contents[0].Text)

	require.NoError(t, cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "test://watched"}))
	// The SDK returns before its stream is acknowledged: update until the
	// client hears of it.
	waitFor(t, updated, func() { s.ResourceUpdated(ctx, "test://watched") })
	waitFor(t, changed, func() {
		s.AddTool(&mcp.Tool{Name: "more", Description: "another"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("more")}}, nil
		})
	})
}

// offer sends v on ch unless ch is full: waitFor may trigger more events
// than it reads.
func offer[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// waitFor triggers an event until ch hears of it, for up to wait: for a
// client that subscribes without waiting for the acknowledgement, so that
// the first events may come before its stream is open.
func waitFor[T any](t *testing.T, ch <-chan T, trigger func()) T {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	again := time.NewTicker(20 * time.Millisecond)
	defer again.Stop()
	for {
		trigger()
		select {
		case v := <-ch:
			return v
		case <-deadline.C:
			t.Fatalf("nothing received within %v", wait)
		case <-again.C:
		}
	}
}
