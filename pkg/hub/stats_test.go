package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// testStatsInterval keeps the tests short: the window is 60 of them, 12 s,
// longer than any test's calls take.
const testStatsInterval = 200 * time.Millisecond

// trafficServer is an MCP server whose tools end in known ways: ok
// answers, fail fails with -32602 (as a server that refuses its
// arguments), boom with a code of its own, sorry with a tool error
// (isError), hang only when cancelled.
func trafficServer(name string) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: name, Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "ok"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("ok")}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "fail fails")
	})
	s.AddTool(&mcp.Tool{Name: "boom"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32050, Message: "boom"}
	})
	s.AddTool(&mcp.Tool{Name: "sorry"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("sorry")}, IsError: true}, nil
	})
	s.AddTool(&mcp.Tool{Name: "hang"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return s
}

// readDoc reads one of the hub's resources into a T.
func readDoc[T any](t *testing.T, c *mcp.Client, uri string) *T {
	t.Helper()
	res, err := c.ReadResource(ctxFor(t), uri)
	require.NoError(t, err, "reading %s", uri)
	require.Len(t, res.Contents, 1)
	var doc T
	require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &doc), "%s: %s", uri, res.Contents[0].Text)
	return &doc
}

// watcher is a client subscribed to some of the hub's resources.
type watcher struct {
	t *testing.T
	c *mcp.Client
	n *notes
}

func watch(t *testing.T, th *testHub, token string, uris ...string) *watcher {
	t.Helper()
	n := newNotes()
	c := th.client(&mcp.ClientOptions{Token: token, OnNotification: n.add})
	for _, uri := range uris {
		require.NoError(t, c.Subscribe(ctxFor(t), uri), "subscribing to %s", uri)
	}
	return &watcher{t: t, c: c, n: n}
}

// updates counts the updates of uri the watcher got.
func (w *watcher) updates(uri string) int {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	k := 0
	for _, x := range w.n.all {
		if x.method == mcp.NotificationResourceUpdated && isUpdateOf(x.params, uri) {
			k++
		}
	}
	return k
}

func isUpdateOf(params json.RawMessage, uri string) bool {
	u, _ := jsonrpc.StringMember(params, "uri")
	return u == uri
}

// until reads uri after each of its updates until ok holds of it.
func until[T any](w *watcher, uri string, what string, ok func(*T) bool) *T {
	w.t.Helper()
	deadline := time.Now().Add(wait)
	var doc *T
	for k := w.updates(uri) + 1; ; k++ {
		doc = readDoc[T](w.t, w.c, uri)
		if ok(doc) {
			return doc
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(doc)
			w.t.Fatalf("%s never held; the last %s: %s", what, uri, b)
		}
		w.n.wait(w.t, mcp.NotificationResourceUpdated, k, func(p json.RawMessage) bool { return isUpdateOf(p, uri) })
	}
}

func (d *statsDoc) server(name string) *serverFigures {
	for i := range d.Servers {
		if d.Servers[i].Name == name {
			return &d.Servers[i]
		}
	}
	return nil
}

func (s *serverFigures) item(method, name string) *itemFigures {
	for i := range s.Items {
		if s.Items[i].Method == method && s.Items[i].Name == name {
			return &s.Items[i]
		}
	}
	return nil
}

func (d *statsDoc) instance(id string) *instanceFigure {
	for i := range d.Instances {
		if d.Instances[i].ID == id {
			return &d.Instances[i]
		}
	}
	return nil
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// After known calls, some failing with known codes, switchboard://stats
// counts each by server, tool and outcome, with latencies; the call log
// shows each with its outcome; switchboard://clients shows the caller.
func TestStats_countsKnownCalls(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{StatsInterval: testStatsInterval, CallTimeout: time.Second})
	th.runServer(trafficServer("traffic"), "traffic")
	w := watch(t, th, "", uriStats, uriCalls, uriClients)
	c := th.client(&mcp.ClientOptions{Info: mcp.Implementation{Name: "stats-test", Version: "7.1"}})
	ctx := ctxFor(t)

	for range 3 {
		_, err := c.CallTool(ctx, "traffic__ok", map[string]int{"n": 1}, nil)
		require.NoError(t, err)
	}
	res, err := c.CallTool(ctx, "traffic__sorry", nil, nil)
	require.NoError(t, err)
	require.True(t, res.IsError)
	_, err = c.CallTool(ctx, "traffic__fail", nil, nil)
	require.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err))
	_, err = c.CallTool(ctx, "traffic__boom", nil, nil)
	require.Equal(t, jsonrpc.Code(-32050), rpcCode(err))
	_, err = c.CallTool(ctx, "traffic__hang", nil, nil)
	require.Equal(t, mcp.CodeRequestTimeout, rpcCode(err))
	_, err = c.CallTool(ctx, "traffic__nothing", nil, nil)
	require.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err), "an unknown tool, refused by the hub")

	doc := until(w, uriStats, "8 calls counted", func(d *statsDoc) bool { return d.Hub.Total == 8 })
	srv := doc.server("traffic")
	require.NotNil(t, srv)
	assert.Equal(t, int64(7), srv.Total)
	assert.Equal(t, int64(3), srv.ErrorsTotal)
	assert.Equal(t, map[string]int64{"ok": 4, "-32602": 1, "other": 1, "-32001": 1}, srv.Outcomes)
	assert.Equal(t, int64(7), srv.Calls, "every call is in the window")
	assert.Equal(t, int64(3), srv.Errors)
	require.NotNil(t, srv.Series)
	assert.Equal(t, int64(7), sum(srv.Series.Calls), "the per-interval series holds every call")
	assert.Equal(t, int64(3), sum(srv.Series.Errors))

	ok := srv.item(mcp.MethodToolsCall, "ok")
	require.NotNil(t, ok)
	assert.Equal(t, int64(3), ok.Total)
	assert.Equal(t, map[string]int64{"ok": 3}, ok.Outcomes)
	require.NotNil(t, ok.P50Ms)
	require.NotNil(t, ok.P99Ms)
	assert.Greater(t, *ok.P50Ms, 0.0)
	assert.LessOrEqual(t, *ok.P50Ms, *ok.P99Ms)
	hang := srv.item(mcp.MethodToolsCall, "hang")
	require.NotNil(t, hang)
	assert.Equal(t, map[string]int64{"-32001": 1}, hang.Outcomes)
	require.NotNil(t, hang.P50Ms)
	assert.GreaterOrEqual(t, *hang.P50Ms, 800.0, "the call that timed out took the whole CallTimeout (1 s)")
	require.NotNil(t, srv.P99Ms)
	assert.GreaterOrEqual(t, *srv.P99Ms, 800.0, "the server's p99 is its slowest call")
	assert.Less(t, *srv.P50Ms, 800.0, "and its p50 one of the quick ones")

	require.NotNil(t, doc.Refused)
	assert.Equal(t, map[string]int64{"-32602": 1}, doc.Refused.Outcomes)
	assert.Equal(t, int64(8), doc.Hub.Total)
	assert.Equal(t, int64(4), doc.Hub.ErrorsTotal)
	assert.Equal(t, map[string]int64{"ok": 4, "-32602": 2, "other": 1, "-32001": 1}, doc.Hub.Outcomes)
	require.NotNil(t, doc.Hub.Series)
	assert.Equal(t, int64(8), sum(doc.Hub.Series.Calls))
	require.Len(t, doc.Instances, 1)
	self := doc.Instances[0]
	assert.True(t, self.Self)
	assert.Equal(t, int64(8), self.Total)
	assert.Equal(t, 2, self.Connections["client/websocket"], "the watcher and the caller")
	assert.Equal(t, 1, self.Connections["server/websocket"])

	calls := until(w, uriCalls, "8 calls logged", func(d *callsDoc) bool { return len(d.Calls) == 8 })
	assert.False(t, calls.Arguments)
	var got []string
	for _, e := range calls.Calls {
		got = append(got, fmt.Sprintf("%s %s %s %d", e.Name, e.Outcome, e.Server, e.Code))
		assert.Equal(t, "stats-test", e.Client)
		assert.Equal(t, th.ID(), e.Instance)
		assert.Empty(t, e.Arguments, "no arguments unless asked for")
	}
	assert.Equal(t, []string{
		"ok ok traffic 0", "ok ok traffic 0", "ok ok traffic 0", "sorry tool error traffic 0",
		"fail error traffic -32602", "boom error traffic -32050", "hang error traffic -32001", "traffic__nothing error  -32602",
	}, got)
	assert.GreaterOrEqual(t, calls.Calls[6].DurationMs, 800.0)

	clients := readDoc[clientsDoc](t, w.c, uriClients)
	require.Equal(t, 2, clients.Total)
	var caller *clientDoc
	for i := range clients.Clients {
		if clients.Clients[i].Name == "stats-test" {
			caller = &clients.Clients[i]
		}
	}
	require.NotNil(t, caller, "the caller is listed: %+v", clients.Clients)
	assert.Equal(t, "7.1", caller.Version)
	assert.Equal(t, "websocket", caller.Transport)
	assert.Equal(t, "anonymous", caller.Token)
	assert.Equal(t, "client", caller.Role)
	assert.Equal(t, "/mcp", caller.Endpoint)
	assert.Equal(t, th.ID(), caller.Instance)
	assert.Equal(t, 0, caller.InFlight)
	assert.WithinDuration(t, time.Now(), caller.ConnectedAt, wait)
}

// The call log shows arguments only in its own view, which only admins may
// read; the clients and the call log are for operators; a client
// restricted to some tools sees only their traffic.
func TestStats_restrictions(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{StatsInterval: testStatsInterval, Tokens: writeTokens(t, `
tokens:
  - {name: ops, token: ops-secret, roles: [dashboard]}
  - {name: root, token: root-secret, roles: [admin]}
  - {name: narrow, token: narrow-secret, roles: [client], tools: ["alpha__ok"]}
  - {name: wide, token: wide-secret, roles: [client]}
  - {name: alpha, token: alpha-secret, roles: [server], servers: [alpha]}
  - {name: beta, token: beta-secret, roles: [server], servers: [beta]}
`)})
	th.runServerWith(trafficServer("alpha"), "alpha", "alpha-secret")
	th.runServerWith(trafficServer("beta"), "beta", "beta-secret")
	root := watch(t, th, "root-secret", uriStats, uriCallsArgs)
	caller := th.tokenClient("wide-secret", nil)
	ctx := ctxFor(t)
	for _, name := range []string{"alpha__ok", "alpha__fail", "beta__ok", "beta__ok"} {
		_, _ = caller.CallTool(ctx, name, map[string]string{"secret": "s3"}, nil)
	}
	until(root, uriStats, "4 calls", func(d *statsDoc) bool { return d.Hub.Total == 4 })

	calls := until(root, uriCallsArgs, "4 calls logged", func(d *callsDoc) bool { return len(d.Calls) == 4 })
	assert.True(t, calls.Arguments)
	assert.JSONEq(t, `{"secret":"s3"}`, calls.Calls[0].Arguments, "admins see arguments in their view")
	assert.Equal(t, "wide", calls.Calls[0].Token)

	ops := th.tokenClient("ops-secret", nil)
	for _, e := range readDoc[callsDoc](t, ops, uriCalls).Calls {
		assert.Empty(t, e.Arguments, "the plain call log never carries arguments")
	}
	assert.NotEmpty(t, readDoc[clientsDoc](t, ops, uriClients).Clients, "dashboards see the clients")
	opsStats := readDoc[statsDoc](t, ops, uriStats)
	assert.Len(t, opsStats.Servers, 2)
	assert.NotEmpty(t, opsStats.Instances)

	narrow := th.tokenClient("narrow-secret", nil)
	for _, tt := range []struct {
		token *mcp.Client
		uri   string
	}{
		{ops, uriCallsArgs}, {narrow, uriClients}, {narrow, uriCalls}, {narrow, uriCallsArgs}, {caller, uriClients}, {caller, uriCalls},
	} {
		_, err := tt.token.ReadResource(ctx, tt.uri)
		assert.Equal(t, mcp.CodeForbidden, rpcCode(err), "reading %s", tt.uri)
		assert.Equal(t, mcp.CodeForbidden, rpcCode(tt.token.Subscribe(ctx, tt.uri)), "subscribing to %s", tt.uri)
	}

	// A client restricted to alpha__ok sees alpha, and of it only ok:
	// figures of what it sees, no series (they would count the rest), no
	// instances, no refusals.
	mine := readDoc[statsDoc](t, narrow, uriStats)
	require.Len(t, mine.Servers, 1)
	alpha := mine.Servers[0]
	assert.Equal(t, "alpha", alpha.Name)
	require.Len(t, alpha.Items, 1)
	assert.Equal(t, "ok", alpha.Items[0].Name)
	assert.Equal(t, int64(1), alpha.Total)
	assert.Equal(t, int64(0), alpha.ErrorsTotal, "alpha__fail is not its to see")
	assert.Nil(t, alpha.Series)
	assert.Equal(t, int64(1), mine.Hub.Total)
	assert.Nil(t, mine.Hub.Series)
	assert.Nil(t, mine.Refused)
	assert.Empty(t, mine.Instances)

	// An unrestricted client sees every server and the series, not the
	// instances.
	all := readDoc[statsDoc](t, caller, uriStats)
	assert.Len(t, all.Servers, 2)
	assert.Equal(t, int64(4), all.Hub.Total)
	assert.NotNil(t, all.Hub.Series)
	assert.Empty(t, all.Instances)
}

// Ticks come about once an interval while someone subscribes, never closer
// than the interval; once nobody watches the loop stops and lets go of
// its window.
func TestStats_updatesOnlyWhileWatched(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{StatsInterval: 50 * time.Millisecond})
	assert.False(t, th.stats.isRunning(), "nobody watches yet")
	w := watch(t, th, "", uriStats)
	require.True(t, th.stats.isRunning())
	assert.Equal(t, 1.0, scrape(t, th, "switchboard_stats_watched"))

	var ticks []time.Time
	for k := 1; len(ticks) < 4; k++ {
		w.n.wait(t, mcp.NotificationResourceUpdated, k, func(p json.RawMessage) bool { return isUpdateOf(p, uriStats) })
		doc := readDoc[statsDoc](t, w.c, uriStats)
		if len(ticks) == 0 || !doc.At.Equal(ticks[len(ticks)-1]) {
			ticks = append(ticks, doc.At)
		}
	}
	for i := 1; i < len(ticks); i++ {
		assert.GreaterOrEqual(t, ticks[i].Sub(ticks[i-1]), 50*time.Millisecond, "ticks %d and %d", i-1, i)
	}

	require.NoError(t, w.c.Unsubscribe(ctxFor(t), uriStats))
	// The subscriber's reads did not keep it running: a poller's would.
	require.Eventually(t, func() bool { return !th.stats.isRunning() }, wait, 10*time.Millisecond)
	assert.Equal(t, 0.0, scrape(t, th, "switchboard_stats_watched"))
	th.stats.mu.Lock()
	assert.Nil(t, th.stats.windows, "the window is freed")
	th.stats.mu.Unlock()
	assert.Zero(t, th.stats.want.Load(), "calls record nothing but their counters")

	// Reading wakes it; its counters were kept.
	c := th.client(nil)
	_, err := c.CallTool(ctxFor(t), "nothing__here", nil, nil)
	require.Error(t, err)
	doc := readDoc[statsDoc](t, w.c, uriStats)
	assert.Equal(t, int64(1), doc.Hub.Total)
	assert.True(t, th.stats.isRunning())
}

// With two instances over Redis, what the clients of one do shows in the
// other's switchboard://stats, clients and calls; each instance publishes
// its summary only while someone, somewhere, watches.
func TestStats_acrossInstances(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a := startHubOn(t, rs, prefix, Config{StatsInterval: 100 * time.Millisecond})
	b := startHubOn(t, rs, prefix, Config{StatsInterval: 100 * time.Millisecond})
	for _, th := range []*testHub{a, b} {
		require.Eventually(t, func() bool { return len(th.remoteInstances()) == 1 }, wait, 10*time.Millisecond)
	}
	a.runServer(trafficServer("traffic"), "traffic")
	b.waitServer("traffic", 1)
	assert.False(t, b.stats.isRunning(), "nobody watches: B publishes nothing")

	w := watch(t, a, "", uriStats, uriCalls, uriClients)
	require.Eventually(t, func() bool { return b.stats.want.Load()&watchCalls != 0 }, wait, 10*time.Millisecond,
		"B hears that A's dashboard watches")

	cb := b.client(&mcp.ClientOptions{Info: mcp.Implementation{Name: "on-b", Version: "2"}})
	ca := a.client(&mcp.ClientOptions{Info: mcp.Implementation{Name: "on-a", Version: "1"}})
	ctx := ctxFor(t)
	for range 3 {
		_, err := cb.CallTool(ctx, "traffic__ok", nil, nil)
		require.NoError(t, err)
	}
	_, err := cb.CallTool(ctx, "traffic__fail", nil, nil)
	require.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err))
	_, err = ca.CallTool(ctx, "traffic__ok", nil, nil)
	require.NoError(t, err)

	doc := until(w, uriStats, "B's calls on A", func(d *statsDoc) bool {
		in := d.instance(b.ID())
		return d.Hub.Total == 5 && in != nil && in.Total == 4
	})
	srv := doc.server("traffic")
	require.NotNil(t, srv)
	assert.Equal(t, map[string]int64{"ok": 4, "-32602": 1}, srv.Outcomes, "both instances' calls add up")
	assert.Equal(t, int64(5), sum(srv.Series.Calls))
	require.NotNil(t, srv.P99Ms, "latency histograms merge")
	require.Len(t, doc.Instances, 2)
	assert.Equal(t, 1, doc.instance(b.ID()).Connections["client/websocket"])
	assert.Equal(t, 2, doc.instance(a.ID()).Connections["client/websocket"])
	assert.Equal(t, 1, doc.instance(a.ID()).Connections["server/websocket"])

	calls := until(w, uriCalls, "5 calls logged", func(d *callsDoc) bool { return len(d.Calls) == 5 })
	onB := 0
	for _, e := range calls.Calls {
		if e.Instance == b.ID() {
			onB++
			assert.Equal(t, "on-b", e.Client)
		}
	}
	assert.Equal(t, 4, onB)

	clients := until(w, uriClients, "B's client on A", func(d *clientsDoc) bool { return d.Total == 3 })
	var names []string
	for _, c := range clients.Clients {
		names = append(names, c.Name+"@"+shortID(c.Instance))
	}
	assert.Contains(t, names, "on-b@"+shortID(b.ID()))
	assert.Contains(t, names, "on-a@"+shortID(a.ID()))

	// Once A's dashboard goes, both stop.
	w.c.Close()
	require.Eventually(t, func() bool { return !a.stats.isRunning() && !b.stats.isRunning() }, wait, 10*time.Millisecond)
}

func TestStats_buckets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {-time.Second, 0}, {16383, 0}, {16384, 1}, {20480, 2}, {32767, 4}, {32768, 5},
		{time.Millisecond, 1 + (19-histMinShift)*histPerOct + 3}, // 2^19 * 1.9
		{1 << 36, numBuckets - 1}, {time.Hour, numBuckets - 1},
	} {
		assert.Equal(t, tt.want, bucketOf(tt.d), "%v", tt.d)
		if tt.d > 0 && tt.d < 1<<36 {
			lo, hi := bucketBounds(bucketOf(tt.d))
			assert.True(t, float64(tt.d) >= lo && float64(tt.d) < hi, "%v in [%v, %v)", tt.d, lo, hi)
		}
	}
	// Every bucket's upper bound is the next one's lower: they tile.
	for b := 0; b < numBuckets-2; b++ {
		_, hi := bucketBounds(b)
		lo, _ := bucketBounds(b + 1)
		assert.Equal(t, hi, lo, "bucket %d", b)
	}

	var hist [numBuckets]int64
	_, ok := percentile(&hist, 0.5)
	assert.False(t, ok)
	for i := range 99 {
		hist[bucketOf(time.Duration(i+1)*100*time.Microsecond)]++ // 0.1 .. 9.9 ms
	}
	hist[bucketOf(time.Second)]++
	p50, _ := percentile(&hist, 0.5)
	p99, _ := percentile(&hist, 0.99)
	p100, _ := percentile(&hist, 1)
	assert.InEpsilon(t, 5e6, p50, 0.25, "p50 within a bucket's width")
	assert.InEpsilon(t, 9.9e6, p99, 0.25)
	assert.InEpsilon(t, 1e9, p100, 0.25)
}

// Recording a call costs two atomic adds and a map lookup: no allocation,
// no lock.
func TestStats_observeAllocatesNothing(t *testing.T) {
	h, err := New(Config{Logger: testLogger()})
	require.NoError(t, err)
	defer h.Close()
	tg := &target{server: "demo", item: "add"}
	var c caller = &sessionCall{} // as forward gets it
	start := time.Now()
	h.stats.observe(context.Background(), tg, c, mcp.MethodToolsCall, start, nil, nil) // the item is made once
	allocs := testing.AllocsPerRun(1000, func() {
		h.stats.observe(context.Background(), tg, c, mcp.MethodToolsCall, start, nil, nil)
	})
	assert.Zero(t, allocs)
}

func BenchmarkStats_observe(b *testing.B) {
	h, err := New(Config{Logger: testLogger()})
	require.NoError(b, err)
	defer h.Close()
	tg := &target{server: "demo", item: "add"}
	var c caller = &sessionCall{}
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.stats.observe(context.Background(), tg, c, mcp.MethodToolsCall, start, nil, nil)
		}
	})
}

// FuzzStatsSummary feeds arbitrary payloads to the statistics' handler, as
// a broken instance sharing the broker could: nothing panics, and reading
// the statistics still works.
func FuzzStatsSummary(f *testing.F) {
	f.Add([]byte(`{"i":"other","iv":1000,"tk":3,"w":1,"it":[{"s":"x","m":"tools/call","n":"t","t":2,"o":{"ok":2},"h":[3,2],"rc":2}],"se":[{"s":"x","c":[1],"e":[0]}]}`))
	f.Add([]byte(`{"i":"other","iv":1,"ca":[null,{"at":"2026-01-01T00:00:00Z","method":"tools/call"}],"cl":{"l":[{"id":"x"}],"n":-5}}`))
	f.Add([]byte(`{"i":"other","iv":5,"it":[{"m":"x","h":[1e9,1,-4,2,7]}]}`))
	f.Add([]byte(`not json`))
	h, err := New(Config{Logger: testLogger()})
	if err != nil {
		f.Fatal(err)
	}
	defer h.Close()
	s := &session{hub: h, who: anonymous}
	f.Fuzz(func(t *testing.T, payload []byte) {
		h.stats.onSummary(context.Background(), topicStats, payload)
		if _, err := h.stats.statsJSON(s); err != nil {
			t.Fatal(err)
		}
		if _, err := h.stats.callsJSON(true); err != nil {
			t.Fatal(err)
		}
		if _, err := h.stats.clientsJSON(); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkStats_observeLogged(b *testing.B) {
	h, err := New(Config{Logger: testLogger()})
	require.NoError(b, err)
	defer h.Close()
	tg := &target{server: "demo", item: "add"}
	s := &session{hub: h, id: "1", who: anonymous}
	var c caller = &sessionCall{s: s}
	h.stats.want.Store(watchCalls)
	raw := json.RawMessage(`{"content":[{"type":"text","text":"3"}],"structuredContent":{"sum":3}}`)
	start := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.stats.log.left.Store(1) // every call logged: the worst case, beyond the log's bound per interval
			h.stats.observe(context.Background(), tg, c, mcp.MethodToolsCall, start, raw, nil)
		}
	})
}

// Under load the call log keeps a bounded number of calls an interval, and
// failed ones beyond, and counts the rest.
func TestStats_callLogBound(t *testing.T) {
	t.Parallel()
	var l callLog
	l.refill()
	admitted := func(n int, failed bool) (k int) {
		for range n {
			if l.admit(failed) {
				k++
			}
		}
		return k
	}
	assert.Equal(t, callLogPerTick, admitted(callLogPerTick+10, false), "successes up to the bound")
	assert.Equal(t, callLogErrorsPerTick, admitted(callLogErrorsPerTick+5, true), "failures beyond it, up to theirs")
	assert.Zero(t, admitted(3, false))
	assert.Equal(t, int64(10+5+3), l.skipped.Load())
	l.refill()
	assert.Equal(t, 1, admitted(1, false), "a new interval logs again")
}

// BenchmarkStats_watched measures, in one run, calls through the hub with
// nobody watching the traffic and with a client subscribed to
// switchboard://stats, clients and calls (what the dashboard's Traffic view
// does), and reports both rates and their ratio.
func BenchmarkStats_watched(b *testing.B) {
	th := benchHub(b, nil)
	dialBenchServer(b, th, newBenchServer(answerOK))
	waitBenchServer(b, th)
	const conns, inflight = 4, 8
	clients := make([]*mcp.Client, conns)
	for i := range clients {
		c, err := mcp.Connect(context.Background(), th.wsURL("/mcp"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	run := func(n int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(n))
		for _, c := range clients {
			for range inflight {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if _, err := c.CallTool(context.Background(), "bench__echo", nil, nil); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		return time.Since(start)
	}
	var without, with time.Duration
	for range 3 { // alternate, so that the machine's drift hits both alike
		without += run(b.N)
		w, err := mcp.Connect(context.Background(), th.wsURL("/mcp"), nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, uri := range []string{uriStats, uriClients, uriCalls} {
			if err := w.Subscribe(context.Background(), uri); err != nil {
				b.Fatal(err)
			}
		}
		with += run(b.N)
		w.Close()
		require.Eventually(b, func() bool { return !th.stats.isRunning() }, wait, 10*time.Millisecond, "the statistics never stopped")
	}
	rate := func(d time.Duration) float64 { return float64(3*b.N) / d.Seconds() }
	b.ReportMetric(rate(without), "calls/s-unwatched")
	b.ReportMetric(rate(with), "calls/s-watched")
	b.ReportMetric(rate(with)/rate(without), "ratio")
}

// A stateless request of the 2026-07-28 revision is counted and logged like
// any call, its client named by the clientInfo of its _meta; one the hub
// refuses is counted as refused.
func TestStats_countsModernCalls(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{StatsInterval: testStatsInterval})
	th.runServer(trafficServer("traffic"), "traffic")
	w := watch(t, th, "", uriStats, uriCalls)
	url := th.srv.URL + "/mcp"
	resp, _ := modernPost(t, url, modernBody(1, mcp.MethodToolsCall, `"name":"traffic__ok","arguments":{}`, "{}"), nil).answer(t)
	assert.Equal(t, "ok", firstText(t, resultOf(t, resp)))
	resp, _ = modernPost(t, url, modernBody(2, mcp.MethodToolsCall, `"name":"traffic__fail","arguments":{}`, "{}"), nil).answer(t)
	code, _ := errorOf(t, resp)
	require.Equal(t, jsonrpc.CodeInvalidParams, code)
	resp, _ = modernPost(t, url, modernBody(3, mcp.MethodToolsCall, `"name":"traffic__none","arguments":{}`, "{}"), nil).answer(t)
	code, _ = errorOf(t, resp)
	require.Equal(t, jsonrpc.CodeInvalidParams, code)

	doc := until(w, uriStats, "3 modern calls", func(d *statsDoc) bool { return d.Hub.Total == 3 })
	srv := doc.server("traffic")
	require.NotNil(t, srv)
	assert.Equal(t, map[string]int64{"ok": 1, "-32602": 1}, srv.Outcomes)
	require.NotNil(t, doc.Refused)
	assert.Equal(t, int64(1), doc.Refused.Total)

	calls := until(w, uriCalls, "3 modern calls logged", func(d *callsDoc) bool { return len(d.Calls) == 3 })
	for _, e := range calls.Calls {
		assert.Equal(t, "modern-test", e.Client, "%+v", e)
	}
}
