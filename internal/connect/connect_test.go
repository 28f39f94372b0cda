package connect_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// running is a connector started by a test.
type running struct {
	log    *logBuffer
	cancel context.CancelFunc
	done   chan error
}

// runConnector runs connect.Run until the test ends (or stop is called).
func runConnector(t *testing.T, servers []connect.Server, opts connect.Options) *running {
	t.Helper()
	r := &running{log: &logBuffer{}, done: make(chan error, 1)}
	opts.Logger = r.log.logger()
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- connect.Run(ctx, servers, &opts) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the connector and waits for Run to return.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(wait):
		t.Fatal("the connector did not stop")
		return nil
	}
}

var pidRe = regexp.MustCompile(`server started.* pid=(\d+)`)

// pids returns the pids of the children started so far, in order.
func (r *running) pids() []int {
	var out []int
	for _, m := range pidRe.FindAllStringSubmatch(r.log.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	require.NotEmpty(t, res.Content)
	return res.Content[0].Text
}

// TestRun_relaysEverything: a stdio server behind the connector is on the
// hub like any other: lists, calls, progress, a resource, a prompt, sampling
// answered by the calling client, and its stderr in the log.
func TestRun_relaysEverything(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, &mcp.ClientOptions{
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: mcp.TextContent("sampled: " + p.Messages[0].Content.Text)}, nil
		},
	})
	waitTool(t, c, "fake__echo", true)
	ctx := ctxFor(t)

	res, err := c.CallTool(ctx, "fake__echo", map[string]string{"text": "hello"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "hello", text(t, res))

	var mu sync.Mutex
	var progress []float64
	res, err = c.CallTool(ctx, "fake__slow", map[string]int{"steps": 3, "delayMs": 10}, &mcp.CallOptions{
		Progress: func(p *mcp.ProgressParams) { mu.Lock(); progress = append(progress, p.Progress); mu.Unlock() },
	})
	require.NoError(t, err)
	assert.Equal(t, "done after 3 steps", text(t, res))
	mu.Lock()
	assert.Equal(t, []float64{1, 2, 3}, progress, "progress passes through")
	mu.Unlock()

	res, err = c.CallTool(ctx, "fake__ask", map[string]string{"question": "why?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "sampled: why?", text(t, res), "the server's sampling request reached the calling client and back")

	read, err := c.ReadResource(ctx, "demo://greeting/ada")
	require.NoError(t, err)
	require.Len(t, read.Contents, 1)
	assert.Equal(t, "Hello, ada!", read.Contents[0].Text)

	prompt, err := c.GetPrompt(ctx, "fake__greet", map[string]string{"name": "ada"})
	require.NoError(t, err)
	assert.NotEmpty(t, prompt.Messages)

	r.log.waitLog(t, 1, "server stderr", "server=fake", "fake server ready")
	r.log.waitLog(t, 1, "answered the hub's initialize", "server_info=fake")
}

// TestRun_restartsAChildThatDies: a child killed from outside and a child
// that exits are both restarted, with the hub's view following.
func TestRun_restartsAChildThatDies(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, nil)
	waitTool(t, c, "fake__pid", true)
	ctx := ctxFor(t)

	pidOf := func() int {
		t.Helper()
		var pid int
		require.Eventually(t, func() bool {
			res, err := c.CallTool(ctx, "fake__pid", nil, nil)
			if err != nil || res.IsError {
				return false
			}
			pid, err = strconv.Atoi(res.Content[0].Text)
			return err == nil
		}, wait, 20*time.Millisecond)
		return pid
	}
	first := pidOf()
	require.Equal(t, []int{first}, r.pids())
	require.NoError(t, syscall.Kill(first, syscall.SIGKILL))
	r.log.waitLog(t, 1, "was killed by signal 9", "restarting", "server=fake")
	r.log.waitLog(t, 2, "server started")
	second := pidOf()
	assert.NotEqual(t, first, second, "a new child serves")

	_, err := c.CallTool(ctx, "fake__exit", nil, nil)
	require.Error(t, err, "the call in flight fails when the child exits")
	r.log.waitLog(t, 1, "the server exited with status 1; restarting")
	r.log.waitLog(t, 3, "server started")
	assert.NotEqual(t, second, pidOf())
}

// TestRun_childThatExitsOnDiscover: the hub asks server/discover first; a
// child that exits on a method it does not know is restarted, and the hub,
// which remembers it, sends the new child initialize first: the server is
// on the hub after one failed start.
func TestRun_childThatExitsOnDiscover(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("strict", "strict")}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, nil)
	waitTool(t, c, "strict__echo", true)
	res, err := c.CallTool(ctxFor(t), "strict__echo", map[string]string{"text": "hello"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "hello", text(t, res))
	assert.Equal(t, 1, r.log.count("not initialize first", "server/discover"), "the log:\n%s", r.log)
	assert.Equal(t, 1, r.log.count("the server exited with status 2; restarting"), "the log:\n%s", r.log)
	assert.Equal(t, 1, r.log.count("the server answered the hub's initialize"), "the log:\n%s", r.log)
}

// TestRun_garbageOnStdout: lines that are not JSON-RPC are dropped and
// logged, the hub gets an error log message, and the server keeps working.
func TestRun_garbageOnStdout(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("fake", "garbage")}, connect.Options{URL: th.url("/mcp/server")})
	logs := make(chan json.RawMessage, 10)
	c := th.client(t, &mcp.ClientOptions{OnNotification: func(method string, params json.RawMessage) {
		if method == mcp.NotificationMessage {
			logs <- params
		}
	}})
	waitTool(t, c, "fake__garble", true)
	r.log.waitLog(t, 1, "not JSON-RPC", "Starting server...")
	ctx := ctxFor(t)
	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelError))

	res, err := c.CallTool(ctx, "fake__garble", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "garbled", text(t, res))
	r.log.waitLog(t, 1, "not JSON-RPC", "oops, not JSON")
	select {
	case p := <-logs:
		var m mcp.LoggingMessageParams
		require.NoError(t, json.Unmarshal(p, &m))
		assert.Equal(t, mcp.LevelError, m.Level)
		assert.Equal(t, "switchboard-connect", m.Logger)
		assert.Contains(t, m.Data, "not JSON-RPC")
	case <-ctx.Done():
		t.Fatal("the client never heard of the garbage")
	}
	res, err = c.CallTool(ctx, "fake__echo", map[string]string{"text": "still here"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "still here", text(t, res))
	assert.Equal(t, 1, len(r.pids()), "the child was not restarted")
}

// TestRun_initializeTimeout: a child that never answers initialize is
// restarted after InitTimeout.
func TestRun_initializeTimeout(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("mute", "mute")}, connect.Options{
		URL: th.url("/mcp/server"), InitTimeout: 200 * time.Millisecond})
	r.log.waitLog(t, 1, "did not answer initialize within 200ms; restarting", "server=mute")
	r.log.waitLog(t, 2, "server started", "server=mute")
	pids := r.pids()
	require.Eventually(t, func() bool { return processGone(pids[0]) }, wait, 10*time.Millisecond, "the first child was stopped")
}

// TestRun_exitingChildBacksOff: a child that exits at once is restarted
// with growing waits, its stderr logged each time.
func TestRun_exitingChildBacksOff(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("quitter", "exit")}, connect.Options{
		URL: th.url("/mcp/server"), Retry: link.Retry{MinBackoff: 20 * time.Millisecond, MaxBackoff: 80 * time.Millisecond}})
	r.log.waitLog(t, 3, "the server exited with status 3; restarting", "server=quitter")
	assert.GreaterOrEqual(t, r.log.count("server stderr", "giving up at once"), 2)
}

// TestRun_hubRefusesConnections: no hub at the URL; the connector says so
// clearly, retries with backoff, starts no child, and stops on cancel.
func TestRun_hubRefusesConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: "ws://" + addr + "/mcp/server"})
	r.log.waitLog(t, 3, "cannot reach the hub at ws://"+addr+"/mcp/server: connection refused (is the hub running?); retrying", "retry_in=")
	assert.Empty(t, r.pids(), "no child runs without a hub")
	assert.NoError(t, r.stop(t))
}

// TestRun_refusedCredentials: a hub that refuses the token ends Run with
// ErrRefused instead of retrying forever.
func TestRun_refusedCredentials(t *testing.T) {
	file := t.TempDir() + "/tokens.yaml"
	require.NoError(t, os.WriteFile(file, []byte("tokens: [{name: a, token: good-token, roles: [server], servers: [fake]}]"), 0o600))
	tokens, err := hub.LoadTokens(file)
	require.NoError(t, err)
	th := startHub(t, hub.Config{Tokens: tokens})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{
		URL: th.url("/mcp/server"), Header: map[string][]string{"Authorization": {"Bearer bad-token"}}})
	select {
	case err := <-r.done:
		close(r.done)
		assert.ErrorIs(t, err, connect.ErrRefused)
		assert.NotContains(t, err.Error(), "bad-token")
	case <-time.After(wait):
		t.Fatal("Run kept retrying refused credentials")
	}
}

// TestRun_stopKillsTheWholeGroup: on stop, the child and what it started
// (a grandchild that ignores SIGTERM) are gone.
func TestRun_stopKillsTheWholeGroup(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("fake", "parent")}, connect.Options{
		URL: th.url("/mcp/server"), StopGrace: 300 * time.Millisecond})
	c := th.client(t, nil)
	waitTool(t, c, "fake__echo", true)
	m := regexp.MustCompile(`grandchild pid=(\d+)`).FindStringSubmatch(r.log.String())
	require.NotNil(t, m, r.log.String())
	grandchild, _ := strconv.Atoi(m[1])
	child := r.pids()[0]
	require.False(t, processGone(grandchild))

	require.NoError(t, r.stop(t))
	assert.True(t, processGone(child), "the child is gone")
	require.Eventually(t, func() bool { return processGone(grandchild) }, wait, 10*time.Millisecond,
		"the grandchild, which ignores SIGTERM, was killed with the group")
	waitTool(t, c, "fake__echo", false)
	assert.Equal(t, 1, r.log.count("server stopped"))
}

// TestRun_rejectsBadInput: what cannot work is refused before anything
// starts.
func TestRun_rejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		url     string
		servers []connect.Server
		want    string
	}{
		{"http URL", "http://127.0.0.1:1/mcp/server", []connect.Server{{Command: "x"}}, "ws://"},
		{"no server", "ws://127.0.0.1:1/mcp/server", nil, "no server"},
		{"no command", "ws://127.0.0.1:1/mcp/server", []connect.Server{{Name: "a"}}, "a command or an upstream URL is needed"},
		{"both", "ws://127.0.0.1:1/mcp/server", []connect.Server{{Name: "a", Command: "x", Upstream: "http://h/mcp"}}, "not both"},
		{"same name", "ws://127.0.0.1:1/mcp/server", []connect.Server{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}}, "twice"},
		{"token in URL is not echoed", "http://u:s3cr3t@h/?token=s3cr3t", []connect.Server{{Command: "x"}}, "ws://"},
		{"OAuth of a command", "ws://127.0.0.1:1/mcp/server", []connect.Server{{Name: "a", Command: "x",
			OAuth: &connect.OAuthClient{ClientID: "c", Secret: oauth.NewSecret("s3cr3t")}}}, "OAuth credentials are for an upstream URL"},
		{"OAuth beside a header", "ws://127.0.0.1:1/mcp/server", []connect.Server{{Name: "a", Upstream: "http://h/mcp",
			Header: http.Header{"Authorization": {"Bearer s3cr3t"}}, OAuth: &connect.OAuthClient{ClientID: "c", Secret: oauth.NewSecret("s3cr3t")}}},
			`server "a": the upstream's credentials: an Authorization header or OAuth credentials, not both`},
		{"OAuth without secret", "ws://127.0.0.1:1/mcp/server", []connect.Server{{Name: "a", Upstream: "http://h/mcp",
			OAuth: &connect.OAuthClient{ClientID: "c"}}}, "an OAuth client secret (client credentials) or a refresh token file is needed"},
		{"OAuth with a secret file missing", "ws://127.0.0.1:1/mcp/server", []connect.Server{{Name: "a", Upstream: "http://h/mcp",
			OAuth: &connect.OAuthClient{ClientID: "c", SecretFile: "/nonexistent/secret"}}}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := connect.Run(context.Background(), tc.servers, &connect.Options{URL: tc.url})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "s3cr3t")
		})
	}
}

func TestParseConfig(t *testing.T) {
	servers, err := connect.ParseConfig([]byte(`{
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"MEMORY_FILE_PATH": "/tmp/m.json"}},
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "cwd": "/tmp", "roots": ["file:///tmp"]},
    "off": {"command": "nothing", "disabled": true},
    "remote": {"url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "Bearer x"}},
    "legacy": {"type": "sse", "url": "http://127.0.0.1:3002/events"},
    "crm": {"url": "https://crm.example/mcp", "oauth": {"clientId": "c", "clientSecretFile": "/run/secrets/c", "scope": "a b",
      "issuer": "https://idp.example", "audience": "crm"}}
  }
}`))
	require.NoError(t, err)
	require.Len(t, servers, 5)
	assert.Equal(t, &connect.OAuthClient{ClientID: "c", SecretFile: "/run/secrets/c", Scopes: []string{"a", "b"},
		Issuer: "https://idp.example", Audience: "crm"}, servers[0].OAuth)
	servers = servers[1:]
	assert.Equal(t, "files", servers[0].Name, "sorted by name")
	assert.Equal(t, "/tmp", servers[0].Dir)
	assert.Equal(t, []string{"file:///tmp"}, servers[0].Roots)
	assert.Equal(t, "legacy", servers[1].Name)
	assert.Equal(t, connect.TransportSSE, servers[1].Transport)
	assert.Equal(t, "memory", servers[2].Name)
	assert.Equal(t, "npx", servers[2].Command)
	assert.Equal(t, []string{"-y", "@modelcontextprotocol/server-memory"}, servers[2].Args)
	assert.Equal(t, map[string]string{"MEMORY_FILE_PATH": "/tmp/m.json"}, servers[2].Env)
	assert.Equal(t, "http://127.0.0.1:3001/mcp", servers[3].Upstream)
	assert.Equal(t, "Bearer x", servers[3].Header.Get("Authorization"))

	yaml, err := connect.ParseConfig([]byte("servers:\n  everything:\n    command: node\n    args: [index.js]\n"))
	require.NoError(t, err)
	assert.Equal(t, []connect.Server{{Name: "everything", Command: "node", Args: []string{"index.js"}}}, yaml)

	for in, want := range map[string]string{
		"mcpServers: {}":                                            "no server",
		"mcpServers: {a: {args: [x]}}":                              "neither a command nor a url",
		"mcpServers: {a: {command: x, url: http://h}}":              "both",
		"mcpServers: {a: {command: x, disabled: true}}":             "every server is disabled",
		"mcpServers: {a: {command: x}}\nservers: {b: {command: y}}": "not both",
		"mcpServers: [":                                             "servers file",
		"mcpServers: {a: {command: x, oauth: {clientId: c}}}":       "oauth is for a server with a url",
	} {
		_, err := connect.ParseConfig([]byte(in))
		assert.ErrorContains(t, err, want, in)
	}
}

// FuzzParseConfig: any file either parses into servers that each have a
// name and exactly one of a command and an upstream, or is refused with an
// error; nothing panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"mcpServers": {"m": {"command": "npx", "args": ["-y", "x"], "env": {"A": "b"}}}}`))
	f.Add([]byte("servers:\n  a: {url: http://h/mcp, headers: {X: y}}\n  b: {command: c, disabled: true}\n"))
	f.Add([]byte("mcpServers: {a: {command: x, roots: [file:///tmp]}, '': {command: y}}"))
	f.Add([]byte("mcpServers: {a: {url: https://h/mcp, oauth: {clientId: c, refreshTokenFile: /f, scope: 'x y'}}}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		servers, err := connect.ParseConfig(b)
		if err != nil {
			return
		}
		require.NotEmpty(t, servers)
		for _, s := range servers {
			assert.NotEmpty(t, s.Name)
			assert.True(t, (s.Command == "") != (s.Upstream == ""), "%+v", s)
			assert.True(t, s.OAuth == nil || s.Upstream != "", "OAuth credentials are an upstream's: %+v", s)
		}
	})
}

// TestRun_learnsTheServersName: without a name, the hub names the server
// after serverInfo.name, and the connector keeps that name for its later
// connections (so that the hub knows whose failure it sees).
func TestRun_learnsTheServersName(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("", "server")}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, nil)
	waitTool(t, c, "fake__pid", true)
	r.log.waitLog(t, 1, "server started", "server=connect.test")
	res, err := c.CallTool(ctxFor(t), "fake__pid", nil, nil)
	require.NoError(t, err)
	pid, err := strconv.Atoi(res.Content[0].Text)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	r.log.waitLog(t, 1, "server started", "server=fake")
	waitTool(t, c, "fake__pid", true)
}

// TestRun_rootsOutsideAnyCall: a server that asks roots/list at start-up,
// outside any client's call, gets the roots given with --root (sent as
// ?root=), or an empty list without any.
func TestRun_rootsOutsideAnyCall(t *testing.T) {
	th := startHub(t, hub.Config{})
	srv := selfServer("rooted", "roots")
	srv.Roots = []string{"file:///srv/a", "file:///srv/b"}
	r := runConnector(t, []connect.Server{srv, selfServer("bare", "roots")}, connect.Options{URL: th.url("/mcp/server")})
	r.log.waitLog(t, 1, "server=rooted", `line="roots: 2 file:///srv/a file:///srv/b"`)
	r.log.waitLog(t, 1, "server=bare", `line="roots: 0 "`)
	assert.Zero(t, r.log.count("roots/list failed"), r.log.String())
}

// TestRun_failingChildIsDeparted: a child that keeps failing shows in the
// hub's switchboard://servers under departed, with the close code and the
// reason the connector closed with: what happened and that it is retried,
// which is what an operator acts on.
func TestRun_failingChildIsDeparted(t *testing.T) {
	for _, tc := range []struct {
		role   string
		reason string
	}{
		{"exit", `^server exited with status 3; restarting in \S+$`},
		{"mute", `^server did not answer initialize within 200ms; restarting in \S+$`},
	} {
		t.Run(tc.role, func(t *testing.T) {
			th := startHub(t, hub.Config{})
			runConnector(t, []connect.Server{selfServer("failing", tc.role)}, connect.Options{
				URL: th.url("/mcp/server"), InitTimeout: 200 * time.Millisecond})
			c := th.client(t, nil)
			type departure struct {
				Name, Reason, Instance string
				Code                   int
				At                     time.Time
			}
			var got departure
			require.Eventually(t, func() bool {
				res, err := c.ReadResource(ctxFor(t), "switchboard://servers")
				if err != nil || len(res.Contents) != 1 {
					return false
				}
				var doc struct{ Departed []departure }
				if json.Unmarshal([]byte(res.Contents[0].Text), &doc) != nil {
					return false
				}
				for _, d := range doc.Departed {
					if d.Name == "failing" {
						got = d
						return true
					}
				}
				return false
			}, wait, 20*time.Millisecond, "the failing server never showed as departed")
			assert.Equal(t, 1011, got.Code, "closed as a server error")
			assert.Regexp(t, tc.reason, got.Reason)
			assert.NotEmpty(t, got.Instance)
			assert.WithinDuration(t, time.Now(), got.At, wait)
		})
	}
}

// TestRun_exitingChildLeavesNothing: a server that ends by itself takes
// what it started with it, even what detached from its group. The keeper
// left at once as the command did, and a server that exits when its
// connector dies (its stdin ends) could beat the keeper to it: the
// detached grandchild was left to init (seen under load, as a flaky
// TestRun_killedConnectorLeavesNothing).
func TestRun_exitingChildLeavesNothing(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("fake", "daemonize-exit")}, connect.Options{URL: th.url("/mcp/server")})
	r.log.waitLog(t, 1, "grandchild pid=")
	m := regexp.MustCompile(`grandchild pid=(\d+)`).FindStringSubmatch(r.log.String())
	require.NotNil(t, m, r.log.String())
	grandchild, _ := strconv.Atoi(m[1])
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) }) // should the test fail
	assert.Eventually(t, func() bool { return processGone(grandchild) }, wait, 10*time.Millisecond,
		"the detached grandchild went with the server that started it")
}

// TestRun_killedConnectorLeavesNothing: a connector killed with SIGKILL
// (which it cannot see coming) takes its child with it, and what the child
// started: a grandchild in the child's group, and one that detached into a
// session of its own and lost its parent, as daemons do.
func TestRun_killedConnectorLeavesNothing(t *testing.T) {
	for _, role := range []string{"parent", "daemonize"} {
		t.Run(role, func(t *testing.T) {
			th := startHub(t, hub.Config{})
			var log logBuffer
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), roleEnv+"=connector", "SWITCHBOARD_CONNECT_TEST_CHILD="+role,
				"SWITCHBOARD_CONNECT_TEST_HUB="+th.url("/mcp/server"))
			cmd.Stderr = &log
			require.NoError(t, cmd.Start())
			done := make(chan struct{})
			go func() {
				_ = cmd.Wait()
				close(done)
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-done
			})
			c := th.client(t, nil)
			waitTool(t, c, "fake__echo", true)
			m := regexp.MustCompile(`grandchild pid=(\d+)`).FindStringSubmatch(log.String())
			require.NotNil(t, m, log.String())
			grandchild, _ := strconv.Atoi(m[1])
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) }) // should the test fail
			m = pidRe.FindStringSubmatch(log.String())
			require.NotNil(t, m, log.String())
			child, _ := strconv.Atoi(m[1])
			require.False(t, processGone(child))
			require.False(t, processGone(grandchild))

			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			<-done
			require.Eventually(t, func() bool { return processGone(child) && processGone(grandchild) }, wait, 10*time.Millisecond,
				"the child (gone: %v) and the grandchild (gone: %v) went with the connector", processGone(child), processGone(grandchild))
			waitTool(t, c, "fake__echo", false)
		})
	}
}
