package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Idle: what connections that do nothing cost, in RSS per connection, each
// kind on a fresh process of its own, in the same run:
//
//   - a bare coder/websocket server (the raw fan-out server, which answers
//     initialize: the floor), with MCP clients connected and initialized;
//   - the hub, with the same clients over WebSocket;
//   - the hub, with Streamable HTTP sessions (initialize and
//     notifications/initialized, then their TCP connections closed: what
//     a session keeps between a client's requests).

// Kinds of idle connection.
const (
	idleBare = "bare coder/websocket"
	idleWS   = "hub websocket"
	idleHTTP = "hub http session"
)

// idleResult is the cost of connected, initialized clients that do nothing.
type idleResult struct {
	what          string // idleBare, idleWS or idleHTTP
	conns         int
	before, after runtimeStats
	statsOK       bool
	connectRate   float64 // connect + initialize, idleConnectors at a time

	// /proc's figures of the process's memory before and after: its RSS,
	// and what RSS is made of (-idle-only; the peak, VmHWM, is the
	// process's whole life's); and with peaks the most goroutines and
	// stack bytes seen while the clients connected (sampled every
	// idlePeakEvery; 0 when not sampled).
	memBefore, memAfter benchlab.ProcMemory
	peakGoroutines      float64
	peakStacks          float64
}

// perConn is the RSS each connection added.
func (ir *idleResult) perConn() float64 {
	return float64(ir.memAfter.RSS-ir.memBefore.RSS) / float64(ir.conns)
}

// detailRows are what the RSS per connection is made of, each a name and
// a figure per connection: /proc's split of RSS and its peak, the
// runtime's classes of memory, and the peaks sampled while the clients
// connected.
func (ir *idleResult) detailRows() [][2]string {
	n := float64(ir.conns)
	per := func(after, before float64) string { return benchlab.FormatBytes((after - before) / n) }
	b, a := ir.memBefore, ir.memAfter
	rows := [][2]string{
		{"RSS peak (VmHWM)", per(float64(a.PeakRSS), float64(b.RSS))},
		{"RSS anonymous", per(float64(a.Anon), float64(b.Anon))},
		{"RSS of files", per(float64(a.File), float64(b.File))},
	}
	if ir.statsOK {
		sb, sa := ir.before, ir.after
		rows = append(rows, [][2]string{
			{"heap objects (live, unswept)", per(sa.HeapAlloc, sb.HeapAlloc)},
			{"heap spans' unused room", per(sa.HeapInuse-sa.HeapAlloc, sb.HeapInuse-sb.HeapAlloc)},
			{"heap free, kept", per(sa.HeapIdle-sa.HeapReleased, sb.HeapIdle-sb.HeapReleased)},
			{"heap returned to the OS", per(sa.HeapReleased, sb.HeapReleased)},
			{"stack spans", per(sa.StackSys, sb.StackSys)},
			{"runtime metadata", per(sa.MetaSys, sb.MetaSys)},
			{"next GC's heap goal", per(sa.NextGC, sb.NextGC)},
		}...)
	}
	if ir.peakGoroutines > 0 {
		rows = append(rows, [][2]string{
			{"goroutines at the peak (total)", benchlab.FormatCount(int64(ir.peakGoroutines))},
			{"stacks in use at the peak", per(ir.peakStacks, ir.before.StackInuse)},
		}...)
	}
	return rows
}

// idleConnectors is how many clients connect at a time.
const idleConnectors = 32

// idleQuiet is how long the connections are left alone, once the last has
// initialized, before their cost is measured.
const idleQuiet = 2 * time.Second

// idlePeakEvery is how often the process's goroutines are read while its
// clients connect, with -idle-peaks: each read is a scrape the process
// answers, so they are not read in the measurements that judge it.
const idlePeakEvery = 100 * time.Millisecond

// idleProcess is a fresh process whose idle cost is measured, and where its
// clients connect.
type idleProcess struct {
	pid   int
	stats *statsSource
	addr  string
}

// runIdle measures the idle cost of each kind on n connections, each on a
// fresh process. With profiles set (a directory), the hubs are their twins,
// and the heap profile and goroutines of each, idle, are written there.
// With peaks set, the goroutines of each process are sampled while its
// clients connect.
func runIdle(ctx context.Context, sup *benchlab.Supervisor, hubBin string, n int, profiles string, peaks bool, progress func(string)) ([]*idleResult, error) {
	var out []*idleResult
	for _, what := range []string{idleBare, idleWS, idleHTTP} {
		mark := sup.Mark()
		p, err := startIdleProcess(ctx, sup, hubBin, what, profiles != "")
		if err != nil {
			return nil, fmt.Errorf("idle, %s: %w", what, err)
		}
		progress(fmt.Sprintf("idle: %s clients of a %s", benchlab.FormatCount(int64(n)), what))
		ir, err := measureIdle(ctx, p, what, n, peaks, func() error {
			if profiles == "" {
				return nil
			}
			return writeIdleProfiles(ctx, p.addr, filepath.Join(profiles, "idle-"+strings.NewReplacer(" ", "-", "/", "-").Replace(what)))
		})
		if err != nil {
			return nil, fmt.Errorf("idle, %s: %w", what, err)
		}
		sup.StopSince(mark) // its clients are gone: the next kind's process is measured alone
		out = append(out, ir)
	}
	return out, nil
}

// startIdleProcess starts the fresh process of one kind: the raw fan-out
// server, or a hub (which takes as many sessions without a token as the
// measurement opens), or its twin when twin is set.
func startIdleProcess(ctx context.Context, sup *benchlab.Supervisor, hubBin, what string, twin bool) (*idleProcess, error) {
	name := "hub (" + what + ")"
	switch {
	case what == idleBare || twin:
		args := []string{"-role", roleFanout, "-addr", "127.0.0.1:0"}
		if what != idleBare {
			args = []string{"-role", roleHub, "-addr", "127.0.0.1:0"}
		} else {
			name = "raw fan-out server (idle)"
		}
		c, addr, err := startRole(ctx, sup, name, args...)
		if err != nil {
			return nil, err
		}
		return &idleProcess{pid: c.PID(), stats: findStats(ctx, addr), addr: addr}, nil
	}
	h, err := startHub(ctx, sup, name, hubBin, "", "--max-connections-per-token=1000000")
	if err != nil {
		return nil, err
	}
	return &idleProcess{pid: h.c.PID(), stats: h.stats, addr: h.addr}, nil
}

// writeIdleProfiles writes the heap profile (after a collection) and the
// goroutines of the process at addr to prefix.heap.pprof and
// prefix.goroutines.txt.
func writeIdleProfiles(ctx context.Context, addr, prefix string) error {
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		return err
	}
	for suffix, path := range map[string]string{".heap.pprof": "/debug/pprof/heap?gc=1", ".goroutines.txt": "/debug/pprof/goroutine?debug=1"} {
		b, err := fetch(ctx, "http://"+addr+path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(prefix+suffix, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// measureIdle connects n clients of its kind to p, waits for p's RSS to
// settle, reads what they added and runs idle (which may profile p); it
// closes them before it returns.
func measureIdle(ctx context.Context, p *idleProcess, what string, n int, peaks bool, idle func() error) (*idleResult, error) {
	ir := &idleResult{what: what, conns: n}
	ir.memBefore, ir.before, ir.statsOK = processMemory(ctx, p.pid, p.stats)
	closers := make([]func(), n)
	defer func() {
		_ = forEach(context.WithoutCancel(ctx), n, 64, func(i int) error {
			if closers[i] != nil {
				closers[i]()
			}
			return nil
		})
	}()
	open := openWebSocketClient
	if what == idleHTTP {
		open = newHTTPSessionOpener()
	}
	began := time.Now()
	stopPeaks := func() {}
	if peaks && p.stats != nil {
		stopPeaks = samplePeaks(ctx, p.stats, ir)
	}
	err := forEach(ctx, n, idleConnectors, func(i int) error {
		var err error
		closers[i], err = open(ctx, p.addr)
		return err
	})
	stopPeaks()
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	ir.connectRate = float64(n) / time.Since(began).Seconds()
	// Idle means quiet for a while: the hub parks the reader of a
	// WebSocket quiet for 0.1 to 0.2 s, and a Streamable HTTP session
	// quiet for 1 s drops its maps of requests; measured sooner, the last
	// thousands of connections are still in their setup.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(idleQuiet):
	}
	if err := settle(ctx, p.pid); err != nil {
		return nil, err
	}
	var ok bool
	ir.memAfter, ir.after, ok = processMemory(ctx, p.pid, p.stats)
	ir.statsOK = ir.statsOK && ok
	return ir, idle()
}

// samplePeaks reads the goroutines and stacks of the process behind stats
// every idlePeakEvery, keeping the most into ir, until the function it
// returns is called.
func samplePeaks(ctx context.Context, stats *statsSource, ir *idleResult) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(idlePeakEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if st, err := stats.read(ctx); err == nil {
				ir.peakGoroutines = max(ir.peakGoroutines, st.Goroutines)
				ir.peakStacks = max(ir.peakStacks, st.StackInuse)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// openWebSocketClient connects an MCP client over WebSocket and
// initializes it.
func openWebSocketClient(ctx context.Context, addr string) (func(), error) {
	c, err := mcp.Connect(ctx, "ws://"+addr+"/mcp", &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion, WebSocket: noKeepalive})
	if err != nil {
		return nil, err
	}
	return func() { _ = c.Close() }, nil
}

// newHTTPSessionOpener returns a function that opens a Streamable HTTP
// session (initialize, then notifications/initialized) and leaves it idle,
// its connections closed: sessions live on between requests, connections
// need not. Closing it ends the session (DELETE).
func newHTTPSessionOpener() func(ctx context.Context, addr string) (func(), error) {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	post := func(ctx context.Context, url, session, body string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set(mcp.HeaderSessionID, session)
			req.Header.Set(mcp.HeaderProtocolVersion, mcp.LatestVersion)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode/100 != 2 {
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		return resp.Header.Get(mcp.HeaderSessionID), err
	}
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"hubbench","version":"1"}}}`,
		mcp.LatestVersion)
	return func(ctx context.Context, addr string) (func(), error) {
		url := "http://" + addr + "/mcp"
		session, err := post(ctx, url, "", init)
		if err != nil {
			return nil, fmt.Errorf("initialize: %w", err)
		}
		if session == "" {
			return nil, fmt.Errorf("initialize: no %s in the answer", mcp.HeaderSessionID)
		}
		if _, err := post(ctx, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
			return nil, fmt.Errorf("notifications/initialized: %w", err)
		}
		return func() {
			req, err := http.NewRequest(http.MethodDelete, url, nil)
			if err != nil {
				return
			}
			req.Header.Set(mcp.HeaderSessionID, session)
			if resp, err := hc.Do(req); err == nil {
				resp.Body.Close()
			}
		}, nil
	}
}

// processMemory reads a process's memory from /proc and, from stats when
// it has them, its runtime figures.
func processMemory(ctx context.Context, pid int, stats *statsSource) (mem benchlab.ProcMemory, st runtimeStats, ok bool) {
	mem, _ = benchlab.Memory(pid)
	if stats != nil {
		var err error
		st, err = stats.read(ctx)
		ok = err == nil
	}
	return mem, st, ok
}
