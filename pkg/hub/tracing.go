package hub

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The spans of a call, one helper per hop, built in one place as errors
// are in errors.go. Each helper starts with tracing's atomic check and does
// nothing else while tracing is off: no Op is built, no lock taken, no
// params read, so that the call path costs what it did without tracing
// (BenchmarkCall's allocations per call do not change).
//
// A call's trace context travels with it: the received span's context is
// the ctx of forward (kept in its flight), of replica.send and of
// cluster.sendCall; a call's upstreamCall keeps the context of the request
// sent to the server, which the server's requests back to its client
// continue; between instances the envelope carries it (envelope.Trace).
// The routing decision is not a span of its own: the received span names
// the server (switchboard.server.name), the span of the request sent names
// the replica, and the crossing the instance. A span of its own cost as
// much as the received span again, for a step of a microsecond.

// tracingShutdown bounds the export of the last spans when the hub closes.
const tracingShutdown = 5 * time.Second

// network is the session's transport, as spans record it.
func (s *session) network() tracing.Network {
	if s.transport() == "http" {
		return tracing.NetworkHTTP
	}
	return tracing.NetworkWebSocket
}

// protocolOf is the protocol version of a request of the session: a modern
// request's own, else the one the session negotiated.
func (s *session) protocolOf(m *mcp.RequestMeta) string {
	if m != nil {
		return m.ProtocolVersion
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protocol
}

// traceReceived starts the span of a client's request: m is what a modern
// request said of itself (nil for a session's), t where it goes (nil when
// the hub answers it itself, or refused it). Its parent is the trace
// context of the request's _meta (where the Streamable HTTP face put the
// POST's traceparent header when _meta had none); without one, a new
// trace starts here.
func (s *session) traceReceived(ctx context.Context, req *jsonrpc.Request, m *mcp.RequestMeta, t *target) (context.Context, tracing.Span) {
	tr := s.hub.tracing
	if !tr.Enabled() {
		return ctx, tracing.Span{}
	}
	op := tracing.Op{Method: req.Method, ID: req.ID, Params: req.Params, Session: s.httpID, Client: s.key(), Network: s.network()}
	if t != nil {
		op.Server = t.server
	}
	ctx, span := tr.Start(ctx, tracing.Received, op)
	span.Describe(func(op *tracing.Op) { op.Protocol = s.protocolOf(m) })
	return ctx, span
}

// ending returns done, made to end span with the outcome first when span
// records: done itself otherwise, so that a call that is not traced pays
// for no closure.
func ending(span tracing.Span, done func(json.RawMessage, error)) func(json.RawMessage, error) {
	if !span.Recording() {
		return done
	}
	return func(raw json.RawMessage, err error) {
		span.EndWith(raw, err)
		done(raw, err)
	}
}

// traceSent starts the span of a request the hub sends a server under id,
// a child of ctx's span, and returns params with its context in _meta,
// where the server's SDK continues the trace.
func (rp *replica) traceSent(ctx context.Context, id jsonrpc.ID, method string, params json.RawMessage) (context.Context, json.RawMessage, tracing.Span) {
	tr := rp.hub.tracing
	if !tr.Enabled() {
		return ctx, params, tracing.Span{}
	}
	ctx, span := tr.Start(ctx, tracing.Sent, tracing.Op{Method: method, ID: id, Params: params, Replica: rp.id, Network: tracing.NetworkWebSocket})
	span.Describe(func(op *tracing.Op) {
		if ri := rp.currentInfo(); ri != nil {
			op.Server, op.Protocol = ri.Name, ri.ProtocolVersion
		}
	})
	return ctx, tr.InjectMeta(ctx, params), span
}

// traceAsked starts the span of a server's request for a client (sampling,
// elicitation, roots, ping), received from this replica: a child of the
// request the hub sent for uc's call (nil: it names none), unless the
// server's own _meta continues the trace.
func (rp *replica) traceAsked(uc *upstreamCall, req *jsonrpc.Request) (context.Context, tracing.Span) {
	tr := rp.hub.tracing
	ctx := context.Background()
	if !tr.Enabled() {
		return ctx, tracing.Span{}
	}
	if uc != nil && uc.trace != nil {
		ctx = uc.trace
	}
	ctx, span := tr.Start(ctx, tracing.Received, tracing.Op{Method: req.Method, ID: req.ID, Params: req.Params,
		Replica: rp.id, Network: tracing.NetworkWebSocket})
	span.Describe(func(op *tracing.Op) { op.Server = rp.name() })
	return ctx, span
}

// traceAsk starts the span of a server's request the hub sends the client
// of session s under id, and returns params with its context in _meta.
func (s *session) traceAsk(ctx context.Context, id jsonrpc.ID, method string, params json.RawMessage) (context.Context, json.RawMessage, tracing.Span) {
	tr := s.hub.tracing
	if !tr.Enabled() {
		return ctx, params, tracing.Span{}
	}
	ctx, span := tr.Start(ctx, tracing.Sent, tracing.Op{Method: method, ID: id, Params: params, Session: s.httpID,
		Client: s.key(), Network: s.network()})
	span.Describe(func(op *tracing.Op) { op.Protocol = s.protocolOf(nil) })
	return ctx, tr.InjectMeta(ctx, params), span
}

// traceOut starts the span of a request leaving for another instance (a
// call, a server's request for a client there, a modern client's retry),
// and puts its context in the envelope.
func (c *cluster) traceOut(ctx context.Context, instance string, env *envelope) tracing.Span {
	tr := c.hub.tracing
	if !tr.Enabled() {
		return tracing.Span{}
	}
	ctx, span := tr.Start(ctx, tracing.CrossOut, tracing.Op{Method: env.Method, Params: env.Params, Server: env.Server,
		Instance: instance, Network: tracing.NetworkBroker})
	env.Trace = tr.Pack(ctx)
	return span
}

// traceIn starts the span of a request another instance sent, continuing
// the trace its envelope carries (none: a new trace), a child of ctx's
// deadline and cancellation.
func (c *cluster) traceIn(ctx context.Context, env *envelope) (context.Context, tracing.Span) {
	tr := c.hub.tracing
	if !tr.Enabled() {
		return ctx, tracing.Span{}
	}
	return tr.Start(tr.Unpack(ctx, env.Trace), tracing.CrossIn, tracing.Op{Method: env.Method, Params: env.Params,
		Server: env.Server, Instance: env.From, Network: tracing.NetworkBroker})
}

// traceRound starts the span of one input-request round of the
// translation between eras: ctx runs the round, trace is the call's
// context.
func (h *Hub) traceRound(ctx, trace context.Context, method, server string, round int) (context.Context, tracing.Span) {
	tr := h.tracing
	if !tr.Enabled() {
		return ctx, tracing.Span{}
	}
	return tr.Start(tr.Carry(ctx, trace), tracing.InputRound, tracing.Op{Method: method, Server: server, Round: round})
}

// tracePublish starts the span of a resource update published to every
// subscriber: a trace of its own, linked to the server's when its _meta
// carried one; one span per update, never one per delivery.
func (h *Hub) tracePublish(server string, params json.RawMessage) tracing.Span {
	tr := h.tracing
	if !tr.Enabled() {
		return tracing.Span{}
	}
	_, span := tr.Start(context.Background(), tracing.Publish, tracing.Op{Method: mcp.NotificationResourceUpdated,
		Params: params, Server: server, Network: tracing.NetworkBroker})
	return span
}

// traceLink returns the address of a trace in the tracing UI of
// Config.TracingUI, or "" without one.
func (h *Hub) traceLink(traceID string) string {
	ui := h.cfg.TracingUI
	if ui == "" || traceID == "" {
		return ""
	}
	if strings.Contains(ui, "{traceId}") {
		return strings.ReplaceAll(ui, "{traceId}", traceID)
	}
	return strings.TrimSuffix(ui, "/") + "/trace/" + traceID
}
