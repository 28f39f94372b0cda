// Command hub runs the Switchboard hub.
//
// Until the hub lands it serves the smallest useful thing: every WebSocket
// connection on /mcp is a JSON-RPC peer that answers "ping" and echoes
// "echo".
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	handler := peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		switch req.Method {
		case "ping":
			return struct{}{}, nil
		case "echo":
			return req.Params, nil
		}
		return nil, jsonrpc.ErrMethodNotFound
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp", func(w http.ResponseWriter, r *http.Request) {
		c, err := peer.Accept(w, r, nil)
		if err != nil {
			return
		}
		p := peer.New(c, &peer.Options{Handler: handler})
		p.Start(ctx)
	})
	srv := &http.Server{Addr: *addr, Handler: mux}
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	slog.Info("listening", "addr", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("serve", "err", err)
		os.Exit(1)
	}
}
