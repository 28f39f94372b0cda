package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Connector pools (pools.go). A stdio server behind `hub connect` cannot
// name the call its requests to clients serve, so the hub leases each of
// its children to one client at a time: measured here are calls/s through
// `hub connect` to one child, to a pool of N children, and to one child
// with --shared (no leases: what a stdio server cost before leases), at
// 16x4, in alternating rounds, the child being hubbench's own MCP server on
// stdio (-role stdio-server). Then the cost of leases for a server that
// names its calls (never leased): the hub of this tree against the hub of
// the commit where this tree left a base revision (-base, default main,
// built from `git archive`), each with the bench
// server dialing out, at 64x16 in alternating rounds: this tree's calls/s
// must stay at least 0.97x the base's.

var (
	poolShape    = shape{16, 4}
	poolPayload  = payload{"100 B", 100}
	leaseShape   = profiled
	leaseTarget  = 0.97
	poolServers  = []string{"one", "pool", "shared"}
	poolRoundMin = 3
	leaseRounds  = 5
)

// poolsResult is the rows of the connector pools.
type poolsResult struct {
	n         int           // children in the pool
	rows      []*callResult // one child, a pool of n, one child shared
	base      string        // the base revision of the lease cost, or why there is none
	lease     []*callResult // the base hub, this tree's hub; nil without a base
	ratios    []float64     // this tree / base, per round
	ratio     float64
	poolRatio float64 // the pool's calls/s / one child's
}

// withRounds is cfg with at least n rounds: the pools' ratios are medians.
func withRounds(cfg *config, n int) *config {
	c := *cfg
	c.rounds = max(c.rounds, n)
	return &c
}

// runPools measures the connector pools against a hub of their own, and
// the cost of leases against the hub of base (none when base is "").
func runPools(ctx context.Context, cfg *config, sup *benchlab.Supervisor, root, hubBin, tmp, base string, n int, progress func(string)) (*poolsResult, error) {
	res := &poolsResult{n: n}
	h, err := startHub(ctx, sup, "hub (pools)", hubBin, "")
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	child := []string{"--", self, "-role", roleStdio}
	for _, name := range poolServers {
		argv := []string{hubBin, "connect", "--hub", h.ws(""), "--name", name, "--log-level", "warn"}
		switch name {
		case "pool":
			argv = append(argv, "--pool", strconv.Itoa(n))
		case "shared":
			argv = append(argv, "--shared")
		}
		if _, _, err := sup.Start(ctx, "hub connect ("+name+")", append(argv, child...), nil, nil); err != nil {
			return nil, err
		}
	}
	for _, name := range poolServers {
		want := map[string]int{"pool": n}[name]
		if err := waitReplicas(ctx, h, name, max(want, 1)); err != nil {
			return nil, err
		}
	}
	var eps []*endpoint
	for _, name := range poolServers {
		params := toolParams(name+"__echo", poolPayload.size)
		eps = append(eps, &endpoint{name: map[string]string{"one": "hub connect, 1 child", "pool": fmt.Sprintf("hub connect, pool of %d", n),
			"shared": "hub connect, 1 child --shared"}[name],
			dial: func(json.RawMessage) dialer { return hubDialer{url: h.ws("/mcp"), params: params} },
			pids: pidsOf([]*hubRef{h}), stats: statsOf([]*hubRef{h})})
	}
	if res.rows, err = runCell(ctx, withRounds(cfg, poolRoundMin), eps, poolShape, poolPayload, nil, progress); err != nil {
		return nil, err
	}
	res.poolRatio = res.rows[1].rateRatio

	if base == "" {
		res.base = "no -base given"
		return res, nil
	}
	baseBin, why, err := buildBase(ctx, root, tmp, base)
	if err != nil {
		return nil, err
	}
	if baseBin == "" {
		res.base = why
		return res, nil
	}
	res.base = why
	b, err := startHub(ctx, sup, "hub (base "+base+")", baseBin, "")
	if err != nil {
		return nil, err
	}
	eps = nil
	for _, hr := range []*hubRef{b, h} {
		if _, _, err := startRole(ctx, sup, "mcp server ("+hr.name+")", "-role", roleMCP, "-url", hr.ws("/mcp/server?name=bench")); err != nil {
			return nil, err
		}
		if err := waitListed(ctx, hr, toolNames, echoTool); err != nil {
			return nil, err
		}
		name := "hub, tagged server"
		if hr == b {
			name = "base hub, tagged server"
		}
		eps = append(eps, &endpoint{name: name, dial: func(p json.RawMessage) dialer { return hubDialer{url: hr.ws("/mcp"), params: p} },
			pids: pidsOf([]*hubRef{hr}), stats: statsOf([]*hubRef{hr})})
	}
	if res.lease, err = runCell(ctx, withRounds(cfg, leaseRounds), eps, leaseShape, poolPayload, nil, progress); err != nil {
		return nil, err
	}
	res.ratio, res.ratios = res.lease[1].rateRatio, res.lease[1].ratios
	return res, nil
}

// buildBase builds ./cmd/hub of the commit where this tree left rev (their
// merge base, from `git archive`) into tmp. It returns "" and why when there
// is nothing to compare: this tree's commit is on rev.
func buildBase(ctx context.Context, root, tmp, rev string) (bin, why string, err error) {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	// Where this tree left rev: what it changed, and nothing rev gained
	// since, is measured.
	commit, err := git("merge-base", "HEAD", rev)
	if err != nil {
		return "", "", fmt.Errorf("-base %s: no common ancestor with this tree's HEAD: %w", rev, err)
	}
	head, _ := git("rev-parse", "HEAD")
	if commit == head {
		return "", fmt.Sprintf("this tree's commit is on %s: nothing to compare (give -base an older revision)", rev), nil
	}
	why = fmt.Sprintf("base %s, %s", commit[:min(len(commit), 10)], "where this tree left "+rev)
	if bin = filepath.Join(tmp, "base-bin", "hub"); fileExists(bin) {
		return bin, why, nil // built already, for another measurement of this run
	}
	dir := filepath.Join(tmp, "base")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", "", err
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		return "", "", err
	}
	if err := errors.Join(archive.Run(), untar.Wait()); err != nil {
		return "", "", fmt.Errorf("extracting %s: %w", rev, err)
	}
	bin, err = buildHub(ctx, dir, filepath.Join(tmp, "base-bin"))
	if err != nil {
		return "", "", err
	}
	return bin, why, nil
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// waitReplicas waits until h lists server with at least n replicas.
func waitReplicas(ctx context.Context, h *hubRef, server string, n int) error {
	c, err := mcp.Connect(ctx, h.ws("/mcp"), &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion, WebSocket: noKeepalive})
	if err != nil {
		return fmt.Errorf("%s: %w", h.name, err)
	}
	defer c.Close()
	return benchlab.Poll(ctx, h.c, func() error {
		res, err := c.ReadResource(ctx, "switchboard://servers")
		if err != nil {
			return err
		}
		var doc struct {
			Servers []struct {
				Name     string            `json:"name"`
				Replicas []json.RawMessage `json:"replicas"`
			} `json:"servers"`
		}
		if len(res.Contents) == 0 || json.Unmarshal([]byte(res.Contents[0].Text), &doc) != nil {
			return errors.New("switchboard://servers unreadable")
		}
		for _, s := range doc.Servers {
			if s.Name == server && len(s.Replicas) >= n {
				return nil
			}
		}
		return fmt.Errorf("%s has not %d replicas of %s yet", h.name, n, server)
	})
}

// poolVerdict is the target of the lease cost.
func (r *report) poolVerdict() (verdict, bool) {
	p := r.pools
	if p == nil || p.lease == nil {
		return verdict{}, false
	}
	return verdict{issue: 21, ok: p.ratio >= leaseTarget, what: "tools/call " + leaseShape.String() + " to a server that names its calls",
		figure: benchlab.FormatRatio(p.ratio) + " the base hub's calls/s (" + p.base + ")", goal: fmt.Sprintf(">= %.2fx", leaseTarget),
		short: fmt.Sprintf("ops/s >= %.2fx base", leaseTarget)}, true
}

// poolRows adds the pools' rows to the table.
func (r *report) poolRows(t *benchlab.Table) {
	p := r.pools
	if p == nil {
		return
	}
	t.Section("hub connect: a stdio server, its children leased to one client at a time (same run, alternating rounds)")
	for i, c := range p.rows {
		target := ""
		if i == 1 {
			target = fmt.Sprintf("vs 1 child %s", benchlab.FormatRatio(p.poolRatio))
		}
		addCallRow(t, c, target)
	}
	if p.lease == nil {
		return
	}
	t.Section("the cost of leases to a server that names its calls: this tree's hub against the base's (same run, alternating rounds)")
	v, _ := r.poolVerdict()
	for i, c := range p.lease {
		target := ""
		if i == 1 {
			target = verdictCell(v)
		}
		addCallRow(t, c, target)
	}
}

// addCallRow adds a row of calls measured beside others (no ratio to the
// raw echo, no floor): its rate, latencies, CPU and allocations per call,
// and target.
func addCallRow(t *benchlab.Table, c *callResult, target string) {
	allCPU := ""
	if d := c.allCPUPerCall(); d > 0 {
		allCPU = benchlab.FormatDuration(d)
	}
	t.Add(c.endpoint, c.shape.String(), c.payload.name, rateCell(c.rate, c.errs),
		benchlab.FormatDuration(c.sum.P50), benchlab.FormatDuration(c.sum.P99), benchlab.FormatDuration(c.sum.P999), "", "",
		benchlab.FormatDuration(c.cpuPerCall()), "", allCPU, allocsCell(c), "", target)
}

func allocsCell(c *callResult) string {
	if a, ok := c.allocsPerCall(); ok {
		return benchlab.FormatPerOp(a)
	}
	return "n/a"
}

// poolsMethod says how the pools' rows were measured, for the report.
func (r *report) poolsMethod() string {
	p := r.pools
	if p == nil {
		return ""
	}
	s := fmt.Sprintf("**Connector pools.** `hub connect` runs hubbench's MCP server on stdio (`-role %s`) behind a hub of "+
		"its own, three ways: one child, whose calls the hub leases to one client at a time; `--pool %d`; and one child with "+
		"`--shared` (no leases, what a stdio server cost before them, when its requests to clients failed with several "+
		"clients). %d connections with %d calls in flight each, %s of arguments, the three in alternating rounds; the pool's "+
		"calls/s are %s one child's.", roleStdio, p.n, poolShape.conns, poolShape.inflight, poolPayload.name, benchlab.FormatRatio(p.poolRatio))
	if p.lease == nil {
		return s + " The cost of leases was not measured: " + p.base + ".\n"
	}
	return s + fmt.Sprintf(" The cost of leases to a server that names its calls (it is never leased): the hub of this tree "+
		"and the hub of the %s, each with the bench server dialing out, at %s in %d alternating rounds: this tree's calls/s "+
		"are %s the base's (per round: %s).\n", p.base, leaseShape, len(p.ratios), benchlab.FormatRatio(p.ratio), fmtRatios(p.ratios))
}

// fmtRatios lists ratios for the report.
func fmtRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = benchlab.FormatRatio(x)
	}
	return strings.Join(parts, ", ")
}
