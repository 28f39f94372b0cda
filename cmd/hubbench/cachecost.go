package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// Lists a client may cache (cachecost.go): the TypeScript SDK's 2026-07-28
// client (pinned in e2e/package.json, run by e2e/bench/cachecalls.mjs)
// lists the tools before each call, as agents do, and listens for the
// tools' changes; its response cache answers a list the hub said was
// fresh (ttlMs) without a round trip. Measured against two hubs in
// alternating rounds: one that promises no freshness (--list-ttl=-1s,
// ttlMs 0: every list goes to the hub, as before), and one with the
// default list TTL. Target: more calls/s with the TTL than without.

const (
	cacheWorkers = 4 // clients, one call at a time each
	cacheRounds  = 3
)

// cacheResult is the caching client's calls/s against each hub.
type cacheResult struct {
	before, after []float64 // calls/s per round
	listsBefore   float64   // tools/list round trips per call
	listsAfter    float64
	ratio         float64 // median of after/before per round
	why           string  // why it was not measured ("" when it was)
}

// cacheOutcome is what cachecalls.mjs prints.
type cacheOutcome struct {
	Calls   float64 `json:"calls"`
	Lists   float64 `json:"lists"`
	Seconds float64 `json:"seconds"`
}

// runCache measures the caching client before and after the list TTL.
func runCache(ctx context.Context, cfg *config, sup *benchlab.Supervisor, root, hubBin string, progress func(string)) (*cacheResult, error) {
	script := filepath.Join(root, "e2e", "bench", "cachecalls.mjs")
	if why := missingNode(root, "e2e", "@modelcontextprotocol/client"); why != "" {
		return &cacheResult{why: why}, nil
	}
	hubs := make([]*hubRef, 2)
	for i, extra := range [][]string{{"--list-ttl=-1s"}, nil} {
		name := []string{"hub (ttlMs 0)", "hub (list TTL)"}[i]
		h, err := startHub(ctx, sup, name, hubBin, "", extra...)
		if err != nil {
			return nil, err
		}
		if _, _, err := startRole(ctx, sup, "mcp server ("+name+")", "-role", roleMCP, "-url", h.ws("/mcp/server?name=bench")); err != nil {
			return nil, err
		}
		if err := waitListed(ctx, h, toolNames, echoTool); err != nil {
			return nil, err
		}
		hubs[i] = h
	}
	secs := max(2*cfg.round.Seconds(), 2) // the clients' own warm-up (the JIT) is in the window
	res := &cacheResult{}
	var lists, calls [2]float64
	for round := range max(cfg.rounds, cacheRounds) {
		var rates [2]float64
		for k := range 2 {
			i := (round + k) % 2 // the first alternates
			progress(fmt.Sprintf("caching client, %s, round %d", hubs[i].name, round+1))
			out, err := runCacheClient(ctx, script, hubs[i].http("/mcp"), secs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", hubs[i].name, err)
			}
			rates[i] = out.Calls / out.Seconds
			lists[i] += out.Lists
			calls[i] += out.Calls
		}
		res.before = append(res.before, rates[0])
		res.after = append(res.after, rates[1])
	}
	res.ratio = medianRatio(res.after, res.before)
	if calls[0] > 0 && calls[1] > 0 {
		res.listsBefore, res.listsAfter = lists[0]/calls[0], lists[1]/calls[1]
	}
	return res, nil
}

// runCacheClient runs the caching clients for secs seconds.
func runCacheClient(ctx context.Context, script, url string, secs float64) (*cacheOutcome, error) {
	cmd := exec.CommandContext(ctx, "node", script, url, echoTool, strconv.FormatFloat(secs, 'f', 1, 64), strconv.Itoa(cacheWorkers))
	cmd.Dir = filepath.Dir(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w: %s", filepath.Base(script), err, bytes.TrimSpace(stderr.Bytes()))
	}
	var out cacheOutcome
	if err := json.Unmarshal(bytes.TrimSpace(b), &out); err != nil || out.Seconds <= 0 {
		return nil, errors.Join(fmt.Errorf("node %s printed %q", filepath.Base(script), b), err)
	}
	return &out, nil
}

// cacheVerdict is the target of cacheable lists.
func (r *report) cacheVerdict() (verdict, bool) {
	c := r.cache
	if c == nil {
		return verdict{}, false
	}
	v := verdict{issue: 28, what: "a caching 2026-07-28 client (TypeScript SDK) listing the tools before each call", goal: "> 1x",
		short: "ops/s > 1x ttlMs 0"}
	if c.why != "" {
		v.figure = "not measured: " + c.why
		return v, true
	}
	v.ok = c.ratio > 1
	v.figure = fmt.Sprintf("%s the calls/s it makes when every list has ttlMs 0 (tools/list round trips per call: %.2f, before %.2f)",
		benchlab.FormatRatio(c.ratio), c.listsAfter, c.listsBefore)
	return v, true
}

// cacheRows adds the caching client's rows to the table.
func (r *report) cacheRows(t *benchlab.Table) {
	c := r.cache
	if c == nil || c.why != "" {
		return
	}
	t.Section(fmt.Sprintf("a caching 2026-07-28 client (TypeScript SDK, %d clients, one call at a time each, tools/list before each call; same run, alternating rounds)", cacheWorkers))
	v, _ := r.cacheVerdict()
	t.Add("hub, lists with ttlMs 0", fmt.Sprintf("%dx1", cacheWorkers), "100 B", rateCell(benchlab.Median(c.before), 0),
		"", "", "", "", "", "", "", "", "", "", fmt.Sprintf("%.2f lists/call", c.listsBefore))
	t.Add("hub, lists with the list TTL", fmt.Sprintf("%dx1", cacheWorkers), "100 B", rateCell(benchlab.Median(c.after), 0),
		"", "", "", benchlab.FormatRatio(c.ratio), "", "", "", "", "", "", fmt.Sprintf("%.2f lists/call; %s", c.listsAfter, verdictCell(v)))
}

// cacheMethod says how the caching client was measured.
func (r *report) cacheMethod() string {
	c := r.cache
	if c == nil {
		return ""
	}
	if c.why != "" {
		return "- **Caching client.** Not measured: " + c.why + ".\n"
	}
	return fmt.Sprintf("- **Caching client.** `e2e/bench/cachecalls.mjs`: %d clients of the TypeScript SDK "+
		"(`@modelcontextprotocol/client`, pinned in e2e/package.json), pinned to 2026-07-28, each listening for the tools' "+
		"changes (its listChanged option opens subscriptions/listen) and calling listTools() then callTool() in a loop, "+
		"against a hub with `--list-ttl=-1s` (every list ttlMs 0) and one with the default TTL, in %d alternating rounds; "+
		"the ratio is the median of the per-round ratios (%s).\n", cacheWorkers, len(c.before), fmtRatios(ratios(c.after, c.before)))
}

// missingNode says why a part run under node cannot run: node is not on
// PATH, or the npm package pkg is not installed in dir (from root); ""
// when both are there. make deps installs them.
func missingNode(root, dir, pkg string) string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not on PATH: run make deps"
	}
	if _, err := os.Stat(filepath.Join(root, dir, "node_modules", filepath.FromSlash(pkg), "package.json")); err != nil {
		return dir + "/node_modules has no " + pkg + ": run make deps"
	}
	return ""
}

// ratios is a[i] / b[i].
func ratios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}
