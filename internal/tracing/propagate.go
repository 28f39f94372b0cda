package tracing

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// propagator reads and writes W3C trace context (traceparent, tracestate)
// and W3C baggage. It is this package's own, never the global one: two hubs
// in one process (as in tests) each keep their own tracing.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// ExtractHeaders returns ctx carrying the trace context and baggage of an
// HTTP request's traceparent, tracestate and baggage headers, as the remote
// parent of the spans started from it. A malformed traceparent is ignored
// (the spans start a new trace); with tracing off ctx comes back as it is.
func (t *Tracing) ExtractHeaders(ctx context.Context, h http.Header) context.Context {
	if !t.Enabled() {
		return ctx
	}
	return extractHeaders(ctx, h)
}

func extractHeaders(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// InjectHeaders sets the traceparent, tracestate and baggage headers of an
// outgoing HTTP request from ctx (hub connect's requests to its upstream).
// With tracing off, or no span in ctx, h is left alone.
func (t *Tracing) InjectHeaders(ctx context.Context, h http.Header) {
	if t.Enabled() {
		injectHeaders(ctx, h)
	}
}

func injectHeaders(ctx context.Context, h http.Header) {
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractMeta returns ctx carrying the trace context and baggage of
// params._meta (traceparent, tracestate, baggage), params being a request's
// or notification's raw params. Only _meta is read, without decoding the
// rest. A malformed or missing traceparent leaves ctx's trace context as it
// was (a span started from it begins a new trace, or continues the HTTP
// request's); it is never an error.
func (t *Tracing) ExtractMeta(ctx context.Context, params []byte) context.Context {
	if !t.Enabled() {
		return ctx
	}
	return extractMeta(ctx, params)
}

func extractMeta(ctx context.Context, params []byte) context.Context {
	f := metaFields(params)
	if f.empty() {
		return ctx
	}
	return extractFields(ctx, f)
}

// extractFields is the propagators' reading of f; apart, so that f itself
// stays on the stack when there is nothing to read.
func extractFields(ctx context.Context, f fields) context.Context {
	return propagator.Extract(ctx, &f)
}

// InjectMeta returns params (a request's raw params) with the trace context
// and baggage of ctx written into params._meta: _meta is created when
// absent (and params when empty), its traceparent, tracestate and baggage
// replaced, and every other member kept byte for byte. With tracing off, no
// span in ctx, a trace that is not sampled, or params that are not an
// object, params come back as they are, without a copy. (A trace not
// sampled is recorded nowhere: writing it would only cost every request's
// receiver the reading of it. The envelope between instances carries it,
// so that the far instance decides as this one did: Pack.)
func (t *Tracing) InjectMeta(ctx context.Context, params []byte) []byte {
	if !t.Enabled() {
		return params
	}
	return injectMeta(ctx, params)
}

func injectMeta(ctx context.Context, params []byte) []byte {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return params
	}
	if out, ok := withTraceparentOnly(ctx, params); ok {
		return out
	}
	var f fields
	propagator.Inject(ctx, &f)
	if f.traceparent == "" {
		return params
	}
	return withMetaFields(params, f)
}

// withTraceparentOnly is injectMeta for what most calls are: a context with
// neither tracestate nor baggage, and params without _meta, or with a
// _meta that holds no trace key (the hub's own, for a server of 2026-07-28).
// It writes the traceparent first into that _meta, or into a _meta of its
// own, in one allocation, where rebuilding _meta member by member took
// seven. ok is false for anything else.
func withTraceparentOnly(ctx context.Context, params []byte) (out []byte, ok bool) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.TraceState().Len() > 0 || baggage.FromContext(ctx).Len() > 0 {
		return nil, false
	}
	obj := bytes.TrimSpace(params)
	switch {
	case len(obj) == 0 || string(obj) == "null":
		obj = []byte("{}")
	case obj[0] != '{' || obj[len(obj)-1] != '}' || bytes.Contains(obj, []byte(`\u`)):
		return nil, false // an escape might spell a key: the general way
	case bytes.Contains(obj, []byte("_meta")):
		return withTraceparentFirst(obj, sc)
	}
	body := bytes.TrimSpace(obj[1 : len(obj)-1])
	out = make([]byte, 0, len(obj)+len(`,"_meta":{"traceparent":""}`)+traceparentLen)
	out = append(out, obj[:len(obj)-1]...)
	if len(body) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"_meta":{"traceparent":"`...)
	out = appendTraceparent(out, sc)
	return append(out, `"}}`...), true
}

// withTraceparentFirst writes sc's traceparent as the first member of the
// object obj's _meta, which must hold no trace key. ok is false when obj
// may have no _meta of its own or more than one (its arguments may: the
// general way), or when _meta is not an object or may hold a trace key.
func withTraceparentFirst(obj []byte, sc trace.SpanContext) (out []byte, ok bool) {
	if bytes.Count(obj, []byte(`"_meta"`)) != 1 {
		return nil, false
	}
	meta, found := jsonrpc.Member(obj, "_meta")
	if !found || len(meta) < 2 || meta[0] != '{' || mayHoldTraceKey(meta) {
		return nil, false
	}
	var b [len(`{"traceparent":"",`) + traceparentLen]byte
	first := append(b[:0], `{"traceparent":"`...)
	first = append(appendTraceparent(first, sc), '"')
	if len(bytes.TrimSpace(meta[1:len(meta)-1])) > 0 {
		first = append(first, ',')
	}
	return jsonrpc.Splice(obj, meta[:1], first)
}

// mayHoldTraceKey reports whether _meta may hold one of the trace keys: a
// search for their names, which a value may hold too (then the general
// way rebuilds _meta, as it would anyway).
func mayHoldTraceKey(meta []byte) bool {
	return bytes.Contains(meta, []byte(keyTraceparent)) || bytes.Contains(meta, []byte(keyTracestate)) ||
		bytes.Contains(meta, []byte(keyBaggage))
}

// traceparentLen is the length of a traceparent of version 00.
const traceparentLen = len("00-") + 32 + len("-") + 16 + len("-01")

// appendTraceparent appends sc as W3C's traceparent: version 00, the trace
// id, the span id and the sampled flag, in lowercase hex.
func appendTraceparent(b []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	if sc.IsSampled() {
		return append(b, "-01"...)
	}
	return append(b, "-00"...)
}

// The compact form of a trace context for the envelope between instances:
// the traceparent, then the tracestate and the baggage when there are any,
// each after a newline (which neither may contain, being HTTP header values).
const packSep = "\n"

// maxPacked bounds what Unpack reads: a traceparent, and a tracestate and a
// baggage within the sizes W3C sets for them (512 and 8192 bytes).
const maxPacked = 64 + 512 + 8192 + 2

// Pack returns the trace context and baggage of ctx in the compact form that
// the envelope between instances carries: "" with tracing off or no span in
// ctx, else the traceparent (55 characters), followed only when present by
// a newline and the tracestate, and a newline and the baggage. Unpack, on
// the far instance, reads it back.
func (t *Tracing) Pack(ctx context.Context) string {
	if !t.Enabled() {
		return ""
	}
	return pack(ctx)
}

func pack(ctx context.Context) string {
	var f fields
	propagator.Inject(ctx, &f)
	if f.traceparent == "" {
		return ""
	}
	if f.tracestate == "" && f.baggage == "" {
		return f.traceparent
	}
	return f.traceparent + packSep + f.tracestate + packSep + f.baggage
}

// Unpack returns ctx carrying the trace context and baggage of s, a string
// Pack made on another instance, as the remote parent of the spans started
// from it. An empty or malformed s leaves ctx as it is.
func (t *Tracing) Unpack(ctx context.Context, s string) context.Context {
	if !t.Enabled() {
		return ctx
	}
	return unpack(ctx, s)
}

func unpack(ctx context.Context, s string) context.Context {
	if s == "" || len(s) > maxPacked {
		return ctx
	}
	var f fields
	f.traceparent, s, _ = strings.Cut(s, packSep)
	f.tracestate, f.baggage, _ = strings.Cut(s, packSep)
	return propagator.Extract(ctx, &f)
}

// Carry returns ctx carrying the span and baggage of from: the trace of
// one context with the deadline and cancellation of another (a step of a
// call that runs under the hub's own lifetime, not its caller's). With
// tracing off ctx comes back as it is.
func (t *Tracing) Carry(ctx, from context.Context) context.Context {
	if !t.Enabled() || from == nil {
		return ctx
	}
	ctx = trace.ContextWithSpan(ctx, trace.SpanFromContext(from))
	return baggage.ContextWithBaggage(ctx, baggage.FromContext(from))
}
