package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// shape is a load's connections and calls in flight on each.
type shape struct{ conns, inflight int }

func (s shape) String() string { return strconv.Itoa(s.conns) + "x" + strconv.Itoa(s.inflight) }

// payload is the size of a call's arguments, in bytes of JSON.
type payload struct {
	name string
	size int
}

// endpoint is one path a call can take in the calls measurement: the raw
// echo (always first: the baseline), the peer echo, the hub, two hubs.
type endpoint struct {
	name  string
	dial  func(params json.RawMessage) dialer
	pids  []int          // processes whose CPU time is charged to this path
	stats []*statsSource // their runtime figures; a nil entry means not available
	// only, when set, says which shapes and payloads the path is measured
	// at; nil means all.
	only func(shape, payload) bool
}

// measuredAt returns the endpoints measured at sh and pl, in order.
func measuredAt(eps []*endpoint, sh shape, pl payload) []*endpoint {
	var out []*endpoint
	for _, ep := range eps {
		if ep.only == nil || ep.only(sh, pl) {
			out = append(out, ep)
		}
	}
	return out
}

// callResult is one endpoint on one shape and payload.
type callResult struct {
	endpoint string
	shape    shape
	payload  payload

	rates     []float64 // calls/s of each round
	ratios    []float64 // rate / the baseline's rate in the same round
	rounds    []benchlab.Latencies
	p99Ratios []float64 // p99 / the baseline's p99 in the same round

	total, errs int64 // calls completed in the windows; errors
	firstErr    error
	cpu         time.Duration     // of the endpoint's processes, over all rounds
	split       benchlab.CPUSplit // of every process, the load generator included
	mallocs     float64
	mallocsOK   bool

	// Filled once the cell is measured.
	rate, rateRatio, p99Ratio float64
	sum                       benchlab.Latencies // medians of the rounds' percentiles
	floorFigures
}

// cpuPerCall, allCPUPerCall and allocsPerCall are the costs per completed
// call.
func (r *callResult) cpuPerCall() time.Duration {
	if r.total == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.total)
}

func (r *callResult) allCPUPerCall() time.Duration {
	if r.total == 0 {
		return 0
	}
	return r.split.All() / time.Duration(r.total)
}

func (r *callResult) allocsPerCall() (float64, bool) {
	if !r.mallocsOK || r.total == 0 {
		return 0, false
	}
	return r.mallocs / float64(r.total), true
}

// runCell measures every endpoint on one shape and payload: all connect,
// then they run in alternating rounds (the first endpoint rotating) so that
// drift in the machine's speed falls on all alike; in each round each
// endpoint's load warms up before its window is measured.
//
// cpuAll reads the CPU time of every process of the run.
func runCell(ctx context.Context, cfg *config, eps []*endpoint, sh shape, pl payload, cpuAll func() map[string]time.Duration, progress func(string)) ([]*callResult, error) {
	eps = measuredAt(eps, sh, pl)
	params := callParams(pl.size)
	conns := make([][]loadConn, len(eps))
	defer func() {
		for _, cs := range conns {
			closeAll(cs)
		}
	}()
	results := make([]*callResult, len(eps))
	for i, ep := range eps {
		cs, err := dialAll(ctx, ep.dial(params), sh.conns)
		if err != nil {
			return nil, fmt.Errorf("%s: connecting: %w", ep.name, err)
		}
		conns[i] = cs
		results[i] = &callResult{endpoint: ep.name, shape: sh, payload: pl, mallocsOK: true}
	}
	for round := range cfg.rounds {
		progress(fmt.Sprintf("calls %s %s: round %d of %d", sh, pl.name, round+1, cfg.rounds))
		rates := make([]float64, len(eps))
		p99s := make([]time.Duration, len(eps))
		for k := range eps {
			i := (k + round) % len(eps)
			ep, res := eps[i], results[i]
			mt := meter{pids: ep.pids, stats: ep.stats, all: cpuAll}
			var r reading
			w, err := measure(ctx, conns[i], sh.inflight, cfg.warmup, cfg.round, func(open bool) {
				if open {
					mt.start(ctx)
				} else {
					r = mt.stop(ctx)
				}
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ep.name, err)
			}
			res.cpu += r.cpu
			res.mallocs += r.mallocs
			res.mallocsOK = res.mallocsOK && r.mallocsOK
			res.split.Add(r.all0, r.all1, w.d)
			rates[i] = w.rate()
			res.rates = append(res.rates, rates[i])
			s := benchlab.Summarize(w.lat)
			p99s[i] = s.P99
			res.rounds = append(res.rounds, s)
			res.total += w.calls()
			res.errs += w.errs
			if res.firstErr == nil {
				res.firstErr = w.firstErr
			}
		}
		for i, res := range results {
			res.ratios = append(res.ratios, rates[i]/rates[0])
			res.p99Ratios = append(res.p99Ratios, float64(p99s[i])/float64(p99s[0]))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	for _, res := range results {
		res.sum = benchlab.MedianLatencies(res.rounds)
		res.rate = benchlab.Median(res.rates)
		res.rateRatio = benchlab.Median(res.ratios)
		res.p99Ratio = benchlab.Median(res.p99Ratios)
	}
	setFloors(results)
	return results, nil
}

// meter reads, at the edges of a measured window, the CPU time and heap
// allocations of the processes in the middle (the hub, the echo server),
// and with all set the CPU time of every process of the run. Allocation
// counters are scraped outside the CPU readings, so that the scraping is
// not counted as the processes' work, and their own cost is taken off.
type meter struct {
	pids  []int
	stats []*statsSource
	all   func() map[string]time.Duration // nil: not read

	m0   float64
	ok0  bool
	cpu0 time.Duration
	all0 map[string]time.Duration
}

// reading is what a meter saw between start and stop.
type reading struct {
	cpu        time.Duration
	mallocs    float64
	mallocsOK  bool // false when an allocation counter could not be read
	all0, all1 map[string]time.Duration
}

func (m *meter) start(ctx context.Context) {
	m.m0, m.ok0 = readMallocs(ctx, m.stats)
	m.cpu0 = benchlab.CPUTimes(m.pids)
	if m.all != nil {
		m.all0 = m.all()
	}
}

func (m *meter) stop(ctx context.Context) reading {
	r := reading{cpu: benchlab.CPUTimes(m.pids) - m.cpu0, all0: m.all0}
	if m.all != nil {
		r.all1 = m.all()
	}
	m1, ok1 := readMallocs(ctx, m.stats)
	if m.ok0 && ok1 {
		r.mallocs, r.mallocsOK = m1-m.m0-scrapeCost(m.stats), true
	}
	return r
}

// readMallocs sums the allocation counters of sources; false if any is
// unavailable.
func readMallocs(ctx context.Context, sources []*statsSource) (float64, bool) {
	if len(sources) == 0 {
		return 0, false
	}
	var sum float64
	for _, s := range sources {
		if s == nil {
			return 0, false
		}
		st, err := s.read(ctx)
		if err != nil {
			return 0, false
		}
		sum += st.Mallocs
	}
	return sum, true
}

func scrapeCost(sources []*statsSource) float64 {
	var sum float64
	for _, s := range sources {
		if s != nil {
			sum += s.scrape
		}
	}
	return sum
}
