package tracing

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// What the encoder writes is what OTLP's official generated types read:
// the resource and its schema, the scope, and each span's ids, parent,
// trace state, flags, name, kind, times, attributes (of every type), links
// and status.
func TestOTLPEncoding(t *testing.T) {
	t.Parallel()
	res, err := resource.New(context.Background(), resource.WithSchemaURL("https://opentelemetry.io/schemas/1.41.0"),
		resource.WithAttributes(attribute.String("service.name", "switchboard"), attribute.Int64("pid", 42),
			attribute.Bool("on", true), attribute.Float64("ratio", 0.5), attribute.StringSlice("tags", []string{"a", "b"}),
			attribute.Int64Slice("ns", []int64{-1, 2})))
	require.NoError(t, err)
	ts, err := trace.ParseTraceState("rojo=00f067aa0ba902b7")
	require.NoError(t, err)
	tid, _ := trace.TraceIDFromHex(testTraceID)
	parent, _ := trace.SpanIDFromHex(testSpanID)
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: parent, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true})
	start := time.Unix(1700000000, 123)
	s := &span{
		sc:     trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: newSpanID(), TraceFlags: trace.FlagsSampled, TraceState: ts}),
		parent: parent, parentRemote: true, kind: trace.SpanKindServer, prefix: "", method: "tools/call", target: "echo",
		start: start, end: start.Add(time.Millisecond), k: Received, subject: "echo",
		op:      Op{Method: "tools/call", ID: jsonrpc.Int64ID(7), Session: "s-1", Network: NetworkWebSocket, Server: "everything"},
		errType: "-32602", status: codes.Error, message: "bad arguments", links: []trace.Link{{SpanContext: linked}},
		extra: []attribute.KeyValue{attribute.Int("n", -5)},
	}
	round := &span{sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: newTraceID(), SpanID: newSpanID(), TraceFlags: trace.FlagsSampled}),
		kind: trace.SpanKindInternal, prefix: "input round ", method: "tools/call", start: start, end: start,
		k: InputRound, op: Op{Method: "tools/call", Round: 2}, status: codes.Ok}

	e := newEncoder(res, scope)
	var req collectorpb.ExportTraceServiceRequest
	e.encode([]*span{round}) // the buffer is reused: what the second encode returns stands alone
	require.NoError(t, proto.Unmarshal(e.encode([]*span{s, round}), &req))

	require.Len(t, req.ResourceSpans, 1)
	rs := req.ResourceSpans[0]
	assert.Equal(t, "https://opentelemetry.io/schemas/1.41.0", rs.SchemaUrl)
	assert.Equal(t, map[string]any{"service.name": "switchboard", "pid": int64(42), "on": true, "ratio": 0.5,
		"tags": []any{"a", "b"}, "ns": []any{int64(-1), int64(2)}}, values(rs.Resource.Attributes))
	require.Len(t, rs.ScopeSpans, 1)
	assert.Equal(t, scope, rs.ScopeSpans[0].Scope.Name)
	require.Len(t, rs.ScopeSpans[0].Spans, 2)

	got := rs.ScopeSpans[0].Spans[0]
	sid := s.sc.SpanID()
	assert.Equal(t, testTraceID, hex.EncodeToString(got.TraceId))
	assert.Equal(t, sid[:], got.SpanId)
	assert.Equal(t, testSpanID, hex.EncodeToString(got.ParentSpanId))
	assert.Equal(t, "rojo=00f067aa0ba902b7", got.TraceState)
	assert.Equal(t, uint32(0x301), got.Flags, "sampled, with a remote parent")
	assert.Equal(t, "tools/call echo", got.Name)
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, got.Kind)
	assert.Equal(t, uint64(start.UnixNano()), got.StartTimeUnixNano)
	assert.Equal(t, uint64(start.Add(time.Millisecond).UnixNano()), got.EndTimeUnixNano)
	assert.Equal(t, map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
		"jsonrpc.request.id": "7", "mcp.session.id": "s-1", "network.protocol.name": "websocket", "network.transport": "tcp",
		"switchboard.server.name": "everything", "error.type": "-32602", "rpc.response.status_code": "-32602", "n": int64(-5)},
		values(got.Attributes))
	require.Len(t, got.Links, 1)
	assert.Equal(t, testTraceID, hex.EncodeToString(got.Links[0].TraceId))
	assert.Equal(t, testSpanID, hex.EncodeToString(got.Links[0].SpanId))
	assert.Equal(t, "rojo=00f067aa0ba902b7", got.Links[0].TraceState)
	assert.Equal(t, uint32(0x301), got.Links[0].Flags)
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, got.Status.Code)
	assert.Equal(t, "bad arguments", got.Status.Message)

	got = rs.ScopeSpans[0].Spans[1]
	assert.Equal(t, "input round tools/call", got.Name)
	assert.Empty(t, got.ParentSpanId)
	assert.Equal(t, uint32(0x101), got.Flags, "sampled, its parent known not to be remote")
	assert.Equal(t, tracepb.Span_SPAN_KIND_INTERNAL, got.Kind)
	assert.Equal(t, map[string]any{"mcp.method.name": "tools/call", "switchboard.input.round": int64(2)}, values(got.Attributes))
	assert.Equal(t, tracepb.Status_STATUS_CODE_OK, got.Status.Code)
}

// values reads OTLP attributes into Go values.
func values(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		out[kv.Key] = value(kv.Value)
	}
	return out
}

func value(v *commonpb.AnyValue) any {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// A message of more than 127 bytes takes a longer length (a batch of
// hundreds of spans, more than 16 KiB, a longer still): the encoder moves
// nothing it should not.
func TestOTLPEncoding_longMessages(t *testing.T) {
	t.Parallel()
	res := resource.NewSchemaless(attribute.String("service.name", "switchboard"))
	e := newEncoder(res, scope)
	var spans []*span
	for i := range 600 {
		n := []int{1, 100, 127, 128, 300, 20000}[i%6]
		s := &span{sc: trace.NewSpanContext(trace.SpanContextConfig{TraceID: newTraceID(), SpanID: newSpanID(), TraceFlags: trace.FlagsSampled}),
			method: "prompts/get", target: "x", k: Received, op: Op{Method: "prompts/get", Server: strings.Repeat("s", n)}}
		spans = append(spans, s)
	}
	var req collectorpb.ExportTraceServiceRequest
	require.NoError(t, proto.Unmarshal(e.encode(spans), &req))
	got := req.ResourceSpans[0].ScopeSpans[0].Spans
	require.Len(t, got, len(spans))
	for i, s := range spans {
		assert.Equal(t, "prompts/get x", got[i].Name)
		assert.Equal(t, clean(s.op.Server), values(got[i].Attributes)["switchboard.server.name"], "span %d", i)
	}
}
