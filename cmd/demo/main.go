// Command demo runs the demo MCP server on its own, dialing out to a hub:
// the example of a server that lives behind NAT and connects outbound.
//
//	demo --hub ws://127.0.0.1:8080/mcp/server --name demo2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

func main() {
	hubURL := flag.String("hub", "ws://127.0.0.1:8080/mcp/server", "the hub's server endpoint")
	name := flag.String("name", "demo", "the server's name")
	token := flag.String("token", os.Getenv("SWITCHBOARD_TOKEN"), "bearer token, when the hub requires one")
	clock := flag.Duration("clock", time.Second, "how often demo://clock changes")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	d := demo.New(&demo.Options{Name: *name, ClockInterval: *clock})
	err := d.Run(ctx, *hubURL, &mcp.DialOptions{
		Token:        *token,
		OnConnect:    func(*mcp.ServerSession) { log.Info("connected to the hub", "hub", *hubURL, "name", *name) },
		OnDisconnect: func(_ *mcp.ServerSession, err error) { log.Info("disconnected from the hub", "err", err) },
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
