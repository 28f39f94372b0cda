package gosdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The other direction: pkg/mcp's Client, over its Streamable HTTP client
// conn, against the Go SDK's server and its StreamableHTTPHandler (what
// `hub connect --upstream` bridges to the hub).

type sdkArgs struct {
	Text string `json:"text,omitempty"`
}

// sdkServer is a Go SDK server with the tools the tests call.
func sdkServer(subscribed chan<- string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "go-sdk-server", Version: "1.8.0"}, &sdk.ServerOptions{
		SubscribeHandler: func(ctx context.Context, req *sdk.SubscribeRequest) error {
			subscribed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(ctx context.Context, req *sdk.UnsubscribeRequest) error { return nil },
	})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "echoes"}, func(ctx context.Context, req *sdk.CallToolRequest, a sdkArgs) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo " + a.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "steps", Description: "reports progress and logs"}, func(ctx context.Context, req *sdk.CallToolRequest, a sdkArgs) (*sdk.CallToolResult, any, error) {
		for i := 1; i <= 3; i++ {
			if token := req.Params.GetProgressToken(); token != nil {
				if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3}); err != nil {
					return nil, nil, err
				}
			}
			if err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("step %d", i)}); err != nil {
				return nil, nil, err
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "stepped"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "ask", Description: "samples and elicits"}, func(ctx context.Context, req *sdk.CallToolRequest, a sdkArgs) (*sdk.CallToolResult, any, error) {
		msg, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{
			Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "hi"}}}, MaxTokens: 5,
		})
		if err != nil {
			return nil, nil, err
		}
		el, err := req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "name?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
		}})
		if err != nil {
			return nil, nil, err
		}
		text := msg.Content.(*sdk.TextContent).Text + " " + el.Action + " " + fmt.Sprint(el.Content["name"])
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "poll", Description: "closes its stream, then answers"}, func(ctx context.Context, req *sdk.CallToolRequest, a sdkArgs) (*sdk.CallToolResult, any, error) {
		if req.Extra == nil || req.Extra.CloseSSEStream == nil {
			return nil, nil, fmt.Errorf("no CloseSSEStream")
		}
		req.Extra.CloseSSEStream(sdk.CloseSSEStreamArgs{RetryAfter: 10 * time.Millisecond})
		t := time.NewTimer(50 * time.Millisecond) // the answer comes while the stream is closed
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "polled"}}}, nil, nil
	})
	s.AddResource(&sdk.Resource{URI: "test://watched", Name: "watched"}, func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "watched"}}}, nil
	})
	return s
}

// sdkURL serves s with the Go SDK's Streamable HTTP handler and records
// the HTTP methods it is sent.
func sdkURL(t *testing.T, s *sdk.Server, opts *sdk.StreamableHTTPOptions) (string, *http.Client, func() []string) {
	t.Helper()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, opts)
	var mu sync.Mutex
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, srv.Client(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(methods)
	}
}

func TestClientConn_againstGoSDKServer(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts *sdk.StreamableHTTPOptions
	}{
		{"sse", &sdk.StreamableHTTPOptions{EventStore: sdk.NewMemoryEventStore(nil)}},
		{"json", &sdk.StreamableHTTPOptions{JSONResponse: true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			subscribed := make(chan string, 4)
			s := sdkServer(subscribed)
			url, hc, methods := sdkURL(t, s, mode.opts)
			type note struct{ method, params string }
			notes := make(chan note, 64)
			c, err := mcp.Connect(testCtx(t), url, &mcp.ClientOptions{
				HTTP: mcp.StreamableClientOptions{HTTPClient: hc},
				Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("hello"), Model: "m"}, nil
				},
				Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
				},
				OnNotification: func(method string, params json.RawMessage) { notes <- note{method, string(params)} },
			})
			require.NoError(t, err)
			ctx := testCtx(t)
			assert.Equal(t, "go-sdk-server", c.InitializeResult().ServerInfo.Name)
			assert.Equal(t, mcp.LatestVersion, c.InitializeResult().ProtocolVersion)

			tools, err := c.AllTools(ctx)
			require.NoError(t, err)
			assert.Len(t, tools, 4)

			res, err := c.CallTool(ctx, "echo", map[string]string{"text": "hi"}, nil)
			require.NoError(t, err)
			assert.Equal(t, "echo hi", res.Content[0].Text)

			if mode.name == "sse" {
				// Progress and logs come on the call's stream, before the answer.
				require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelInfo))
				var progress []float64
				res, err = c.CallTool(ctx, "steps", nil, &mcp.CallOptions{Progress: func(p *mcp.ProgressParams) { progress = append(progress, p.Progress) }})
				require.NoError(t, err)
				assert.Equal(t, "stepped", res.Content[0].Text)
				assert.Equal(t, []float64{1, 2, 3}, progress)

				res, err = c.CallTool(ctx, "poll", nil, nil)
				require.NoError(t, err, "the client resumed the closed stream with Last-Event-ID")
				assert.Equal(t, "polled", res.Content[0].Text)
			}

			res, err = c.CallTool(ctx, "ask", nil, nil)
			require.NoError(t, err)
			assert.Equal(t, "hello accept Ada", res.Content[0].Text, "sampling and elicitation answered by POSTs")

			require.NoError(t, c.Subscribe(ctx, "test://watched"))
			assert.Equal(t, "test://watched", recv(t, subscribed))
			require.NoError(t, s.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: "test://watched"}))
			for {
				n := recv(t, notes)
				if n.method == mcp.NotificationResourceUpdated {
					assert.Contains(t, n.params, "test://watched", "on the GET stream")
					break
				}
			}

			require.NoError(t, c.Close())
			assert.Contains(t, methods(), http.MethodDelete, "Close deletes the session")
		})
	}
}

// TestClientConn_againstGoSDKLegacySSE checks the older HTTP+SSE transport
// (2024-11-05) against the Go SDK's SSEHandler: Connect's POST of
// initialize is refused (400), so it falls back to a GET for the event
// stream and POSTs to the endpoint the server names.
func TestClientConn_againstGoSDKLegacySSE(t *testing.T) {
	subscribed := make(chan string, 4)
	s := sdkServer(subscribed)
	h := sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := mcp.Connect(testCtx(t), srv.URL, &mcp.ClientOptions{
		HTTP: mcp.StreamableClientOptions{HTTPClient: srv.Client()},
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("hello"), Model: "m"}, nil
		},
		Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	require.NoError(t, err)
	ctx := testCtx(t)
	assert.Equal(t, "go-sdk-server", c.InitializeResult().ServerInfo.Name)

	var progress []float64
	res, err := c.CallTool(ctx, "steps", nil, &mcp.CallOptions{Progress: func(p *mcp.ProgressParams) { progress = append(progress, p.Progress) }})
	require.NoError(t, err)
	assert.Equal(t, "stepped", res.Content[0].Text)
	assert.Equal(t, []float64{1, 2, 3}, progress)

	res, err = c.CallTool(ctx, "ask", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "hello decline <nil>", res.Content[0].Text)
	require.NoError(t, c.Close())

	// DialSSE directly, with a conn of its own.
	conn, err := mcp.DialSSE(ctx, srv.URL, &mcp.StreamableClientOptions{HTTPClient: srv.Client()})
	require.NoError(t, err)
	assert.Contains(t, conn.Endpoint(), "sessionid=")
	c, err = mcp.ConnectConn(ctx, conn, nil)
	require.NoError(t, err)
	res, err = c.CallTool(ctx, "echo", map[string]string{"text": "old"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "echo old", res.Content[0].Text)
	require.NoError(t, c.Close())
}
