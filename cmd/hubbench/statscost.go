package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The cost of the hub's traffic statistics: calls/s through the hub with
// no one watching, and with a dashboard's Traffic view open (subscribed to
// switchboard://stats, clients and calls, reading each again on its
// updates, as the dashboard does), in alternating rounds of the same run
// on the same connections. Without a watcher a call costs the hub two
// atomic adds; with one, the window's upkeep every second, the summaries,
// and an entry of the call log per call.

// statsCostShape and statsCostPayload are the load of both rows: the shape
// of the throughput target.
var (
	statsCostShape   = profiled
	statsCostPayload = payload{"100 B", 100}
)

// Traffic resources the dashboard watches, and the metric that says the
// hub keeps their window.
var (
	trafficURIs    = []string{"switchboard://stats", "switchboard://clients", "switchboard://calls"}
	watchedMetric  = "switchboard_stats_watched"
	watchedTimeout = 30 * time.Second
)

// statsCostResult is the two rows.
type statsCostResult struct {
	without, with *callResult
	ratios        []float64 // with / without, per round
	ratio         float64   // their median
	reads         int64     // the dashboard's reads during the measured rounds
}

// runStatsCost measures the solo hub's 64x16 calls without and with a
// dashboard watching, in alternating rounds. Before a round without, it
// waits until the hub says nobody watches (the last dashboard has gone);
// before a round with, until it says someone does.
func runStatsCost(ctx context.Context, cfg *config, h *hubRef, progress func(string)) (*statsCostResult, error) {
	sh, pl := statsCostShape, statsCostPayload
	conns, err := dialAll(ctx, hubDialer{url: h.ws("/mcp"), params: callParams(pl.size)}, sh.conns)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	defer closeAll(conns)
	res := &statsCostResult{
		without: &callResult{endpoint: "hub, nobody watching", shape: sh, payload: pl, mallocsOK: true},
		with:    &callResult{endpoint: "hub + Traffic view", shape: sh, payload: pl, mallocsOK: true},
	}
	pids, stats := pidsOf([]*hubRef{h}), statsOf([]*hubRef{h})
	rounds := statsCostRounds(cfg)
	for round := range rounds {
		progress(fmt.Sprintf("traffic statistics' cost %s %s: round %d of %d", sh, pl.name, round+1, rounds))
		rates := map[bool]float64{}
		for _, watched := range []bool{round%2 == 1, round%2 == 0} {
			r := res.without
			var dash *dashboard
			if watched {
				r = res.with
				if dash, err = openDashboard(ctx, h); err != nil {
					return nil, fmt.Errorf("the dashboard: %w", err)
				}
			}
			if err := waitWatched(ctx, h, watched); err != nil {
				dash.close()
				return nil, err
			}
			mt := meter{pids: pids, stats: stats}
			var rd reading
			reads0 := dash.readCount()
			w, err := measure(ctx, conns, sh.inflight, cfg.warmup, cfg.round, func(open bool) {
				if open {
					mt.start(ctx)
				} else {
					rd = mt.stop(ctx)
				}
			})
			res.reads += dash.readCount() - reads0
			dash.close()
			if err != nil {
				return nil, err
			}
			r.cpu += rd.cpu
			r.mallocs += rd.mallocs
			r.mallocsOK = r.mallocsOK && rd.mallocsOK
			rates[watched] = w.rate()
			r.rates = append(r.rates, w.rate())
			r.rounds = append(r.rounds, benchlab.Summarize(w.lat))
			r.total += w.calls()
			r.errs += w.errs
			if r.firstErr == nil {
				r.firstErr = w.firstErr
			}
		}
		res.ratios = append(res.ratios, rates[true]/rates[false])
	}
	for _, r := range []*callResult{res.without, res.with} {
		r.sum = benchlab.MedianLatencies(r.rounds)
		r.rate = benchlab.Median(r.rates)
	}
	res.ratio = benchlab.Median(res.ratios)
	return res, nil
}

// statsCostRounds is at least 5, even in a quick run: the ratio is a
// median, and on a shared machine two rounds of the same load alike can
// differ by a third.
func statsCostRounds(cfg *config) int { return max(cfg.rounds, 5) }

// waitWatched polls the hub's /metrics until switchboard_stats_watched is 1
// (watched) or 0.
func waitWatched(ctx context.Context, h *hubRef, watched bool) error {
	want := "0"
	if watched {
		want = "1"
	}
	ctx, cancel := context.WithTimeout(ctx, watchedTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		body, err := get(ctx, "http://"+h.addr+"/metrics")
		if err == nil {
			for line := range strings.Lines(body) {
				if name, value, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == watchedMetric && value == want {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s never became %s (does this hub have the Traffic view?)", h.name, watchedMetric, want)
		case <-tick.C:
		}
	}
}

// dashboard is an MCP client doing what the dashboard's Traffic view does:
// subscribed to the traffic resources, it reads each again when told it
// changed (one read at a time per resource, as the page's coalescing does).
type dashboard struct {
	c      *mcp.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	reads int64
}

// openDashboard connects a dashboard to h and subscribes it; close it.
func openDashboard(ctx context.Context, h *hubRef) (*dashboard, error) {
	d := &dashboard{}
	ctx, d.cancel = context.WithCancel(ctx)
	changed := map[string]chan struct{}{}
	for _, uri := range trafficURIs {
		changed[uri] = make(chan struct{}, 1)
	}
	c, err := mcp.Connect(ctx, h.ws("/mcp"), &mcp.ClientOptions{
		Info:      mcp.Implementation{Name: "hubbench-dashboard", Version: "1"},
		WebSocket: noKeepalive,
		OnNotification: func(method string, params json.RawMessage) {
			if method != mcp.NotificationResourceUpdated {
				return
			}
			var p mcp.ResourceUpdatedParams
			if json.Unmarshal(params, &p) == nil && changed[p.URI] != nil {
				select {
				case changed[p.URI] <- struct{}{}:
				default:
				}
			}
		},
	})
	if err != nil {
		d.cancel()
		return nil, err
	}
	d.c = c
	for _, uri := range trafficURIs {
		if err := c.Subscribe(ctx, uri); err != nil {
			d.close()
			return nil, fmt.Errorf("subscribing to %s: %w", uri, err)
		}
		ch := changed[uri]
		d.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
				}
				if _, err := c.ReadResource(ctx, uri); err == nil {
					d.mu.Lock()
					d.reads++
					d.mu.Unlock()
				}
			}
		})
	}
	return d, nil
}

// readCount returns the reads made so far (0 for no dashboard).
func (d *dashboard) readCount() int64 {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reads
}

// close disconnects the dashboard (the hub drops its subscriptions) and
// waits for its readers.
func (d *dashboard) close() {
	if d == nil {
		return
	}
	d.cancel()
	if d.c != nil {
		d.c.Close()
	}
	d.wg.Wait()
}

// statsCostRows adds the two rows to the table, the ratio in the target
// column.
func (r *report) statsCostRows(t *benchlab.Table) {
	sc := r.statsCost
	if sc == nil {
		return
	}
	t.Section("traffic statistics: hub calls/s with nobody watching, then with a dashboard's Traffic view open (same run, alternating rounds)")
	for _, c := range []*callResult{sc.without, sc.with} {
		allocs := "n/a"
		if a, ok := c.allocsPerCall(); ok {
			allocs = benchlab.FormatPerOp(a)
		}
		target := ""
		if c == sc.with {
			target = fmt.Sprintf("with/without %s (%d dashboard reads)", benchlab.FormatRatio(sc.ratio), sc.reads)
		}
		t.Add(c.endpoint, c.shape.String(), c.payload.name, rateCell(c.rate, c.errs),
			benchlab.FormatDuration(c.sum.P50), benchlab.FormatDuration(c.sum.P99), benchlab.FormatDuration(c.sum.P999), "", "",
			benchlab.FormatDuration(c.cpuPerCall()), "", "", allocs, "", target)
	}
}

// statsCostMethod says how the two rows were measured, for the report.
func (r *report) statsCostMethod() string {
	if r.statsCost == nil {
		return ""
	}
	return fmt.Sprintf("- Traffic statistics: the hub's %s %s load, in %d rounds each taking both turns (the first alternating): with nobody\n"+
		"  watching, and with a client doing what the dashboard's Traffic view does (subscribed to switchboard://stats,\n"+
		"  clients and calls, reading each again on its updates). Each turn starts once the hub's %s says so. The\n"+
		"  ratio is the median of the rounds' with/without calls/s.\n", statsCostShape, statsCostPayload.name, statsCostRounds(r.cfg), watchedMetric)
}
