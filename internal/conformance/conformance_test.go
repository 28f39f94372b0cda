package conformance_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/conformance"
	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// fixtureEnv makes the test binary the fixture on standard input and
// output: the child `hub connect` runs in the lanes behind it.
const fixtureEnv = "SWITCHBOARD_CONFORMANCE_FIXTURE"

func TestMain(m *testing.M) {
	if os.Getenv(fixtureEnv) == "stdio" {
		_ = conformance.ServeStdio(context.Background(), nil, os.Stdin, os.Stdout)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// The scenarios of each revision, as the pinned suite
// (@modelcontextprotocol/conformance 0.2.0-alpha.12) runs them with
// --requirements <revision>: those the revision scores, frozen at its
// release, and those it runs beside them without scoring them (pending in
// the suite, added after the release, or of an extension). A suite that
// runs others fails the test: a new pin is a decision.
var (
	scored2025 = []string{
		"server-initialize", "logging-set-level", "ping", "completion-complete",
		"tools-list", "tools-call-simple-text", "tools-call-image", "tools-call-audio",
		"tools-call-embedded-resource", "tools-call-mixed-content", "tools-call-with-logging",
		"tools-call-error", "tools-call-with-progress", "tools-call-sampling", "tools-call-elicitation",
		"elicitation-sep1034-defaults", "server-sse-multiple-streams", "elicitation-sep1330-enums",
		"resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read",
		"resources-subscribe", "resources-unsubscribe",
		"prompts-list", "prompts-get-simple", "prompts-get-with-args",
		"prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection",
	}
	unscored2025 = []string{"server-session-lifecycle", "json-schema-2020-12", "server-sse-polling"}
	scored2026   = []string{
		"server-stateless", "completion-complete", "tools-list", "tools-call-simple-text",
		"tools-call-image", "tools-call-audio", "tools-call-embedded-resource", "tools-call-mixed-content",
		"tools-call-error", "tools-call-with-progress", "server-sse-multiple-streams",
		"resources-list", "resources-read-text", "resources-read-binary", "resources-templates-read",
		"sep-2164-resource-not-found", "prompts-list", "prompts-get-simple", "prompts-get-with-args",
		"prompts-get-embedded-resource", "prompts-get-with-image", "dns-rebinding-protection", "caching",
		"input-required-result-basic-elicitation", "input-required-result-basic-sampling",
		"input-required-result-basic-list-roots", "input-required-result-request-state",
		"input-required-result-multiple-input-requests", "input-required-result-multi-round",
		"input-required-result-missing-input-response", "input-required-result-non-tool-request",
		"input-required-result-result-type", "input-required-result-unsupported-methods",
		"input-required-result-tampered-state", "input-required-result-capability-check",
		"input-required-result-ignore-extra-params", "input-required-result-validate-input",
	}
	unscored2026 = []string{
		"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
		"tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
		"tasks-required-task-error", "tasks-mrtr-composition",
		"json-schema-2020-12", "http-header-validation", "http-custom-header-server-validation",
	}
)

// lane is one column of the table: the suite at one revision, at that
// revision's wire, against one target.
type lane struct {
	name     string // the target, and how it answers
	revision string
	// start serves the fixture and returns the URL the suite is pointed
	// at, and how to stop it; nil for a lane not built yet.
	start func(t *testing.T) (url string, stop func())
	// holds are the unscored scenarios the lane must pass, besides every
	// scored one.
	holds []string
	// also checks more of its results.
	also func(t *testing.T, results map[string]*scenario)

	results map[string]*scenario
}

// lanes are the table's columns: the fixture served directly over
// Streamable HTTP, answering POSTs with JSON where that suffices or with
// SSE always; through a hub's /servers/conformance/mcp, the fixture dialed
// out to it over a WebSocket, speaking every revision or 2026-07-28 only;
// and behind `hub connect`, as its child on stdio or reached over HTTP
// (--upstream). Each revision at its own wire, in every lane.
func lanes() []*lane {
	modernOnly := &mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}}
	return []*lane{
		{name: "direct, JSON answers", revision: mcp.LatestVersion, start: direct(mcp.ResponseAuto), holds: unscored2025},
		{name: "direct, JSON answers", revision: mcp.ModernVersion, start: direct(mcp.ResponseAuto), holds: unscored2026},
		{name: "direct, SSE answers", revision: mcp.LatestVersion, start: direct(mcp.ResponseSSE), holds: unscored2025, also: resumes},
		{name: "direct, SSE answers", revision: mcp.ModernVersion, start: direct(mcp.ResponseSSE), holds: unscored2026},
		{name: "hub, JSON answers", revision: mcp.LatestVersion, start: throughHub(mcp.ResponseAuto, nil), holds: unscored2025, also: nothingToResume},
		{name: "hub, SSE answers", revision: mcp.LatestVersion, start: throughHub(mcp.ResponseSSE, nil), holds: unscored2025, also: primesButCannotClose},
		{name: "hub, JSON answers", revision: mcp.ModernVersion, start: throughHub(mcp.ResponseAuto, nil), holds: unscored2026},
		{name: "hub, fixture of 2026-07-28 only", revision: mcp.ModernVersion, start: throughHub(mcp.ResponseAuto, modernOnly), holds: unscored2026},
		{name: "hub, fixture of 2026-07-28 only", revision: mcp.LatestVersion, start: throughHub(mcp.ResponseAuto, modernOnly), holds: unscored2025},
		{name: "behind hub connect, stdio", revision: mcp.LatestVersion, start: behindConnect(false), holds: unscored2025, also: nothingToResume},
		{name: "behind hub connect, stdio", revision: mcp.ModernVersion, start: behindConnect(false), holds: unscored2026},
		{name: "behind hub connect, --upstream", revision: mcp.LatestVersion, start: behindConnect(true), holds: unscored2025, also: nothingToResume},
		{name: "behind hub connect, --upstream", revision: mcp.ModernVersion, start: behindConnect(true), holds: unscored2026},
	}
}

// TestConformance runs the official suite in every lane, the lanes side by
// side (each is a hub or a fixture of its own, and the suite spends most
// of its time waiting), and prints one table of every scenario in every
// lane (make conformance shows it). A lane fails on any failed or warned
// check of a scenario it holds: every scored one, and every unscored one
// (the tasks extension's, the SEP-2243 headers', json-schema-2020-12); a
// scenario whose every check the suite itself skips is reported as
// skipped.
//
// server-sse-polling (SEP-1699) is the one scenario whose checks depend on
// the answers' mode. Its test_reconnection tool has the server close the
// call's SSE stream mid-call, and the suite resumes it with Last-Event-ID
// (served directly, both modes stream that call). Through the hub
// answering with JSON there is no stream: the scenario has nothing to
// check. Through the hub in SSE mode, it checks the hub's priming event
// and retry field, but not resumption: the fixture sits behind a
// WebSocket, and nothing in MCP lets a server close a client's stream at
// the hub, so the answer comes on the stream and the suite says so (INFO).
// TestHTTP_resumesADroppedStream in pkg/hub resumes a stream through the
// hub instead, with a client that drops it mid-call.
//
// Through the hub (dialed out, or behind hub connect), the fixture speaks
// both eras, and the hub speaks 2026-07-28 to it (server/discover first):
// the 2025-11-25 suite's session is translated (the fixture's input
// requests become requests to the session, and so on). The fixture of
// 2026-07-28 only is the same to the hub.
func TestConformance(t *testing.T) {
	suite(t) // fails at once, saying what to do, without it
	all := lanes()
	t.Run("lanes", func(t *testing.T) {
		for i, l := range all {
			t.Run(fmt.Sprintf("%c %s %s", 'A'+i, l.name, l.revision), func(t *testing.T) {
				t.Parallel()
				url, stop := l.start(t)
				defer stop()
				l.results = runSuite(t, l.revision, url)
				l.judge(t)
			})
		}
	})
	writeTable(os.Stdout, all)
}

// judge checks a lane's results: the suite ran the revision's scenarios,
// scored as pinned, and every scenario the lane holds passed.
func (l *lane) judge(t *testing.T) {
	scored, unscored := scored2025, unscored2025
	if l.revision == mcp.ModernVersion {
		scored, unscored = scored2026, unscored2026
	}
	var gotScored, gotUnscored []string
	for name, s := range l.results {
		if s.scored {
			gotScored = append(gotScored, name)
		} else {
			gotUnscored = append(gotUnscored, name)
		}
	}
	assert.ElementsMatch(t, scored, gotScored, "the scenarios %s scores", l.revision)
	assert.ElementsMatch(t, unscored, gotUnscored, "the scenarios run beside them")
	for _, name := range slices.Concat(scored, l.holds) {
		s := l.results[name]
		if !assert.NotNil(t, s, "scenario %s ran", name) || s.ok() {
			continue
		}
		if s.skipped() {
			t.Logf("scenario %s: the suite skips its every check (%s)", name, s.checks[0].ErrorMessage)
			continue
		}
		var failed []string
		for _, c := range s.checks {
			if c.Status != "SUCCESS" && c.Status != "INFO" {
				failed = append(failed, fmt.Sprintf("%s %s: %s", c.ID, c.Status, c.ErrorMessage))
			}
		}
		t.Errorf("scenario %s: %d passed, %d failed:\n\t%s", name, s.passed, s.failed, strings.Join(failed, "\n\t"))
	}
	if l.also != nil {
		l.also(t, l.results)
	}
}

// cell is the lane's mark for a scenario in the table: ✓ passed, ✗n n
// checks failed or warned, skip the suite skipped its checks, · not a
// scenario of the lane's revision, - the lane did not run.
func (l *lane) cell(name string) string {
	s, ok := l.results[name]
	switch {
	case l.results == nil:
		return "-"
	case !ok:
		return "·"
	case s.ok():
		return "✓"
	}
	bad, skipped := 0, 0
	for _, c := range s.checks {
		switch c.Status {
		case "SUCCESS", "INFO":
		case "SKIPPED":
			skipped++
		default:
			bad++
		}
	}
	if bad == 0 && skipped > 0 {
		return "skip"
	}
	return fmt.Sprintf("✗%d", max(bad, s.failed, 1))
}

// score says how many of the scenarios the revision scores passed.
func (l *lane) score() string {
	if l.results == nil {
		return "-"
	}
	n, ok := 0, 0
	for _, s := range l.results {
		if s.scored {
			n++
			if s.ok() {
				ok++
			}
		}
	}
	return fmt.Sprintf("%d/%d", ok, n)
}

// direct serves the fixture over pkg/mcp's Streamable HTTP handler,
// answering POSTs as mode says.
func direct(mode mcp.ResponseMode) func(t *testing.T) (string, func()) {
	return func(t *testing.T) (string, func()) {
		s := conformance.NewServer(nil)
		h, sh := conformance.Handler(s, &mcp.StreamableOptions{ResponseMode: mode})
		srv := httptest.NewServer(h)
		return srv.URL + "/mcp", func() {
			sh.Close()
			srv.Close()
			shutdown(t, s)
		}
	}
}

// throughHub starts a hub answering POSTs as mode says, with the fixture
// (made with opts) dialed out to it, and returns the fixture's endpoint on
// the hub.
func throughHub(mode mcp.ResponseMode, opts *mcp.ServerOptions) func(t *testing.T) (string, func()) {
	return onHub(mode, func(ctx context.Context, t *testing.T, servers string) func() {
		s := conformance.NewServer(opts)
		dialed := make(chan error, 1)
		go func() { dialed <- s.Dial(ctx, servers+"?name=conformance", nil) }()
		return func() {
			assert.ErrorIs(t, <-dialed, context.Canceled)
			shutdown(t, s)
		}
	})
}

// behindConnect starts a hub with the fixture behind `hub connect`'s
// connector (internal/connect, as the command runs it): a child on stdio
// (this test binary, as the fixture), or, with upstream, the fixture served
// over Streamable HTTP and reached as an --upstream.
func behindConnect(upstream bool) func(t *testing.T) (string, func()) {
	return onHub(mcp.ResponseAuto, func(ctx context.Context, t *testing.T, servers string) func() {
		self, err := os.Executable()
		require.NoError(t, err)
		srv := connect.Server{Name: "conformance", Command: self, Env: map[string]string{fixtureEnv: "stdio"}}
		stopDirect := func() {}
		if upstream {
			var url string
			url, stopDirect = direct(mcp.ResponseAuto)(t)
			srv = connect.Server{Name: "conformance", Upstream: url}
		}
		ran := make(chan error, 1)
		go func() {
			ran <- connect.Run(ctx, []connect.Server{srv}, &connect.Options{URL: servers,
				Logger: slog.New(slog.DiscardHandler), Retry: link.Retry{MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}})
		}()
		return func() {
			assert.NoError(t, <-ran, "the connector stops with its context")
			stopDirect()
		}
	})
}

// onHub starts a hub answering POSTs as mode says, puts the fixture on it
// with attach (given a context that ends when the lane stops, and the
// hub's endpoint for servers; it returns what waits for the fixture to
// stop), waits until the fixture is registered, and returns the fixture's
// endpoint on the hub.
func onHub(mode mcp.ResponseMode, attach func(ctx context.Context, t *testing.T, servers string) (wait func())) func(t *testing.T) (string, func()) {
	return func(t *testing.T) (string, func()) {
		h, err := hub.New(hub.Config{Logger: slog.New(slog.DiscardHandler), HTTPResponses: mode})
		require.NoError(t, err)
		srv := httptest.NewUnstartedServer(nil)
		srv.Config = h.NewHTTPServer()
		srv.Start()
		ctx, cancel := context.WithCancel(t.Context())
		wait := attach(ctx, t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/mcp/server")
		url := srv.URL + "/servers/conformance/mcp"
		stop := func() {
			cancel()
			wait()
			srv.Close()
			assert.NoError(t, h.Close())
		}
		if !assert.Eventually(t, func() bool {
			c, err := mcp.Connect(ctx, url, &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion})
			if err != nil {
				return false
			}
			c.Close()
			return true
		}, 20*time.Second, 20*time.Millisecond, "the fixture registers on the hub") {
			stop()
			t.FailNow()
		}
		return url, stop
	}
}

// shutdown stops the fixture's tasks, which outlive the suite's requests.
func shutdown(t *testing.T, s *mcp.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.NoError(t, s.Shutdown(ctx), "the fixture's tasks end")
}

// resumes: served directly with SSE answers, the suite resumed the stream
// the fixture closed mid-call.
func resumes(t *testing.T, results map[string]*scenario) {
	assert.Equal(t, "SUCCESS", statusOf(results["server-sse-polling"], "server-sse-disconnect-resume"),
		"the suite resumed the stream the fixture closed mid-call")
}

// nothingToResume: the hub answered with JSON, so server-sse-polling has
// nothing to check.
func nothingToResume(t *testing.T, results map[string]*scenario) {
	assert.NotContains(t, statuses(results["server-sse-polling"]), "SUCCESS", "the hub answered with JSON: nothing to check")
	t.Log("server-sse-polling: the hub answers with JSON in this mode, so the scenario checks nothing; see the SSE lane")
}

// primesButCannotClose: through the hub with SSE answers, the stream
// starts with a priming event and a retry field, and the answer comes on
// it, since the fixture cannot close a stream at the hub.
func primesButCannotClose(t *testing.T, results map[string]*scenario) {
	polling := results["server-sse-polling"]
	assert.Equal(t, "SUCCESS", statusOf(polling, "server-sse-priming-event"), "the hub's stream starts with a priming event")
	assert.Equal(t, "SUCCESS", statusOf(polling, "server-sse-retry-field"), "and tells the client when to come back")
	assert.Equal(t, "INFO", statusOf(polling, "server-sse-disconnect-resume"),
		"the answer came on the stream: the fixture, behind a WebSocket, cannot close it")
	t.Log("server-sse-polling through the hub: priming event and retry field checked; resumption is not, since " +
		"the fixture cannot close a stream at the hub (TestHTTP_resumesADroppedStream in pkg/hub covers it)")
}
