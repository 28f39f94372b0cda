package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// The hub records its spans itself, where the OpenTelemetry SDK's tracer
// would cost a traced call several times what the call costs: each of its
// spans copies its attributes three times (at start, at end, into the
// exporter's protobuf structures) and allocates for each of them, which a
// hub that routes tens of thousands of calls a second cannot afford
// (hubbench -tracing-only). What the hub needs of a span is little: its
// context (trace.SpanContext, so that W3C propagation reads and writes it
// as for any span), its kind, name, times, attributes, links and status;
// a span records them once, in one allocation besides its attributes, and
// the exporter encodes them to OTLP straight from there (otlp.go). The
// SDK's samplers decide which traces are recorded, as the OTEL_TRACES_*
// variables say, and its resource detection describes the hub.
//
// A trace that is not sampled records nothing: its spans are only the
// contexts their children and the requests sent carry (with the sampled
// flag off, so that what comes next need not record it either).

// span is one span the hub records. It is a trace.Span so that a context
// can carry it; nothing outside this package calls its methods but
// SpanContext, and those of the hub's Span are called by one goroutine at a
// time, the one that ends it.
type span struct {
	embedded.Span
	sc           trace.SpanContext
	parent       trace.SpanID // zero for a root
	parentRemote bool
	kind         trace.SpanKind
	// The name is prefix, method and target ("" for none) joined, written
	// so by the encoder: a string of them would be an allocation per span.
	prefix, method, target string
	start, end             time.Time
	// What its attributes are made of (span.go's eachAttribute).
	k       Kind
	op      Op     // without its params
	subject string // the tool, prompt or URI of op's params
	errType string // error.type: a JSON-RPC code, or tool_error
	extra   []attribute.KeyValue
	links   []trace.Link
	status  codes.Code
	message string
	q       *queue
	ended   atomic.Bool
}

// name is the span's name.
func (s *span) name() string {
	if s.target == "" {
		return s.prefix + s.method
	}
	return s.prefix + s.method + " " + s.target
}

var _ trace.Span = (*span)(nil)

// SpanContext implements trace.Span: the span's identity, which children and
// propagation read.
func (s *span) SpanContext() trace.SpanContext { return s.sc }

// IsRecording implements trace.Span.
func (s *span) IsRecording() bool { return !s.ended.Load() }

// End implements trace.Span: the span is queued for export, once.
func (s *span) End(...trace.SpanEndOption) {
	if s.ended.CompareAndSwap(false, true) {
		s.end = time.Now()
		s.q.add(s)
	}
}

// SetStatus implements trace.Span.
func (s *span) SetStatus(code codes.Code, description string) {
	s.status, s.message = code, description
}

// SetName implements trace.Span.
func (s *span) SetName(name string) { s.prefix, s.method, s.target = "", name, "" }

// SetAttributes implements trace.Span.
func (s *span) SetAttributes(kv ...attribute.KeyValue) { s.extra = append(s.extra, kv...) }

// AddEvent, AddLink and RecordError implement trace.Span; the hub's spans
// have none of them.
func (s *span) AddEvent(string, ...trace.EventOption)   {}
func (s *span) AddLink(trace.Link)                      {}
func (s *span) RecordError(error, ...trace.EventOption) {}

// TracerProvider implements trace.Span: the hub's spans come from no
// provider another package could use.
func (s *span) TracerProvider() trace.TracerProvider { return noop.NewTracerProvider() }

// begin starts a span of kind with name (the bare method: its full name
// and attributes are added once the sampler chose to record it), parented
// by ctx's span unless root, with links. It returns the context carrying
// the span, and the span when it records. A trace not sampled records
// nothing: ctx comes back as it was when it carries one already (what
// follows continues its span context, which says not sampled), else with a
// new span context that says so, for what follows to carry on.
func (t *Tracing) begin(ctx context.Context, kind trace.SpanKind, name string, root bool, links []trace.Link) (context.Context, *span) {
	parent := trace.SpanContextFromContext(ctx)
	pctx := ctx
	if root || !parent.IsValid() {
		parent, pctx = trace.SpanContext{}, context.Background()
	}
	tid := parent.TraceID()
	if !parent.IsValid() {
		tid = newTraceID()
	}
	res := t.sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: pctx, TraceID: tid, Name: name, Kind: kind, Links: links})
	if res.Decision != sdktrace.RecordAndSample {
		if parent.IsValid() && !parent.IsSampled() {
			return ctx, nil
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceState: res.Tracestate})
		return trace.ContextWithSpanContext(ctx, sc), nil
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceFlags: trace.FlagsSampled, TraceState: res.Tracestate})
	s := &span{sc: sc, parent: parent.SpanID(), parentRemote: parent.IsRemote(), kind: kind, method: name, start: time.Now(),
		links: links, q: t.queue}
	return trace.ContextWithSpan(ctx, s), s
}

// newTraceID and newSpanID return random ids, never zero: math/rand/v2's
// generator, which has no lock to contend for (ids need to be unique, not
// secret).
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// samplerFromEnv returns the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG name, as OpenTelemetry specifies them; by
// default parentbased_always_on.
func samplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(firstEnv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(firstEnv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or parentbased_ one of them", name)
}
