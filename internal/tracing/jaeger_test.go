package tracing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/jaegertest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// The tests of this package that export spans share one real Jaeger,
// started by the first that needs it and stopped by TestMain. Each test
// reads back only its own traces (by trace id, or by a service instance
// id of its own).
var shared struct {
	once   sync.Once
	jaeger *jaegertest.Jaeger
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.jaeger != nil {
		shared.jaeger.Stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func jaeger(t *testing.T) *jaegertest.Jaeger {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "jaegertest")
		if err != nil {
			shared.err = err
			return
		}
		shared.jaeger, shared.err = jaegertest.Launch(dir)
	})
	require.NoError(t, shared.err)
	return shared.jaeger
}

// newTracing sets up tracing that exports to endpoint, shut down when the
// test ends. Batches leave every 20ms, so that ForceFlush is rarely needed.
func newTracing(t *testing.T, cfg Config) *Tracing {
	t.Helper()
	cfg.Enabled = true
	if cfg.BatchDelay == 0 {
		cfg.BatchDelay = 20 * time.Millisecond
	}
	tr, err := New(context.Background(), cfg)
	require.NoError(t, err)
	require.True(t, tr.Enabled())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, tr.Shutdown(ctx))
	})
	return tr
}

func flush(t *testing.T, trs ...*Tracing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tr := range trs {
		require.NoError(t, tr.ForceFlush(ctx))
	}
}

// unique returns n random bytes in hex: trace and span ids, and instance
// ids that no other test (or earlier run against the same Jaeger) uses.
func unique(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// One call's way through two instances and a server, as the hub will trace
// it: the client's request on instance A, the routing decision, the
// crossing to instance B through the envelope, the request B forwards to
// the server with the context in its _meta, and the server (an SDK
// continuing from _meta) failing with -32602. Jaeger holds one trace with
// every span, parented in that order, each with its instance as resource
// and the MCP conventions' attributes; the tool's arguments are nowhere.
func TestJaeger_callAcrossInstances(t *testing.T) {
	t.Parallel()
	j := jaeger(t)
	for _, tc := range []struct{ protocol, endpoint string }{
		{"http/protobuf", j.OTLPHTTP()},
		{"grpc", j.OTLPGRPC()},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			t.Parallel()
			idA, idB, idS := "a-"+unique(4), "b-"+unique(4), "srv-"+unique(4)
			cfg := Config{Endpoint: tc.endpoint, Protocol: tc.protocol}
			cfg.InstanceID = idA
			a := newTracing(t, cfg)
			cfg.InstanceID = idB
			b := newTracing(t, cfg)
			cfg.InstanceID = idS
			srv := newTracing(t, cfg)
			bg := context.Background()
			params := []byte(`{"name":"echo","arguments":{"secret":"hunter2"}}`)

			ctxA, received := a.Start(bg, Received, Op{Method: "tools/call", ID: jsonrpc.Int64ID(7), Params: params,
				Session: "sess-1", Protocol: "2025-11-25", Network: NetworkWebSocket})
			require.True(t, received.Recording())
			_, route := a.Start(ctxA, Route, Op{Method: "tools/call", Server: "everything", Instance: idB})
			route.End()
			ctxOut, out := a.Start(ctxA, CrossOut, Op{Method: "tools/call", Params: params, Instance: idB, Network: NetworkBroker})
			packed := a.Pack(ctxOut)

			ctxB, in := b.Start(b.Unpack(bg, packed), CrossIn, Op{Method: "tools/call", Params: params, Instance: idA, Network: NetworkBroker})
			ctxSent, sent := b.Start(ctxB, Sent, Op{Method: "tools/call", ID: jsonrpc.StringID("sb-3"), Params: params,
				Server: "everything", Replica: "r1", Network: NetworkWebSocket})
			toServer := b.InjectMeta(ctxSent, params)

			_, atServer := srv.Start(bg, Received, Op{Method: "tools/call", ID: jsonrpc.StringID("sb-3"), Params: toServer})
			callErr := jsonrpc.NewError(jsonrpc.CodeInvalidParams, "missing argument")
			atServer.EndWith(nil, callErr)
			sent.EndWith(nil, callErr)
			in.End()
			out.End()
			received.EndWith(nil, callErr)
			flush(t, a, b, srv)

			traceID := received.TraceID()
			require.Len(t, traceID, 32)
			tr := j.WaitTrace(t, traceID, 6)
			require.Len(t, tr.Spans, 6, "%v", tr.Names())
			byName := func(name, instance string) *jaegertest.Span {
				t.Helper()
				for _, s := range tr.Spans {
					if s.Name == name && s.Resource["service.instance.id"] == instance {
						return s
					}
				}
				require.Failf(t, "no span", "%q of %s in %v", name, instance, tr.Names())
				return nil
			}
			sRecv := byName("tools/call echo", idA)
			sRoute := byName("route tools/call", idA)
			sOut := byName("send tools/call echo", idA)
			sIn := byName("receive tools/call echo", idB)
			sSent := byName("tools/call echo", idB)
			sSrv := byName("tools/call echo", idS)

			assert.Empty(t, sRecv.ParentID)
			assert.Equal(t, sRecv.SpanID, sRoute.ParentID)
			assert.Equal(t, sRecv.SpanID, sOut.ParentID)
			assert.Equal(t, sOut.SpanID, sIn.ParentID)
			assert.Equal(t, sIn.SpanID, sSent.ParentID)
			assert.Equal(t, sSent.SpanID, sSrv.ParentID)
			for s, kind := range map[*jaegertest.Span]string{sRecv: "SERVER", sRoute: "INTERNAL", sOut: "CLIENT", sIn: "SERVER", sSent: "CLIENT", sSrv: "SERVER"} {
				assert.Equal(t, kind, s.Kind, s.Name)
				assert.Equal(t, ServiceName, s.Resource["service.name"])
				assert.Equal(t, "tools/call", s.Attributes["mcp.method.name"], s.Name)
				for k, v := range s.Attributes {
					assert.NotContains(t, v, "hunter2", "attribute %s of %s", k, s.Name)
				}
			}
			assert.Equal(t, map[string]string{
				"mcp.method.name":          "tools/call",
				"gen_ai.tool.name":         "echo",
				"gen_ai.operation.name":    "execute_tool",
				"jsonrpc.request.id":       "7",
				"mcp.session.id":           "sess-1",
				"mcp.protocol.version":     "2025-11-25",
				"network.protocol.name":    "websocket",
				"network.transport":        "tcp",
				"error.type":               "-32602",
				"rpc.response.status_code": "-32602",
			}, without(sRecv.Attributes, "otel."))
			assert.Equal(t, "ERROR", sRecv.StatusCode)
			assert.Equal(t, "missing argument", sRecv.StatusMessage)
			assert.Equal(t, idB, sRoute.Attributes["switchboard.instance.peer"])
			assert.Equal(t, "everything", sRoute.Attributes["switchboard.server.name"])
			assert.Equal(t, "redis", sIn.Attributes["network.protocol.name"])
			assert.Equal(t, idA, sIn.Attributes["switchboard.instance.peer"])
			assert.Equal(t, "sb-3", sSent.Attributes["jsonrpc.request.id"])
			assert.Equal(t, "r1", sSent.Attributes["switchboard.replica.id"])
			assert.Equal(t, "-32602", sSrv.Attributes["error.type"])
		})
	}
}

// without returns m less the keys that start with prefix (the SDK's own
// status attributes, which some backends add).
func without(m map[string]string, prefix string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// A client that sends a traceparent in _meta has its trace continued: the
// hub's span is a child of the client's span, in the client's trace. An
// HTTP request's traceparent header is continued the same way when _meta has
// none, and linked when _meta has one (which then is the parent, as the MCP
// conventions say).
func TestJaeger_continuesClientContext(t *testing.T) {
	t.Parallel()
	j := jaeger(t)
	tr := newTracing(t, Config{Endpoint: j.OTLPHTTP(), InstanceID: "i-" + unique(4)})
	metaTrace, metaSpan := unique(16), unique(8)
	hdrTrace, hdrSpan := unique(16), unique(8)
	params := []byte(`{"_meta":{"traceparent":"00-` + metaTrace + `-` + metaSpan + `-01"},"name":"x"}`)
	header := map[string][]string{"Traceparent": {"00-" + hdrTrace + "-" + hdrSpan + "-01"}}

	_, fromMeta := tr.Start(tr.ExtractHeaders(context.Background(), header), Received, Op{Method: "prompts/get", Params: params, Network: NetworkHTTP})
	fromMeta.End()
	_, fromHeader := tr.Start(tr.ExtractHeaders(context.Background(), header), Received, Op{Method: "prompts/get", Params: []byte(`{"name":"x"}`), Network: NetworkHTTP})
	fromHeader.End()
	flush(t, tr)

	assert.Equal(t, metaTrace, fromMeta.TraceID())
	s := j.WaitTrace(t, metaTrace, 1).Span("prompts/get x")
	require.NotNil(t, s)
	assert.Equal(t, metaSpan, s.ParentID)
	assert.Equal(t, "x", s.Attributes["gen_ai.prompt.name"])
	assert.Equal(t, "http", s.Attributes["network.protocol.name"])
	assert.Equal(t, []jaegertest.Link{{TraceID: hdrTrace, SpanID: hdrSpan}}, s.Links)

	assert.Equal(t, hdrTrace, fromHeader.TraceID())
	s = j.WaitTrace(t, hdrTrace, 1).Span("prompts/get x")
	require.NotNil(t, s)
	assert.Equal(t, hdrSpan, s.ParentID)
	assert.Empty(t, s.Links)
}

// A malformed traceparent in _meta is ignored: the hub's span starts a new
// trace of its own, and nothing fails.
func TestJaeger_malformedTraceparent(t *testing.T) {
	t.Parallel()
	j := jaeger(t)
	tr := newTracing(t, Config{Endpoint: j.OTLPHTTP(), InstanceID: "i-" + unique(4)})
	for _, bad := range []string{
		`"00-xyz-00f067aa0ba902b7-01"`,
		`"00-00000000000000000000000000000000-00f067aa0ba902b7-01"`,
		`"00-` + testTraceID + `-` + testSpanID + `"`,
		`7`, `null`, `{"a":1}`,
	} {
		params := []byte(`{"uri":"file:///x","_meta":{"traceparent":` + bad + `}}`)
		ctx := tr.ExtractMeta(context.Background(), params)
		_, s := tr.Start(ctx, Received, Op{Method: "resources/read", Params: params})
		s.End()
		flush(t, tr)
		id := s.TraceID()
		require.Len(t, id, 32, bad)
		assert.NotEqual(t, testTraceID, id, bad)
		got := j.WaitTrace(t, id, 1).Span("resources/read")
		require.NotNil(t, got, bad)
		assert.Empty(t, got.ParentID, "a new trace, not a child: %s", bad)
		assert.Equal(t, "file:///x", got.Attributes["mcp.resource.uri"])
	}
}

// The standard OTEL_* variables choose the exporter, its endpoint, the
// sampler and extra resource attributes.
func TestJaeger_environment(t *testing.T) {
	j := jaeger(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPGRPC())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "1")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,team=mcp")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	id := "env-" + unique(4)
	tr, err := New(context.Background(), Config{Enabled: true, InstanceID: id})
	require.NoError(t, err)
	defer func() { assert.NoError(t, tr.Shutdown(context.Background())) }()

	_, s := tr.Start(context.Background(), Publish, Op{Method: "notifications/resources/updated",
		Params: []byte(`{"uri":"demo://clock","_meta":{"traceparent":"` + testTraceparent + `"}}`)})
	s.End()
	flush(t, tr)
	got := j.WaitTrace(t, s.TraceID(), 1).Span("publish notifications/resources/updated")
	require.NotNil(t, got)
	assert.Equal(t, "test", got.Resource["deployment.environment.name"])
	assert.Equal(t, "mcp", got.Resource["team"])
	assert.Equal(t, id, got.Resource["service.instance.id"])
	assert.Equal(t, "PRODUCER", got.Kind)
	assert.Empty(t, got.ParentID, "an update starts a trace of its own")
	assert.NotEqual(t, testTraceID, got.TraceID)
	assert.Equal(t, []jaegertest.Link{{TraceID: testTraceID, SpanID: testSpanID}}, got.Links, "linked to the server's context")
	assert.Equal(t, "demo://clock", got.Attributes["mcp.resource.uri"])

	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	off, err := New(context.Background(), Config{Enabled: true})
	require.NoError(t, err)
	defer func() { assert.NoError(t, off.Shutdown(context.Background())) }()
	_, s = off.Start(context.Background(), Received, Op{Method: "ping"})
	assert.False(t, s.Recording())
	assert.Empty(t, s.TraceID(), "no trace id for a trace the backend will not have")
	s.End()
}

// Names from peers are cleaned before they reach a span: a tool name that is
// not valid UTF-8, or one long enough to be cut inside a character, would
// otherwise make the OTLP encoding fail, and with it the export of every
// span of its batch.
func TestJaeger_peerStringsAreCleaned(t *testing.T) {
	t.Parallel()
	j := jaeger(t)
	tr := newTracing(t, Config{Endpoint: j.OTLPGRPC(), Protocol: "grpc", InstanceID: "i-" + unique(4)})
	long := strings.Repeat("é", maxTarget) // 2 bytes each: cut at maxTarget bytes, it would end inside one
	for _, name := range []string{"bad\xff\xfename", long} {
		params := []byte(`{"name":"` + name + `"}`)
		_, s := tr.Start(context.Background(), Received, Op{Method: "tools/call", Params: params, Session: "s\xc3", ID: jsonrpc.StringID("id\xff")})
		s.Fail(jsonrpc.NewError(-32000, "failed: \xff"))
		s.End()
		flush(t, tr)
		got := j.WaitTrace(t, s.TraceID(), 1).Spans[0]
		assert.True(t, utf8.ValidString(got.Attributes["gen_ai.tool.name"]))
		assert.LessOrEqual(t, len(got.Attributes["gen_ai.tool.name"]), maxTarget)
		assert.True(t, strings.HasPrefix(got.Name, "tools/call "), got.Name)
	}
	_, s := tr.Start(context.Background(), Received, Op{Method: "tools/\xffcall" + long})
	s.End()
	flush(t, tr)
	got := j.WaitTrace(t, s.TraceID(), 1).Spans[0]
	assert.True(t, utf8.ValidString(got.Name))
	assert.Zero(t, counts(t, tr)["export_failed"])
}
