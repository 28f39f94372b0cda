package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// The cost of tracing (tracing.go): calls/s at 64x16 with 100 B of
// arguments through the hub of the base revision (-base, built from `git
// archive`: the hub before tracing, or the last release), through this
// tree's hub with tracing compiled in but off, on with every call sampled,
// and on with 1% of calls sampled, in alternating rounds, each hub with the
// bench server dialing out. The traced hubs export over OTLP/HTTP to a
// local collector, hubbench's -role otlp-sink: it takes every export and
// answers at once, without decoding it (what a collector's receiver costs,
// not what it does next: a backend's work is not the hub's). Each figure
// is a ratio to the base's calls/s in the same round; without a base, to
// the hub with tracing off. The spans the traced hubs exported, and
// dropped, are read from their /metrics afterwards.

var (
	tracingShape   = profiled
	tracingPayload = payload{"100 B", 100}
	tracingRounds  = 5
	// The targets: tracing off, on at 100% and at 1%, against the base.
	tracingTargets = map[string]float64{tracingOff: 0.98, tracingAll: 0.8, tracingSome: 0.95}
)

// The rows of the tracing cost, and the hubs' settings (environment: the
// hub's flags have SWITCHBOARD_* equivalents, which a hub without them
// ignores).
const (
	tracingBase = "base hub"
	tracingOff  = "hub, tracing off"
	tracingAll  = "hub, tracing 100%"
	tracingSome = "hub, tracing 1%"
)

var tracingEnv = map[string][]string{
	tracingOff:  nil,
	tracingAll:  {"SWITCHBOARD_TRACING=true", "OTEL_TRACES_SAMPLER=always_on"},
	tracingSome: {"SWITCHBOARD_TRACING=true", "OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.01"},
}

// tracingResult is the rows of the tracing cost.
type tracingResult struct {
	base   string        // the base revision, or why there is none
	rows   []*callResult // the base hub (when built), then off, 100% and 1%
	spans  map[string]spanCounts
	ratios map[string]float64 // a row's calls/s / the reference's (base, else off)
}

// spanCounts are what a traced hub said of its spans.
type spanCounts struct {
	exported, dropped float64
}

// runTracing measures the cost of tracing: this tree's hub off, on at 100%
// and at 1%, against the hub of base (none when base is "").
func runTracing(ctx context.Context, cfg *config, sup *benchlab.Supervisor, root, hubBin, tmp, base string, progress func(string)) (*tracingResult, error) {
	res := &tracingResult{spans: map[string]spanCounts{}, ratios: map[string]float64{}}
	_, sink, err := startRole(ctx, sup, "otlp sink", "-role", roleOTLPSink, "-addr", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	type hubRow struct {
		name string
		h    *hubRef
	}
	var hubs []hubRow
	res.base = "no -base given"
	if base != "" {
		baseBin, why, err := buildBase(ctx, root, tmp, base)
		if err != nil {
			return nil, err
		}
		res.base = why
		if baseBin != "" {
			b, err := startHub(ctx, sup, "hub (base "+base+")", baseBin, "")
			if err != nil {
				return nil, err
			}
			hubs = append(hubs, hubRow{tracingBase, b})
		}
	}
	for _, name := range []string{tracingOff, tracingAll, tracingSome} {
		env := append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sink, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}, tracingEnv[name]...)
		h, err := startHubEnv(ctx, sup, name, hubBin, "", env)
		if err != nil {
			return nil, err
		}
		hubs = append(hubs, hubRow{name, h})
	}
	var eps []*endpoint
	for _, hr := range hubs {
		if _, _, err := startRole(ctx, sup, "mcp server ("+hr.name+")", "-role", roleMCP, "-url", hr.h.ws("/mcp/server?name=bench")); err != nil {
			return nil, err
		}
		if err := waitListed(ctx, hr.h, toolNames, echoTool); err != nil {
			return nil, err
		}
		eps = append(eps, &endpoint{name: hr.name, dial: func(p json.RawMessage) dialer { return hubDialer{url: hr.h.ws("/mcp"), params: p} },
			pids: pidsOf([]*hubRef{hr.h}), stats: statsOf([]*hubRef{hr.h})})
	}
	if res.rows, err = runCell(ctx, withRounds(cfg, tracingRounds), eps, tracingShape, tracingPayload, sup.CPUByProcess, progress); err != nil {
		return nil, err
	}
	for i, row := range res.rows {
		res.ratios[row.endpoint] = row.rateRatio
		if hubs[i].name == tracingAll || hubs[i].name == tracingSome {
			if res.spans[row.endpoint], err = readSpanCounts(ctx, hubs[i].h); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// readSpanCounts reads a hub's counts of spans exported and dropped.
func readSpanCounts(ctx context.Context, h *hubRef) (spanCounts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.http("/metrics"), nil)
	if err != nil {
		return spanCounts{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return spanCounts{}, fmt.Errorf("%s: /metrics: %w", h.name, err)
	}
	defer resp.Body.Close()
	var c spanCounts
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		switch {
		case err != nil:
		case name == "switchboard_tracing_spans_exported_total":
			c.exported = v
		case strings.HasPrefix(name, "switchboard_tracing_spans_dropped_total{"):
			c.dropped += v
		}
	}
	return c, sc.Err()
}

// otlpSink is the local collector of the traced hubs: it takes every OTLP
// export over HTTP, reads it and answers 200 with an empty response (an
// ExportTraceServiceResponse with nothing to say, as protobuf).
func otlpSink(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// runOTLPSink is the role: the sink on addr until ctx ends.
func runOTLPSink(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return serve(ctx, ln, http.HandlerFunc(otlpSink))
}

// tracingReference is the row the others are held to: the base, else the
// hub with tracing off.
func (t *tracingResult) reference() string {
	if len(t.rows) > 0 && t.rows[0].endpoint == tracingBase {
		return tracingBase
	}
	return tracingOff
}

// tracingVerdict is the target of a row: against the base only (against
// the hub off, tracing off would be held to itself).
func (r *report) tracingVerdict(name string) (verdict, bool) {
	t := r.tracing
	goal, ok := tracingTargets[name]
	if t == nil || !ok || t.reference() != tracingBase {
		return verdict{}, false
	}
	return verdict{issue: 27, ok: t.ratios[name] >= goal,
		what:   "tools/call " + tracingShape.String() + " " + tracingPayload.name + ", " + strings.TrimPrefix(name, "hub, "),
		figure: benchlab.FormatRatio(t.ratios[name]) + " the base hub's calls/s (" + t.base + ")",
		goal:   fmt.Sprintf(">= %.2fx", goal), short: fmt.Sprintf("ops/s >= %.2fx base", goal)}, true
}

// tracingVerdicts are the targets of the tracing cost.
func (r *report) tracingVerdicts() []verdict {
	var out []verdict
	for _, name := range []string{tracingOff, tracingAll, tracingSome} {
		if v, ok := r.tracingVerdict(name); ok {
			out = append(out, v)
		}
	}
	return out
}

// tracingRows adds the rows of the tracing cost to the table.
func (r *report) tracingRows(t *benchlab.Table) {
	tr := r.tracing
	if tr == nil {
		return
	}
	t.Section("the cost of tracing: this tree's hub off, on at 100% and at 1% (OTLP/HTTP to a local sink), against the base's (same run, alternating rounds)")
	for _, c := range tr.rows {
		target := ""
		if v, ok := r.tracingVerdict(c.endpoint); ok {
			target = verdictCell(v)
		} else if c.endpoint != tr.reference() {
			target = "vs " + tr.reference() + " " + benchlab.FormatRatio(tr.ratios[c.endpoint])
		}
		addCallRow(t, c, target)
	}
}

// tracingMethod says how the rows were measured, for the report.
func (r *report) tracingMethod() string {
	t := r.tracing
	if t == nil {
		return ""
	}
	s := fmt.Sprintf("**The cost of tracing.** The hub of this tree three times, tracing off, on with every call sampled "+
		"(`OTEL_TRACES_SAMPLER=always_on`) and on with 1%% of calls sampled (`traceidratio`, 0.01), the traced ones exporting "+
		"over OTLP/HTTP to a local sink that takes each export and answers at once (`-role %s`), beside the %s; each with the "+
		"bench server dialing out, at %s %s in %d alternating rounds; ratios to %s's calls/s.", roleOTLPSink, t.base,
		tracingShape, tracingPayload.name, len(t.rows[0].rates), t.reference())
	for _, c := range t.rows[1:] {
		s += fmt.Sprintf(" %s, per round: %s.", c.endpoint, fmtRatios(c.ratios))
	}
	for _, name := range []string{tracingAll, tracingSome} {
		if c, ok := t.spans[name]; ok {
			s += fmt.Sprintf(" %s: %.0f spans exported, %.0f dropped.", name, c.exported, c.dropped)
		}
	}
	return s + "\n"
}
