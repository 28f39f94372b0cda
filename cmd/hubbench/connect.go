package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// `hub connect` against its floors (connect.go). A server with one tool,
// echo, is reached three ways by the same lean Streamable HTTP client, in
// alternating rounds. The server is the official Go SDK's (e2e/gosdk's
// benchserver, built from its own module, as most stdio servers are built
// with an SDK), or hubbench's own on pkg/mcp when that cannot be built:
//
//   - served directly over Streamable HTTP by its own SDK: what a client
//     would get without the hub;
//   - through a hub and `hub connect --shared` (no leases: the one client
//     of a round never needs them, and the floor below has none);
//   - through the same hub and a raw relay (-role pipe-relay) that copies
//     WebSocket frames to lines and back, looking at nothing: the floor of
//     the connector's own cost.
//
// Targets: at 1x1, p50 through hub + connector at most 1.3x the backend's
// served directly; the connector's CPU per call at most 1.2x the raw
// relay's, at each shape.

const (
	targetConnectP50 = 1.3 // 1x1 p50 through hub + connector over the backend served directly, at most
	targetConnectCPU = 1.2 // the connector's CPU per call over the raw relay's, at most
)

// Endpoint names of the connector's rows.
const (
	epBackend = "backend direct (http)"
	epConnect = "hub + hub connect (http)"
	epPipe    = "hub + raw pipe relay (http)"
)

var connectShapes = []shape{{1, 1}, {16, 4}}

// connectResult is the connector's rows, one cell per shape: the backend
// first, then the connector, then the raw relay.
type connectResult struct {
	backend string // which server, and why when not the Go SDK's
	cells   [][]*callResult
	// per cell: the connector's p50 over the backend's and its CPU per
	// call over the relay's (medians over the rounds where they are per
	// round)
	p50Ratios, cpuRatios []float64
}

// runConnect measures `hub connect` against its floors on a hub of its own.
func runConnect(ctx context.Context, cfg *config, sup *benchlab.Supervisor, root, tmp, hubBin string, progress func(string)) (*connectResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	res := &connectResult{backend: "the Go SDK's (e2e/gosdk/benchserver)"}
	child := []string{"--", self, "-role", roleStdio}
	direct := []string{self, "-role", roleHTTPServer, "-addr", "127.0.0.1:0"}
	if bin, err := goBuild(ctx, filepath.Join(root, "e2e", "gosdk"), "./benchserver", filepath.Join(tmp, "benchserver")); err == nil {
		child = []string{"--", bin}
		direct = []string{bin, "-http", "127.0.0.1:0"}
	} else {
		res.backend = "hubbench's own on pkg/mcp (-role " + roleStdio + "): the Go SDK's benchserver did not build: " + firstLine(err.Error())
	}
	backend, backendAddr, err := sup.Start(ctx, "backend (http)", direct, nil, roleReady)
	if err != nil {
		return nil, err
	}
	h, err := startHub(ctx, sup, "hub (connect)", hubBin, "")
	if err != nil {
		return nil, err
	}
	conn, _, err := sup.Start(ctx, "hub connect", append([]string{hubBin, "connect", "--hub", h.ws(""), "--name", "conn",
		"--shared", "--log-level", "warn"}, child...), nil, nil)
	if err != nil {
		return nil, err
	}
	pipe, _, err := startRole(ctx, sup, "raw pipe relay", append([]string{"-role", rolePipe, "-url", h.ws("/mcp/server?name=pipe")}, child...)...)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"conn", "pipe"} {
		if err := waitReplicas(ctx, h, name, 1); err != nil {
			return nil, err
		}
	}
	pl := payloads[0]
	eps := []*endpoint{
		{name: epBackend, dial: func(json.RawMessage) dialer {
			return leanHTTPDialer{url: "http://" + backendAddr + "/mcp", params: toolParams("echo", pl.size)}
		}, pids: []int{backend.PID()}, stats: []*statsSource{findStats(ctx, backendAddr)}},
		{name: epConnect, dial: func(json.RawMessage) dialer {
			return leanHTTPDialer{url: h.http("/mcp"), params: toolParams("conn__echo", pl.size)}
		}, pids: []int{conn.PID()}, stats: []*statsSource{nil}},
		{name: epPipe, dial: func(json.RawMessage) dialer {
			return leanHTTPDialer{url: h.http("/mcp"), params: toolParams("pipe__echo", pl.size)}
		}, pids: []int{pipe.PID()}, stats: []*statsSource{nil}},
	}
	for _, sh := range connectShapes {
		cell, err := runCell(ctx, withRounds(cfg, 3), eps, sh, pl, sup.CPUByProcess, progress)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sh, err)
		}
		res.cells = append(res.cells, cell)
		base, via, floor := cell[0], cell[1], cell[2]
		var p50s []float64
		for i := range min(len(base.rounds), len(via.rounds)) {
			if base.rounds[i].P50 > 0 {
				p50s = append(p50s, float64(via.rounds[i].P50)/float64(base.rounds[i].P50))
			}
		}
		res.p50Ratios = append(res.p50Ratios, benchlab.Median(p50s))
		cpu := 0.0
		if f := floor.cpuPerCall(); f > 0 {
			cpu = float64(via.cpuPerCall()) / float64(f)
		}
		res.cpuRatios = append(res.cpuRatios, cpu)
	}
	return res, nil
}

// connectVerdicts are the connector's targets.
func (r *report) connectVerdicts() []verdict {
	if r.connect == nil {
		return nil
	}
	var out []verdict
	for i := range r.connect.cells {
		out = append(out, r.connect.verdicts(i)...)
	}
	return out
}

// verdicts are the targets of cell i.
func (c *connectResult) verdicts(i int) []verdict {
	cell := c.cells[i]
	sh := cell[0].shape
	what := "tools/call " + sh.String() + " 100 B through hub + hub connect"
	var out []verdict
	if sh == (shape{1, 1}) {
		out = append(out, verdict{issue: 28, ok: c.p50Ratios[i] > 0 && c.p50Ratios[i] <= targetConnectP50, what: what,
			figure: "p50 " + benchlab.FormatRatio(c.p50Ratios[i]) + " the backend's served directly over Streamable HTTP",
			goal:   fmt.Sprintf("<= %.1fx", targetConnectP50), short: fmt.Sprintf("p50 <= %.1fx direct", targetConnectP50)})
	}
	return append(out, verdict{issue: 28, ok: c.cpuRatios[i] > 0 && c.cpuRatios[i] <= targetConnectCPU, what: what,
		figure: fmt.Sprintf("the connector's CPU per call %s the raw pipe relay's (%s vs %s)", benchlab.FormatRatio(c.cpuRatios[i]),
			benchlab.FormatDuration(cell[1].cpuPerCall()), benchlab.FormatDuration(cell[2].cpuPerCall())),
		goal: fmt.Sprintf("<= %.1fx", targetConnectCPU), short: fmt.Sprintf("CPU <= %.1fx pipe", targetConnectCPU)})
}

// connectRows adds the connector's rows to the table.
func (r *report) connectRows(t *benchlab.Table) {
	c := r.connect
	if c == nil {
		return
	}
	t.Section("hub connect against its floors: the backend served directly, and a raw pipe relay in the connector's place (same run, alternating rounds)")
	for ci, cell := range c.cells {
		for i, x := range cell {
			target := ""
			if i == 1 {
				target = verdictCell(c.verdicts(ci)...)
			}
			t.Add(x.endpoint, x.shape.String(), x.payload.name, rateCell(x.rate, x.errs),
				benchlab.FormatDuration(x.sum.P50), benchlab.FormatDuration(x.sum.P99), benchlab.FormatDuration(x.sum.P999),
				benchlab.FormatRatio(x.rateRatio), benchlab.FormatRatio(x.p99Ratio),
				benchlab.FormatDuration(x.cpuPerCall()), "", benchlab.FormatDuration(x.allCPUPerCall()), allocsCell(x), "", target)
		}
	}
}

// connectMethod says how the connector's rows were measured.
func (r *report) connectMethod() string {
	if r.connect == nil {
		return ""
	}
	return fmt.Sprintf("- **hub connect against its floors.** A server with one tool, echo, %s, reached by the lean HTTP "+
		"client three ways in alternating rounds: served directly over Streamable HTTP by its own SDK; on stdio through a hub "+
		"and `hub connect --shared`; and on stdio through the same hub and a raw relay (`-role %s`) copying WebSocket frames to "+
		"lines and lines to frames. CPU per call is the connector's (the relay's) process alone, the backend's for the direct "+
		"row; p50 ratios are medians of the per-round ratios.\n", r.connect.backend, rolePipe)
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
