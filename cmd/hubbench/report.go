package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// Targets of one instance against the raw echo and the raw fan-out
// figures, on a 2-core machine.
const (
	targetRateRatio  = 0.5                    // hub 64x16 calls/s over raw echo calls/s, at least
	targetP99Ratio   = 3.0                    // hub 1x1 p99 over raw echo p99, at most
	targetFanoutOne  = 100 * time.Millisecond // p99 delivery to 10,000 subscribers on one instance
	targetFanoutTwo  = 150 * time.Millisecond // ... spread over two
	targetFanoutRate = 300_000.0              // notifications delivered per second, at least
	targetIdleRSS    = 20 << 10               // RSS per idle connection, at most
	targetIdleWS     = 10 << 10               // ... per idle WebSocket client, at most
	targetIdleHTTP   = 8 << 10                // ... per idle Streamable HTTP session, at most
	targetSubs       = 10_000                 // subscribers and connections the targets are stated for
)

// Endpoint names in the calls measurement.
const (
	epRaw  = "raw ws echo"
	epPeer = "peer direct"
	epHub  = "hub"
	epHub2 = "hub x2 (redis)"
	// The same calls through the hub over Streamable HTTP: answered as one
	// JSON body, and (a call whose server reports progress once) as an SSE
	// stream.
	epRawHTTP = "raw http echo"
	epHTTP    = "hub http (json)"
	epHTTPSSE = "hub http (sse)"
	// The same without a session: each POST a request of the 2026-07-28
	// revision.
	epHTTPModern    = "hub http 2026 (json)"
	epHTTPModernSSE = "hub http 2026 (sse)"
	// PUBLISH to a subscriber on the redis-server the hubs share: the floor
	// of a hop between instances.
	epRedis = "redis publish -> sub"
)

// report is everything one run measured.
type report struct {
	cfg        *config
	began      time.Time
	took       time.Duration
	machine    benchlab.Machine
	command    string
	cells      [][]*callResult // one per shape and payload; the baseline first
	fanout     []*fanoutResult
	idle       []*idleResult // idle.go
	idleDetail bool          // -idle-only: what the idle RSS is made of, in rows of its own
	churn      *churnResult
	statsCost  *statsCostResult // statscost.go
	pools      *poolsResult     // pools.go
	catalog    *catalogResult   // catalog.go
	tracing    *tracingResult   // tracing.go
	connect    *connectResult   // connect.go
	cache      *cacheResult     // cachecost.go
	auth       *authResult      // authcost.go
	profiles   []*profileResult
	profileDir string
	notes      []string // what could not be measured, and why
	loadAfter  string
}

// verdict is one target with its measured figure.
type verdict struct {
	issue  int // the issue that set it, shown as "(#N)"
	ok     bool
	what   string
	figure string
	goal   string
	short  string // what the table's target column says before PASS or MISS
	note   string
}

func (v verdict) String() string {
	s := fmt.Sprintf("%s  (#%d) %s: %s (target %s)", passMiss(v.ok), v.issue, v.what, v.figure, v.goal)
	if v.note != "" {
		s += " " + v.note
	}
	return s
}

// callVerdicts are the targets of a calls row.
func callVerdicts(r *callResult) []verdict {
	large := r.payload == payloads[1]
	what := fmt.Sprintf("tools/call %s %s", r.shape, r.payload.name)
	var out []verdict
	switch {
	case r.endpoint == epHub && r.shape == shape{64, 16}:
		out = append(out, verdict{issue: 7, ok: r.rateRatio >= targetRateRatio, what: what + " through the hub",
			figure: benchlab.FormatRatio(r.rateRatio) + " raw echo calls/s", goal: fmt.Sprintf(">= %.1fx", targetRateRatio),
			short: fmt.Sprintf("ops/s >= %.1fx raw", targetRateRatio)})
		if large && r.cpuFloor > 0 {
			x := 2 * r.cpuFloor
			out = append(out, verdict{issue: 15, ok: x <= targetLargeCPU, what: what + " through the hub",
				figure: "hub CPU per call " + benchlab.FormatRatio(x) + " the echo server's per round trip", goal: fmt.Sprintf("<= %.1fx", targetLargeCPU),
				short: fmt.Sprintf("CPU <= %.1fx echo", targetLargeCPU)})
		}
	case r.endpoint == epHub && r.shape == shape{1, 1}:
		out = append(out, verdict{issue: 7, ok: r.p99Ratio <= targetP99Ratio, what: what + " through the hub",
			figure: "p99 " + benchlab.FormatRatio(r.p99Ratio) + " raw echo p99", goal: fmt.Sprintf("<= %.0fx", targetP99Ratio),
			short: fmt.Sprintf("p99 <= %.0fx raw", targetP99Ratio)})
		if large {
			out = append(out, verdict{issue: 15, ok: r.p99Ratio <= targetLargeP99, what: what + " through the hub",
				figure: "p99 " + benchlab.FormatRatio(r.p99Ratio) + " raw echo p99", goal: fmt.Sprintf("<= %.0fx", targetLargeP99),
				short: fmt.Sprintf("p99 <= %.0fx raw", targetLargeP99)})
		}
	case r.endpoint == epHub2 && !large && r.shape == shape{64, 16}:
		w := what + " across two instances"
		out = append(out, verdict{issue: 15, ok: r.cpuFloor > 0 && r.cpuFloor <= targetCrossCPU, what: w,
			figure: "both hubs' CPU per call " + benchlab.FormatRatio(r.cpuFloor) + " twice one instance's", goal: fmt.Sprintf("<= %.1fx", targetCrossCPU),
			short: fmt.Sprintf("CPU <= %.1fx floor", targetCrossCPU)})
		if a, ok := r.allocsPerCall(); ok {
			out = append(out, verdict{issue: 15, ok: a <= targetCrossAllocs, what: w,
				figure: benchlab.FormatPerOp(a) + " allocations per call in both hubs", goal: fmt.Sprintf("<= %.0f", targetCrossAllocs),
				short: fmt.Sprintf("allocs <= %.0f", targetCrossAllocs)})
		}
		out = append(out, verdict{issue: 15, ok: r.vsOne >= targetCrossRate, what: w,
			figure: benchlab.FormatRatio(r.vsOne) + " one instance's calls/s", goal: fmt.Sprintf(">= %.1fx", targetCrossRate),
			short: fmt.Sprintf("ops/s >= %.1fx one", targetCrossRate)})
	case r.endpoint == epHub2 && !large && r.shape == shape{1, 1} && r.beyondRTTs != 0:
		out = append(out, verdict{issue: 15, ok: r.beyondRTTs <= targetCrossRTTs, what: what + " across two instances",
			figure: fmt.Sprintf("p50 %s beyond one instance's: %.1f Redis round trips", benchlab.FormatDuration(r.p50Beyond), r.beyondRTTs),
			goal:   fmt.Sprintf("<= %.0f", targetCrossRTTs), short: fmt.Sprintf("p50 <= 1 + %.0f Redis RTT", targetCrossRTTs)})
	case isHTTPFace(r.endpoint) && r.shape == shape{64, 16}:
		w := what + " through the hub, " + r.endpoint
		if r.endpoint == epHTTP || r.endpoint == epHTTPSSE {
			out = append(out, verdict{issue: 12, ok: r.vsWS >= targetHTTPRate, what: w,
				figure: benchlab.FormatRatio(r.vsWS) + " WebSocket calls/s through the hub", goal: fmt.Sprintf(">= %.1fx", targetHTTPRate),
				short: fmt.Sprintf("ops/s >= %.1fx ws", targetHTTPRate)})
		}
		out = append(out, verdict{issue: 28, ok: r.cpuFloor > 0 && r.cpuFloor <= targetHTTPCPU, what: w,
			figure: "hub CPU per call " + benchlab.FormatRatio(r.cpuFloor) + " net/http's alone (raw http echo)", goal: fmt.Sprintf("<= %.1fx", targetHTTPCPU),
			short: fmt.Sprintf("CPU <= %.1fx net/http", targetHTTPCPU)},
			verdict{issue: 28, ok: r.vsWS >= targetHTTPRate28, what: w,
				figure: benchlab.FormatRatio(r.vsWS) + " WebSocket calls/s through the hub", goal: fmt.Sprintf(">= %.2fx", targetHTTPRate28),
				short: fmt.Sprintf("ops/s >= %.2fx ws", targetHTTPRate28)})
	}
	return out
}

// isHTTPFace reports whether an endpoint is the hub over Streamable HTTP.
func isHTTPFace(ep string) bool {
	return ep == epHTTP || ep == epHTTPSSE || ep == epHTTPModern || ep == epHTTPModernSSE
}

// fanoutVerdicts are the targets of a fan-out row: only the largest size
// run has them (10,000, or fewer in quick mode, which says so).
func (r *report) fanoutVerdicts(f *fanoutResult) []verdict {
	largest := 0
	for _, g := range r.fanout {
		largest = max(largest, g.subs)
	}
	if f.subs != largest || f.raw {
		return nil
	}
	note := ""
	if f.subs < targetSubs {
		note = fmt.Sprintf("(measured at %s subscribers, not %s)", benchlab.FormatCount(int64(f.subs)), benchlab.FormatCount(targetSubs))
	}
	limit := targetFanoutOne
	if f.instances > 1 {
		limit = targetFanoutTwo
	}
	what := fmt.Sprintf("fan-out to %s subscribers, %s", benchlab.FormatCount(int64(f.subs)), f.setting)
	out := []verdict{
		{issue: 7, ok: f.p99 <= limit && f.delivered == f.expected, what: what, figure: "p99 " + benchlab.FormatDuration(f.p99),
			goal: "<= " + benchlab.FormatDuration(limit), short: "p99 <= " + benchlab.FormatDuration(limit), note: note},
		{issue: 7, ok: f.rate >= targetFanoutRate, what: what, figure: benchlab.FormatRate(f.rate),
			goal: ">= " + benchlab.FormatRate(targetFanoutRate), short: ">= " + benchlab.FormatRate(targetFanoutRate), note: note},
	}
	if f.delivered != f.expected {
		out[0].note = strings.TrimSpace(out[0].note + fmt.Sprintf(" (only %d of %d delivered)", f.delivered, f.expected))
	}
	if f.rateRatio > 0 {
		rate := targetFanoutRawOne
		if f.instances > 1 {
			rate = targetFanoutRawTwo
		}
		out = append(out, verdict{issue: 15, ok: f.rateRatio >= rate, what: what, figure: benchlab.FormatRatio(f.rateRatio) + " the raw fan-out's rate",
			goal: fmt.Sprintf(">= %.1fx", rate), short: fmt.Sprintf(">= %.1fx raw", rate), note: note})
		if f.instances == 1 {
			out = append(out, verdict{issue: 15, ok: f.p99Ratio <= targetFanoutP99One, what: what, figure: "p99 " + benchlab.FormatRatio(f.p99Ratio) + " the raw fan-out's",
				goal: fmt.Sprintf("<= %.1fx", targetFanoutP99One), short: fmt.Sprintf("p99 <= %.1fx raw", targetFanoutP99One), note: note})
		}
	}
	return out
}

// idleVerdicts are the targets of an idle row: none for the bare server.
func idleVerdicts(ir *idleResult) []verdict {
	note := ""
	if ir.conns < targetSubs {
		note = fmt.Sprintf("(measured at %s connections, not %s)", benchlab.FormatCount(int64(ir.conns)), benchlab.FormatCount(targetSubs))
	}
	per := ir.perConn()
	v := func(issue int, what string, limit float64) verdict {
		return verdict{issue: issue, ok: per <= limit, what: what, figure: benchlab.FormatBytes(per) + " RSS",
			goal: "<= " + benchlab.FormatBytes(limit), short: "RSS <= " + benchlab.FormatBytes(limit), note: note}
	}
	switch ir.what {
	case idleWS:
		return []verdict{v(7, "idle connection", targetIdleRSS), v(28, "idle WebSocket client", targetIdleWS)}
	case idleHTTP:
		return []verdict{v(28, "idle Streamable HTTP session", targetIdleHTTP)}
	}
	return nil
}

// verdicts lists every target with its figure.
func (r *report) verdicts() []verdict {
	var out []verdict
	for _, cell := range r.cells {
		for _, c := range cell {
			out = append(out, callVerdicts(c)...)
		}
	}
	for _, f := range r.fanout {
		out = append(out, r.fanoutVerdicts(f)...)
	}
	for _, ir := range r.idle {
		out = append(out, idleVerdicts(ir)...)
	}
	if v, ok := r.poolVerdict(); ok {
		out = append(out, v)
	}
	if r.catalog != nil {
		out = append(out, r.catalog.verdicts()...)
	}
	out = append(out, r.tracingVerdicts()...)
	out = append(out, r.connectVerdicts()...)
	if v, ok := r.cacheVerdict(); ok {
		out = append(out, v)
	}
	out = append(out, r.authVerdicts()...)
	return out
}

func verdictCell(vs ...verdict) string {
	var parts []string
	for _, v := range vs {
		parts = append(parts, v.short+" "+passMiss(v.ok))
	}
	return strings.Join(parts, "; ")
}

func rateCell(rate float64, errs int64) string {
	s := benchlab.FormatRate(rate)
	if errs > 0 {
		s += fmt.Sprintf(" (%d errors)", errs)
	}
	return s
}

func perOp(total int64, x float64, ok bool) string {
	if !ok {
		return "n/a"
	}
	if total == 0 {
		return "-"
	}
	return benchlab.FormatPerOp(x / float64(total))
}

func cpuPerOp(cpu time.Duration, ops int64) string {
	if ops == 0 {
		return "-"
	}
	return benchlab.FormatDuration(cpu / time.Duration(ops))
}

// table builds the one table of the run.
func (r *report) table() *benchlab.Table {
	t := benchlab.NewTable(3, "what", "shape", "payload", "ops/s", "p50", "p99", "p999/max",
		"ops/s vs raw", "p99 vs raw", "CPU/op", "CPU vs floor", "all CPU/op", "allocs/op", "mem/conn", "target")
	t.Section("tools/call round trips (shape: connections x calls in flight on each)")
	for _, cell := range r.cells {
		for _, c := range cell {
			rateRatio, p99Ratio := benchlab.FormatRatio(c.rateRatio), benchlab.FormatRatio(c.p99Ratio)
			switch c.endpoint {
			case epRaw:
				rateRatio, p99Ratio = "base", "base"
			case epRedis:
				rateRatio, p99Ratio = "", ""
			}
			allocs := "n/a"
			if a, ok := c.allocsPerCall(); ok {
				allocs = benchlab.FormatPerOp(a)
			}
			floor := ""
			if c.cpuFloor > 0 {
				floor = benchlab.FormatRatio(c.cpuFloor)
			}
			t.Add(c.endpoint, c.shape.String(), c.payload.name, rateCell(c.rate, c.errs),
				benchlab.FormatDuration(c.sum.P50), benchlab.FormatDuration(c.sum.P99), benchlab.FormatDuration(c.sum.P999),
				rateRatio, p99Ratio, benchlab.FormatDuration(c.cpuPerCall()), floor, benchlab.FormatDuration(c.allCPUPerCall()), allocs, "",
				verdictCell(callVerdicts(c)...))
		}
	}
	r.statsCostRows(t)
	r.poolRows(t)
	r.tracingRows(t)
	r.connectRows(t)
	r.cacheRows(t)
	r.authRows(t)
	if len(r.fanout) > 0 {
		t.Section("fan-out: one notifications/resources/updated, server send -> each subscriber (p999/max: max)")
		for _, f := range r.fanout {
			rate := benchlab.FormatRate(f.rate)
			if f.delivered != f.expected {
				rate += fmt.Sprintf(" (%d of %d delivered)", f.delivered, f.expected)
			}
			rateRatio, p99Ratio := "", ""
			switch {
			case f.raw:
				rateRatio, p99Ratio = "base", "base"
			case f.rateRatio > 0:
				rateRatio, p99Ratio = benchlab.FormatRatio(f.rateRatio), benchlab.FormatRatio(f.p99Ratio)
			}
			t.Add("fan-out, "+f.setting, benchlab.FormatCount(int64(f.subs))+" subs", "-", rate,
				benchlab.FormatDuration(f.p50), benchlab.FormatDuration(f.p99), benchlab.FormatDuration(f.max), rateRatio, p99Ratio,
				f.cpuCell(), "", "", perOp(f.delivered, f.mallocs, f.mallocsOK), "", verdictCell(r.fanoutVerdicts(f)...))
		}
	}
	if len(r.idle) > 0 {
		t.Section("idle connections: connected and initialized clients, each kind on a fresh process")
		for _, ir := range r.idle {
			conns := benchlab.FormatCount(int64(ir.conns)) + " conns"
			n := float64(ir.conns)
			t.Add("idle, "+ir.what, conns, "RSS", "", "", "", "", "", "", "", "", "", "",
				benchlab.FormatBytes(ir.perConn()), verdictCell(idleVerdicts(ir)...))
			heap, stacks, gor := "n/a", "n/a", "n/a"
			if ir.statsOK {
				heap = benchlab.FormatBytes((ir.after.HeapInuse - ir.before.HeapInuse) / n)
				stacks = benchlab.FormatBytes((ir.after.StackInuse - ir.before.StackInuse) / n)
				gor = benchlab.FormatPerOp((ir.after.Goroutines - ir.before.Goroutines) / n)
			}
			t.Add("idle, "+ir.what, conns, "heap in use", "", "", "", "", "", "", "", "", "", "", heap)
			t.Add("idle, "+ir.what, conns, "stacks", "", "", "", "", "", "", "", "", "", "", stacks)
			t.Add("idle, "+ir.what, conns, "goroutines", "", "", "", "", "", "", "", "", "", "", gor)
			if r.idleDetail {
				for _, row := range ir.detailRows() {
					t.Add("idle, "+ir.what, conns, row[0], "", "", "", "", "", "", "", "", "", "", row[1])
				}
			}
		}
	}
	if c := r.churn; c != nil || len(r.idle) > 0 {
		t.Section("connections: connect + initialize (+ close)")
		if c != nil {
			allocs := perOp(c.total, c.mallocs, c.mallocsOK)
			t.Add("churn: connect+init+close", fmt.Sprintf("%d workers", c.workers), "-", rateCell(c.rate, c.errs),
				benchlab.FormatDuration(c.sum.P50), benchlab.FormatDuration(c.sum.P99), benchlab.FormatDuration(c.sum.P999), "", "",
				cpuPerOp(c.cpu, c.total), "", "", allocs)
		}
		for _, ir := range r.idle {
			t.Add("ramp: connect+init, kept open, "+ir.what, fmt.Sprintf("%d at a time", idleConnectors), "-", benchlab.FormatRate(ir.connectRate))
		}
	}
	return t
}

// cpuTable breaks each row's CPU down by process.
func (r *report) cpuTable() *benchlab.Table {
	t := benchlab.NewTable(3, "what", "shape", "payload", "cores busy: run", "machine", "CPU per operation, by process")
	t.AlignLeft(5)
	row := func(what, sh, pl string, s *benchlab.CPUSplit, ops int64) {
		if !s.Enough() {
			t.Add(what, sh, pl, "-", "-", fmt.Sprintf("(measured %v: too short for 10 ms ticks)", s.Measured().Round(time.Millisecond)))
			return
		}
		ours, machine := s.Busy()
		t.Add(what, sh, pl, strconv.FormatFloat(ours, 'f', 2, 64), strconv.FormatFloat(machine, 'f', 2, 64), s.PerOp(ops))
	}
	for _, cell := range r.cells {
		for _, c := range cell {
			row(c.endpoint, c.shape.String(), c.payload.name, &c.split, c.total)
		}
	}
	for _, f := range r.fanout {
		row("fan-out, "+f.setting, benchlab.FormatCount(int64(f.subs))+" subs", "-", &f.split, f.delivered)
	}
	return t
}

// markdown renders docs/benchmarks.md.
func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks\n\n")
	w("Written by `%s` (cmd/hubbench); run it again rather than editing this file.\n\n", r.command)
	w("## How to read this\n\n")
	w("- Everything below was measured in one run, on loopback, on the machine described here. The load generator,\n")
	w("  the hub(s), the MCP server and Redis share its cores: figures are what this machine does end to end, and\n")
	w("  the ratios, measured in alternating rounds against the raw echo, are what carries to other machines.\n")
	w("- **raw ws echo** is the physical limit: a coder/websocket server echoing the same frame bytes, one hop, same\n")
	w("  connections and calls in flight. **peer direct** is pkg/peer on both ends, no hub. **hub** is a client\n")
	w("  calling `tools/call` through `bin/hub` to an MCP server process: two hops. Like the raw echo's ends, which\n")
	w("  reuse their buffers, these WebSocket clients borrow each answer (`peer.CallBorrowing`) and their servers\n")
	w("  lend each request (`LendRequests`): no end allocates a buffer per call. **hub x2** puts the client and the\n")
	w("  server on two hub instances sharing one redis-server: the call crosses Redis both ways. **hub http (json)** and\n")
	w("  **hub http (sse)** make the same calls through the hub over Streamable HTTP, one session per connection:\n")
	w("  answered with one JSON body, and answered with an SSE stream (each call carries a progress token and the\n")
	w("  server reports progress once before answering, which is what makes the hub switch the POST to a stream).\n")
	w("  The MCP server (pkg/mcp's, which speaks both eras) dials in with `?era=session`, so that the hub opens a\n")
	w("  session with it as it did with every server before it spoke 2026-07-28 to those that can: these rows measure\n")
	w("  the hub's routing, comparable from run to run. A server spoken to in 2026-07-28 makes each call carry its\n")
	w("  client's `_meta` both ways (docs/performance.md, \"The hub's calls to a server of 2026-07-28\").\n")
	w("- **Floors**, measured in the same run: **redis publish -> sub** is a PUBLISH and its delivery to a subscriber\n")
	w("  (go-redis, on the redis-server the hubs share; pipelined when more than one is in flight), the least a hop\n")
	w("  between instances costs; **fan-out, raw fan-out** is a coder/websocket server writing one prepared frame to\n")
	w("  as many subscribers (the same MCP clients, same machine), in alternating rounds with each hub fan-out.\n")
	w("- **ops/s**: operations completed per second, median of the rounds. For fan-out: subscribers reached per\n")
	w("  second, from the server's send to the last receipt.\n")
	w("- **p50, p99, p999**: latency percentiles (nearest rank) of each round's calls, median over the rounds. For\n")
	w("  fan-out: per-subscriber delivery time from the server's send to the subscriber's receipt, on one clock (the\n")
	w("  server runs in the load generator's process), and max instead of p999.\n")
	w("- **vs raw**: the median over the rounds of the ratio to the raw echo in the same round. A p99 ratio above 1 is\n")
	w("  slower than raw.\n")
	w("- **CPU/op**: user + system CPU of the process(es) in the middle, from /proc/PID/stat (10 ms ticks, so shown\n")
	w("  only for at least %v measured: short fan-outs show -), over the\n", benchlab.MinMeasured)
	w("  operations completed: the echo server for the baselines, the hub for hub rows (both hubs for x2), never the\n")
	w("  MCP server, Redis or the load generator. **all CPU/op** counts every process of the run, the load\n")
	w("  generator and the MCP server included: ops/s x all CPU/op near the core count means the machine is the limit.\n")
	w("  For the redis row: redis-server's CPU per message; for fan-out rows: per delivery.\n")
	w("- **CPU vs floor**: CPU/op over its floor from the same cell: for **hub**, twice the raw echo server's CPU per\n")
	w("  round trip (a call crosses two hops); for **hub x2**, twice one instance's hub CPU per call (each of the two\n")
	w("  hubs should cost about what one instance costs). 1.00x is the floor.\n")
	w("- **allocs/op**: heap allocations per operation of the same process(es) as CPU/op, from their Go runtime\n")
	w("  counters (the hub's /metrics; /debug/pprof for hubbench's own roles), less the reading's own; n/a where\n")
	w("  a process does not expose them (see the notes).\n")
	w("- **mem/conn**: (after - before) / connections, for clients that connected and initialized and then do\n")
	w("  nothing, each kind on a fresh process: **bare coder/websocket** (the floor: the raw fan-out server, which\n")
	w("  answers initialize), the hub's WebSocket clients, and its Streamable HTTP sessions.\n")
	w("- Fan-out subscribers are WebSocket clients inside the load generator: their reading shares the cores with\n")
	w("  the hub, so delivery times include the receivers' work, as they would on a real machine with that many.\n")
	w("- **target**: the targets of issues 7 (one instance against raw), 15 (two instances, 16 KiB, fan-out, against\n")
	w("  their floors) and 12 (HTTP against WebSocket), PASS or MISS; the list below names each one's issue.\n\n")
	w("## Machine and run\n\n")
	w("| | |\n|---|---|\n")
	w("| CPU | %s |\n| cores | %d |\n| RAM | %s |\n| Go | %s |\n| OS | %s |\n", r.machine.CPU, r.machine.Cores, r.machine.RAM, r.machine.Go, r.machine.OS)
	w("| commit | %s |\n| date | %s |\n| command | `%s` |\n| run time | %s |\n", r.machine.Commit,
		r.began.UTC().Format("2006-01-02 15:04 MST"), r.command, r.took.Round(time.Second))
	w("| load average | %s at the start, %s at the end (1, 5, 15 min; other work on the machine shows here) |\n\n",
		r.machine.Load, r.loadAfter)
	w("## Figures\n\n%s\n", r.table().Markdown())
	w("## Targets\n\n")
	for _, v := range r.verdicts() {
		w("- %s\n", v)
	}
	w("%s", r.distances())
	w("\n## Method\n\n")
	w("- Calls: for each shape and payload, every path gets its connections, then %d rounds in which the paths take\n", r.cfg.rounds)
	w("  turns (the first one rotating) so that the machine's drift hits all alike. Each connection keeps its calls in\n")
	w("  flight in a closed loop: a call starts when one ends. In each turn the load warms up (at least %v, and until\n", r.cfg.warmup)
	w("  every slot has completed a call), then a window of %v is measured: only calls that end inside it count, and\n", r.cfg.round)
	w("  the processes' CPU and allocation counters are read at its edges. Arguments are `{\"text\":\"xx…\"}` of\n")
	w("  exactly the payload size; the raw echo sends the whole `tools/call` request frame, the MCP server answers\n")
	w("  with its arguments as `structuredContent`, so every answer is about as large as its call.\n")
	w("- HTTP rows (100 B, 1x1 and 64x16 only): a lean client under the same closed loop, each connection one\n")
	w("  session (initialize, notifications/initialized), each call in flight with a keep-alive TCP connection of its\n")
	w("  own on which it writes the POST by hand and reads the whole response. **raw http echo** is net/http alone\n")
	w("  answering each POST with its body, one hop: the floor of the HTTP face, as raw ws echo is of WebSocket.\n")
	w("- Redis floor: each connection PUBLISHes on a channel of its own to a subscriber connection of its own, in the\n")
	w("  same closed loop; with k in flight, the PUBLISHes free at the time leave as one pipeline, as the broker sends.\n")
	w("- Fan-out: clients connect and initialize (spread evenly over the instances), subscribe to one resource of a\n")
	w("  server (on the first instance), then the server sends one update per round, %d rounds after a warm-up, the\n", r.cfg.fanoutRounds)
	w("  next one after the previous has reached everyone. The raw baseline: as many clients of their own, connected\n")
	w("  at once with the hub's, to `hubbench -role fanout-server`, which answers initialize and resources/subscribe,\n")
	w("  and on a control connection's word writes the prepared notifications/resources/updated frame to every\n")
	w("  subscriber, one goroutine per core each writing its share in turn. Each round updates the raw subscribers\n")
	w("  and the hub's one after the other (which first alternates), and the ratios are the medians of the rounds'\n")
	w("  ratios (where the open files limit does not allow both sets at once, the notes say so and the baseline is\n")
	w("  measured just before the hub's). Its allocations are not read (n/a): net/http/pprof's reading, with a\n")
	w("  goroutine per subscriber, would cost more than what it measures.\n")
	w("- Idle: RSS (/proc/PID/status VmRSS) of a fresh process before and after %s clients connect and initialize,\n", benchlab.FormatCount(int64(r.cfg.idleConns)))
	w("  %d at a time, once they have been left alone for %v (the hub parks a quiet WebSocket's reader after 0.1 to 0.2 s, and a quiet\n", idleConnectors, idleQuiet)
	w("  HTTP session drops its maps of requests after 1 s) and it stops moving; heap in use, goroutine stacks and goroutines from its\n")
	w("  runtime counters where exposed.\n")
	w("  WebSocket clients (MCP clients of pkg/mcp) stay connected; an HTTP session is initialize and\n")
	w("  notifications/initialized, each on a connection of its own that is then closed: what a session keeps\n")
	w("  between a client's requests.\n")
	w("- Churn: %d workers each connect, initialize and close a session, over and over, for %v.\n", r.cfg.churnWorkers, r.cfg.churn)
	w("%s", r.statsCostMethod())
	w("%s", r.poolsMethod())
	w("%s", r.tracingMethod())
	w("%s", r.connectMethod())
	w("%s", r.cacheMethod())
	w("%s", r.authMethod())
	w("- Processes: `bin/hub` (built from this tree, run with `SWITCHBOARD_RATE_LIMIT=-1`: the per-connection rate\n")
	w("  limit is a policy, not a cost), redis-server (`--save '' --appendonly no`), and hubbench itself\n")
	w("  in hidden roles: `-role echo-server`, `-role peer-server`, `-role mcp-server`, `-role fanout-server`, and for profiles only\n")
	w("  `-role hub` (pkg/hub in-process exactly as cmd/hub runs it, plus net/http/pprof).\n")
	w("\n## Where the CPU goes\n\n")
	w("CPU per operation of each process while it was measured (those above 2%% of the total), and how many of the\n")
	w("machine's %d cores were busy: with the run's processes (run), and in all (machine: /proc/stat, other users'\n", r.machine.Cores)
	w("work included). Near %d: the cores are the limit; well below: something waits. The machine column is sampled\n", r.machine.Cores)
	w("at the kernel's tick and misses short bursts (1x1 rows read low); only where it clearly exceeds run did\n")
	w("other work on the machine take cores from the run.\n\n")
	w("%s\n", r.cpuTable().Markdown())
	if len(r.notes) > 0 {
		w("\n## Notes\n\n")
		for _, n := range r.notes {
			w("- %s\n", n)
		}
	}
	if len(r.profiles) > 0 {
		w("\n## CPU profiles of the hub\n\n")
		w("The hub binary has no profiling endpoint, so these come from its twins (`hubbench -role hub`: `hub serve` through\n")
		w("the command's own entry, with net/http/pprof beside it) under the same 64x16 loads, %v each: one instance, two\n", r.cfg.profile)
		w("instances sharing a redis-server (each twin profiled), Streamable HTTP, and one instance fanning updates out.\n")
		w("Profiles: `%s`.\n\n", r.profileDir)
		for _, p := range r.profiles {
			w("### %s\n\n", p.heading())
			if p.toolError != nil {
				w("(go tool pprof failed: %v)\n\n", p.toolError)
				continue
			}
			w("By flat time:\n\n```\n%s\n```\n\nBy cumulative time:\n\n```\n%s\n```\n\n", p.top, p.cum)
		}
	}
	return b.String()
}

// passMiss labels a target as met or not.
func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}
