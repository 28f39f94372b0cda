package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/jaegertest"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The tracing tests export to one real Jaeger, started by the first test
// that needs it and stopped by TestMain (before goleak looks), and read
// each trace back through its query API, as an operator's UI would. Each
// test reads only its own traces, by trace id.
var sharedJaeger struct {
	once   sync.Once
	dir    string
	jaeger *jaegertest.Jaeger
	err    error
}

func testJaeger(t *testing.T) *jaegertest.Jaeger {
	t.Helper()
	sharedJaeger.once.Do(func() {
		sharedJaeger.dir, sharedJaeger.err = os.MkdirTemp("", "jaegertest")
		if sharedJaeger.err == nil {
			sharedJaeger.jaeger, sharedJaeger.err = jaegertest.Launch(sharedJaeger.dir)
		}
	})
	require.NoError(t, sharedJaeger.err, "tracing tests need Jaeger (make deps builds it)")
	return sharedJaeger.jaeger
}

// stopsJaeger is the package's tests, then the shared Jaeger stopped.
type stopsJaeger struct{ *testing.M }

func (m stopsJaeger) Run() int {
	code := m.M.Run()
	defaultTransport.CloseIdleConnections()
	if j := sharedJaeger.jaeger; j != nil {
		j.Stop()
	}
	if sharedJaeger.dir != "" {
		os.RemoveAll(sharedJaeger.dir)
	}
	return code
}

// tracingTo is the configuration of a hub exporting to j, in batches that
// leave every 20ms.
func tracingTo(j *jaegertest.Jaeger) tracing.Config {
	return tracing.Config{Enabled: true, Endpoint: j.OTLPHTTP(), BatchDelay: 20 * time.Millisecond}
}

// randomHex returns n random bytes in hex: trace and span ids no other
// test uses.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tracedServer is an MCP server named srv, as an instrumented one would
// be: its tool "echo" continues the trace of its request's _meta with a
// tracing of its own (service.instance.id srvID), and records the
// traceparent it received; its tool "ask" does the same, then asks the
// client to sample.
type tracedServer struct {
	*mcp.Server
	tr    *tracing.Tracing
	id    string
	mu    sync.Mutex
	metas []string // the traceparent of each call, "" for none
}

func newTracedServer(t *testing.T, j *jaegertest.Jaeger) *tracedServer {
	ts := &tracedServer{id: "srv-" + randomHex(4)}
	if j != nil {
		cfg := tracingTo(j)
		cfg.InstanceID = ts.id
		tr, err := tracing.New(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { tr.Shutdown(context.Background()) })
		ts.tr = tr
	}
	ts.Server = sessionServer("srv", nil) // ask blocks on CreateMessage
	ts.AddTool(&mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		_, span := ts.received(ctx, req)
		defer span.End()
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("echo")}}, nil
	})
	ts.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		ctx, span := ts.received(ctx, req)
		defer span.End()
		res, err := req.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
			Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("?")}}})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil
	})
	return ts
}

// received records the traceparent of a call and starts the server's
// span, continuing it.
func (ts *tracedServer) received(ctx context.Context, req *mcp.ToolRequest) (context.Context, tracing.Span) {
	tp, _ := req.Params.Meta[mcp.MetaTraceparent].(string)
	ts.mu.Lock()
	ts.metas = append(ts.metas, tp)
	ts.mu.Unlock()
	params, _ := json.Marshal(map[string]any{"name": req.Params.Name, "_meta": req.Params.Meta})
	return ts.tr.Start(ctx, tracing.Received, tracing.Op{Method: mcp.MethodToolsCall, Params: params})
}

// lastMeta returns the traceparent of the last call.
func (ts *tracedServer) lastMeta(t *testing.T) string {
	t.Helper()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	require.NotEmpty(t, ts.metas, "the server saw no call")
	return ts.metas[len(ts.metas)-1]
}

func (ts *tracedServer) flush(t *testing.T) {
	t.Helper()
	if ts.tr != nil {
		require.NoError(t, ts.tr.ForceFlush(ctxFor(t)))
	}
}

// startTracedHub starts a hub of cfg with a traced server named srv on it,
// whose own spans go to j (nil: it records none).
func startTracedHub(t *testing.T, cfg Config, j *jaegertest.Jaeger) (*testHub, *tracedServer) {
	t.Helper()
	th := startHub(t, cfg)
	srv := newTracedServer(t, j)
	th.runServer(srv.Server, "srv")
	return th, srv
}

// traceparentParts splits a valid traceparent into its trace id and span
// id.
func traceparentParts(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(tp, "-")
	require.Len(t, parts, 4, "traceparent %q", tp)
	require.Len(t, parts[1], 32)
	require.Len(t, parts[2], 16)
	return parts[1], parts[2]
}

// spanOf returns the one span of tr named name that instance made.
func spanOf(t *testing.T, tr *jaegertest.Trace, instance, name string) *jaegertest.Span {
	t.Helper()
	var found *jaegertest.Span
	for _, s := range tr.Spans {
		if s.Name == name && s.Resource["service.instance.id"] == instance {
			require.Nil(t, found, "two spans %q of %s", name, instance)
			found = s
		}
	}
	require.NotNil(t, found, "no span %q of %s in %v", name, instance, tr.Names())
	return found
}

// A call from a client on instance A to a server on instance B, which asks
// the client to sample in the middle of it, is one trace: A's span of the
// request and of its crossing, B's of the crossing and of the request to
// the server, the server's own (continued from _meta, with the id of B's
// span), and the sampling request's way back to the client through both
// instances, each the child of the one before. The spans carry the
// conventions' attributes, and nothing of the arguments.
func TestTracing_callAcrossInstances(t *testing.T) {
	t.Parallel()
	j := testJaeger(t)
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a := startHubOn(t, rs, prefix, Config{Tracing: tracingTo(j)})
	b := startHubOn(t, rs, prefix, Config{Tracing: tracingTo(j)})
	srv := newTracedServer(t, j)
	b.runServer(srv.Server, "srv")
	a.waitServer("srv", 1)

	c := a.client(&mcp.ClientOptions{Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("sampled")}, nil
	}})
	res, err := c.CallTool(ctxFor(t), "srv__ask", map[string]string{"secret": "hunter2"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "sampled", res.Content[0].Text)

	traceID, parentID := traceparentParts(t, srv.lastMeta(t))
	srv.flush(t)
	tr := j.WaitTrace(t, traceID, 9)
	require.Len(t, tr.Spans, 9, "%v", tr.Names())

	idA, idB := a.ID(), b.ID()
	recv := spanOf(t, tr, idA, "tools/call srv__ask")
	out := spanOf(t, tr, idA, "send tools/call ask")
	in := spanOf(t, tr, idB, "receive tools/call ask")
	sent := spanOf(t, tr, idB, "tools/call ask")
	atServer := spanOf(t, tr, srv.id, "tools/call ask")
	asked := spanOf(t, tr, idB, "sampling/createMessage")
	askOut := spanOf(t, tr, idB, "send sampling/createMessage")
	askIn := spanOf(t, tr, idA, "receive sampling/createMessage")
	askSent := spanOf(t, tr, idA, "sampling/createMessage")

	assert.Empty(t, recv.ParentID, "the client sent no trace context: the trace starts at the hub")
	for _, link := range []struct{ child, parent *jaegertest.Span }{
		{out, recv}, {in, out}, {sent, in}, {atServer, sent}, {asked, sent}, {askOut, asked}, {askIn, askOut}, {askSent, askIn},
	} {
		assert.Equal(t, link.parent.SpanID, link.child.ParentID, "%q of %s is a child of %q of %s",
			link.child.Name, link.child.Resource["service.instance.id"], link.parent.Name, link.parent.Resource["service.instance.id"])
	}
	assert.Equal(t, sent.SpanID, parentID, "the server's _meta names B's span of the request it received")
	for s, kind := range map[*jaegertest.Span]string{recv: "SERVER", out: "CLIENT", in: "SERVER", sent: "CLIENT", asked: "SERVER", askOut: "CLIENT", askIn: "SERVER", askSent: "CLIENT"} {
		assert.Equal(t, kind, s.Kind, s.Name)
		assert.Equal(t, tracing.ServiceName, s.Resource["service.name"])
		for k, v := range s.Attributes {
			assert.NotContains(t, v, "hunter2", "attribute %s of %s", k, s.Name)
		}
	}
	assert.Equal(t, "tools/call", recv.Attributes["mcp.method.name"])
	assert.Equal(t, "srv__ask", recv.Attributes["gen_ai.tool.name"])
	assert.Equal(t, "srv", recv.Attributes["switchboard.server.name"], "the routing decision, on the received span")
	assert.Equal(t, mcp.LatestVersion, recv.Attributes["mcp.protocol.version"])
	assert.Equal(t, "websocket", recv.Attributes["network.protocol.name"])
	assert.NotEmpty(t, recv.Attributes["jsonrpc.request.id"])
	assert.True(t, strings.HasPrefix(recv.Attributes["switchboard.client.id"], idA+"/"), recv.Attributes["switchboard.client.id"])
	assert.Equal(t, idB, out.Attributes["switchboard.instance.peer"])
	assert.Equal(t, "redis", in.Attributes["network.protocol.name"])
	assert.Equal(t, idA, in.Attributes["switchboard.instance.peer"])
	assert.Equal(t, "ask", sent.Attributes["gen_ai.tool.name"])
	assert.Equal(t, "srv", sent.Attributes["switchboard.server.name"])
	assert.NotEmpty(t, sent.Attributes["switchboard.replica.id"])
	assert.Equal(t, "sampling/createMessage", askSent.Attributes["mcp.method.name"])
}

// A client's own trace context continues through the hub, from _meta (a
// WebSocket session) and from the traceparent header of a Streamable HTTP
// POST (a client of the 2026-07-28 revision): the hub's span is the child
// of the client's, and the server receives the same trace id in _meta with
// the hub's span as parent. A modern client's call that asks for input is
// one trace too: its round of the translation between eras is a span of
// it.
func TestTracing_clientContextContinues(t *testing.T) {
	t.Parallel()
	j := testJaeger(t)
	th, srv := startTracedHub(t, Config{Tracing: tracingTo(j)}, j)
	sampling := func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("sampled")}, nil
	}

	t.Run("meta", func(t *testing.T) {
		traceID, spanID := randomHex(16), randomHex(8)
		c := th.client(nil)
		_, err := c.CallTool(ctxFor(t), "srv__echo", nil, &mcp.CallOptions{Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01"}})
		require.NoError(t, err)
		gotTrace, gotParent := traceparentParts(t, srv.lastMeta(t))
		assert.Equal(t, traceID, gotTrace, "the server continues the client's trace")
		srv.flush(t)
		tr := j.WaitTrace(t, traceID, 3)
		recv := spanOf(t, tr, th.ID(), "tools/call srv__echo")
		sent := spanOf(t, tr, th.ID(), "tools/call echo")
		assert.Equal(t, spanID, recv.ParentID, "the hub's span is the child of the client's")
		assert.Equal(t, recv.SpanID, sent.ParentID)
		assert.Equal(t, sent.SpanID, gotParent)
		assert.Equal(t, sent.SpanID, spanOf(t, tr, srv.id, "tools/call echo").ParentID)
	})

	t.Run("header", func(t *testing.T) {
		traceID, spanID := randomHex(16), randomHex(8)
		c := httpClient(t, th.srv.URL+"/mcp", &mcp.ClientOptions{ProtocolVersion: mcp.ModernVersion, Sampling: sampling,
			Header: http.Header{"Traceparent": {"00-" + traceID + "-" + spanID + "-01"}}})
		res, err := c.CallTool(ctxFor(t), "srv__ask", nil, nil)
		require.NoError(t, err)
		assert.Equal(t, "sampled", res.Content[0].Text)
		gotTrace, _ := traceparentParts(t, srv.lastMeta(t))
		assert.Equal(t, traceID, gotTrace, "the server continues the client's trace")
		srv.flush(t)
		// The client's server/discover (its header is on every POST), the
		// first request, its round of input, the server's sampling
		// request, the retry, the request to the server and the server's
		// own span: all seven, or the retry's span may not be in yet.
		tr := j.WaitTrace(t, traceID, 7)
		var received []*jaegertest.Span
		for _, s := range tr.Spans {
			if s.Name == "tools/call srv__ask" {
				received = append(received, s)
			}
		}
		require.Len(t, received, 2, "the request and its retry: %v", tr.Names())
		for _, s := range received {
			assert.Equal(t, spanID, s.ParentID, "each request continues the context of its POST's header")
			assert.Equal(t, mcp.ModernVersion, s.Attributes["mcp.protocol.version"])
			assert.Equal(t, "http", s.Attributes["network.protocol.name"])
		}
		round := spanOf(t, tr, th.ID(), "input round tools/call")
		assert.Equal(t, "1", round.Attributes["switchboard.input.round"])
		assert.Contains(t, []string{received[0].SpanID, received[1].SpanID}, round.ParentID, "the round is a step of the call")
		asked := spanOf(t, tr, th.ID(), "sampling/createMessage")
		assert.Equal(t, spanOf(t, tr, th.ID(), "tools/call ask").SpanID, asked.ParentID)
	})
}

// A malformed traceparent, in _meta or in a header, is ignored: the call
// succeeds, and its trace starts at the hub, whose span has no parent.
func TestTracing_malformedContextIsIgnored(t *testing.T) {
	t.Parallel()
	j := testJaeger(t)
	th, srv := startTracedHub(t, Config{Tracing: tracingTo(j)}, nil)
	zero := "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name   string
		meta   any
		header string
	}{
		{name: "meta all-zero trace id", meta: zero},
		{name: "meta too short", meta: "00-4bf92f3577b34da6-01"},
		{name: "meta not a string", meta: 7},
		{name: "meta uppercase", meta: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"},
		{name: "header version ff", header: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{name: "header garbage", header: "hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *mcp.Client
			var opts *mcp.CallOptions
			if tc.header != "" {
				c = httpClient(t, th.srv.URL+"/mcp", &mcp.ClientOptions{Header: http.Header{"Traceparent": {tc.header}}})
			} else {
				c = th.client(nil)
				opts = &mcp.CallOptions{Meta: mcp.Meta{"traceparent": tc.meta}}
			}
			_, err := c.CallTool(ctxFor(t), "srv__echo", nil, opts)
			require.NoError(t, err, "never an error to the client")
			traceID, _ := traceparentParts(t, srv.lastMeta(t))
			assert.NotEqual(t, "4bf92f3577b34da6a3ce929d0e0e4736", strings.ToLower(traceID))
			assert.NotEqual(t, "00000000000000000000000000000000", traceID)
			tr := j.WaitTrace(t, traceID, 2)
			assert.Empty(t, spanOf(t, tr, th.ID(), "tools/call srv__echo").ParentID, "a new trace")
		})
	}
}

// With the exporter's endpoint down, calls go on as ever: their spans are
// dropped, and counted.
func TestTracing_exporterDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	th, _ := startTracedHub(t, Config{Tracing: tracing.Config{Enabled: true, Endpoint: down, BatchDelay: 10 * time.Millisecond}}, nil)
	c := th.client(nil)
	ctx := ctxFor(t)
	for range 50 {
		_, err := c.CallTool(ctx, "srv__echo", nil, nil)
		require.NoError(t, err)
	}
	_, err = c.CallTool(ctx, "nosuch__tool", nil, nil)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err), "errors are the same too")
	require.NoError(t, th.tracing.ForceFlush(ctx))
	assert.GreaterOrEqual(t, scrape(t, th, `switchboard_tracing_spans_dropped_total{reason="export_failed"}`), 101.0,
		"the spans of every call were dropped, and counted")
	assert.Zero(t, scrape(t, th, "switchboard_tracing_spans_exported_total"))
}

// scrapeOpenMetrics reads th's /metrics as OpenMetrics, which carries
// exemplars.
func scrapeOpenMetrics(t *testing.T, th *testHub) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodGet, th.srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/openmetrics-text")
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}

// The call log shows each call's trace id, and its page in the tracing UI;
// the routed-request histogram's exemplar holds it too.
func TestTracing_callLogAndExemplars(t *testing.T) {
	t.Parallel()
	j := testJaeger(t)
	th, srv := startTracedHub(t, Config{Tracing: tracingTo(j), TracingUI: "http://jaeger.example:16686/"}, nil)
	c := th.client(nil)
	ctx := ctxFor(t)
	_, err := c.ReadResource(ctx, uriCalls) // someone watches the call log
	require.NoError(t, err)
	require.Eventually(t, func() bool { return th.stats.want.Load()&watchCalls != 0 }, wait, 5*time.Millisecond)
	_, err = c.CallTool(ctx, "srv__echo", nil, nil)
	require.NoError(t, err)
	traceID, _ := traceparentParts(t, srv.lastMeta(t))

	var doc callsDoc
	require.Eventually(t, func() bool {
		res, err := c.ReadResource(ctx, uriCalls)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &doc))
		return len(doc.Calls) > 0
	}, wait, 10*time.Millisecond)
	e := doc.Calls[len(doc.Calls)-1]
	assert.Equal(t, traceID, e.TraceID)
	assert.Equal(t, "http://jaeger.example:16686/trace/"+traceID, e.TraceURL)

	assert.Contains(t, scrapeOpenMetrics(t, th), `trace_id="`+traceID+`"`,
		"an exemplar of switchboard_routed_request_duration_seconds")
}

// With tracing off the hub changes nothing: a client's trace context
// reaches the server as the client wrote it, and no span is made.
func TestTracing_offChangesNothing(t *testing.T) {
	t.Parallel()
	th, srv := startTracedHub(t, Config{}, nil)
	tp := "00-" + randomHex(16) + "-" + randomHex(8) + "-01"
	_, err := th.client(nil).CallTool(ctxFor(t), "srv__echo", nil, &mcp.CallOptions{Meta: mcp.Meta{"traceparent": tp}})
	require.NoError(t, err)
	assert.Equal(t, tp, srv.lastMeta(t))
	assert.False(t, th.tracing.Enabled())
	assert.Contains(t, scrapeOpenMetrics(t, th), "switchboard_tracing_spans_exported_total 0", "the counters are there, at 0")
}

// A resource update published to subscribers is one span, a trace of its
// own (it belongs to no call), with the resource's URI; delivering it to
// each subscriber makes none.
func TestTracing_updatePublished(t *testing.T) {
	t.Parallel()
	j := testJaeger(t)
	th := startHub(t, Config{Tracing: tracingTo(j)})
	srv := newTracedServer(t, nil)
	srv.AddResource(&mcp.Resource{URI: "srv://x", Name: "x"}, func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: "srv://x", Text: "x"}}}, nil
	})
	th.runServer(srv.Server, "srv")
	notes := newNotes()
	var clients []*mcp.Client
	for range 3 {
		c := th.client(&mcp.ClientOptions{OnNotification: notes.add})
		require.NoError(t, c.Subscribe(ctxFor(t), "srv://x"))
		clients = append(clients, c)
	}
	since := time.Now()
	srv.ResourceUpdated(ctxFor(t), "srv://x")
	notes.wait(t, mcp.NotificationResourceUpdated, len(clients), nil)
	require.NoError(t, th.tracing.ForceFlush(ctxFor(t)))
	traces := j.WaitTraces(t, tracing.ServiceName, since, func(tr *jaegertest.Trace) bool {
		for _, s := range tr.Spans {
			if s.Resource["service.instance.id"] == th.ID() && strings.HasPrefix(s.Name, "publish ") {
				return true
			}
		}
		return false
	})
	require.Len(t, traces, 1, "one trace for one update")
	require.Len(t, traces[0].Spans, 1, "one span, however many subscribers: %v", traces[0].Names())
	s := traces[0].Spans[0]
	assert.Equal(t, "publish notifications/resources/updated", s.Name)
	assert.Equal(t, "PRODUCER", s.Kind)
	assert.Empty(t, s.ParentID)
	assert.Equal(t, "srv://x", s.Attributes["mcp.resource.uri"])
	assert.Equal(t, "srv", s.Attributes["switchboard.server.name"])
}

// The other way of the translation between eras: a session client's call to
// a server of the 2026-07-28 revision that answers with an input request is
// one trace: the client's request, the hub's two attempts at the server,
// and between them the round, whose child is the sampling request the hub
// asks the client.
func TestTracing_inputRoundForAModernServer(t *testing.T) {
	t.Parallel()
	j := testJaeger(t)
	th := startHub(t, Config{Tracing: tracingTo(j)})
	ms := startModernServer(t, th, "modern")
	traceID, spanID := randomHex(16), randomHex(8)
	c := th.client(&mcp.ClientOptions{Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("because")}, nil
	}})
	res, err := c.CallTool(ctxFor(t), "modern__ask", nil, &mcp.CallOptions{Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01"}})
	require.NoError(t, err)
	assert.Equal(t, "the model said: because", res.Content[0].Text)
	ms.mu.Lock()
	require.Len(t, ms.calls, 2)
	for _, call := range ms.calls {
		meta, _ := jsonrpc.Member(call, "_meta")
		tp, _ := jsonrpc.StringMember(meta, "traceparent")
		assert.Contains(t, tp, traceID, "each attempt carries the trace")
	}
	ms.mu.Unlock()

	tr := j.WaitTrace(t, traceID, 5)
	recv := spanOf(t, tr, th.ID(), "tools/call modern__ask")
	round := spanOf(t, tr, th.ID(), "input round tools/call")
	ask := spanOf(t, tr, th.ID(), "sampling/createMessage")
	assert.Equal(t, spanID, recv.ParentID)
	assert.Equal(t, recv.SpanID, round.ParentID)
	assert.Equal(t, "1", round.Attributes["switchboard.input.round"])
	assert.Equal(t, round.SpanID, ask.ParentID, "the hub asks the client within the round")
	assert.Equal(t, "CLIENT", ask.Kind)
	attempts := 0
	for _, s := range tr.Spans {
		if s.Name == "tools/call ask" {
			attempts++
			assert.Equal(t, recv.SpanID, s.ParentID)
			assert.Equal(t, mcp.ModernVersion, s.Attributes["mcp.protocol.version"])
		}
	}
	assert.Equal(t, 2, attempts, "%v", tr.Names())
}
