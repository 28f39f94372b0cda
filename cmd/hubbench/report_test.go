package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

func TestVerdicts_targets(t *testing.T) {
	t.Parallel()
	hub := func(sh shape, rateRatio, p99Ratio float64) *callResult {
		return &callResult{endpoint: epHub, shape: sh, payload: payloads[0], rateRatio: rateRatio, p99Ratio: p99Ratio}
	}
	two := &callResult{endpoint: epHub2, shape: shape{64, 16}, payload: payloads[0], total: 10, mallocs: 400, mallocsOK: true,
		floorFigures: floorFigures{cpuFloor: 1.31, vsOne: 0.6}}
	r := &report{
		cells: [][]*callResult{
			{hub(shape{64, 16}, 0.5, 9)},
			{hub(shape{1, 1}, 0.1, 3.01)},
			{hub(shape{16, 1}, 0.1, 9)}, // no target
			{{endpoint: epRaw, shape: shape{64, 16}}},
			{two},
			{{endpoint: epHTTP, shape: shape{64, 16}, payload: payloads[0], floorFigures: floorFigures{vsWS: 0.49, cpuFloor: 1.6}}},
			{{endpoint: epHTTPModernSSE, shape: shape{64, 16}, payload: payloads[0], floorFigures: floorFigures{vsWS: 0.45, cpuFloor: 1.5}}},
		},
		fanout: []*fanoutResult{
			{setting: "raw fan-out", raw: true, instances: 1, subs: 10000, rate: 1}, // the baseline: no target
			{setting: "1 instance", instances: 1, subs: 1000, p99: time.Second},     // not the largest: no target
			{setting: "1 instance", instances: 1, subs: 10000, p99: 100 * time.Millisecond, rate: 300000, delivered: 5, expected: 5,
				rateRatio: 0.7, p99Ratio: 1.6},
			{setting: "2 instances", instances: 2, subs: 10000, p99: 151 * time.Millisecond, rate: 1, delivered: 4, expected: 5,
				rateRatio: 0.6, p99Ratio: 9},
		},
		idle: []*idleResult{
			{what: idleBare, conns: 10000, memAfter: benchlab.ProcMemory{RSS: 10000 * 30 << 10}}, // the floor: no target
			{what: idleWS, conns: 10000, memAfter: benchlab.ProcMemory{RSS: 10000 * 20 << 10}},
			{what: idleHTTP, conns: 1000, memBefore: benchlab.ProcMemory{RSS: 1 << 20}, memAfter: benchlab.ProcMemory{RSS: 1<<20 + 1000*8<<10}},
		},
	}
	vs := r.verdicts()
	assert.Equal(t, "ops/s >= 0.5x raw PASS", verdictCell(vs[0]))
	assert.Equal(t, "CPU <= 1.3x floor MISS; allocs <= 40 PASS; ops/s >= 0.6x one PASS", verdictCell(callVerdicts(two)...))
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	assert.Equal(t, []string{
		"PASS  (#7) tools/call 64x16 100 B through the hub: 0.50x raw echo calls/s (target >= 0.5x)",
		"MISS  (#7) tools/call 1x1 100 B through the hub: p99 3.01x raw echo p99 (target <= 3x)",
		"MISS  (#15) tools/call 64x16 100 B across two instances: both hubs' CPU per call 1.31x twice one instance's (target <= 1.3x)",
		"PASS  (#15) tools/call 64x16 100 B across two instances: 40.0 allocations per call in both hubs (target <= 40)",
		"PASS  (#15) tools/call 64x16 100 B across two instances: 0.60x one instance's calls/s (target >= 0.6x)",
		"MISS  (#12) tools/call 64x16 100 B through the hub, hub http (json): 0.49x WebSocket calls/s through the hub (target >= 0.5x)",
		"MISS  (#28) tools/call 64x16 100 B through the hub, hub http (json): hub CPU per call 1.60x net/http's alone (raw http echo) (target <= 1.5x)",
		"PASS  (#28) tools/call 64x16 100 B through the hub, hub http (json): 0.49x WebSocket calls/s through the hub (target >= 0.45x)",
		"PASS  (#28) tools/call 64x16 100 B through the hub, hub http 2026 (sse): hub CPU per call 1.50x net/http's alone (raw http echo) (target <= 1.5x)",
		"PASS  (#28) tools/call 64x16 100 B through the hub, hub http 2026 (sse): 0.45x WebSocket calls/s through the hub (target >= 0.45x)",
		"PASS  (#7) fan-out to 10,000 subscribers, 1 instance: p99 100 ms (target <= 100 ms)",
		"PASS  (#7) fan-out to 10,000 subscribers, 1 instance: 300,000/s (target >= 300,000/s)",
		"PASS  (#15) fan-out to 10,000 subscribers, 1 instance: 0.70x the raw fan-out's rate (target >= 0.7x)",
		"MISS  (#15) fan-out to 10,000 subscribers, 1 instance: p99 1.60x the raw fan-out's (target <= 1.5x)",
		"MISS  (#7) fan-out to 10,000 subscribers, 2 instances: p99 151 ms (target <= 150 ms) (only 4 of 5 delivered)",
		"MISS  (#7) fan-out to 10,000 subscribers, 2 instances: 1/s (target >= 300,000/s)",
		"PASS  (#15) fan-out to 10,000 subscribers, 2 instances: 0.60x the raw fan-out's rate (target >= 0.6x)",
		"PASS  (#7) idle connection: 20.0 KiB RSS (target <= 20.0 KiB)",
		"MISS  (#28) idle WebSocket client: 20.0 KiB RSS (target <= 10.0 KiB)",
		"PASS  (#28) idle Streamable HTTP session: 8.0 KiB RSS (target <= 8.0 KiB) (measured at 1,000 connections, not 10,000)",
	}, got)
}

// TestSetFloors: each row's figures against the floors of its cell.
func TestSetFloors(t *testing.T) {
	t.Parallel()
	row := func(ep string, cpu time.Duration, rates []float64, p50s ...time.Duration) *callResult {
		r := &callResult{endpoint: ep, cpu: cpu * 10, total: 10, rates: rates}
		for _, p := range p50s {
			r.rounds = append(r.rounds, benchlab.Latencies{P50: p})
		}
		r.sum = benchlab.MedianLatencies(r.rounds)
		return r
	}
	raw := row(epRaw, 10*time.Microsecond, []float64{100, 100})
	hub := row(epHub, 25*time.Microsecond, []float64{50, 40}, 200*time.Microsecond, 220*time.Microsecond)
	two := row(epHub2, 65*time.Microsecond, []float64{20, 20}, 300*time.Microsecond, 400*time.Microsecond)
	redis := row(epRedis, time.Microsecond, []float64{1, 1}, 50*time.Microsecond, 60*time.Microsecond)
	web := row(epHTTP, 50*time.Microsecond, []float64{25, 30})
	setFloors([]*callResult{raw, hub, two, redis, web})
	assert.InDelta(t, 1.25, hub.cpuFloor, 1e-9, "25 µs over 2 x 10 µs")
	assert.InDelta(t, 1.3, two.cpuFloor, 1e-9, "65 µs over 2 x 25 µs")
	assert.InDelta(t, 0.45, two.vsOne, 1e-9, "median of 0.4 and 0.5")
	assert.Equal(t, 140*time.Microsecond, two.p50Beyond)
	assert.InDelta(t, 2.5, two.beyondRTTs, 1e-9, "median of 100/50 and 180/60")
	assert.InDelta(t, 0.625, web.vsWS, 1e-9, "median of 0.5 and 0.75")
	assert.Zero(t, raw.cpuFloor)
}

// TestDistances: the distance of each HTTP row to its floor, split into
// net/http's own work, a WebSocket call's cost to the hub and the rest;
// and hub connect's p50 at 1x1 split into the connector's share and the
// hops beyond the hub's HTTP face.
func TestDistances(t *testing.T) {
	t.Parallel()
	row := func(ep string, sh shape, cpu time.Duration, mallocs float64, p50 time.Duration) *callResult {
		return &callResult{endpoint: ep, shape: sh, payload: payloads[0], cpu: cpu * 10, total: 10, mallocs: mallocs * 10, mallocsOK: true,
			sum: benchlab.Latencies{P50: p50}}
	}
	big, one := shape{64, 16}, shape{1, 1}
	r := &report{
		cells: [][]*callResult{
			{row(epRawHTTP, big, 20*time.Microsecond, 30, 0), row(epHub, big, 12*time.Microsecond, 21, 0),
				row(epHTTP, big, 50*time.Microsecond, 54, 0), row(epHTTPModern, big, 60*time.Microsecond, 72, 0)},
			{row(epHTTP, one, time.Millisecond, 53, 220*time.Microsecond)},
		},
		connect: &connectResult{cells: [][]*callResult{{row(epBackend, one, 0, 0, 160*time.Microsecond),
			row(epConnect, one, 0, 0, 480*time.Microsecond), row(epPipe, one, 0, 0, 470*time.Microsecond)}}},
	}
	got := r.distances()
	assert.Contains(t, got, "## Where the distance to the floors comes from (issue 28)")
	assert.Contains(t, got, "alone, is 30.0 µs a call; net/http's own work and a WebSocket call's cost to the hub add up to 32.0 µs.")
	assert.Contains(t, got, "| hub http (json) | 50.0 µs | 20.0 µs | 12.0 µs | 18.0 µs | 54.0 | 3.00 |")
	assert.Contains(t, got, "| hub http 2026 (json) | 60.0 µs | 20.0 µs | 12.0 µs | 28.0 µs | 72.0 | 21.0 |")
	assert.NotContains(t, got, "hub http (sse) |", "a row the run does not have")
	assert.Contains(t, got, "relay in the connector's place in\n470 µs: the connector's own share of the latency is the difference, 10.0 µs.")
	assert.Contains(t, got, "takes 220 µs, 1.38x the backend's")
	assert.Contains(t, got, "rest, 250 µs, is the two hops more")
	assert.Contains(t, got, "The target, 1.3x the backend's, is 208 µs.")
	assert.Empty(t, (&report{}).distances(), "nothing to split: no section")
}
