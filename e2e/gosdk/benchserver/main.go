// Command benchserver is the official Go SDK's MCP server with one tool,
// "echo", which returns its arguments as structured content: the backend
// of cmd/hubbench's `hub connect` rows, on its standard input and output
// (behind `hub connect`) or, with -http, served over Streamable HTTP by the
// SDK's own handler (the floor: the backend without the hub). With -http it
// prints "hubbench: ready addr=HOST:PORT" once it listens.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("http", "", "serve Streamable HTTP at /mcp on this address instead of stdio")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1.0.0"}, nil)
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Return the arguments.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: req.Params.Arguments}, nil
		})
	if *addr == "" {
		if err := s.Run(ctx, &sdk.StdioTransport{}); err != nil && ctx.Err() == nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	srv := &http.Server{Handler: mux}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Printf("hubbench: ready addr=%s\n", ln.Addr())
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
