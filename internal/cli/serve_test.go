package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/jaegertest"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// envOf is an Env reading variables from vars only, writing to stderr.
func envOf(vars map[string]string, stderr io.Writer) *Env {
	return &Env{Stdout: io.Discard, Stderr: stderr, LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}}
}

func TestParse_environmentThenCommandLine(t *testing.T) {
	var o serveOptions
	c := serveCommand(&o)
	env := envOf(map[string]string{"SWITCHBOARD_ADDR": "127.0.0.1:9999", "SWITCHBOARD_LOG_FORMAT": "json", "SWITCHBOARD_DEMO": "true"}, io.Discard)
	require.NoError(t, c.parse([]string{"--log-format", "text"}, env))
	assert.Equal(t, "127.0.0.1:9999", o.addr, "the environment sets what the command line does not")
	assert.True(t, o.demo)
	assert.Equal(t, "text", o.log.format, "the command line wins")

	c = serveCommand(&serveOptions{})
	err := c.parse(nil, envOf(map[string]string{"SWITCHBOARD_CALL_TIMEOUT": "soon"}, io.Discard))
	assert.ErrorContains(t, err, "SWITCHBOARD_CALL_TIMEOUT")
	assert.ErrorIs(t, err, ErrUsage)
}

func TestParse_taskAfter(t *testing.T) {
	var o serveOptions
	c := serveCommand(&o)
	env := envOf(map[string]string{"SWITCHBOARD_TASK_AFTER_FOR": "slow=5s, crawl=0"}, io.Discard)
	require.NoError(t, c.parse([]string{"--task-after", "0"}, env))
	after, per, err := o.taskAfterConfig()
	require.NoError(t, err)
	assert.Negative(t, after, "0 disables, which the hub's Config says with a negative duration")
	assert.Equal(t, map[string]time.Duration{"slow": 5 * time.Second, "crawl": -1}, per)

	o = serveOptions{}
	require.NoError(t, serveCommand(&o).parse(nil, envOf(nil, io.Discard)))
	after, per, err = o.taskAfterConfig()
	require.NoError(t, err)
	assert.Zero(t, after, "on by default: the hub's default (DefaultTaskAfter, or half the call timeout)")
	assert.Nil(t, per)

	for _, bad := range []string{"slow", "=5s", "slow=soon"} {
		o = serveOptions{taskAfterFor: bad}
		_, _, err := o.taskAfterConfig()
		assert.ErrorIs(t, err, ErrUsage, bad)
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:80": true, "[::1]:8080": true, "127.1.2.3:1": true,
		":8080": false, "0.0.0.0:8080": false, "10.0.0.1:8080": false, "example.com:80": false, "nonsense": false,
	} {
		assert.Equal(t, want, isLoopback(addr), addr)
	}
}

func TestRun_refusesToExposeWithoutTokens(t *testing.T) {
	env := envOf(nil, io.Discard)
	err := Run(context.Background(), []string{"--addr", "0.0.0.0:0"}, env)
	assert.ErrorContains(t, err, "without --tokens")
	err = Run(context.Background(), []string{"--log-format", "xml"}, env)
	assert.ErrorContains(t, err, "text or json")
	err = Run(context.Background(), []string{"serve", "--tokens", "/nonexistent/tokens.yaml"}, env)
	require.Error(t, err)
}

// TestRun_servesAndShutsDownCleanly runs the command with the demo server,
// finds the dashboard and the demo server, then stops it as a signal would.
func TestRun_servesAndShutsDownCleanly(t *testing.T) {
	logs := newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--addr", "127.0.0.1:0", "--demo", "--drain-timeout", "2s"}, envOf(nil, logs))
	}()

	var addr string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "switchboard listening") {
				_, rest, _ := strings.Cut(line, "addr=")
				addr, _, _ = strings.Cut(rest, " ")
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the hub never said it was listening")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "server registered") }, 10*time.Second, 10*time.Millisecond,
		"the demo server never registered")

	resp, err := http.Get("http://" + addr + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Content-Security-Policy"))

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "a signal ends the command cleanly (exit 0)")
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop")
	}
	assert.Contains(t, logs.String(), "draining")
}

// TestRun_demoWithTokens: with --tokens, the demo server gets credentials of
// its own and registers.
func TestRun_demoWithTokens(t *testing.T) {
	file := t.TempDir() + "/tokens.yaml"
	require.NoError(t, os.WriteFile(file, []byte("tokens: [{name: a, token: admin-secret, roles: [admin]}]"), 0o600))
	logs := newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--demo", "--tokens", file}, envOf(nil, logs))
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "server registered") }, 10*time.Second, 10*time.Millisecond,
		"the demo server never registered: %s", logs)
	cancel()
	require.NoError(t, <-done)
}

// TestRun_oauth: with --oauth-issuer and --public-url the hub takes access
// tokens of the issuer (the demo server gets credentials of its own
// without a tokens file), and --audit-log records who called what.
func TestRun_oauth(t *testing.T) {
	as := oauthtest.Start(t)
	audit := filepath.Join(t.TempDir(), "audit.log")
	const public = "http://hub.test"
	logs := newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--demo", "--oauth-issuer", as.Issuer(),
			"--public-url", public, "--audit-log", audit}, envOf(nil, logs))
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "server registered") }, 10*time.Second, 10*time.Millisecond,
		"the demo server never registered: %s", logs)
	_, rest, _ := strings.Cut(logs.String(), "addr=")
	addr, _, _ := strings.Cut(rest, " ")

	resp, err := http.Get("http://" + addr + "/.well-known/oauth-protected-resource/mcp")
	require.NoError(t, err)
	var md oauth.ResourceMetadata
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&md))
	resp.Body.Close()
	assert.Equal(t, public+"/mcp", md.Resource)
	assert.Equal(t, []string{as.Issuer()}, md.AuthorizationServers)

	tok := as.Token(as.MachineClient("mcp:client"), public+"/mcp", "mcp:client")
	c, err := mcp.Connect(ctxFor(t), "http://"+addr+"/mcp", &mcp.ClientOptions{Token: tok, ProtocolVersion: mcp.LatestVersion})
	require.NoError(t, err)
	res, err := c.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "hi"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "hi", res.Content[0].Text)
	c.Close()

	cancel()
	require.NoError(t, <-done)
	b, err := os.ReadFile(audit)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"event":"call"`)
	assert.Contains(t, string(b), `"tool":"echo"`)
	assert.NotContains(t, string(b), tok)
}

func TestRun_oauthFlags(t *testing.T) {
	env := envOf(nil, io.Discard)
	err := Run(context.Background(), []string{"--oauth-issuer", "https://idp.example"}, env)
	assert.ErrorContains(t, err, "--oauth-issuer needs --public-url")
	assert.ErrorIs(t, err, ErrUsage)
	err = Run(context.Background(), []string{"--dashboard-client-id", "x"}, env)
	assert.ErrorContains(t, err, "--dashboard-client-id needs --oauth-issuer")
	err = Run(context.Background(), []string{"--oauth-issuer", "ftp://idp.example", "--public-url", "http://hub.test"}, env)
	assert.ErrorContains(t, err, "issuer")
	err = Run(context.Background(), []string{"--oauth-issuer", "https://idp.example", "--public-url", "http://hub.test/some/path"}, env)
	assert.ErrorContains(t, err, "must be an http(s) URL with a host and no path")
	err = Run(context.Background(), []string{"--audit-log", "/nonexistent/dir/audit.log"}, env)
	assert.ErrorContains(t, err, "audit log")
}

// TestServe_introspectionFlags: the introspection clients follow the
// issuers' order, each secret from its file (or, for one issuer, the
// environment), never from the command line; mismatched lists are usage
// errors that say what to give.
func TestServe_introspectionFlags(t *testing.T) {
	dir := t.TempDir()
	secretA := filepath.Join(dir, "a")
	require.NoError(t, os.WriteFile(secretA, []byte("secret-a\n"), 0o600))
	issuers := "https://a.example,https://b.example"
	parse := func(env map[string]string, args ...string) (*hub.OAuthConfig, error) {
		var o serveOptions
		e := envOf(env, io.Discard)
		require.NoError(t, serveCommand(&o).parse(append([]string{"--public-url", "http://hub.test"}, args...), e))
		return o.oauthConfig(e)
	}

	cfg, err := parse(nil, "--oauth-issuer", issuers, "--oauth-introspection-client-id", "hub-a,",
		"--oauth-introspection-secret-file", secretA+",", "--oauth-introspection-cache", "10s")
	require.NoError(t, err)
	require.Len(t, cfg.Introspection, 1)
	a := cfg.Introspection["https://a.example"]
	require.NotNil(t, a)
	assert.Equal(t, "hub-a", a.ClientID)
	assert.Equal(t, "secret-a", a.Secret.Reveal())
	assert.Equal(t, 10*time.Second, a.CacheFor)

	cfg, err = parse(map[string]string{"SWITCHBOARD_OAUTH_INTROSPECTION_CLIENT_ID": ",hub-b", "SWITCHBOARD_OAUTH_INTROSPECTION_SECRET": "from-env"},
		"--oauth-issuer", issuers)
	require.NoError(t, err)
	b := cfg.Introspection["https://b.example"]
	require.NotNil(t, b)
	assert.Equal(t, "from-env", b.Secret.Reveal())
	assert.Equal(t, oauth.DefaultIntrospectionCache, b.CacheFor)

	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--oauth-issuer", issuers, "--oauth-introspection-client-id", "hub"}, "has 1 items for 2 issuers"},
		{nil, []string{"--oauth-issuer", issuers, "--oauth-introspection-client-id", "a,b", "--oauth-introspection-secret-file", secretA}, "--oauth-introspection-secret-file has 1 items for 2 issuers"},
		{nil, []string{"--oauth-issuer", issuers, "--oauth-introspection-client-id", "a,", "--oauth-introspection-secret-file", "," + secretA}, "names a file for https://b.example, which has no introspection client id"},
		{nil, []string{"--oauth-issuer", issuers, "--oauth-introspection-secret-file", secretA + "," + secretA}, "needs --oauth-introspection-client-id"},
		{nil, []string{"--oauth-issuer", issuers, "--oauth-introspection-client-id", "a,"}, "needs its secret: --oauth-introspection-secret-file or SWITCHBOARD_OAUTH_INTROSPECTION_SECRET"},
		{map[string]string{"SWITCHBOARD_OAUTH_INTROSPECTION_SECRET": "x"}, []string{"--oauth-issuer", issuers, "--oauth-introspection-client-id", "a,b"}, "SWITCHBOARD_OAUTH_INTROSPECTION_SECRET serves one issuer only"},
		{nil, []string{"--oauth-issuer", "https://a.example", "--oauth-introspection-client-id", "a", "--oauth-introspection-secret-file", filepath.Join(dir, "missing")}, "the introspection secret of https://a.example"},
	} {
		_, err := parse(tt.env, tt.args...)
		assert.ErrorContains(t, err, tt.want, "%v", tt.args)
	}
}

// TestRun_tracing: --tracing with the standard OTEL_* variables exports the
// hub's spans where they say (a real Jaeger here); a configuration the
// exporter cannot use stops the command at start, with the reason.
func TestRun_tracing(t *testing.T) {
	j := jaegertest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPGRPC())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	logs := newSyncBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"--addr", "127.0.0.1:0", "--demo"}, envOf(map[string]string{"SWITCHBOARD_TRACING": "true"}, logs))
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "server registered") }, 10*time.Second, 10*time.Millisecond,
		"the demo server never registered: %s", logs)
	_, rest, _ := strings.Cut(logs.String(), "addr=")
	addr, _, _ := strings.Cut(rest, " ")
	since := time.Now()
	c, err := mcp.Connect(context.Background(), "ws://"+addr+"/mcp", nil)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CallTool(context.Background(), "demo__add", map[string]int{"a": 1, "b": 2}, nil)
	require.NoError(t, err)
	j.WaitTraces(t, "switchboard", since, func(tr *jaegertest.Trace) bool { return tr.Span("tools/call demo__add") != nil })

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	err = Run(context.Background(), []string{"--addr", "127.0.0.1:0", "--tracing"}, envOf(nil, io.Discard))
	assert.ErrorContains(t, err, `OTLP protocol "http/json"`)
}
