package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := dispatch(ctx, os.Args[1:])
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "hubbench: interrupted")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "hubbench:", err)
		os.Exit(1)
	}
}

// dispatch runs a hidden role when the first argument is -role, else the
// benchmark suite.
func dispatch(ctx context.Context, args []string) error {
	if len(args) > 0 && (args[0] == "-role" || args[0] == "--role") {
		var f roleFlags
		var role string
		fs := flag.NewFlagSet("hubbench role", flag.ContinueOnError)
		fs.StringVar(&role, "role", "", "")
		fs.StringVar(&f.addr, "addr", "127.0.0.1:0", "")
		fs.StringVar(&f.url, "url", "", "")
		fs.StringVar(&f.redis, "redis", "", "")
		if err := fs.Parse(args); err != nil {
			return err
		}
		f.args = fs.Args()
		err := runRole(ctx, role, f)
		if ctx.Err() != nil {
			return nil // told to stop
		}
		return err
	}
	o, err := parseOptions(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	return run(ctx, o, os.Stdout, os.Stderr)
}

// options are hubbench's flags.
type options struct {
	quick   bool
	hub     string // hub binary; empty builds ./cmd/hub
	out     string // Markdown report; "-" for none
	profile string // "auto", "off" or a directory
	servers int    // MCP server processes behind each hub
	// profileOnly takes the profiles and nothing else, for work on the hub;
	// fanoutOnly measures the fan-out and idle connections only, idleOnly
	// idle connections only.
	profileOnly, fanoutOnly, idleOnly bool
	// idlePeaks samples the goroutines of the idle processes while their
	// clients connect.
	idlePeaks bool
	// poolsOnly measures the connector pools only; pool is the children of
	// the pool measured, base the revision whose hub the cost of leases is
	// measured against ("" for none).
	poolsOnly bool
	pool      int
	base      string
	// catalogOnly measures the catalog's costs only (catalog.go).
	catalogOnly bool
	// tracingOnly measures the cost of tracing only (against base too).
	tracingOnly bool
	// connectOnly measures `hub connect` against its floors only,
	// cacheOnly the caching client only, and httpOnly the Streamable HTTP
	// rows (100 B, 1x1 and 64x16) with their WebSocket and net/http floors.
	connectOnly, cacheOnly, httpOnly bool
	// authOnly measures the cost of access tokens only (authcost.go).
	authOnly bool
	// calls, when set, measures the calls of these cells only
	// ("1x1/100B,64x16/16KiB"), and paths, when set, only these paths
	// beside the raw echo (their names, comma-separated).
	calls, paths string
	// profileShape is the load the profiles are taken under.
	profileShape string
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("hubbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./cmd/hubbench [-quick] [-hub bin/hub] [-out docs/benchmarks.md] [-profile auto|off|DIR] [-servers N]")
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.quick, "quick", false, "smaller counts and shorter rounds: under a minute")
	fs.StringVar(&o.hub, "hub", "", "hub binary to measure; empty builds ./cmd/hub of this tree into a temporary directory")
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "Markdown report, relative to the module root; - for none")
	fs.StringVar(&o.profile, "profile", "auto", "CPU profiles of the hub at 64x16: auto (when its throughput target is missed, full runs only), off, or a directory to always write them to; with -idle-only, a directory for the heap profiles of idle hubs (their twins)")
	fs.BoolVar(&o.fanoutOnly, "fanout-only", false, "measure the fan-out and idle connections only, print the table and write no report")
	fs.BoolVar(&o.idleOnly, "idle-only", false, "measure idle connections only (a bare coder/websocket server, the hub's WebSocket clients and HTTP sessions), print the table and write no report")
	fs.BoolVar(&o.idlePeaks, "idle-peaks", false, "with -idle-only: also read each process's goroutines and stacks while its clients connect (each read is a scrape it answers), and report their peaks")
	fs.BoolVar(&o.profileOnly, "profile-only", false, "take the CPU profiles only (into -profile DIR, else a temporary directory), print their summaries and write no report")
	fs.IntVar(&o.servers, "servers", 1, "MCP server processes behind each hub path, replicas of one server that the hub spreads calls over")
	fs.StringVar(&o.calls, "calls", "", "measure the calls of these cells only, SHAPE/PAYLOAD comma-separated (1x1/100B,64x16/16KiB), print the table and write no report")
	fs.StringVar(&o.paths, "paths", "", "with -calls: the paths measured beside the raw echo, by name, comma-separated (hub,hub x2 (redis),redis publish -> sub)")
	fs.StringVar(&o.profileShape, "profile-shape", profiled.String(), "the shape of the load the CPU profiles are taken under (1x1, 16x1, 64x16); with -paths, only those paths are profiled")
	fs.BoolVar(&o.poolsOnly, "pools-only", false, "measure the connector pools (hub connect: one child, a pool, --shared) and the cost of leases only, print the table and write no report")
	fs.BoolVar(&o.catalogOnly, "catalog-only", false, "measure the catalog's costs only (tool search over 10,000 tools, a server of 500 joining the index, a call through a virtual server against the per-server endpoint), print them and write no report")
	fs.IntVar(&o.pool, "pool", 8, "children of the connector pool measured")
	fs.BoolVar(&o.connectOnly, "connect-only", false, "measure hub connect against its floors only (the backend served directly, a raw pipe relay), print the table and write no report")
	fs.BoolVar(&o.cacheOnly, "cache-only", false, "measure the caching TypeScript client's calls/s with and without the list TTL only (needs make deps), print the table and write no report")
	fs.BoolVar(&o.authOnly, "auth-only", false, "measure the cost of access tokens only (pkg/hub's BenchmarkStreamableCallAuth and BenchmarkAuthenticateWarm against oidc-provider; needs make deps), print the table and write no report")
	fs.BoolVar(&o.httpOnly, "http-only", false, "measure the Streamable HTTP rows (100 B, 1x1 and 64x16) beside their WebSocket and net/http floors only, print the table and write no report")
	fs.StringVar(&o.base, "base", "main", "git revision whose hub the cost of leases and of tracing is measured against (built from git archive); empty for none")
	fs.BoolVar(&o.tracingOnly, "tracing-only", false, "measure the cost of tracing only (this tree's hub off, on at 100% and at 1%, against the base's), print the table and write no report")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.calls != "" {
		if err := o.selectCells(); err != nil {
			return nil, err
		}
	}
	if o.fanoutOnly || o.poolsOnly || o.catalogOnly || o.tracingOnly || o.connectOnly || o.cacheOnly || o.authOnly || o.httpOnly || o.idleOnly || o.calls != "" {
		o.out = "-"
		if !o.idleOnly || o.profile == "auto" {
			o.profile = "off" // -idle-only -profile DIR profiles the idle hubs' twins
		}
	}
	if o.pool < 1 {
		return nil, errors.New("-pool must be at least 1")
	}
	if o.servers < 1 {
		return nil, errors.New("-servers must be at least 1")
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return &o, nil
}

// config is the size of a run.
type config struct {
	quick        bool
	warmup       time.Duration // before each path's rounds
	round        time.Duration
	rounds       int
	shapes       []shape
	payloads     []payload
	fanoutSizes  []int
	fanoutRounds int
	idleConns    int // connections of each idle kind
	churnWorkers int
	churn        time.Duration
	profile      time.Duration
	// For a profile of the fan-out: rounds stop once fanoutUntil has
	// passed since the first measured one, when fanoutStart runs.
	fanoutUntil time.Duration
	fanoutStart func()
	// profilePaths, when set, are the only cases profiled (their path
	// names, or "fan-out").
	profilePaths []string
}

var (
	shapes   = []shape{{1, 1}, {16, 1}, {64, 16}}
	payloads = []payload{{"100 B", 100}, {"16 KiB", 16 << 10}}
	profiled = shape{64, 16} // the shape of the throughput target
)

func newConfig(quick bool) *config {
	if quick {
		return &config{quick: true, warmup: 100 * time.Millisecond, round: 300 * time.Millisecond, rounds: 1,
			shapes: shapes, payloads: payloads, fanoutSizes: []int{1_000}, fanoutRounds: 3, idleConns: 1_000,
			churnWorkers: 8, churn: 500 * time.Millisecond, profile: 2 * time.Second}
	}
	return &config{warmup: 500 * time.Millisecond, round: 1500 * time.Millisecond, rounds: 3,
		shapes: shapes, payloads: payloads, fanoutSizes: []int{1_000, 10_000}, fanoutRounds: 5, idleConns: 10_000,
		churnWorkers: 16, churn: 3 * time.Second, profile: 5 * time.Second}
}

// run runs the suite: starts every process, measures, prints the table and
// writes the report. Whatever happens, every child is stopped and reaped
// before it returns.
func run(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	began := time.Now()
	cfg := newConfig(o.quick)
	progress := func(msg string) {
		fmt.Fprintf(stderr, "hubbench: [%5.1fs] %s\n", time.Since(began).Seconds(), msg)
	}
	rep := &report{cfg: cfg, began: began, command: commandLine(o)}

	// Room for the fan-out's subscribers of a setting and of the raw
	// baseline at once (runFanoutPair), where the machine allows it.
	limit, err := benchlab.RaiseNoFile(uint64(2*slices.Max(cfg.fanoutSizes) + 4096))
	if err != nil {
		return fmt.Errorf("raising the open files limit: %w", err)
	}
	// Each subscriber is a descriptor here and one in the hub; keep room
	// for everything else.
	if maxConns := int(limit) - 1024; maxConns < slices.Max(cfg.fanoutSizes) {
		for i, n := range cfg.fanoutSizes {
			cfg.fanoutSizes[i] = min(n, maxConns)
		}
		cfg.idleConns = min(cfg.idleConns, maxConns)
		rep.notes = append(rep.notes, fmt.Sprintf("the open files limit (%d) caps subscribers and idle connections at %d", limit, maxConns))
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	rep.machine = benchlab.ReadMachine(ctx, root, o.out)
	tmp, err := os.MkdirTemp("", "hubbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	sup := &benchlab.Supervisor{Self: "hubbench (load)"}
	defer sup.StopAll()
	if o.profileOnly {
		return profileOnly(ctx, o, cfg, sup, stdout, progress)
	}

	hubBin := o.hub
	if hubBin == "" {
		progress("building ./cmd/hub")
		if hubBin, err = buildHub(ctx, root, tmp); err != nil {
			return err
		}
	}
	if o.catalogOnly {
		cat, err := runCatalog(ctx, cfg, sup, root, hubBin, tmp, progress)
		if err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		sup.StopAll()
		cat.print(stdout)
		return nil
	}
	if o.poolsOnly || o.tracingOnly || o.connectOnly || o.cacheOnly || o.authOnly || o.idleOnly {
		if o.poolsOnly {
			if rep.pools, err = runPools(ctx, cfg, sup, root, hubBin, tmp, o.base, o.pool, progress); err != nil {
				return fmt.Errorf("connector pools: %w", err)
			}
		}
		if o.tracingOnly {
			if rep.tracing, err = runTracing(ctx, cfg, sup, root, hubBin, tmp, o.base, progress); err != nil {
				return fmt.Errorf("the cost of tracing: %w", err)
			}
		}
		if o.connectOnly {
			if rep.connect, err = runConnect(ctx, cfg, sup, root, tmp, hubBin, progress); err != nil {
				return fmt.Errorf("hub connect: %w", err)
			}
		}
		if o.idleOnly {
			rep.idleDetail = true
			dir := ""
			if o.profile != "auto" && o.profile != "off" {
				dir = o.profile
			}
			if rep.idle, err = runIdle(ctx, sup, hubBin, cfg.idleConns, dir, o.idlePeaks, progress); err != nil {
				return err
			}
		}
		if o.cacheOnly {
			if rep.cache, err = runCache(ctx, cfg, sup, root, hubBin, progress); err != nil {
				return fmt.Errorf("caching client: %w", err)
			}
		}
		if o.authOnly {
			if rep.auth, err = runAuth(ctx, cfg, root, progress); err != nil {
				return fmt.Errorf("access tokens: %w", err)
			}
		}
		sup.StopAll()
		printOnly(stdout, rep)
		for _, m := range []string{rep.tracingMethod(), rep.authMethod()} {
			if m != "" {
				fmt.Fprintln(stdout, m)
			}
		}
		return nil
	}
	env, err := startEnv(ctx, sup, hubBin, tmp, o.servers, progress)
	if err != nil {
		return err
	}
	if env.solo.stats == nil {
		rep.notes = append(rep.notes, "allocations per operation, heap in use and goroutines of bin/hub: it serves neither "+
			"/metrics nor /debug/pprof at this commit; RSS and CPU come from /proc. The hub twin's allocations "+
			"per call at 64x16 are in the profile section when profiles were taken.")
	}

	eps := env.endpoints
	if o.paths != "" {
		eps = selectPaths(eps, o.paths)
	}
	for _, pl := range cfg.payloads {
		for _, sh := range cfg.shapes {
			if o.fanoutOnly || !o.measures(sh, pl) || o.httpOnly && (pl != payloads[0] || sh == shape{16, 1}) {
				continue
			}
			cell, err := runCell(ctx, cfg, eps, sh, pl, sup.CPUByProcess, progress)
			if err != nil {
				return fmt.Errorf("calls %s %s: %w", sh, pl.name, err)
			}
			rep.cells = append(rep.cells, cell)
			for _, c := range cell {
				if c.errs > 0 {
					note := fmt.Sprintf("%s %s %s: %d calls failed; the first: %v", c.endpoint, sh, pl.name, c.errs, c.firstErr)
					progress(note)
					rep.notes = append(rep.notes, note)
				}
			}
		}
	}
	if o.httpOnly || o.calls != "" {
		sup.StopAll()
		printOnly(stdout, rep)
		return nil
	}
	if !o.fanoutOnly {
		if rep.statsCost, err = runStatsCost(ctx, cfg, env.solo, progress); err != nil {
			return fmt.Errorf("traffic statistics' cost: %w", err)
		}
		if rep.churn, err = runChurn(ctx, cfg, env.solo, progress); err != nil {
			return err
		}
		if rep.pools, err = stage(sup, func() (*poolsResult, error) {
			return runPools(ctx, cfg, sup, root, hubBin, tmp, o.base, o.pool, progress)
		}); err != nil {
			return fmt.Errorf("connector pools: %w", err)
		}
		if rep.catalog, err = stage(sup, func() (*catalogResult, error) {
			return runCatalog(ctx, cfg, sup, root, hubBin, tmp, progress)
		}); err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		if rep.tracing, err = stage(sup, func() (*tracingResult, error) {
			return runTracing(ctx, cfg, sup, root, hubBin, tmp, o.base, progress)
		}); err != nil {
			return fmt.Errorf("the cost of tracing: %w", err)
		}
		if rep.connect, err = stage(sup, func() (*connectResult, error) {
			return runConnect(ctx, cfg, sup, root, tmp, hubBin, progress)
		}); err != nil {
			return fmt.Errorf("hub connect: %w", err)
		}
		if rep.cache, err = stage(sup, func() (*cacheResult, error) {
			return runCache(ctx, cfg, sup, root, hubBin, progress)
		}); err != nil {
			return fmt.Errorf("caching client: %w", err)
		}
		if rep.auth, err = runAuth(ctx, cfg, root, progress); err != nil {
			return fmt.Errorf("access tokens: %w", err)
		}
	}
	fanoutMark := sup.Mark()
	fresh, err := startHub(ctx, sup, "hub (fan-out)", hubBin, "")
	if err != nil {
		return err
	}
	rawProc, rawAddr, err := startRole(ctx, sup, "raw fan-out server", "-role", roleFanout, "-addr", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// Each setting in alternating rounds with a raw baseline of its own,
	// where the open files limit allows both sets of subscribers at once;
	// else right after it: the machine's drift over the minutes of the
	// fan-out falls on both alike.
	alternate := int(limit)-1024 >= 2*slices.Max(cfg.fanoutSizes)
	if !alternate {
		rep.notes = append(rep.notes, fmt.Sprintf("the open files limit (%d) does not allow the subscribers of the raw fan-out "+
			"and of the hub at once: each raw baseline was measured just before the hub's, not in alternating rounds", limit))
	}
	for _, hubs := range [][]*hubRef{{fresh}, {env.hubA, env.hubB}} {
		rawSetup := func() (*fanoutPath, func(), error) { return rawFanoutPath(ctx, rawProc, rawAddr) }
		hubSetup := func() (*fanoutPath, func(), error) { return hubFanout(ctx, hubs) }
		var raw, results []*fanoutResult
		if alternate {
			raw, results, err = measureFanoutPair(ctx, cfg, sup, rawSetup, hubSetup, progress)
		} else if raw, err = measureFanout(ctx, cfg, sup, rawSetup, progress); err == nil {
			results, err = measureFanout(ctx, cfg, sup, hubSetup, progress)
			againstRaw(results, raw)
		}
		if err != nil {
			return fmt.Errorf("fan-out on %d instance(s): %w", len(hubs), err)
		}
		rep.fanout = append(append(rep.fanout, raw...), results...)
	}
	sup.StopSince(fanoutMark)

	if rep.idle, err = runIdle(ctx, sup, hubBin, cfg.idleConns, "", false, progress); err != nil {
		return err
	}

	if dir, ok := profileDir(o, cfg, rep); ok {
		rep.profileDir = dir
		if rep.profiles, err = runProfile(ctx, cfg, sup, dir, profiled, progress); err != nil {
			return fmt.Errorf("profiling: %w", err)
		}
	}
	sup.StopAll()
	rep.took = time.Since(began)
	rep.loadAfter = benchlab.LoadAverage()

	fmt.Fprint(stdout, rep.table().Text())
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "targets (#issue):")
	for _, v := range rep.verdicts() {
		fmt.Fprintln(stdout, "  "+v.String())
	}
	for _, p := range rep.profiles {
		fmt.Fprintf(stdout, "CPU profile, %s: %s\n", p.heading(), p.file)
	}
	if o.out != "-" {
		path := o.out
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(rep.markdown()), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s (run took %s)\n", path, rep.took.Round(time.Second))
	}
	return nil
}

// printOnly prints the table and the verdicts of a partial run, with the
// load average at its start and end (other work on the machine shows
// there).
func printOnly(stdout io.Writer, rep *report) {
	fmt.Fprint(stdout, rep.table().Text())
	for _, v := range rep.verdicts() {
		fmt.Fprintln(stdout, "  "+v.String())
	}
	fmt.Fprintf(stdout, "load average: %s at the start, %s at the end\n", rep.machine.Load, benchlab.LoadAverage())
}

// profileDir decides whether to profile and where: always into a directory
// given with -profile, never with off, and with auto only in a full run
// whose 64x16 throughput target was missed.
func profileDir(o *options, cfg *config, rep *report) (string, bool) {
	switch o.profile {
	case "off":
		return "", false
	case "auto":
		if cfg.quick {
			return "", false
		}
		for _, cell := range rep.cells {
			for _, c := range cell {
				if c.endpoint != epHub || c.shape != profiled {
					continue
				}
				for _, v := range callVerdicts(c) {
					if !v.ok {
						return filepath.Join(os.TempDir(), "hubbench-profiles-"+rep.began.Format("20060102-150405")), true
					}
				}
			}
		}
		return "", false
	}
	return o.profile, true
}

// selectCells checks -calls: every cell must name a shape and a payload
// of the suite.
func (o *options) selectCells() error {
	for _, c := range strings.Split(o.calls, ",") {
		sh, pl, ok := strings.Cut(strings.TrimSpace(c), "/")
		found := false
		for _, s := range shapes {
			for _, p := range payloads {
				found = found || ok && s.String() == sh && strings.ReplaceAll(p.name, " ", "") == strings.ReplaceAll(pl, " ", "")
			}
		}
		if !found {
			return fmt.Errorf("-calls: %q is not a cell of the suite (shapes 1x1, 16x1, 64x16; payloads 100B, 16KiB)", c)
		}
	}
	return nil
}

// measures reports whether the calls of sh and pl are measured: all of
// them unless -calls names cells.
func (o *options) measures(sh shape, pl payload) bool {
	if o.calls == "" {
		return true
	}
	for _, c := range strings.Split(o.calls, ",") {
		s, p, _ := strings.Cut(strings.TrimSpace(c), "/")
		if s == sh.String() && strings.ReplaceAll(p, " ", "") == strings.ReplaceAll(pl.name, " ", "") {
			return true
		}
	}
	return false
}

// selectPaths keeps the raw echo (the baseline, first) and the paths named
// in list.
func selectPaths(eps []*endpoint, list string) []*endpoint {
	out := eps[:1:1]
	for _, ep := range eps[1:] {
		for _, name := range strings.Split(list, ",") {
			if strings.TrimSpace(name) == ep.name {
				out = append(out, ep)
			}
		}
	}
	return out
}

func commandLine(o *options) string {
	parts := []string{"go run ./cmd/hubbench"}
	if o.quick {
		parts = append(parts, "-quick")
	}
	if o.hub != "" {
		parts = append(parts, "-hub", o.hub)
	}
	if o.idleOnly {
		parts = append(parts, "-idle-only")
	}
	if o.calls != "" {
		parts = append(parts, "-calls", strconv.Quote(o.calls))
	}
	if o.paths != "" {
		parts = append(parts, "-paths", strconv.Quote(o.paths))
	}
	if o.profile != "auto" {
		parts = append(parts, "-profile", o.profile)
	}
	if o.servers != 1 {
		parts = append(parts, "-servers", strconv.Itoa(o.servers))
	}
	for flag, on := range map[string]bool{"-pools-only": o.poolsOnly, "-connect-only": o.connectOnly, "-cache-only": o.cacheOnly, "-auth-only": o.authOnly, "-http-only": o.httpOnly} {
		if on {
			parts = append(parts, flag)
		}
	}
	if o.tracingOnly {
		parts = append(parts, "-tracing-only")
	}
	if o.pool != 8 {
		parts = append(parts, "-pool", strconv.Itoa(o.pool))
	}
	if o.base != "main" {
		parts = append(parts, "-base", o.base)
	}
	return strings.Join(parts, " ")
}

// env is what the calls measurement runs against.
type env struct {
	solo, hubA, hubB *hubRef
	endpoints        []*endpoint
}

// startEnv starts the baselines' servers, a hub with an MCP server behind
// it, and two hubs sharing a redis-server with an MCP server behind the
// second, and waits until each is ready.
func startEnv(ctx context.Context, sup *benchlab.Supervisor, hubBin, tmp string, servers int, progress func(string)) (*env, error) {
	progress("starting the echo servers, hubs, redis-server and MCP servers")
	echo, echoAddr, err := startRole(ctx, sup, "raw echo server", "-role", roleEcho, "-addr", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	peerSrv, peerAddr, err := startRole(ctx, sup, "peer echo server", "-role", rolePeer, "-addr", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &env{}
	if e.solo, err = startHub(ctx, sup, "hub", hubBin, ""); err != nil {
		return nil, err
	}
	redisAddr, err := startRedis(sup, tmp)
	if err != nil {
		return nil, err
	}
	redisURL := "redis://" + redisAddr + "/0"
	if e.hubA, err = startHub(ctx, sup, "hub A", hubBin, redisURL); err != nil {
		return nil, err
	}
	if e.hubB, err = startHub(ctx, sup, "hub B", hubBin, redisURL); err != nil {
		return nil, err
	}
	for _, h := range []*hubRef{e.solo, e.hubB} {
		for i := range servers {
			name := "mcp server (" + h.name + ")"
			if servers > 1 {
				name = fmt.Sprintf("mcp server %d (%s)", i+1, h.name)
			}
			if _, _, err := startRole(ctx, sup, name, "-role", roleMCP, "-url", h.ws("/mcp/server?name=bench&era=session")); err != nil {
				return nil, err
			}
		}
	}
	// The client side of each hub path must see the tool: on hub A it
	// arrives through Redis.
	for _, h := range []*hubRef{e.solo, e.hubA} {
		if err := waitListed(ctx, h, toolNames, echoTool); err != nil {
			return nil, err
		}
	}
	raw := func(params json.RawMessage) dialer {
		return rawDialer{url: "ws://" + echoAddr + "/", frame: callFrame(params)}
	}
	// The floor of a hop between instances, and the HTTP face, at 100 B
	// and the shapes of the targets.
	small := func(sh shape, pl payload) bool { return pl == payloads[0] && sh != shape{16, 1} }
	var channels atomic.Int64
	e.endpoints = []*endpoint{
		{name: epRaw, dial: raw, pids: []int{echo.PID()}, stats: []*statsSource{findStats(ctx, echoAddr)}},
		{name: epPeer, dial: func(p json.RawMessage) dialer { return peerDialer{url: "ws://" + peerAddr + "/", params: p} },
			pids: []int{peerSrv.PID()}, stats: []*statsSource{findStats(ctx, peerAddr)}},
		{name: epHub, dial: func(p json.RawMessage) dialer { return hubDialer{url: e.solo.ws("/mcp"), params: p} },
			pids: pidsOf([]*hubRef{e.solo}), stats: statsOf([]*hubRef{e.solo})},
		{name: epHub2, dial: func(p json.RawMessage) dialer { return hubDialer{url: e.hubA.ws("/mcp"), params: p} },
			pids: pidsOf([]*hubRef{e.hubA, e.hubB}), stats: statsOf([]*hubRef{e.hubA, e.hubB})},
		{name: epRawHTTP, dial: func(p json.RawMessage) dialer {
			return leanHTTPDialer{url: "http://" + echoAddr + "/http", params: p, raw: true}
		}, pids: []int{echo.PID()}, stats: []*statsSource{findStats(ctx, echoAddr)}, only: small},
		{name: epHTTP, dial: func(p json.RawMessage) dialer { return leanHTTPDialer{url: e.solo.http("/mcp"), params: p} },
			pids: pidsOf([]*hubRef{e.solo}), stats: statsOf([]*hubRef{e.solo}), only: small},
		{name: epHTTPSSE, dial: func(p json.RawMessage) dialer {
			return leanHTTPDialer{url: e.solo.http("/mcp"), params: p, progress: true}
		},
			pids: pidsOf([]*hubRef{e.solo}), stats: statsOf([]*hubRef{e.solo}), only: small},
		{name: epHTTPModern, dial: func(p json.RawMessage) dialer {
			return leanHTTPDialer{url: e.solo.http("/mcp"), params: p, modern: true}
		},
			pids: pidsOf([]*hubRef{e.solo}), stats: statsOf([]*hubRef{e.solo}), only: small},
		{name: epHTTPModernSSE, dial: func(p json.RawMessage) dialer {
			return leanHTTPDialer{url: e.solo.http("/mcp"), params: p, progress: true, modern: true}
		}, pids: pidsOf([]*hubRef{e.solo}), stats: statsOf([]*hubRef{e.solo}), only: small},
		{name: epRedis, dial: func(json.RawMessage) dialer {
			return redisDialer{addr: redisAddr, payload: callParams(payloads[0].size), seq: &channels}
		}, pids: []int{sup.RedisPID(redisAddr)}, stats: []*statsSource{nil}, only: small},
	}
	return e, nil
}

// profileOnly takes the CPU profiles of the twins and prints their
// summaries.
func profileOnly(ctx context.Context, o *options, cfg *config, sup *benchlab.Supervisor, stdout io.Writer, progress func(string)) error {
	dir := o.profile
	if dir == "auto" || dir == "off" {
		dir = filepath.Join(os.TempDir(), "hubbench-profiles-"+time.Now().Format("20060102-150405"))
	}
	sh := profiled
	for _, s := range shapes {
		if s.String() == o.profileShape {
			sh = s
		}
	}
	if o.paths != "" {
		cfg.profilePaths = strings.Split(o.paths, ",")
	}
	profiles, err := runProfile(ctx, cfg, sup, dir, sh, progress)
	if err != nil {
		return fmt.Errorf("profiling: %w", err)
	}
	for _, p := range profiles {
		fmt.Fprintf(stdout, "## %s\n%s\n%s\n\n%s\n\n", p.heading(), p.file, p.allocFile, p.top)
	}
	return nil
}

// stage runs one part of a full run: the processes it starts end with it,
// so that none of them wakes (keepalives, heartbeats, sweeps, collections)
// while a later part measures. The processes of the calls, which the
// fan-out uses again, run to the end.
func stage[T any](sup *benchlab.Supervisor, run func() (T, error)) (T, error) {
	defer sup.StopSince(sup.Mark())
	return run()
}
