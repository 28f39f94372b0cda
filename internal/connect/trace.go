package connect

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// hops traces the connector's hop (Options.Tracing): each request of the
// hub's that the relay passes to the server is a span (tracing.Hop, a
// client span named as the request), the child of the trace context its
// _meta carries (the hub's span of the request it sent), and its own
// context replaces that one in _meta, so that the server continues the
// trace from the hop; a Streamable HTTP upstream gets it as headers too
// (mcp.StreamableClientOptions.TraceHeaders). The span ends with the
// server's answer, the hub's cancellation, or the session. A nil *hops
// traces nothing and leaves every frame as it is.
type hops struct {
	tr      *tracing.Tracing
	server  string
	network tracing.Network

	mu    sync.Mutex
	spans map[jsonrpc.ID]tracing.Span // the requests in flight at the server
}

// newHops returns the hops of one session with a server, or nil when tr is
// off.
func newHops(tr *tracing.Tracing, server string, network tracing.Network) *hops {
	if !tr.Enabled() {
		return nil
	}
	return &hops{tr: tr, server: server, network: network, spans: map[jsonrpc.ID]tracing.Span{}}
}

// sent starts the span of a request in a frame from the hub and returns the
// frame with the span's context in the request's _meta. The hub writes one
// message a frame; anything else passes as it is.
func (h *hops) sent(frame []byte) []byte {
	if h == nil {
		return frame
	}
	f := jsonrpc.Decode(frame)
	if f.Batch || len(f.Messages) != 1 {
		return frame
	}
	req, ok := f.Messages[0].(*jsonrpc.Request)
	switch {
	case !ok:
		return frame
	case req.Method == mcp.NotificationCancelled:
		var p mcp.CancelledParams
		if json.Unmarshal(req.Params, &p) == nil {
			h.end(p.RequestID, nil, errCancelled)
		}
		return frame
	case !req.IsCall():
		return frame
	}
	ctx := h.tr.ExtractMeta(context.Background(), req.Params)
	ctx, span := h.tr.Start(ctx, tracing.Hop, tracing.Op{Method: req.Method, ID: req.ID, Params: req.Params,
		Server: h.server, Network: h.network})
	if !span.Recording() {
		return frame
	}
	h.mu.Lock()
	h.spans[req.ID] = span
	h.mu.Unlock()
	return (&jsonrpc.Request{ID: req.ID, Method: req.Method, Params: h.tr.InjectMeta(ctx, req.Params)}).Encode()
}

// answered ends the spans of the answers among msgs, from the server.
func (h *hops) answered(msgs []jsonrpc.Message) {
	if h == nil {
		return
	}
	for _, m := range msgs {
		if resp, ok := m.(*jsonrpc.Response); ok {
			var err error
			if resp.Error != nil {
				err = resp.Error
			}
			h.end(resp.ID, resp.Result, err)
		}
	}
}

// errCancelled ends the span of a request the hub cancelled.
var errCancelled = jsonrpc.NewError(jsonrpc.CodeInternalError, "cancelled by the hub")

func (h *hops) end(id jsonrpc.ID, result []byte, err error) {
	h.mu.Lock()
	span, ok := h.spans[id]
	delete(h.spans, id)
	h.mu.Unlock()
	if ok {
		span.EndWith(result, err)
	}
}

// close ends the spans of the requests the session ended before the
// server answered them.
func (h *hops) close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	spans := h.spans
	h.spans = map[jsonrpc.ID]tracing.Span{}
	h.mu.Unlock()
	for _, span := range spans {
		span.EndWith(nil, errSessionEnded)
	}
}

var errSessionEnded = jsonrpc.NewError(mcp.CodeConnectionClosed, "the session with the server ended")

// network is how the connector reaches its server, as spans record it.
func (c *connector) network() tracing.Network {
	if c.srv.Upstream != "" {
		return tracing.NetworkHTTP
	}
	return tracing.NetworkStdio
}
