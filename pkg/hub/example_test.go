package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"

	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// A hub on one instance, an MCP server that dials out to it, and a client
// that calls the server's tool through it. The client connects first and
// hears the hub's tools/list_changed when the server joins; the tool is
// named server__tool.
func Example() {
	// One instance on an in-memory broker; its logs (slog.Default() when
	// Logger is nil) are left out here.
	h, err := hub.New(hub.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h.Handler()) // in production: h.NewHTTPServer()
	defer srv.Close()
	defer h.Close()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx := context.Background()

	changed := make(chan struct{}, 1)
	c, err := mcp.Connect(ctx, ws+"/mcp", &mcp.ClientOptions{
		OnNotification: func(method string, _ json.RawMessage) {
			if method == mcp.NotificationToolsListChanged {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	type greetArgs struct {
		Name string `json:"name"`
	}
	s := mcp.NewServer(mcp.Implementation{Name: "greeter", Version: "1.0.0"}, nil)
	mcp.AddTypedTool(s, &mcp.Tool{Name: "greet", Description: "Say hello"},
		func(ctx context.Context, req *mcp.ToolRequest, args greetArgs) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("Hello, " + args.Name)}}, nil
		})
	serving, stop := context.WithCancel(ctx)
	dialed := make(chan struct{})
	go func() {
		defer close(dialed)
		s.Dial(serving, ws+"/mcp/server?name=greeter", nil) // reconnects until stopped
	}()
	defer func() {
		stop()
		<-dialed
	}()

	<-changed
	tools, err := c.AllTools(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tools {
		fmt.Println("tool:", t.Name)
	}
	res, err := c.CallTool(ctx, "greeter__greet", map[string]any{"name": "Ada"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].Text)
	// Output:
	// tool: greeter__greet
	// Hello, Ada
}
