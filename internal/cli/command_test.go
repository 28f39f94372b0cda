package cli

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// TestRun_help: `hub --help` and each command's help say what, how, which
// flags, with an example, on standard output.
func TestRun_help(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:", "hub [serve] [flags]", "hub connect --hub URL", "hub stdio --hub URL", "Examples:",
			"hub connect --hub ws://127.0.0.1:8080 -- npx -y @modelcontextprotocol/server-memory", "Flags of hub serve:", "--addr ADDRESS"}},
		{[]string{"help"}, []string{"Usage:", "hub help [COMMAND]"}},
		{[]string{"-h"}, []string{"Usage:"}},
		{[]string{"serve", "--help"}, []string{"hub serve: run the hub", "--tokens FILE", "$SWITCHBOARD_TOKENS", "Examples:", "SIGHUP"}},
		{[]string{"connect", "--help"}, []string{"hub connect: put MCP servers on a hub", "-- COMMAND [ARGS...]", "--config FILE",
			"--upstream URL", "--hub URL", "$SWITCHBOARD_TOKEN", "--root URI", "Examples:", "mcpServers:"}},
		{[]string{"help", "connect"}, []string{"hub connect: put MCP servers on a hub"}},
		{[]string{"stdio", "-h"}, []string{"hub stdio: the hub as a local stdio MCP server", "--server NAME", "Examples:", `"command": "hub"`}},
	} {
		var out bytes.Buffer
		err := Run(context.Background(), tc.args, &Env{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }})
		require.NoError(t, err, tc.args)
		for _, w := range tc.want {
			assert.Contains(t, out.String(), w, tc.args)
		}
	}
}

// TestRun_usageErrors: a command line that cannot run says why, and
// matches ErrUsage (exit status 2).
func TestRun_usageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"help", "bogus"}, `no help on "bogus"`},
		{[]string{"connect", "--hub", "ws://127.0.0.1:1"}, "what to connect is missing"},
		{[]string{"connect", "--", "server"}, "--hub is required"},
		{[]string{"connect", "--hub", "ws://h:1", "--bogus", "x"}, "unknown flag --bogus"},
		{[]string{"connect", "--hub", "ws://h:1", "--config", "f.yaml", "--", "server"}, "give one of"},
		{[]string{"connect", "--hub", "ws://h:1", "--config", "f.yaml", "--name", "x"}, "with --config, put them in the file"},
		{[]string{"connect", "--hub", "ws://h:1", "--upstream", "http://h/mcp"}, "--upstream needs --name"},
		{[]string{"connect", "--hub", "ws://h:1", "--name", "x", "--upstream", "ftp://h/mcp"}, "http:// or https://"},
		{[]string{"connect", "--hub", "ws://h:1", "--header", "A: b", "--", "server"}, "apply to --upstream only"},
		{[]string{"connect", "--hub", "ws://h:1", "--name", "x", "--upstream", "http://h/mcp", "--transport", "grpc"}, "--transport must be"},
		{[]string{"connect", "--hub", "ws://h:1", "--name", "x", "--upstream", "http://h/mcp", "--header", "nocolon"}, "'Name: value'"},
		{[]string{"connect", "--hub", "ftp://h:1", "--", "server"}, "the scheme must be"},
		{[]string{"connect", "--hub", "ws://h:1", "--init-timeout", "soon", "--", "server"}, "invalid value"},
		{[]string{"connect", "--hub", "ws://h:1", "--pool", "0..2", "--", "server"}, "--pool: 0..2: at least one run"},
		{[]string{"connect", "--hub", "ws://h:1", "--pool", "many", "--", "server"}, `--pool: "many" is neither`},
		{[]string{"connect", "--hub", "ws://h:1", "--config", "f.yaml", "--pool", "1..2"}, "with --config, put them in the file"},
		{[]string{"stdio"}, "--hub is required"},
		{[]string{"stdio", "--hub", "ws://h:1/mcp", "--server", "x"}, "not both"},
		{[]string{"stdio", "--hub", "ws://h:1", "extra"}, "unexpected arguments"},
		{[]string{"serve", "extra"}, "unexpected arguments"},
		{[]string{"stdio", "--hub", "ws://h:1", "--log-level", "loud"}, "--log-level"},
	} {
		err := Run(context.Background(), tc.args, envOf(nil, &bytes.Buffer{}))
		require.Error(t, err, tc.args)
		assert.ErrorIs(t, err, ErrUsage, tc.args)
		assert.Contains(t, err.Error(), tc.want, tc.args)
	}
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		raw, path, token string
		url, auth        string
	}{
		{"ws://127.0.0.1:8080", "/mcp/server", "", "ws://127.0.0.1:8080/mcp/server", ""},
		{"127.0.0.1:8080", "/mcp", "", "ws://127.0.0.1:8080/mcp", ""},
		{"http://h:1/", "/mcp", "", "ws://h:1/mcp", ""},
		{"https://hub.example", "/servers/a/mcp", "t", "wss://hub.example/servers/a/mcp", "Bearer t"},
		{"ws://h:1/custom/path?x=1", "/mcp", "", "ws://h:1/custom/path?x=1", ""},
		{"ws://h:1?token=secret", "/mcp", "", "ws://h:1/mcp", "Bearer secret"},
		{"ws://h:1?token=secret", "/mcp", "flag", "ws://h:1/mcp", "Bearer flag"},
	} {
		u, h, err := endpoint(tc.raw, tc.path, tc.token)
		require.NoError(t, err, tc.raw)
		assert.Equal(t, tc.url, u, tc.raw)
		assert.Equal(t, tc.auth, h.Get("Authorization"), tc.raw)
	}
}

// TestMain_exitStatus: the binary exits 2 on a usage error, with the help
// to read, and 1 on a failure.
func TestMain_exitStatus(t *testing.T) {
	run := func(args ...string) (int, string) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(cleanEnv(), roleEnv+"=hub")
		var out bytes.Buffer
		cmd.Stderr = &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &ee)
			return ee.ExitCode(), out.String()
		}
		return 0, out.String()
	}
	code, out := run("connect", "--bogus")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "hub: unknown flag --bogus\nRun 'hub connect --help' for usage.")
	code, out = run("serve", "--addr", "0.0.0.0:0")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "refusing to listen")
	code, _ = run("--help")
	assert.Equal(t, 0, code)
}

// TestConnect_process: `hub connect -- COMMAND` as users run it: the
// server is on the hub, its stderr is in the connector's log, and SIGTERM
// (or SIGINT) stops the child and the connection and exits 0.
func TestConnect_process(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			th := startHub(t)
			p := startHubCommand(t, nil, "connect", "--hub", th.base(), "--name", "fake", "--", os.Args[0], stdioServerArg).start(t)
			c := th.client(t, nil)
			waitTool(t, c, "fake__echo", true)
			res, err := c.CallTool(ctxFor(t), "fake__echo", map[string]string{"text": "through a process"}, nil)
			require.NoError(t, err)
			assert.Equal(t, "through a process", res.Content[0].Text)
			p.stderr.waitFor(t, 1, `msg="server stderr" server=fake line="fake server ready`)

			pids := childPids(p.stderr.String())
			require.Len(t, pids, 1)
			assert.Equal(t, 0, p.stop(t, sig), "a signal ends the connector cleanly; its log:\n%s", p.stderr)
			assert.True(t, processGone(pids[0]), "no orphan child")
			assert.Contains(t, p.stderr.String(), "server stopped")
			waitTool(t, c, "fake__echo", false)
		})
	}
}

// TestConnect_configFile: one process runs every server of a desktop-style
// file, each under its key.
func TestConnect_configFile(t *testing.T) {
	th := startHub(t)
	file := t.TempDir() + "/servers.json"
	require.NoError(t, os.WriteFile(file, []byte(`{"mcpServers": {
		"one": {"command": "`+os.Args[0]+`", "args": ["`+stdioServerArg+`"]},
		"two": {"command": "`+os.Args[0]+`", "args": ["`+stdioServerArg+`"]}
	}}`), 0o600))
	p := startHubCommand(t, nil, "connect", "--hub", th.base(), "--config", file).start(t)
	c := th.client(t, nil)
	waitTool(t, c, "one__echo", true)
	waitTool(t, c, "two__echo", true)
	pids := childPids(p.stderr.String())
	require.Len(t, pids, 2)
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
	for _, pid := range pids {
		assert.True(t, processGone(pid))
	}
}

// TestConnect_hubRefuses: a hub URL where nothing listens: the connector
// says so clearly and keeps trying, with growing waits.
func TestConnect_hubRefuses(t *testing.T) {
	th := startHub(t)
	addr := strings.TrimPrefix(th.base(), "ws://")
	th.srv.Close() // nothing listens there any more
	p := startHubCommand(t, nil, "connect", "--hub", "ws://"+addr, "--", os.Args[0], stdioServerArg).start(t)
	p.stderr.waitFor(t, 3, "cannot reach the hub at ws://"+addr+"/mcp/server: connection refused (is the hub running?); retrying")
	assert.Empty(t, childPids(p.stderr.String()), "no child without a hub")
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
}

// TestStdio_process: `hub stdio` as a desktop client runs it: protocol on
// stdout, messages for people on stderr, exit 0 when the client closes
// stdin.
func TestStdio_process(t *testing.T) {
	th := startHub(t)
	startHubCommand(t, nil, "connect", "--hub", th.base(), "--name", "fake", "--", os.Args[0], stdioServerArg).start(t)

	p := startHubCommand(t, nil, "stdio", "--hub", th.base())
	stdin, err := p.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.start(t)
	c, err := mcp.ConnectConn(ctxFor(t), peer.NewStdio(stdout, stdin, nil), session(nil))
	require.NoError(t, err)
	defer c.Close()
	waitTool(t, c, "fake__echo", true)
	res, err := c.CallTool(ctxFor(t), "fake__echo", map[string]string{"text": "via stdio"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "via stdio", res.Content[0].Text)
	p.stderr.waitFor(t, 1, "connected to the hub at "+th.base()+"/mcp")

	require.NoError(t, c.Close()) // closes stdin: the client is gone
	select {
	case <-p.done:
		assert.Equal(t, 0, p.state.ExitCode())
	case <-time.After(wait):
		t.Fatal("hub stdio did not exit when its client closed stdin")
	}
}

// TestStdio_processSignal: SIGTERM ends `hub stdio` at once, even while
// its client keeps stdin open and the hub is unreachable.
func TestStdio_processSignal(t *testing.T) {
	p := startHubCommand(t, nil, "stdio", "--hub", "ws://127.0.0.1:1")
	stdin, err := p.cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	p.start(t)
	p.stderr.waitFor(t, 1, "cannot reach the hub at ws://127.0.0.1:1/mcp: connection refused")
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
}

// TestStdio_processOneServer: with --server, the client sees one server of
// the hub under its own names (/servers/NAME/mcp).
func TestStdio_processOneServer(t *testing.T) {
	th := startHub(t)
	startHubCommand(t, nil, "connect", "--hub", th.base(), "--name", "fake", "--", os.Args[0], stdioServerArg).start(t)
	p := startHubCommand(t, nil, "stdio", "--hub", th.base(), "--server", "fake")
	stdin, err := p.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.start(t)
	c, err := mcp.ConnectConn(ctxFor(t), peer.NewStdio(stdout, stdin, nil), session(nil))
	require.NoError(t, err)
	defer c.Close()
	waitTool(t, c, "echo", true)
	res, err := c.CallTool(ctxFor(t), "echo", map[string]string{"text": "own names"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "own names", res.Content[0].Text)
	p.stderr.waitFor(t, 1, "connected to the hub at "+th.base()+"/servers/fake/mcp")
}

// TestConnect_tokenFile: the connector reads its token from --token-file,
// so that it never shows in the process list; a token given with --token
// works and is warned about, and the warning never holds the token.
func TestConnect_tokenFile(t *testing.T) {
	dir := t.TempDir()
	tokensFile := dir + "/tokens.yaml"
	require.NoError(t, os.WriteFile(tokensFile, []byte(`tokens:
  - {name: srv, token: server-secret, roles: [server], servers: ["*"]}
  - {name: user, token: client-secret, roles: [client]}
`), 0o600))
	tokens, err := hub.LoadTokens(tokensFile)
	require.NoError(t, err)
	h, err := hub.New(hub.Config{Tokens: tokens, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(h.NewHTTPServer().Handler)
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, h.Close())
	})
	th := &testHub{Hub: h, srv: srv}
	c := th.client(t, &mcp.ClientOptions{Token: "client-secret"})

	tokenFile := dir + "/hub-token"
	require.NoError(t, os.WriteFile(tokenFile, []byte("server-secret\n"), 0o600))
	p := startHubCommand(t, nil, "connect", "--hub", th.base(), "--token-file", tokenFile, "--name", "filed", "--", os.Args[0], stdioServerArg).start(t)
	waitTool(t, c, "filed__echo", true)
	assert.NotContains(t, p.stderr.String(), "command line", "no warning without --token")
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))

	p = startHubCommand(t, nil, "connect", "--hub", th.base(), "--token", "server-secret", "--name", "flagged", "--", os.Args[0], stdioServerArg).start(t)
	waitTool(t, c, "flagged__echo", true)
	p.stderr.waitFor(t, 1, "the token is on the command line (--token), where every user of this machine sees it in the process list; use --token-file FILE or SWITCHBOARD_TOKEN instead")
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
	assert.NotContains(t, p.stderr.String(), "server-secret")

	p = startHubCommand(t, []string{"SWITCHBOARD_TOKEN=server-secret"}, "connect", "--hub", th.base(), "--name", "environ", "--", os.Args[0], stdioServerArg).start(t)
	waitTool(t, c, "environ__echo", true)
	assert.NotContains(t, p.stderr.String(), "command line", "no warning for the variable")
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "x", "--token-file", tokenFile}, "not both"},
		{[]string{"--token-file", dir + "/missing"}, "--token-file: open "},
		{[]string{"--token-file", writeFile(t, dir+"/empty", "\n\n")}, "holds no token"},
	} {
		args := append(append([]string{"connect", "--hub", th.base()}, tc.args...), "--", "server")
		err := Run(context.Background(), args, envOf(nil, &bytes.Buffer{}))
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want, tc.args)
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
