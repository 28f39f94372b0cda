package main

import (
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// Floors: every figure of the hub against the least this machine can do
// for the same work, measured in the same run.
//
//   - one instance: the hub relays each call over two hops, so its floor is
//     twice the raw echo server's CPU per round trip;
//   - two instances: each hub should cost about what one instance costs,
//     so their floor is twice one instance's CPU per call; the latency a
//     call adds beyond one instance is counted in Redis round trips
//     (PUBLISH to a subscriber, on the same redis-server);
//   - fan-out: the raw fan-out server writing one prepared frame to the
//     same subscribers (fanout_raw.go);
//   - Streamable HTTP: the same calls through the hub over WebSocket, and
//     net/http alone answering the same POSTs (the raw http echo), whose
//     CPU per request is the floor of the hub's per HTTP call.

// Targets against the floors (two instances, 16 KiB, fan-out) and of the
// HTTP face against WebSocket, as ratios from one run.
const (
	targetCrossCPU     = 1.3  // both hubs' CPU per call over twice one instance's, at most
	targetCrossAllocs  = 40.0 // allocations per call in both hubs, at most
	targetCrossRTTs    = 3.0  // 1x1 p50 beyond one instance's, in Redis round trips, at most
	targetCrossRate    = 0.6  // 64x16 calls/s over one instance's, at least
	targetLargeCPU     = 2.5  // 16 KiB: hub CPU per call over the echo server's per round trip, at most
	targetLargeP99     = 4.0  // 16 KiB 1x1: p99 over raw echo's, at most
	targetFanoutRawOne = 0.7  // fan-out to 10,000, one instance: rate over raw, at least
	targetFanoutP99One = 1.5  // ... p99 over raw, at most
	targetFanoutRawTwo = 0.6  // fan-out to 10,000 over two instances: rate over raw, at least
	targetHTTPRate     = 0.5  // 64x16 HTTP calls/s over WebSocket calls/s through the hub, at least
	targetHTTPRate28   = 0.45 // the same, for every HTTP face, both eras, beside targetHTTPCPU (net/http alone makes about 0.5x)
	targetHTTPCPU      = 1.5  // 64x16 hub CPU per HTTP call over net/http's alone per request, at most
)

// floorFigures are a calls row's figures against its floors, set by
// setFloors; zero where the row has none.
type floorFigures struct {
	// cpuFloor is CPU per call over the floor: 2 x the raw echo server's
	// per round trip for the hub, 2 x one instance's for two, net/http's
	// alone per request for the hub over HTTP.
	cpuFloor float64
	// For two instances: the 1x1 p50 beyond one instance's, that in Redis
	// round trips (medians over the rounds), and calls/s over one
	// instance's.
	p50Beyond  time.Duration
	beyondRTTs float64
	vsOne      float64
	// For HTTP: calls/s over the WebSocket hub's, median over the rounds.
	vsWS float64
}

// setFloors fills the floor figures of a cell's rows from its other rows.
func setFloors(cell []*callResult) {
	by := map[string]*callResult{}
	for _, c := range cell {
		by[c.endpoint] = c
	}
	raw, hub, two, redis := by[epRaw], by[epHub], by[epHub2], by[epRedis]
	ratio := func(a, b time.Duration) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	if hub != nil && raw != nil {
		hub.cpuFloor = ratio(hub.cpuPerCall(), 2*raw.cpuPerCall())
	}
	if two != nil && hub != nil {
		two.cpuFloor = ratio(two.cpuPerCall(), 2*hub.cpuPerCall())
		two.vsOne = medianRatio(two.rates, hub.rates)
		two.p50Beyond = two.sum.P50 - hub.sum.P50
		if redis != nil {
			var rtts []float64
			for i := range min(len(two.rounds), len(hub.rounds), len(redis.rounds)) {
				if rtt := redis.rounds[i].P50; rtt > 0 {
					rtts = append(rtts, float64(two.rounds[i].P50-hub.rounds[i].P50)/float64(rtt))
				}
			}
			two.beyondRTTs = benchlab.Median(rtts)
		}
	}
	for _, name := range []string{epHTTP, epHTTPSSE, epHTTPModern, epHTTPModernSSE} {
		h := by[name]
		if h != nil && hub != nil {
			h.vsWS = medianRatio(h.rates, hub.rates)
		}
		if h != nil && by[epRawHTTP] != nil {
			h.cpuFloor = ratio(h.cpuPerCall(), by[epRawHTTP].cpuPerCall())
		}
	}
}

// medianRatio is the median over the rounds of a[i] / b[i].
func medianRatio(a, b []float64) float64 { return benchlab.Median(ratios(a, b)) }
