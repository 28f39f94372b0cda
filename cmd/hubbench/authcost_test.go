package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// authCallsOutput and authWarmOutput are `go test -bench` output of the
// access tokens' benchmarks as this machine prints it (the first line of
// each, as printed; the second made up): two runs of each.
const authCallsOutput = `goos: linux
goarch: amd64
pkg: github.com/switchboard-mcp/switchboard/pkg/hub
cpu: Intel(R) Xeon(R) Processor
BenchmarkStreamableCallAuth-2   	  100000	     35305 ns/op	         0.9925 cpu-static/jwt	     63884 jwt-cpu-ns/call	     34959 jwt-ns/call	     63401 static-cpu-ns/call	     35647 static-ns/call	         1.020 static/jwt	   11961 B/op	     125 allocs/op
BenchmarkStreamableCallAuth-2   	  100000	     36000 ns/op	         0.9500 cpu-static/jwt	     70000 jwt-cpu-ns/call	     40000 jwt-ns/call	     66500 static-cpu-ns/call	     36000 static-ns/call	         0.900 static/jwt	   11961 B/op	     125 allocs/op
PASS
ok  	github.com/switchboard-mcp/switchboard/pkg/hub	12.345s
`

const authWarmOutput = `BenchmarkAuthenticateWarm/static-2         	  100000	       141.7 ns/op	       0 B/op	       0 allocs/op
BenchmarkAuthenticateWarm/jwt-2            	  100000	       180.3 ns/op	       0 B/op	       0 allocs/op
BenchmarkAuthenticateWarm/static-2         	  100000	       150.3 ns/op	       0 B/op	       0 allocs/op
BenchmarkAuthenticateWarm/jwt-2            	  100000	       2100 ns/op	       0 B/op	       1 allocs/op
`

func TestParseGoBench(t *testing.T) {
	t.Parallel()
	got := parseGoBench(authCallsOutput + authWarmOutput)
	require.Len(t, got, 6)
	assert.Equal(t, "BenchmarkStreamableCallAuth", got[0].name, "without the GOMAXPROCS suffix")
	assert.Equal(t, 100000, got[0].n)
	assert.Equal(t, map[string]float64{"ns/op": 35305, "cpu-static/jwt": 0.9925, "jwt-cpu-ns/call": 63884, "jwt-ns/call": 34959,
		"static-cpu-ns/call": 63401, "static-ns/call": 35647, "static/jwt": 1.020, "B/op": 11961, "allocs/op": 125}, got[0].metrics)
	assert.Equal(t, "BenchmarkAuthenticateWarm/jwt", got[3].name)
	assert.Equal(t, 180.3, got[3].metrics["ns/op"])

	for _, line := range []string{
		"BenchmarkX-2 --- FAIL", "BenchmarkX-2 0 1 ns/op", "BenchmarkX 10 1", "BenchmarkX 10 one ns/op",
		"--- BENCH: BenchmarkX-2", "ok  	pkg	1.0s",
	} {
		_, ok := parseGoBenchLine(line)
		assert.False(t, ok, line)
	}
	r, ok := parseGoBenchLine("BenchmarkX/a-b 10 1 ns/op")
	require.True(t, ok)
	assert.Equal(t, "BenchmarkX/a-b", r.name, "a name's own dash is kept")
}

func TestAuthFigures(t *testing.T) {
	t.Parallel()
	res, err := authFigures(parseGoBench(authCallsOutput), parseGoBench(authWarmOutput))
	require.NoError(t, err)
	assert.Equal(t, 100000, res.calls)
	assert.Equal(t, [2]time.Duration{35823, 37479}, res.wall, "medians of the two runs")
	assert.Equal(t, [2]time.Duration{64950, 66942}, res.cpu)
	assert.Equal(t, []float64{0.9925, 0.95}, res.cpuRatios)
	assert.InDelta(t, 0.97125, res.cpuRatio, 1e-9)
	assert.InDelta(t, 0.96, res.ratio, 1e-9)
	assert.Equal(t, [2]time.Duration{146, 1140}, res.warm)
	assert.Equal(t, [2]float64{0, 0.5}, res.warmAllocs)

	r := &report{auth: res}
	var got []string
	for _, v := range r.verdicts() {
		got = append(got, v.String())
	}
	assert.Equal(t, []string{
		"PASS  (#24) tools/call 64x16 100 B over Streamable HTTP, an access token (JWT) on every request: 0.97x the static token's " +
			"calls/s by CPU per call (66.9 µs vs 65.0 µs a call, the whole process); by wall time 0.96x (target >= 0.95x)",
		"PASS  (#24) an access token's verification per request, warm cache: 1.14 µs (a static token's: 146 ns) (target <= 2.00 µs)",
	}, got)
	table := r.table().Text()
	assert.Contains(t, table, "ops/s by CPU >= 0.95x static PASS")
	assert.Contains(t, table, "<= 2.00 µs PASS")
	assert.Contains(t, r.authMethod(), "Ratios per run, by CPU: 0.99x, 0.95x; by wall time: 1.02x, 0.90x.")

	res.cpuRatios, res.cpuRatio = []float64{0.94}, 0.94
	res.warm[1] = 2001
	for _, v := range r.authVerdicts() {
		assert.False(t, v.ok, v.String())
	}

	_, err = authFigures(parseGoBench(strings.ReplaceAll(authCallsOutput, "cpu-static/jwt", "x")), parseGoBench(authWarmOutput))
	assert.ErrorContains(t, err, "BenchmarkStreamableCallAuth reported no cpu-static/jwt")
	_, err = authFigures(parseGoBench(authCallsOutput), parseGoBench(authWarmOutput)[:1])
	assert.ErrorContains(t, err, "BenchmarkAuthenticateWarm reported no figures")
	_, err = authFigures(nil, parseGoBench(authWarmOutput))
	assert.ErrorContains(t, err, "BenchmarkStreamableCallAuth reported no figures")
}

// TestAuthNotMeasured: without the authorization server, both targets
// are MISS and say why, and the table has no rows.
func TestAuthNotMeasured(t *testing.T) {
	t.Parallel()
	r := &report{auth: &authResult{why: "e2e/oauth/node_modules has no oidc-provider: run make deps"}}
	vs := r.verdicts()
	require.Len(t, vs, 2)
	for _, v := range vs {
		assert.False(t, v.ok)
		assert.Contains(t, v.String(), "MISS  (#24)")
		assert.Contains(t, v.String(), "not measured: e2e/oauth/node_modules has no oidc-provider: run make deps")
	}
	assert.NotContains(t, r.table().Text(), "access token")
	assert.Equal(t, "- **Access tokens.** Not measured: e2e/oauth/node_modules has no oidc-provider: run make deps.\n", r.authMethod())
}

// FuzzParseGoBench: any output parses without panicking, and every result
// has a name, iterations and a figure per unit.
func FuzzParseGoBench(f *testing.F) {
	f.Add(authCallsOutput)
	f.Add(authWarmOutput)
	f.Add("BenchmarkX-2 1 NaN ns/op")
	f.Fuzz(func(t *testing.T, out string) {
		for _, r := range parseGoBench(out) {
			if !strings.HasPrefix(r.name, "Benchmark") || r.n <= 0 || len(r.metrics) == 0 {
				t.Fatalf("%+v", r)
			}
		}
	})
}

// TestMissingNode: a part run under node says what to install, and runs
// once its package is there.
func TestMissingNode(t *testing.T) {
	t.Parallel()
	_, err := exec.LookPath("node")
	require.NoError(t, err, "node is not on PATH: run make deps")
	root := t.TempDir()
	assert.Equal(t, "e2e/oauth/node_modules has no oidc-provider: run make deps", missingNode(root, "e2e/oauth", "oidc-provider"))
	dir := filepath.Join(root, "e2e", "node_modules", "@modelcontextprotocol", "client")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	assert.NotEmpty(t, missingNode(root, "e2e", "@modelcontextprotocol/client"), "a folder without its package.json")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte("{}"), 0o644))
	assert.Empty(t, missingNode(root, "e2e", "@modelcontextprotocol/client"))
}
