package peer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// BenchmarkRoundTrip compares, in the same run and on the same payload, a
// Peer's call round trip over a loopback WebSocket with a raw
// coder/websocket echo of the same bytes: the physical limit. It reports
// both rates, the allocations per round trip of each (both ends counted), and
// peer/raw, the ratio the project's targets are stated in.
//
// The machine this runs on is small and noisy, so the two loads run in
// alternating rounds and the figures are medians over the rounds: drift in
// the machine's speed hits both sides of each ratio alike.
func BenchmarkRoundTrip(b *testing.B) {
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"` + strings.Repeat("x", benchPayload) + `"}}`)
	for _, shape := range []struct{ conns, inflight int }{{1, 1}, {1, 16}, {16, 16}} {
		b.Run(fmt.Sprintf("%dx%d", shape.conns, shape.inflight), func(b *testing.B) {
			frame := (&jsonrpc.Request{ID: jsonrpc.Int64ID(1234567), Method: "echo", Params: params}).AppendJSON(nil)
			rawRun, rawStop := rawEcho(b, shape.conns, shape.inflight, frame)
			defer rawStop()
			peerRun, peerStop := peerEcho(b, shape.conns, shape.inflight, params)
			defer peerStop()
			c := compare(b.N, rawRun, peerRun)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(c.baseRate, "raw-rt/s")
			b.ReportMetric(c.rate, "peer-rt/s")
			b.ReportMetric(c.baseAllocs, "raw-allocs/rt")
			b.ReportMetric(c.allocs, "peer-allocs/rt")
			b.ReportMetric(c.ratio, "peer/raw")
		})
	}
}

// comparison holds the medians of a load against its baseline.
type comparison struct {
	baseRate, rate     float64 // operations per second
	baseAllocs, allocs float64 // allocations per operation
	ratio              float64 // rate / baseRate, the median of the rounds' ratios
}

// compare runs n operations of each load in alternating rounds.
func compare(n int, base, load func(n int)) comparison {
	const rounds = 5
	per := max(n/rounds, 1)
	base(min(per, 200)) // warm up connections and pools
	load(min(per, 200))
	var baseRates, rates, ratios []float64
	for range rounds {
		tb := timed(per, base)
		tl := timed(per, load)
		baseRates = append(baseRates, float64(per)/tb.Seconds())
		rates = append(rates, float64(per)/tl.Seconds())
		ratios = append(ratios, tb.Seconds()/tl.Seconds())
	}
	return comparison{
		baseRate: median(baseRates), rate: median(rates), ratio: median(ratios),
		baseAllocs: allocsPer(per, base), allocs: allocsPer(per, load),
	}
}

func timed(n int, run func(int)) time.Duration {
	start := time.Now()
	run(n)
	return time.Since(start)
}

func allocsPer(n int, run func(int)) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run(n)
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// split runs n operations over workers goroutines.
func split(n, workers int, op func(worker, count int)) {
	var wg sync.WaitGroup
	for w := range workers {
		count := n / workers
		if w < n%workers {
			count++
		}
		wg.Add(1)
		go func() { defer wg.Done(); op(w, count) }()
	}
	wg.Wait()
}

func wsURL(srv *httptest.Server) string { return "ws" + strings.TrimPrefix(srv.URL, "http") }

// rawEcho: a coder/websocket server echoing every frame, and clients that
// keep inflight frames outstanding on each connection.
func rawEcho(b *testing.B, conns, inflight int, frame []byte) (func(int), func()) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"mcp"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if err := c.Write(context.Background(), typ, msg); err != nil {
				return
			}
		}
	}))
	clients := make([]*websocket.Conn, conns)
	for i := range clients {
		c, _, err := websocket.Dial(context.Background(), wsURL(srv), &websocket.DialOptions{Subprotocols: []string{"mcp"}})
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = c
	}
	run := func(n int) {
		split(n, conns, func(w, count int) {
			c := clients[w]
			sem := make(chan struct{}, inflight)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range count {
					if _, _, err := c.Read(context.Background()); err != nil {
						b.Error(err)
						return
					}
					<-sem
				}
			}()
			for range count {
				sem <- struct{}{}
				if err := c.Write(context.Background(), websocket.MessageText, frame); err != nil {
					b.Error(err)
					break
				}
			}
			<-done
		})
	}
	stop := func() {
		for _, c := range clients {
			c.Close(websocket.StatusNormalClosure, "")
		}
		srv.Close()
	}
	return run, stop
}

// peerEcho: a Peer server whose handler returns the params, and Peer clients
// running inflight concurrent calls on each connection.
func peerEcho(b *testing.B, conns, inflight int, params json.RawMessage) (func(int), func()) {
	var mu sync.Mutex
	var servers []*peer.Peer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := peer.Accept(w, r, nil)
		if err != nil {
			return
		}
		p := peer.New(c, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			return req.Params, nil
		})})
		mu.Lock()
		servers = append(servers, p)
		mu.Unlock()
		p.Start(context.Background())
	}))
	clients := make([]*peer.Peer, conns)
	for i := range clients {
		c, err := peer.Dial(context.Background(), wsURL(srv), nil)
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = peer.New(c, nil)
		clients[i].Start(context.Background())
	}
	run := func(n int) {
		split(n, conns, func(w, count int) {
			p := clients[w]
			split(count, inflight, func(_, count int) {
				var out json.RawMessage
				for range count {
					if err := p.Call(context.Background(), "echo", params, &out); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	stop := func() {
		for _, p := range clients {
			p.Close()
		}
		mu.Lock()
		for _, p := range servers {
			p.Close()
		}
		mu.Unlock()
		srv.Close()
	}
	return run, stop
}

var benchPayload = 60
