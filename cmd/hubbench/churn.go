package main

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// churnResult is the rate of whole client sessions: connect, initialize,
// close.
type churnResult struct {
	workers   int
	rate      float64
	sum       benchlab.Latencies
	total     int64
	errs      int64
	firstErr  error
	cpu       time.Duration
	mallocs   float64
	mallocsOK bool
}

// churner is a load whose round trip is a whole session: WebSocket
// handshake, initialize, notifications/initialized, close handshake.
type churner struct{ url string }

func (c churner) drive(ctx context.Context, _ int, lr *loadRun, rec *recorder) {
	t := tally{run: lr}
	defer rec.add(&t)
	first := true
	for !lr.stop.Load() && ctx.Err() == nil {
		start := time.Now()
		cl, err := mcp.Connect(ctx, c.url, &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion, WebSocket: noKeepalive})
		if err == nil {
			err = cl.Close()
		}
		if err != nil {
			t.fail(err)
			continue
		}
		t.record(start, time.Now())
		if first {
			first = false
			lr.warm.Add(1)
		}
	}
}

func (churner) close() {}

// runChurn has cfg.churnWorkers workers open and close sessions one after
// the other, and measures them for cfg.churn once warm.
func runChurn(ctx context.Context, cfg *config, h *hubRef, progress func(string)) (*churnResult, error) {
	progress(fmt.Sprintf("churn: %d workers for %v", cfg.churnWorkers, cfg.churn))
	workers := make([]loadConn, cfg.churnWorkers)
	for i := range workers {
		workers[i] = churner{url: h.ws("/mcp")}
	}
	mt := meter{pids: []int{h.c.PID()}, stats: []*statsSource{h.stats}}
	var r reading
	w, err := measure(ctx, workers, 1, cfg.warmup, cfg.churn, func(open bool) {
		if open {
			mt.start(ctx)
		} else {
			r = mt.stop(ctx)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("churn: %w", err)
	}
	res := &churnResult{
		workers:   cfg.churnWorkers,
		rate:      w.rate(),
		total:     w.calls(),
		errs:      w.errs,
		firstErr:  w.firstErr,
		cpu:       r.cpu,
		mallocs:   r.mallocs,
		mallocsOK: r.mallocsOK,
	}
	res.sum = benchlab.Summarize(w.lat)
	return res, nil
}
