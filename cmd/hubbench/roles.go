package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
	"github.com/switchboard-mcp/switchboard/internal/cli"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Roles: what a child started from this executable does.
const (
	roleEcho = "echo-server" // raw coder/websocket echo: the baseline
	rolePeer = "peer-server" // pkg/peer server answering every call with its params
	roleMCP  = "mcp-server"  // MCP server dialing out to a hub, tool "echo"
	// the same MCP server on its standard input and output, for `hub connect`
	roleStdio = "stdio-server"
	roleHub   = "hub" // `hub serve` in-process (internal/cli) plus net/http/pprof: the profiled twin
	// raw coder/websocket fan-out to MCP clients: the fan-out baseline
	roleFanout = "fanout-server"
	// an OTLP/HTTP receiver that discards what it takes: the traced hubs'
	// local collector (tracing.go)
	roleOTLPSink = "otlp-sink"
	// the MCP server of roleStdio served over Streamable HTTP by pkg/mcp,
	// its own SDK: the floor of a call through `hub connect`
	roleHTTPServer = "http-server"
	// a raw relay between a hub and a stdio server (the command after --),
	// copying WebSocket frames to lines and lines to frames: the floor of
	// the connector's own cost
	rolePipe = "pipe-relay"
)

// roleFlags are the flags of the hidden roles.
type roleFlags struct {
	addr  string   // listen address (echo-server, peer-server, hub)
	url   string   // hub URL to dial (mcp-server, pipe-relay)
	redis string   // Redis URL (hub)
	args  []string // the command a pipe-relay runs
}

// runRole runs one role until ctx ends (SIGINT or SIGTERM from hubbench).
func runRole(ctx context.Context, role string, f roleFlags) error {
	_, _ = benchlab.RaiseNoFile(0) // the limits hubbench set, inherited
	switch role {
	case roleEcho, rolePeer:
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return err
		}
		var echo http.Handler = http.HandlerFunc(rawEcho)
		if role == rolePeer {
			echo = http.HandlerFunc(peerEcho)
		} else {
			mux := http.NewServeMux()
			mux.HandleFunc("/http", rawHTTPEcho)
			mux.HandleFunc("/", rawEcho)
			echo = mux
		}
		return serve(ctx, ln, withPprof(echo))
	case roleFanout:
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return err
		}
		return serve(ctx, ln, withPprof(http.HandlerFunc(newRawFanout().serve)))
	case roleMCP:
		return mcpEchoServer().Dial(ctx, f.url, nil)
	case roleStdio:
		ss := mcpEchoServer().Serve(ctx, peer.NewStdio(os.Stdin, os.Stdout, nil))
		return ss.Peer().Wait()
	case roleHTTPServer:
		ln, err := net.Listen("tcp", f.addr)
		if err != nil {
			return err
		}
		srv := mcpEchoServer()
		h := mcp.NewStreamableHandler(&mcp.StreamableOptions{Open: func(_ *http.Request, sess *mcp.StreamSession) error {
			srv.Serve(sess.Context(), sess.Conn())
			return nil
		}})
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		return serve(ctx, ln, withPprof(mux))
	case rolePipe:
		return pipeRelay(ctx, f.url, f.args)
	case roleHub:
		return runTwin(ctx, f)
	case roleOTLPSink:
		return runOTLPSink(ctx, f.addr)
	}
	return fmt.Errorf("unknown role %q", role)
}

// serve announces the listener's address on stdout and serves h on it
// until ctx ends.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	fmt.Printf("hubbench: ready addr=%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// rawEcho echoes every frame back as it came, with coder/websocket alone:
// the least any WebSocket service on this machine can cost.
func rawEcho(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{peer.Subprotocol}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(peer.DefaultReadLimit)
	var buf bytes.Buffer // reused: the echo allocates nothing per frame
	for {
		typ, rd, err := c.Reader(r.Context())
		if err != nil {
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(rd); err != nil {
			return
		}
		if err := c.Write(r.Context(), typ, buf.Bytes()); err != nil {
			return
		}
	}
}

// rawHTTPEcho answers a POST with its body, with net/http alone: the least
// an HTTP request and its answer cost on this machine, the floor of the
// Streamable HTTP rows.
func rawHTTPEcho(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// peerEcho serves a pkg/peer connection whose handler returns each call's
// params: the whole JSON-RPC stack without MCP and without the hub. Its
// requests are lent (the answer refers to the params, and is written
// before their buffer goes back), as the raw echo reuses its buffer.
func peerEcho(w http.ResponseWriter, r *http.Request) {
	c, err := peer.Accept(w, r, nil)
	if err != nil {
		return
	}
	p := peer.New(c, &peer.Options{
		Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			return req.Params, nil
		}),
		MaxConcurrent: 64,
		MaxPending:    1024,
		LendRequests:  true,
	})
	p.Start(context.Background())
	_ = p.Wait()
}

// mcpEchoServer is the MCP server behind the hub: one tool, "echo", whose
// result carries its arguments back as structured content, so that the
// answer is as large as the call, like the echoes of the baselines. A call
// with a progress token gets one progress report before its answer. Its
// requests are lent (the result refers to the arguments and is written
// before their buffer goes back).
func mcpEchoServer() *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "bench", Version: "1.0.0"}, &mcp.ServerOptions{LendRequests: true})
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Return the arguments."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			_ = req.Progress(ctx, 1, 1, "") // nothing without a token
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: json.RawMessage(req.Params.Arguments)}, nil
		})
	return s
}

// runTwin runs `hub serve` in this process, through the command's own
// entry (internal/cli), with the flags bin/hub gets from startHub, and
// net/http/pprof mounted beside the hub: the hub binary has no profiling
// endpoint, and this twin exists only to be profiled. It announces its
// address with the hub's own "switchboard listening" line.
func runTwin(ctx context.Context, f roleFlags) error {
	// Limits are policies, not costs: as for bin/hub (startHub), none is
	// hit by a measurement (the idle HTTP sessions have no token).
	args := []string{"serve", "--addr", f.addr, "--log-level", "info", "--rate-limit=-1", "--max-connections-per-token=1000000"}
	if f.redis != "" {
		args = append(args, "--redis", f.redis)
	}
	return cli.Run(ctx, args, &cli.Env{
		// As for bin/hub: none of the user's SWITCHBOARD_* settings.
		LookupEnv: func(string) (string, bool) { return "", false },
		Handler:   withPprof,
	})
}

// withPprof serves net/http/pprof under /debug/pprof/ and h elsewhere, so
// that the role's allocations and profiles can be read.
func withPprof(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
