package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
)

const (
	testTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpanID      = "00f067aa0ba902b7"
	testTraceparent = "00-" + testTraceID + "-" + testSpanID + "-01"
)

// on is a Tracing that is on, without an exporter: what these tests check
// needs no spans exported, only the propagation.
func on() *Tracing {
	t := &Tracing{metrics: newMetrics()}
	t.on.Store(true)
	return t
}

// remote returns ctx with the remote span context of testTraceparent.
func remote(t *testing.T) context.Context {
	t.Helper()
	ctx := on().ExtractMeta(context.Background(), []byte(`{"_meta":{"traceparent":"`+testTraceparent+`","tracestate":"rojo=00f067aa0ba902b7","baggage":"user=alice"}}`))
	require.True(t, trace.SpanContextFromContext(ctx).IsValid())
	return ctx
}

func TestExtractMeta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, params string
		valid        bool
	}{
		{"traceparent", `{"name":"x","_meta":{"traceparent":"` + testTraceparent + `"}}`, true},
		{"with other keys", `{"_meta":{"progressToken":7,"io.modelcontextprotocol/x":{"a":1},"traceparent":"` + testTraceparent + `"},"arguments":{}}`, true},
		{"spaces", " { \"_meta\" : { \"traceparent\" : \"" + testTraceparent + "\" } } ", true},
		{"escaped key", `{"_meta":{"trace\u0070arent":"` + testTraceparent + `"}}`, true},
		{"no _meta", `{"name":"x"}`, false},
		{"no params", ``, false},
		{"null params", `null`, false},
		{"array params", `["` + testTraceparent + `"]`, false},
		{"_meta not an object", `{"_meta":"` + testTraceparent + `"}`, false},
		{"traceparent not a string", `{"_meta":{"traceparent":42}}`, false},
		{"malformed traceparent", `{"_meta":{"traceparent":"00-xyz-00f067aa0ba902b7-01"}}`, false},
		{"zero trace id", `{"_meta":{"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}`, false},
		{"zero span id", `{"_meta":{"traceparent":"00-` + testTraceID + `-0000000000000000-01"}}`, false},
		{"version ff", `{"_meta":{"traceparent":"ff-` + testTraceID + `-` + testSpanID + `-01"}}`, false},
		{"uppercase hex", `{"_meta":{"traceparent":"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"}}`, false},
		{"nested, not _meta", `{"arguments":{"_meta":{"traceparent":"` + testTraceparent + `"}}}`, false},
		{"unterminated string", `{"_meta":{"traceparent":"` + testTraceparent, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := on().ExtractMeta(context.Background(), []byte(tc.params))
			sc := trace.SpanContextFromContext(ctx)
			assert.Equal(t, tc.valid, sc.IsValid())
			if tc.valid {
				assert.Equal(t, testTraceID, sc.TraceID().String())
				assert.Equal(t, testSpanID, sc.SpanID().String())
				assert.True(t, sc.IsRemote())
				assert.True(t, sc.IsSampled())
			}
		})
	}
}

func TestExtractMeta_stateAndBaggage(t *testing.T) {
	t.Parallel()
	ctx := remote(t)
	sc := trace.SpanContextFromContext(ctx)
	assert.Equal(t, "rojo=00f067aa0ba902b7", sc.TraceState().String())
	assert.Equal(t, "alice", baggage.FromContext(ctx).Member("user").Value())
}

func TestInjectMeta(t *testing.T) {
	t.Parallel()
	ctx := remote(t)
	want := `"traceparent":"` + testTraceparent + `","tracestate":"rojo=00f067aa0ba902b7","baggage":"user=alice"`
	for _, tc := range []struct {
		name, params, want string
	}{
		{"no params", ``, `{"_meta":{` + want + `}}`},
		{"null params", `null`, `{"_meta":{` + want + `}}`},
		{"empty object", `{}`, `{"_meta":{` + want + `}}`},
		{"no _meta", `{"name":"echo","arguments":{"text":"hi"}}`, `{"name":"echo","arguments":{"text":"hi"},"_meta":{` + want + `}}`},
		{"empty _meta", `{"name":"echo","_meta":{}}`, `{"name":"echo","_meta":{` + want + `}}`},
		{"other keys kept, trace keys replaced",
			`{"_meta":{"progressToken":"p1","traceparent":"00-11111111111111111111111111111111-2222222222222222-00","baggage":"x=y","io.x/y":[1,{"a":null}]},"name":"echo"}`,
			`{"_meta":{"progressToken":"p1","io.x/y":[1,{"a":null}],` + want + `},"name":"echo"}`},
		{"_meta not an object: unchanged", `{"_meta":7,"name":"echo"}`, `{"_meta":7,"name":"echo"}`},
		{"array params: unchanged", `[1,2]`, `[1,2]`},
		{"arguments' own _meta untouched", `{"arguments":{"_meta":{"traceparent":"a"}}}`, `{"arguments":{"_meta":{"traceparent":"a"}},"_meta":{` + want + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := on().InjectMeta(ctx, []byte(tc.params))
			assert.Equal(t, tc.want, string(got))
			if json.Valid([]byte(tc.params)) || tc.params == "" {
				assert.True(t, json.Valid(got), "%s", got)
			}
		})
	}
}

// A context with a traceparent alone (what the hub's own spans carry) is
// written into params in one allocation, _meta or none: first into a _meta
// without trace keys (a 2026-07-28 server's request has the hub's), where
// the general way rebuilt _meta member by member. Params it would have to
// search further go the general way, with the same outcome.
func TestInjectMeta_traceparentOnly(t *testing.T) {
	tr := on()
	ctx := remoteParent(context.Background())
	tp := `"traceparent":"` + testTraceparent + `"`
	for _, tc := range []struct {
		name, params, want string
		allocs             float64
	}{
		{"no _meta", `{"name":"echo"}`, `{"name":"echo","_meta":{` + tp + `}}`, 1},
		{"the hub's _meta", `{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
			`{"name":"echo","_meta":{` + tp + `,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, 1},
		{"empty _meta", `{"_meta": { } ,"name":"echo"}`, `{"_meta": {` + tp + ` } ,"name":"echo"}`, 1},
		{"a trace key: rebuilt", `{"_meta":{"k":1,"traceparent":"x"}}`, `{"_meta":{"k":1,` + tp + `}}`, -1},
		{"two _meta: rebuilt", `{"_meta":{"a":1},"_meta":{"b":2}}`, `{"_meta":{"b":2,` + tp + `},"_meta":{"b":2,` + tp + `}}`, -1},
		{"only the arguments' _meta", `{"arguments":{"_meta":{}}}`, `{"arguments":{"_meta":{}},"_meta":{` + tp + `}}`, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := []byte(tc.params)
			assert.Equal(t, tc.want, string(tr.InjectMeta(ctx, params)))
			if tc.allocs > 0 {
				assert.Equal(t, tc.allocs, testing.AllocsPerRun(100, func() { tr.InjectMeta(ctx, params) }))
			}
		})
	}
}

// A stale tracestate or baggage in _meta never rides with the new
// traceparent: a context without them removes them.
func TestInjectMeta_removesStaleKeys(t *testing.T) {
	t.Parallel()
	ctx := on().ExtractMeta(context.Background(), []byte(`{"_meta":{"traceparent":"`+testTraceparent+`"}}`))
	got := on().InjectMeta(ctx, []byte(`{"_meta":{"tracestate":"old=1","baggage":"old=2","k":1}}`))
	assert.Equal(t, `{"_meta":{"k":1,"traceparent":"`+testTraceparent+`"}}`, string(got))
}

func TestInjectMeta_noContext(t *testing.T) {
	t.Parallel()
	params := []byte(`{"_meta":{"traceparent":"` + testTraceparent + `"}}`)
	got := on().InjectMeta(context.Background(), params)
	assert.Same(t, &params[0], &got[0], "params without a span in ctx come back as they are")
}

func TestOff(t *testing.T) {
	t.Parallel()
	for name, tr := range map[string]*Tracing{"nil": nil, "off": {metrics: newMetrics()}} {
		t.Run(name, func(t *testing.T) {
			ctx := remote(t)
			params := []byte(`{"name":"echo"}`)
			got := tr.InjectMeta(ctx, params)
			assert.Same(t, &params[0], &got[0])
			assert.Empty(t, tr.Pack(ctx))
			bg := context.Background()
			assert.Equal(t, bg, tr.ExtractMeta(bg, []byte(`{"_meta":{"traceparent":"`+testTraceparent+`"}}`)))
			assert.Equal(t, bg, tr.Unpack(bg, testTraceparent))
			h := http.Header{"Traceparent": {testTraceparent}}
			assert.Equal(t, bg, tr.ExtractHeaders(bg, h))
			out := http.Header{}
			tr.InjectHeaders(ctx, out)
			assert.Empty(t, out)
			sctx, s := tr.Start(ctx, Received, Op{Method: "tools/call"})
			assert.Equal(t, ctx, sctx)
			assert.False(t, s.Recording())
			assert.Empty(t, s.TraceID())
			s.EndWith([]byte(`{"isError":true}`), nil)
			assert.NoError(t, tr.ForceFlush(bg))
			assert.NoError(t, tr.Shutdown(bg))
		})
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("traceparent", testTraceparent)
	h.Set("tracestate", "rojo=1")
	h.Set("baggage", "k=v")
	ctx := on().ExtractHeaders(context.Background(), h)
	sc := trace.SpanContextFromContext(ctx)
	require.True(t, sc.IsValid())
	assert.Equal(t, testTraceID, sc.TraceID().String())

	out := http.Header{}
	on().InjectHeaders(ctx, out)
	assert.Equal(t, testTraceparent, out.Get("traceparent"))
	assert.Equal(t, "rojo=1", out.Get("tracestate"))
	assert.Equal(t, "k=v", out.Get("baggage"))

	bad := http.Header{"Traceparent": {"00-zz-00f067aa0ba902b7-01"}}
	assert.False(t, trace.SpanContextFromContext(on().ExtractHeaders(context.Background(), bad)).IsValid())
}

func TestPack(t *testing.T) {
	t.Parallel()
	tr := on()
	ctx := remote(t)
	s := tr.Pack(ctx)
	assert.Equal(t, testTraceparent+"\nrojo=00f067aa0ba902b7\nuser=alice", s)
	back := tr.Unpack(context.Background(), s)
	assert.True(t, trace.SpanContextFromContext(ctx).Equal(trace.SpanContextFromContext(back)))
	assert.Equal(t, "alice", baggage.FromContext(back).Member("user").Value())

	only := tr.ExtractMeta(context.Background(), []byte(`{"_meta":{"traceparent":"`+testTraceparent+`"}}`))
	assert.Equal(t, testTraceparent, tr.Pack(only), "a bare traceparent packs as itself")
	assert.Empty(t, tr.Pack(context.Background()))

	for _, bad := range []string{"", "garbage", "00-" + testTraceID + "\n\n", string(make([]byte, maxPacked+1))} {
		assert.False(t, trace.SpanContextFromContext(tr.Unpack(context.Background(), bad)).IsValid(), "%q", bad)
	}
}

// TraceID reads the sampled trace of a context; Carry moves a context's
// span and baggage onto another's deadline and cancellation. Off, both do
// nothing.
func TestTraceIDAndCarry(t *testing.T) {
	t.Parallel()
	tr := on()
	ctx := remote(t)
	assert.Equal(t, testTraceID, tr.TraceID(ctx))
	assert.Empty(t, tr.TraceID(context.Background()))
	unsampled := tr.ExtractMeta(context.Background(), []byte(`{"_meta":{"traceparent":"00-`+testTraceID+`-`+testSpanID+`-00"}}`))
	assert.Empty(t, tr.TraceID(unsampled), "no trace id for a trace the backend will not have")

	lifetime, cancel := context.WithCancel(context.Background())
	carried := tr.Carry(lifetime, ctx)
	assert.True(t, trace.SpanContextFromContext(ctx).Equal(trace.SpanContextFromContext(carried)))
	assert.Equal(t, "alice", baggage.FromContext(carried).Member("user").Value())
	cancel()
	assert.Error(t, carried.Err(), "the deadline and cancellation are lifetime's")
	assert.NoError(t, ctx.Err())

	for name, off := range map[string]*Tracing{"nil": nil, "off": {metrics: newMetrics()}} {
		assert.Empty(t, off.TraceID(ctx), name)
		bg := context.Background()
		assert.Equal(t, bg, off.Carry(bg, ctx), name)
	}
}

// A trace that is not sampled is not written into _meta: nothing records
// it, and every server would pay for reading it. Pack carries it still.
func TestInjectMeta_notSampled(t *testing.T) {
	t.Parallel()
	tr := on()
	ctx := tr.ExtractMeta(context.Background(), []byte(`{"_meta":{"traceparent":"00-`+testTraceID+`-`+testSpanID+`-00"}}`))
	require.True(t, trace.SpanContextFromContext(ctx).IsValid())
	params := []byte(`{"name":"echo","_meta":{"traceparent":"00-` + testTraceID + `-` + testSpanID + `-00"}}`)
	out := tr.InjectMeta(ctx, params)
	assert.Same(t, &params[0], &out[0], "params as they came")
	assert.Equal(t, "00-"+testTraceID+"-"+testSpanID+"-00", tr.Pack(ctx))
}
