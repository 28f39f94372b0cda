package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// What the distance to each floor of the Streamable HTTP and `hub connect`
// targets (the hub's CPU per HTTP call against net/http alone; hub
// connect's 1x1 p50 against the backend served directly) is made of, from
// the rows of the same run: the report says it beside the verdicts, so
// that a MISS comes with its reasons in figures (docs/performance.md tells
// the profiles behind them).

// row returns the calls row of an endpoint at a shape and payload, or nil.
func (r *report) row(endpoint string, sh shape, pl payload) *callResult {
	for _, cell := range r.cells {
		for _, c := range cell {
			if c.endpoint == endpoint && c.shape == sh && c.payload == pl {
				return c
			}
		}
	}
	return nil
}

// distances writes the section, or nothing when the run has none of its
// rows.
func (r *report) distances() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	dur := benchlab.FormatDuration
	sh, pl := shape{64, 16}, payloads[0]
	floor, ws := r.row(epRawHTTP, sh, pl), r.row(epHub, sh, pl)
	if floor != nil && ws != nil && floor.total > 0 && ws.total > 0 {
		f, h := floor.cpuPerCall(), ws.cpuPerCall()
		fa, fok := floor.allocsPerCall()
		ha, hok := ws.allocsPerCall()
		w("**Streamable HTTP, %s %s: the hub's CPU per call.** Each HTTP row's cost, split into net/http's own\n", sh, pl.name)
		w("work for the same POSTs (raw http echo: %s and %s allocations a request), the hub's whole cost of the\n", dur(f), allocs(fa, fok))
		w("same call from a WebSocket client (hub: %s and %s, both sockets and the routing), and what the\n", dur(h), allocs(ha, hok))
		w("HTTP face costs beyond both. The sum of the first two counts the client's socket twice (net/http's\n")
		w("and the WebSocket's), so the remainder is the least the HTTP face adds. The target, %.1fx net/http's\n", targetHTTPCPU)
		w("alone, is %s a call; net/http's own work and a WebSocket call's cost to the hub add up to %s.\n\n",
			dur(time.Duration(targetHTTPCPU*float64(f))), dur(f+h))
		w("| row | hub CPU per call | = net/http alone | + a WebSocket call | + the HTTP face | allocations | of which the HTTP face |\n")
		w("|---|---:|---:|---:|---:|---:|---:|\n")
		for _, name := range []string{epHTTP, epHTTPSSE, epHTTPModern, epHTTPModernSSE} {
			c := r.row(name, sh, pl)
			if c == nil || c.total == 0 {
				continue
			}
			ca, cok := c.allocsPerCall()
			rest := "n/a"
			if cok && fok && hok {
				rest = benchlab.FormatPerOp(ca - fa - ha)
			}
			w("| %s | %s | %s | %s | %s | %s | %s |\n", name, dur(c.cpuPerCall()), dur(f), dur(h), dur(c.cpuPerCall()-f-h), allocs(ca, cok), rest)
		}
		w("\nThe calls/s of an HTTP row over the WebSocket row's are set by the machine's %d cores, saturated and shared\n", r.machine.Cores)
		w("by every process of the path: per call, all of them spend %s over WebSocket (the hub %s), and over HTTP:\n", dur(ws.allCPUPerCall()), dur(h))
		var parts []string
		for _, name := range []string{epHTTP, epHTTPSSE, epHTTPModern, epHTTPModernSSE} {
			if c := r.row(name, sh, pl); c != nil && c.total > 0 {
				parts = append(parts, fmt.Sprintf("%s %s (the hub %s)", name, dur(c.allCPUPerCall()), dur(c.cpuPerCall())))
			}
		}
		w("%s. The hub's share is what the first table splits; the rest is the load generator's HTTP client and\n", strings.Join(parts, ", "))
		w("the server's.\n\n")
	}
	if cn := r.connect; cn != nil && len(cn.cells) > 0 && len(cn.cells[0]) == 3 {
		direct, via, relay := cn.cells[0][0], cn.cells[0][1], cn.cells[0][2]
		face := r.row(epHTTP, shape{1, 1}, pl)
		w("**`hub connect` at 1x1: p50 latency.** The backend served directly answers in %s; through the hub\n", dur(direct.sum.P50))
		w("and `hub connect` in %s, and through the same hub and the raw pipe relay in the connector's place in\n", dur(via.sum.P50))
		w("%s: the connector's own share of the latency is the difference, %s.", dur(relay.sum.P50), dur(via.sum.P50-relay.sum.P50))
		if face != nil && face.total > 0 {
			w(" The hub's HTTP face alone at 1x1 (hub http (json):\n")
			w("the hub with its server on a WebSocket, no connector, no child) takes %s, %s the backend's: the\n", dur(face.sum.P50), benchlab.FormatRatio(float64(face.sum.P50)/float64(direct.sum.P50)))
			w("rest, %s, is the two hops more (a WebSocket to the connector, a pipe to the child, and back) and the\n", dur(relay.sum.P50-face.sum.P50))
			w("server's own work on stdio.")
		}
		w(" The target, %.1fx the backend's, is %s.\n\n", targetConnectP50, dur(time.Duration(targetConnectP50*float64(direct.sum.P50))))
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n## Where the distance to the floors comes from (issue 28)\n\n" + b.String()
}

// allocs formats allocations per call, or n/a where they were not read.
func allocs(x float64, ok bool) string {
	if !ok {
		return "n/a"
	}
	return benchlab.FormatPerOp(x)
}
