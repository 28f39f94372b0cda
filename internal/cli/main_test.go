package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// roleEnv makes the test binary the hub command itself ("hub"): a real
// process, started the way users start it.
const roleEnv = "SWITCHBOARD_CLI_TEST_ROLE"

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == stdioServerArg {
		fmt.Fprintf(os.Stderr, "fake server ready pid=%d\n", os.Getpid())
		ss := demo.New(&demo.Options{Name: "fake"}).Serve(context.Background(), peer.NewStdio(os.Stdin, os.Stdout, nil))
		_ = ss.Peer().Wait()
		os.Exit(0)
	}
	if os.Getenv(roleEnv) == "hub" {
		Main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// stdioServerArg, as the only argument, makes the test binary a stdio MCP
// server (the demo's tools), for `hub connect` to run: the child inherits
// the connector's environment, so its role is in its arguments.
const stdioServerArg = "--test-stdio-server"

const wait = 20 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// syncBuffer is a log destination the test reads while something writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
		os.Stderr.Write(p)
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the text holds s n times.
func (s *syncBuffer) waitFor(t *testing.T, n int, sub string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Count(s.String(), sub) >= n }, wait, 10*time.Millisecond,
		"never saw %q %d time(s) in:\n%s", sub, n, s)
}

// testHub is a hub in this test's process, on a loopback port.
type testHub struct {
	*hub.Hub
	srv *httptest.Server
}

func startHub(t *testing.T) *testHub {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := hub.New(hub.Config{Logger: log})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = h.NewHTTPServer()
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, h.Close())
	})
	return &testHub{Hub: h, srv: srv}
}

// base is the hub's URL as users give it to --hub.
func (th *testHub) base() string { return "ws" + strings.TrimPrefix(th.srv.URL, "http") }

// client connects an MCP client to the hub's /mcp, with a session
// (initialize at mcp.LatestVersion unless opts name a version).
func (th *testHub) client(t *testing.T, opts *mcp.ClientOptions) *mcp.Client {
	t.Helper()
	c, err := mcp.Connect(ctxFor(t), th.base()+"/mcp", session(opts))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// session returns opts asking for a session (initialize at
// mcp.LatestVersion) unless they name a version: these tests are of the
// hub's sessions, and pkg/mcp's client speaks 2026-07-28 first by default.
func session(opts *mcp.ClientOptions) *mcp.ClientOptions {
	o := mcp.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = mcp.LatestVersion
	}
	return &o
}

// waitTool waits until the client's list holds tool (present) or not.
func waitTool(t *testing.T, c *mcp.Client, tool string, present bool) {
	t.Helper()
	var names []string
	ok := assertEventually(func() bool {
		tools, err := c.AllTools(ctxFor(t))
		if err != nil {
			return false
		}
		names = names[:0]
		found := false
		for _, x := range tools {
			names = append(names, x.Name)
			found = found || x.Name == tool
		}
		return found == present
	})
	require.True(t, ok, "tool %s present=%v never; tools: %v", tool, present, names)
}

// assertEventually polls cond every 20 ms until it holds or wait passes.
func assertEventually(cond func() bool) bool {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// proc is the hub command running as a process of its own.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	state  *os.ProcessState
}

// startHubCommand runs `hub args...` (this test binary in the role "hub")
// with extra environment variables.
func startHubCommand(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(cleanEnv(), roleEnv+"=hub"), env...)
	p := &proc{cmd: cmd, stderr: newSyncBuffer(), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return p
}

// start starts the process and stops it (SIGKILL) at the end of the test
// if it still runs.
func (p *proc) start(t *testing.T) *proc {
	t.Helper()
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends sig and waits for the process to exit; it returns the exit
// status.
func (p *proc) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(wait):
		t.Fatalf("the command did not stop on %v; its log:\n%s", sig, p.stderr)
		return -1
	}
}

// cleanEnv is this process's environment without SWITCHBOARD_* settings,
// and without the second the race detector waits at exit.
func cleanEnv() []string {
	env := []string{"GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") {
			env = append(env, kv)
		}
	}
	return env
}

var pidRe = regexp.MustCompile(`server started.* pid=(\d+)`)

// childPids returns the pids of the children a connector started so far.
func childPids(log string) []int {
	var out []int
	for _, m := range pidRe.FindAllStringSubmatch(log, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// processGone reports whether pid has ended (a zombie counts as ended).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// repoRoot is the module's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// publishedServer returns the entry point of a published MCP server
// installed by scripts/deps.sh (e2e/package.json pins the versions), and
// node. It fails the test with what to run when either is missing.
func publishedServer(t *testing.T, pkg string) (node, entry string) {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is missing: run 'make deps' (scripts/deps.sh installs Node and the published MCP servers)")
	entry = filepath.Join(repoRoot(t), "e2e", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	_, err = os.Stat(entry)
	require.NoError(t, err, "%s is not installed: run 'make deps' (npm ci in e2e/)", pkg)
	return node, entry
}
