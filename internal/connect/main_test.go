package connect_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// roleEnv makes the test binary a stdio MCP server (or a broken one), the
// child the connector starts in these tests: a real process, with real pipes.
const roleEnv = "SWITCHBOARD_CONNECT_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	goleak.VerifyTestMain(m)
}

// runRole is the child's main.
//
//	server   the demo server on stdin/stdout, plus tools pid, garble, exit,
//	         wait (until cancelled), elicit and abandon (gives up on
//	         elicit's request), which say on stderr what they saw
//	garbage  a line that is not JSON on stdout first, then the server
//	mute     reads stdin and never answers
//	exit     a line on stderr, then exit status 3
//	parent   starts a grandchild (role sleep) in its group, then the server
//	daemonize  starts a process that starts a grandchild (role sleep) in a
//	         session of its own and exits, as daemons detach, then the server
//	daemonize-exit  the same, then exits with status 3 instead of serving
//	detach   that process
//	sleep    sleeps until killed, ignoring SIGTERM
//	connector  connect.Run for the server of role $SWITCHBOARD_CONNECT_TEST_CHILD
//	         at the hub $SWITCHBOARD_CONNECT_TEST_HUB, its log on stderr
//	roots    the server, asking roots/list once initialized (outside any call)
//	alone    the server, asking for sampling and elicitation once
//	         initialized (outside any call), saying on stderr how each failed
//	strict   the server, but a first request other than initialize (the
//	         hub's server/discover) makes it exit with status 2, as some
//	         servers take a method they do not know
func runRole(role string) int {
	switch role {
	case "mute":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "exit":
		fmt.Fprintln(os.Stderr, "giving up at once")
		return 3
	case "sleep":
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "garbage":
		fmt.Println("Starting server... (this line is not JSON)")
	case "parent":
		if startRole("sleep", nil) != nil {
			return 1
		}
	case "daemonize":
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), roleEnv+"=detach")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "daemonize-exit":
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), roleEnv+"=detach")
		cmd.Stderr = os.Stderr
		_ = cmd.Run()
		return 3
	case "detach":
		if startRole("sleep", &syscall.SysProcAttr{Setsid: true}) != nil {
			return 1
		}
		return 0
	case "connector":
		log := slog.New(slog.NewTextHandler(os.Stderr, nil))
		err := connect.Run(context.Background(), []connect.Server{selfServer("fake", os.Getenv("SWITCHBOARD_CONNECT_TEST_CHILD"))},
			&connect.Options{URL: os.Getenv("SWITCHBOARD_CONNECT_TEST_HUB"), Logger: log})
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "fake server ready pid=%d\n", os.Getpid())
	d := demo.New(&demo.Options{Name: "fake"})
	d.AddTool(&mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(strconv.Itoa(os.Getpid()))}}, nil
		})
	d.AddTool(&mcp.Tool{Name: "garble", Description: "Write a line that is not JSON on stdout."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			os.Stdout.Write([]byte("oops, not JSON\n"))
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("garbled")}}, nil
		})
	d.AddTool(&mcp.Tool{Name: "exit", Description: "Exit with status 1."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(1)
			return nil, nil
		})
	d.AddTool(&mcp.Tool{Name: "wait", Description: "Wait until cancelled."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprintf(os.Stderr, "wait started id=%s\n", req.ID)
			<-ctx.Done() // the hub's notifications/cancelled for req.ID, and nothing else, ends it
			fmt.Fprintf(os.Stderr, "wait cancelled id=%s\n", req.ID)
			return nil, ctx.Err()
		})
	var abandon struct {
		sync.Mutex
		cancel context.CancelFunc
	}
	d.AddTool(&mcp.Tool{Name: "elicit", Description: "Ask the caller's user for a name."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			ectx, cancel := context.WithCancel(ctx)
			defer cancel()
			abandon.Lock()
			abandon.cancel = cancel
			abandon.Unlock()
			res, err := req.Elicit(ectx, &mcp.ElicitParams{Message: "Your name?",
				RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
			if err != nil {
				return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("elicitation ended: " + err.Error())}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprintf("%s %v", res.Action, res.Content["name"]))}}, nil
		})
	d.AddTool(&mcp.Tool{Name: "abandon", Description: "Give up on elicit's pending request."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			abandon.Lock()
			defer abandon.Unlock()
			if abandon.cancel == nil {
				return nil, errors.New("no elicitation to abandon")
			}
			abandon.cancel()
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("abandoned")}}, nil
		})
	var in io.Reader = os.Stdin
	if role == "strict" {
		br := bufio.NewReader(os.Stdin)
		first, err := br.ReadBytes('\n')
		if err != nil || !bytes.Contains(first, []byte(`"method":"initialize"`)) {
			fmt.Fprintf(os.Stderr, "not initialize first: %.80s\n", first)
			return 2
		}
		in = io.MultiReader(bytes.NewReader(first), br)
	}
	ss := d.Serve(context.Background(), peer.NewStdio(in, os.Stdout, nil))
	if role == "alone" {
		// Requests that need a client, outside any client's call.
		go func() {
			<-ss.Ready()
			for _, m := range []struct {
				method string
				params any
			}{
				{mcp.MethodSamplingCreateMessage, &mcp.CreateMessageParams{MaxTokens: 1,
					Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("anyone?")}}}},
				{mcp.MethodElicitationCreate, &mcp.ElicitParams{Message: "anyone?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`)}},
			} {
				err := ss.Peer().Call(context.Background(), m.method, m.params, nil)
				fmt.Fprintf(os.Stderr, "%s outside a call: code=%d err=%v\n", m.method, jsonrpc.CodeOf(err), err)
			}
		}()
	}
	if role == "roots" {
		// As server-filesystem does: ask for the roots as soon as the
		// client said initialized, outside any call.
		go func() {
			<-ss.Ready()
			var res mcp.ListRootsResult
			if err := ss.Peer().Call(context.Background(), mcp.MethodRootsList, map[string]any{}, &res); err != nil {
				fmt.Fprintf(os.Stderr, "roots/list failed: %v\n", err)
				return
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			fmt.Fprintf(os.Stderr, "roots: %d %s\n", len(uris), strings.Join(uris, " "))
		}()
	}
	_ = ss.Peer().Wait()
	return 0
}

// startRole starts this test binary in role, with attr, and says its pid
// on stderr ("grandchild pid=N").
func startRole(role string, attr *syscall.SysProcAttr) error {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return err
	}
	fmt.Fprintf(os.Stderr, "grandchild pid=%d\n", cmd.Process.Pid)
	return nil
}

const wait = 15 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// logBuffer collects the connector's log for the test to read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
		os.Stderr.Write(p)
	}
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count counts the log lines holding every one of parts.
func (l *logBuffer) count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// waitLog waits until n lines hold every one of parts.
func (l *logBuffer) waitLog(t *testing.T, n int, parts ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return l.count(parts...) >= n }, wait, 10*time.Millisecond,
		"never logged %d line(s) with %q; the log:\n%s", n, parts, l)
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testHub is a hub in this process, on a loopback port.
type testHub struct {
	*hub.Hub
	srv  *httptest.Server
	t    *testing.T
	once sync.Once
}

func startHub(t *testing.T, cfg hub.Config) *testHub { return startHubOn(t, nil, cfg) }

// startHubOn is startHub on a listener of the test's (nil: any port).
func startHubOn(t *testing.T, ln net.Listener, cfg hub.Config) *testHub {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
		if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	h, err := hub.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(nil)
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	srv.Config = h.NewHTTPServer()
	srv.Start()
	th := &testHub{Hub: h, srv: srv, t: t}
	t.Cleanup(th.stop)
	return th
}

// stop stops the hub (once), as a hub that goes away would: its listener
// and every connection close.
func (th *testHub) stop() {
	th.once.Do(func() {
		th.srv.Close()
		require.NoError(th.t, th.Close())
	})
}

func (th *testHub) url(path string) string {
	return "ws" + strings.TrimPrefix(th.srv.URL, "http") + path
}

// client connects an MCP client to the hub's /mcp, with a session
// (initialize at mcp.LatestVersion unless opts name a version: pkg/mcp's
// client speaks 2026-07-28 first by default).
func (th *testHub) client(t *testing.T, opts *mcp.ClientOptions) *mcp.Client {
	t.Helper()
	o := mcp.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = mcp.LatestVersion
	}
	c, err := mcp.Connect(ctxFor(t), th.url("/mcp"), &o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// waitTool waits until the hub lists tool (or, with present false, no
// longer lists it).
func waitTool(t *testing.T, c *mcp.Client, tool string, present bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		tools, err := c.AllTools(ctxFor(t))
		if err != nil {
			return false
		}
		for _, x := range tools {
			if x.Name == tool {
				return present
			}
		}
		return !present
	}, wait, 20*time.Millisecond, "tool %s present=%v never", tool, present)
}

// selfServer is a Server that runs this test binary in role.
func selfServer(name, role string) connect.Server {
	return connect.Server{Name: name, Command: os.Args[0], Env: map[string]string{roleEnv: role}}
}

// processGone reports whether pid has ended (a zombie counts as ended: its
// parent is gone and nobody reaped it yet).
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
