package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// The catalog's costs (catalog.go; -catalog-only runs them alone): tool
// search over 10,000 tools (p50 at most 1 ms, p99 at most 5 ms) and a
// server of 500 tools joining them (its index update, at most 50 ms at
// p50 and p99), measured by internal/search's own benchmarks on the
// corpus of real servers' tools; and a call through a virtual server
// against the same call through the member's own endpoint, on one hub in
// alternating rounds: the virtual server may cost at most 1.05x, that is
// keep at least 1/1.05 of the per-server calls/s.

var (
	catalogShape   = shape{16, 4}
	catalogPayload = payload{"100 B", 100}
	catalogTarget  = 1 / 1.05
	catalogRounds  = 5
)

const (
	epPerServer = "per-server endpoint"
	epVirtual   = "virtual server"
)

// catalogResult is the catalog's figures.
type catalogResult struct {
	search, join [2]float64 // p50, p99 in ms
	calls        []*callResult
	ratio        float64 // the virtual server's calls/s / the per-server endpoint's, median of rounds
}

// runCatalog measures the catalog's costs.
func runCatalog(ctx context.Context, cfg *config, sup *benchlab.Supervisor, root, hubBin, tmp string, progress func(string)) (*catalogResult, error) {
	res := &catalogResult{}
	progress("catalog: internal/search's benchmarks (10,000 tools)")
	if err := res.searchBenchmarks(ctx, root, cfg.quick); err != nil {
		return nil, err
	}
	file := filepath.Join(tmp, "catalog.yaml")
	if err := os.WriteFile(file, []byte("virtualServers:\n  - name: curated\n    tools: [{server: bench, tool: echo, as: reply, description: \"Echoes.\"}]\n"), 0o644); err != nil {
		return nil, err
	}
	h, err := startHub(ctx, sup, "hub (catalog)", hubBin, "", "--catalog", file)
	if err != nil {
		return nil, err
	}
	if _, _, err := startRole(ctx, sup, "mcp server (catalog)", "-role", roleMCP, "-url", h.ws("/mcp/server?name=bench")); err != nil {
		return nil, err
	}
	if err := waitListed(ctx, h, toolNames, echoTool); err != nil {
		return nil, err
	}
	eps := []*endpoint{
		{name: epPerServer, dial: func(json.RawMessage) dialer {
			return hubDialer{url: h.ws("/servers/bench/mcp"), params: toolParams("echo", catalogPayload.size)}
		}, pids: pidsOf([]*hubRef{h}), stats: statsOf([]*hubRef{h})},
		{name: epVirtual, dial: func(json.RawMessage) dialer {
			return hubDialer{url: h.ws("/servers/curated/mcp"), params: toolParams("reply", catalogPayload.size)}
		}, pids: pidsOf([]*hubRef{h}), stats: statsOf([]*hubRef{h})},
	}
	res.calls, err = runCell(ctx, withRounds(cfg, catalogRounds), eps, catalogShape, catalogPayload, sup.CPUByProcess, progress)
	if err != nil {
		return nil, err
	}
	res.ratio = res.calls[1].rateRatio
	return res, nil
}

// benchLine is a line of `go test -bench` output with the figures the
// search benchmarks report; failLine and missLine, those of one that
// missed its target (it reports its figures in its error instead).
var (
	benchLine = regexp.MustCompile(`^Benchmark(Search|ServerJoins)-?\d*\s.*?([\d.]+) p50-ms\s+([\d.]+) p99-ms`)
	failLine  = regexp.MustCompile(`^--- FAIL: Benchmark(Search|ServerJoins)\b`)
	missLine  = regexp.MustCompile(`p50 ([\d.]+) ms \(target [\d.]+\), p99 ([\d.]+) ms`)
)

// searchBenchmarks runs BenchmarkSearch and BenchmarkServerJoins of
// internal/search and reads their percentiles.
func (res *catalogResult) searchBenchmarks(ctx context.Context, root string, quick bool) error {
	benchtime := "3s"
	if quick {
		benchtime = "1s"
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^(BenchmarkSearch|BenchmarkServerJoins)$",
		"-benchtime", benchtime, "./internal/search")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	found, failed := 0, ""
	set := func(name, p50s, p99s string) {
		p50, _ := strconv.ParseFloat(p50s, 64)
		p99, _ := strconv.ParseFloat(p99s, 64)
		if name == "Search" {
			res.search = [2]float64{p50, p99}
		} else {
			res.join = [2]float64{p50, p99}
		}
		found++
	}
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	for sc.Scan() {
		line := sc.Text()
		if m := benchLine.FindStringSubmatch(line); m != nil {
			set(m[1], m[2], m[3])
		} else if m := failLine.FindStringSubmatch(line); m != nil {
			failed = m[1]
		} else if m := missLine.FindStringSubmatch(line); m != nil && failed != "" {
			set(failed, m[1], m[2])
			failed = ""
		}
	}
	if found < 2 {
		return fmt.Errorf("internal/search's benchmarks (%v): %s", err, out.String())
	}
	return nil // a benchmark past its target fails the go test run: the verdicts say so
}

// verdicts are the catalog's targets.
func (res *catalogResult) verdicts() []verdict {
	ms := func(v [2]float64) string { return fmt.Sprintf("p50 %.2f ms, p99 %.2f ms", v[0], v[1]) }
	return []verdict{
		{issue: 25, ok: res.search[0] <= 1 && res.search[1] <= 5, what: "tool search over 10,000 tools",
			figure: ms(res.search), goal: "p50 <= 1 ms, p99 <= 5 ms", short: "search"},
		{issue: 25, ok: res.join[0] <= 50 && res.join[1] <= 50, what: "a server of 500 tools joins the index",
			figure: ms(res.join), goal: "<= 50 ms", short: "join"},
		{issue: 25, ok: res.ratio >= catalogTarget, what: "a call through a virtual server",
			figure: fmt.Sprintf("%.3fx the per-server endpoint's calls/s (cost %.3fx)", res.ratio, 1/res.ratio),
			goal:   fmt.Sprintf("cost <= 1.05x (calls/s >= %.3fx)", catalogTarget), short: "virtual"},
	}
}

// print writes the catalog's figures and verdicts.
func (res *catalogResult) print(w io.Writer) {
	for _, c := range res.calls {
		fmt.Fprintf(w, "%-20s %s %s: %s calls, p50 %v, p99 %v\n", c.endpoint, c.shape, c.payload.name,
			benchlab.FormatRate(c.rate), c.sum.P50, c.sum.P99)
	}
	for _, v := range res.verdicts() {
		fmt.Fprintln(w, "  "+v.String())
	}
}
