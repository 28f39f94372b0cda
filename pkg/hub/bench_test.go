package hub

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// benchHub starts a hub for a benchmark: no rate limit, the given broker.
func benchHub(b *testing.B, broker pubsub.Broker) *testHub {
	return benchHubWith(b, Config{Broker: broker})
}

// benchHubWith starts a hub of cfg for a benchmark, without rate limit.
func benchHubWith(b *testing.B, cfg Config) *testHub {
	b.Helper()
	cfg.RateLimit, cfg.HeartbeatInterval, cfg.Logger = -1, 100*time.Millisecond, slog.New(slog.DiscardHandler)
	h, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	th := &testHub{Hub: h, srv: httptest.NewUnstartedServer(nil)}
	th.srv.Config = h.NewHTTPServer()
	th.srv.Start()
	b.Cleanup(func() {
		th.srv.Close()
		h.Close()
	})
	return th
}

// benchPair starts two hub instances for a benchmark, sharing a Redis it
// starts.
func benchPair(b *testing.B) (a, bh *testHub) {
	b.Helper()
	rs := redistest.Start(b)
	prefix := redistest.Prefix(b)
	newBroker := func() pubsub.Broker {
		br, err := pubsub.NewRedis(context.Background(), pubsub.RedisOptions{URL: rs.URL(), KeyPrefix: prefix, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { br.Close() })
		return br
	}
	return benchHub(b, newBroker()), benchHub(b, newBroker())
}

// newBenchServer is an MCP server named "bench" with one tool, echo,
// answered by answer.
func newBenchServer(answer func(*mcp.ToolRequest) *mcp.CallToolResult) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "bench", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return answer(req), nil
	})
	return s
}

// dialBenchServer dials s into th until the benchmark ends.
func dialBenchServer(b *testing.B, th *testHub, s *mcp.Server) {
	dialBenchServerAt(b, th, s, "/mcp/server")
}

// dialBenchServerAt is dialBenchServer at path, which may ask for a
// revision (?era=session).
func dialBenchServerAt(b *testing.B, th *testHub, s *mcp.Server, path string) {
	ctx, cancel := context.WithCancel(context.Background())
	dialed := make(chan struct{})
	go func() { defer close(dialed); s.Dial(ctx, th.wsURL(path), nil) }()
	b.Cleanup(func() { cancel(); <-dialed })
}

// echoArguments answers a call with its arguments, as structured content.
func echoArguments(req *mcp.ToolRequest) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: json.RawMessage(req.Params.Arguments)}
}

// answerOK answers every call with the text "ok".
func answerOK(*mcp.ToolRequest) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("ok")}}
}

// waitBenchServer waits until th lists the bench server (benchServer).
func waitBenchServer(b *testing.B, th *testHub) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := th.waitView(ctx, func(v *view) bool { return len(v.servers["bench"]) == 1 }); err != nil {
		b.Fatal("the bench server never appeared")
	}
}

// BenchmarkCrossInstance compares, in one run, a tools/call through one hub
// instance with the same call crossing from one instance to another through
// Redis, and a resources/updated fanned out to subscribers on the server's
// own instance with one crossing through Redis. It reports calls per
// second and fan-out delivery latency for each, and the ratios.
func BenchmarkCrossInstance(b *testing.B) {
	// One instance on its in-memory broker, and two sharing Redis with the
	// server on the second; clients of the cross-instance runs are on the
	// first.
	single := benchHub(b, nil)
	a, bh := benchPair(b)
	servers := map[*testHub]*mcp.Server{}
	for _, th := range []*testHub{single, bh} {
		s := newBenchServer(answerOK)
		s.AddResource(&mcp.Resource{URI: "bench://r", Name: "r"}, nil)
		servers[th] = s
		dialBenchServer(b, th, s)
	}
	for _, th := range []*testHub{single, a, bh} {
		waitBenchServer(b, th)
	}

	const conns, inflight = 4, 8
	calls := func(th *testHub, n int) time.Duration {
		clients := make([]*mcp.Client, conns)
		for i := range clients {
			c, err := mcp.Connect(context.Background(), th.wsURL("/mcp"), sessionOpts(nil))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			clients[i] = c
		}
		start := time.Now()
		var wg sync.WaitGroup
		var left atomic.Int64
		left.Store(int64(n))
		for _, c := range clients {
			for range inflight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if _, err := c.CallTool(context.Background(), "bench__echo", nil, nil); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		return time.Since(start)
	}
	fanout := func(th *testHub, s *mcp.Server, subscribers, rounds int) []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var sent atomic.Int64
		got := make(chan struct{}, subscribers*rounds)
		for range subscribers {
			c, err := mcp.Connect(context.Background(), th.wsURL("/mcp"), &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion, OnNotification: func(m string, _ json.RawMessage) {
				if m == mcp.NotificationResourceUpdated {
					d := time.Duration(time.Now().UnixNano() - sent.Load())
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
					got <- struct{}{}
				}
			}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if err := c.Subscribe(context.Background(), "bench://r"); err != nil {
				b.Fatal(err)
			}
		}
		for range rounds {
			sent.Store(time.Now().UnixNano())
			s.ResourceUpdated(context.Background(), "bench://r")
			for range subscribers {
				select {
				case <-got:
				case <-time.After(wait):
					b.Fatal("an update never arrived")
				}
			}
		}
		return lat
	}

	n := max(b.N, 2000)
	calls(single, 500) // warm up both paths
	calls(a, 500)
	singleCalls := calls(single, n)
	crossCalls := calls(a, n)
	singleFan := fanout(single, servers[single], 200, 20)
	crossFan := fanout(a, servers[bh], 200, 20)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(n)/singleCalls.Seconds(), "single-calls/s")
	b.ReportMetric(float64(n)/crossCalls.Seconds(), "cross-calls/s")
	b.ReportMetric(singleCalls.Seconds()/crossCalls.Seconds(), "cross/single")
	b.ReportMetric(pct(singleFan, 50).Seconds()*1e3, "single-fanout-p50-ms")
	b.ReportMetric(pct(singleFan, 99).Seconds()*1e3, "single-fanout-p99-ms")
	b.ReportMetric(pct(crossFan, 50).Seconds()*1e3, "cross-fanout-p50-ms")
	b.ReportMetric(pct(crossFan, 99).Seconds()*1e3, "cross-fanout-p99-ms")
	b.Logf("%d calls (%d connections x %d in flight); fan-out of 20 updates to 200 subscribers", n, conns, inflight)
}

// BenchmarkCall is one tools/call of 100 bytes from a client to a server,
// through one hub instance and across two sharing Redis, with 64 calls in
// flight on 4 connections, and one at a time (1x1: ns/op is then the
// round trip's latency): for A/B comparisons of the call path with
// benchstat. ns/op and allocs/op count the whole process: the clients, the
// hubs, the server (and for two instances, both hubs' broker work).
func BenchmarkCall(b *testing.B) {
	single := benchHub(b, nil)
	a, bh := benchPair(b)
	for _, th := range []*testHub{single, bh} {
		dialBenchServer(b, th, newBenchServer(echoArguments))
	}
	for _, th := range []*testHub{single, a} {
		waitBenchServer(b, th)
	}
	for _, tc := range []struct {
		name string
		th   *testHub
		one  bool // one call at a time
	}{{"one-instance", single, false}, {"two-instances", a, false}, {"one-instance-1x1", single, true}, {"two-instances-1x1", a, true}} {
		b.Run(tc.name, func(b *testing.B) { runCalls(b, tc.th, tc.one, 100) })
	}
}

// BenchmarkCallLarge is BenchmarkCall's one instance with 16 KiB of
// arguments, 64 calls in flight: a process without children (no Redis),
// which valgrind's callgrind can follow to its end. Its server speaks
// 2026-07-28 (modern-server), or a session revision (session-server, as
// hubbench's): the hub edits the params of each differently.
func BenchmarkCallLarge(b *testing.B) {
	modern, session := benchHub(b, nil), benchHub(b, nil)
	dialBenchServer(b, modern, newBenchServer(echoArguments))
	dialBenchServerAt(b, session, newBenchServer(echoArguments), "/mcp/server?era=session")
	for _, tc := range []struct {
		name string
		th   *testHub
	}{{"modern-server", modern}, {"session-server", session}} {
		waitBenchServer(b, tc.th)
		b.Run(tc.name, func(b *testing.B) { runCalls(b, tc.th, false, 16<<10) })
	}
}

// runCalls is the load of BenchmarkCall: size bytes of arguments to
// bench__echo through th, one call at a time, or 64 in flight on 4
// connections.
func runCalls(b *testing.B, th *testHub, one bool, size int) {
	params := json.RawMessage(`{"name":"bench__echo","arguments":{"text":"` + strings.Repeat("x", size-len(`{"text":""}`)) + `"}}`)
	clients := make([]*mcp.Client, 4)
	for i := range clients {
		c, err := mcp.Connect(context.Background(), th.wsURL("/mcp"), &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	var next atomic.Int64
	b.SetParallelism(64 / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	if one {
		var out json.RawMessage
		for range b.N {
			if err := clients[0].Peer().Call(context.Background(), mcp.MethodToolsCall, params, &out); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		c := clients[next.Add(1)%int64(len(clients))]
		var out json.RawMessage
		for pb.Next() {
			if err := c.Peer().Call(context.Background(), mcp.MethodToolsCall, params, &out); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCallTraced is BenchmarkCall's one instance with tracing on,
// every call sampled and 1% of them, exporting over OTLP/HTTP to a sink
// that takes every export: against BenchmarkCall/one-instance, what
// tracing costs a call (the sink's work included, in-process).
func BenchmarkCallTraced(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	for _, tc := range []struct{ name, sampler, arg string }{{"sampled", "always_on", ""}, {"1%", "traceidratio", "0.01"}} {
		b.Run(tc.name, func(b *testing.B) {
			b.Setenv("OTEL_TRACES_SAMPLER", tc.sampler)
			b.Setenv("OTEL_TRACES_SAMPLER_ARG", tc.arg)
			th := benchHubWith(b, Config{Tracing: tracing.Config{Enabled: true, Endpoint: sink.URL, BatchDelay: 100 * time.Millisecond}})
			dialBenchServer(b, th, newBenchServer(echoArguments))
			waitBenchServer(b, th)
			runCalls(b, th, false, 100)
		})
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}
