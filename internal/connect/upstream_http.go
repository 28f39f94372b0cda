package connect

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Transports of an upstream server (Server.Transport).
const (
	TransportStreamable = "streamable-http" // MCP's Streamable HTTP (2025-03-26 on)
	TransportSSE        = "sse"             // the older HTTP+SSE transport (2024-11-05)
)

// transport is the transport to use for s: the one it names, else SSE for
// a URL whose path ends in /sse (the convention of HTTP+SSE servers), else
// Streamable HTTP.
func (s *Server) transport() string {
	if s.Transport != "" {
		return s.Transport
	}
	if u, err := url.Parse(s.Upstream); err == nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/sse") {
		return TransportSSE
	}
	return TransportStreamable
}

// httpUpstream is one session with a server over HTTP. It never ends by
// itself: its conn's Read fails when the session is gone (404) or the
// server cannot be reached any more.
type httpUpstream struct {
	conn peer.Conn
}

var _ upstream = (*httpUpstream)(nil)

// dialUpstream opens a session with srv's HTTP server. Streamable HTTP sends
// nothing yet (the hub's initialize opens the session); HTTP+SSE opens its
// event stream and waits for the server to name its message endpoint.
// client sends the requests (nil: http.DefaultClient).
func dialUpstream(ctx context.Context, srv *Server, client *http.Client, readLimit int, log *slog.Logger) (*httpUpstream, error) {
	// NameRelated: the hub learns which call each of the server's requests
	// serves from the POST stream that carried it, so that one session
	// serves every client at once (an HTTP+SSE server's requests all come
	// on one stream: its session is leased to one client at a time).
	// TraceHeaders: a server that reads trace context from headers only
	// continues the trace the request's _meta carries.
	opts := &mcp.StreamableClientOptions{HTTPClient: client, Header: srv.Header, MaxMessageBytes: readLimit, Logger: log, NameRelated: true,
		TraceHeaders: true}
	if srv.transport() == TransportSSE {
		ctx, cancel := context.WithTimeout(ctx, link.DialTimeout)
		defer cancel()
		c, err := mcp.DialSSE(ctx, srv.Upstream, opts)
		if err != nil {
			return nil, err
		}
		return &httpUpstream{conn: c}, nil
	}
	c, err := mcp.DialStreamable(ctx, srv.Upstream, opts)
	if err != nil {
		return nil, err
	}
	return &httpUpstream{conn: c}, nil
}

func (h *httpUpstream) ended() <-chan struct{} { return nil }

// stop ends the session: Streamable HTTP sends DELETE (bounded by the
// conn's own timeout); grace does not apply.
func (h *httpUpstream) stop(time.Duration) { h.conn.Close(peer.CloseNormal, "") }

func (h *httpUpstream) how() string { return "ended its session" }
