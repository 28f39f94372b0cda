package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// The cost of access tokens (authcost.go; -auth-only runs it alone):
// pkg/hub's own benchmarks, run by `go test` against the real authorization
// server of internal/oauthtest (oidc-provider under node, e2e/oauth, after
// make deps). BenchmarkStreamableCallAuth makes tools/call at 64x16 over
// Streamable HTTP with a static token, and with an access token (an RS256
// JWT, which the hub's verified-token cache answers after its first
// request), on every POST, in alternating rounds on one hub in one
// process; BenchmarkAuthenticateWarm times the hub's authentication of one
// request whose token it verified before. Targets: the access token's
// calls/s at least 0.95x the static token's, judged by the CPU a call
// costs the process (which this machine's other work moves less than wall
// time); its verification with a warm cache at most 2 µs a request.

const (
	targetAuthRatio = 0.95                 // the access token's calls/s over the static token's, at least
	targetAuthWarm  = 2 * time.Microsecond // an access token's verification with a warm cache, at most
)

// The benchmarks, in pkg/hub's bench_oauth_test.go.
const (
	authBenchPkg  = "./pkg/hub"
	authCallBench = "BenchmarkStreamableCallAuth"
	authWarmBench = "BenchmarkAuthenticateWarm"
)

// Sizes of the access tokens' runs, -quick's first, a full run's second:
// calls of each run of BenchmarkStreamableCallAuth (both tokens), how long
// each sub-benchmark of BenchmarkAuthenticateWarm runs, and how many runs
// of each (the figures are their medians).
var (
	authCalls    = [2]int{100_000, 300_000}
	authWarmTime = [2]string{"300ms", "1s"}
	authRuns     = [2]int{1, 3}
)

// authResult is the access tokens' figures: index 0 the static token's,
// 1 the access token's.
type authResult struct {
	why      string   // why it was not measured ("" when it was)
	commands []string // the go test commands, for the method
	calls    int      // calls of each run (both tokens)
	// wall and CPU (the whole process's) per call, medians over the runs
	wall, cpu [2]time.Duration
	// static/jwt per run, by wall time and by CPU: the access token's
	// calls/s over the static token's; ratio and cpuRatio their medians
	wallRatios, cpuRatios []float64
	ratio, cpuRatio       float64
	warm                  [2]time.Duration // authentication of a request, warm: median ns/op
	warmAllocs            [2]float64
}

// runAuth runs pkg/hub's access token benchmarks and reads their figures.
func runAuth(ctx context.Context, cfg *config, root string, progress func(string)) (*authResult, error) {
	if why := missingNode(root, "e2e/oauth", "oidc-provider"); why != "" {
		return &authResult{why: why}, nil
	}
	size := 1
	if cfg.quick {
		size = 0
	}
	count := strconv.Itoa(authRuns[size])
	var results [2][]goBenchResult
	var commands []string
	for i, b := range []struct{ name, benchtime string }{
		{authCallBench, strconv.Itoa(authCalls[size]) + "x"}, {authWarmBench, authWarmTime[size]},
	} {
		args := []string{"test", "-run", "^$", "-bench", "^" + b.name + "$", "-benchtime", b.benchtime, "-count", count, authBenchPkg}
		progress("access tokens: go " + strings.Join(args, " "))
		out, err := goBench(ctx, root, args)
		if err != nil {
			return nil, err
		}
		results[i] = out
		commands = append(commands, fmt.Sprintf("`go test -run '^$' -bench '^%s$' -benchtime %s -count %s %s`", b.name, b.benchtime, count, authBenchPkg))
	}
	res, err := authFigures(results[0], results[1])
	if err != nil {
		return nil, err
	}
	res.commands = commands
	return res, nil
}

// goBench runs go with args (test -bench ...) in the module at root and
// returns the results it printed; a failure, with the end of its output.
func goBench(ctx context.Context, root string, args []string) ([]goBenchResult, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 30))
	}
	return parseGoBench(out.String()), nil
}

// goBenchResult is one line of `go test -bench` output: a benchmark's
// name (without the -GOMAXPROCS suffix, taken to be any numeric one: the
// names read here end in none of their own), its iterations and its
// figures by unit (ns/op, allocs/op and the custom ones).
type goBenchResult struct {
	name    string
	n       int
	metrics map[string]float64
}

// parseGoBench reads the result lines of `go test -bench` output; it
// ignores every other line.
func parseGoBench(out string) []goBenchResult {
	var res []goBenchResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if r, ok := parseGoBenchLine(sc.Text()); ok {
			res = append(res, r)
		}
	}
	return res
}

// parseGoBenchLine reads "BenchmarkX/sub-2  1000  123 ns/op  4.5 unit ...".
func parseGoBenchLine(line string) (goBenchResult, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return goBenchResult{}, false
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n <= 0 {
		return goBenchResult{}, false
	}
	r := goBenchResult{name: f[0], n: n, metrics: map[string]float64{}}
	if i := strings.LastIndexByte(r.name, '-'); i > 0 {
		if _, err := strconv.Atoi(r.name[i+1:]); err == nil {
			r.name = r.name[:i]
		}
	}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return goBenchResult{}, false
		}
		r.metrics[f[i+1]] = v
	}
	return r, true
}

// authFigures makes the access tokens' figures of what the benchmarks
// reported: the medians of their runs.
func authFigures(calls, warm []goBenchResult) (*authResult, error) {
	res := &authResult{}
	var wall, cpu [2][]float64
	for _, r := range calls {
		if r.name != authCallBench {
			continue
		}
		m, err := metrics(r, "static-ns/call", "jwt-ns/call", "static-cpu-ns/call", "jwt-cpu-ns/call", "static/jwt", "cpu-static/jwt")
		if err != nil {
			return nil, err
		}
		res.calls = r.n
		wall[0], wall[1] = append(wall[0], m[0]), append(wall[1], m[1])
		cpu[0], cpu[1] = append(cpu[0], m[2]), append(cpu[1], m[3])
		res.wallRatios, res.cpuRatios = append(res.wallRatios, m[4]), append(res.cpuRatios, m[5])
	}
	if len(res.wallRatios) == 0 {
		return nil, fmt.Errorf("%s reported no figures", authCallBench)
	}
	var ns, allocs [2][]float64
	for _, r := range warm {
		var i int
		switch r.name {
		case authWarmBench + "/static":
			i = 0
		case authWarmBench + "/jwt":
			i = 1
		default:
			continue
		}
		m, err := metrics(r, "ns/op", "allocs/op")
		if err != nil {
			return nil, err
		}
		ns[i], allocs[i] = append(ns[i], m[0]), append(allocs[i], m[1])
	}
	if len(ns[0]) == 0 || len(ns[1]) == 0 {
		return nil, fmt.Errorf("%s reported no figures for static and jwt", authWarmBench)
	}
	for i := range 2 {
		res.wall[i] = time.Duration(benchlab.Median(wall[i]))
		res.cpu[i] = time.Duration(benchlab.Median(cpu[i]))
		res.warm[i] = time.Duration(benchlab.Median(ns[i]))
		res.warmAllocs[i] = benchlab.Median(allocs[i])
	}
	res.ratio, res.cpuRatio = benchlab.Median(res.wallRatios), benchlab.Median(res.cpuRatios)
	return res, nil
}

// metrics returns r's figures in units, or an error naming the first one
// it did not report.
func metrics(r goBenchResult, units ...string) ([]float64, error) {
	out := make([]float64, len(units))
	for i, u := range units {
		v, ok := r.metrics[u]
		if !ok {
			return nil, fmt.Errorf("%s reported no %s", r.name, u)
		}
		out[i] = v
	}
	return out, nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// authWhat names the calls of the access tokens' rows.
const authWhat = "tools/call 64x16 100 B over Streamable HTTP"

// authVerdicts are the targets of access tokens.
func (r *report) authVerdicts() []verdict {
	a := r.auth
	if a == nil {
		return nil
	}
	calls := verdict{issue: 24, what: authWhat + ", an access token (JWT) on every request",
		goal: fmt.Sprintf(">= %.2fx", targetAuthRatio), short: fmt.Sprintf("ops/s by CPU >= %.2fx static", targetAuthRatio)}
	warm := verdict{issue: 24, what: "an access token's verification per request, warm cache",
		goal: "<= " + benchlab.FormatDuration(targetAuthWarm), short: "<= " + benchlab.FormatDuration(targetAuthWarm)}
	if a.why != "" {
		calls.figure, warm.figure = "not measured: "+a.why, "not measured: "+a.why
		return []verdict{calls, warm}
	}
	calls.ok = a.cpuRatio >= targetAuthRatio
	calls.figure = fmt.Sprintf("%s the static token's calls/s by CPU per call (%s vs %s a call, the whole process); by wall time %s",
		benchlab.FormatRatio(a.cpuRatio), benchlab.FormatDuration(a.cpu[1]), benchlab.FormatDuration(a.cpu[0]), benchlab.FormatRatio(a.ratio))
	warm.ok = a.warm[1] <= targetAuthWarm
	warm.figure = fmt.Sprintf("%s (a static token's: %s)", benchlab.FormatDuration(a.warm[1]), benchlab.FormatDuration(a.warm[0]))
	return []verdict{calls, warm}
}

// authRows adds the access tokens' rows to the table.
func (r *report) authRows(t *benchlab.Table) {
	a := r.auth
	if a == nil || a.why != "" {
		return
	}
	vs := r.authVerdicts()
	t.Section("access tokens: a credential on every POST, 64 sessions x 16 in flight over Streamable HTTP (pkg/hub's " +
		authCallBench + ": hub, server and clients in one process, alternating rounds; " + authWarmBench + ")")
	perSec := func(d time.Duration) string { return benchlab.FormatRate(float64(time.Second) / float64(d)) }
	t.Add("hub http, static token", "64x16", "100 B", perSec(a.wall[0]), "", "", "", "", "", "", "", benchlab.FormatDuration(a.cpu[0]))
	t.Add("hub http, access token (JWT)", "64x16", "100 B", perSec(a.wall[1]), "", "", "", benchlab.FormatRatio(a.ratio), "", "",
		benchlab.FormatRatio(float64(a.cpu[1])/float64(a.cpu[0])), benchlab.FormatDuration(a.cpu[1]), "", "", verdictCell(vs[0]))
	t.Add("authenticate, static token, warm", "1 request", "-", perSec(a.warm[0]), "", "", "", "", "",
		benchlab.FormatDuration(a.warm[0]), "", "", benchlab.FormatPerOp(a.warmAllocs[0]))
	t.Add("authenticate, access token, warm", "1 request", "-", perSec(a.warm[1]), "", "", "", "", "",
		benchlab.FormatDuration(a.warm[1]), "", "", benchlab.FormatPerOp(a.warmAllocs[1]), "", verdictCell(vs[1]))
}

// authMethod says how the access tokens' figures were measured.
func (r *report) authMethod() string {
	a := r.auth
	if a == nil {
		return ""
	}
	if a.why != "" {
		return "- **Access tokens.** Not measured: " + a.why + ".\n"
	}
	return fmt.Sprintf("- **Access tokens.** pkg/hub's own benchmarks, run by %s (the figures are the medians of the "+
		"runs) against the real authorization server of internal/oauthtest (oidc-provider under node, e2e/oauth). `%s` makes "+
		"tools/call with 100 B of arguments through one hub over Streamable HTTP, 64 sessions with 16 POSTs in flight each on "+
		"keep-alive connections, every POST carrying a static token, or an access token (an RS256 JWT of that server, verified "+
		"at its first request and then answered by the hub's verified-token cache): both loads on the same hub, %s calls a run "+
		"(half with each token) in 10 alternating rounds, with the bench server and the clients in the same process, whose wall "+
		"time and CPU per call it reports (all CPU/op; CPU vs floor is the access token's over the static token's). The target "+
		"is judged by CPU per call, the access token's calls/s over the static token's taken as the inverse ratio of their CPU: "+
		"with the machine's cores the limit, calls/s follows the CPU a call costs, which other work on these 2 shared cores "+
		"moves less than the wall time of a round (ops/s, and its ratio beside it). Ratios per run, by CPU: %s; by wall time: "+
		"%s. `%s` times the hub's authentication of one request whose token it verified before (finding the token, the static "+
		"tokens, the verified-token cache, the audience, the principal and its role), one goroutine in a loop (CPU/op: its "+
		"ns/op).\n", strings.Join(a.commands, " and "), authCallBench, benchlab.FormatCount(int64(a.calls)),
		fmtRatios(a.cpuRatios), fmtRatios(a.wallRatios), authWarmBench)
}
