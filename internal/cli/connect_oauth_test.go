package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// procFile reads /proc/<pid>/<name>.
func procFile(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + name)
	require.NoError(t, err)
	return string(b)
}

// parentOf returns the parent of pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	_, rest, _ := strings.Cut(procFile(t, pid, "stat"), ") ")
	fields := strings.Fields(rest)
	ppid, err := strconv.Atoi(fields[1])
	require.NoError(t, err)
	return ppid
}

// oauthHub starts a hub that is an OAuth resource server trusting as,
// where the machine client hubClient registers the server name, and
// returns it with a client's token for its /mcp.
func oauthHub(t *testing.T, as *oauthtest.Server, hubClient, name string) (*testHub, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	public := "http://" + ln.Addr().String()
	tokens, err := hub.LoadTokens(writeFile(t, filepath.Join(t.TempDir(), "tokens.yaml"),
		fmt.Sprintf("tokens: []\npolicy:\n  - {claim: client_id, value: %q, roles: [server], servers: [%q]}\n", hubClient, name)))
	require.NoError(t, err)
	h, err := hub.New(hub.Config{Tokens: tokens, OAuth: &hub.OAuthConfig{PublicURL: public, Issuers: []string{as.Issuer()}},
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(nil)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config = h.NewHTTPServer()
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, h.Close())
	})
	return &testHub{Hub: h, srv: srv}, as.Token(as.MachineClient("mcp:client"), public+"/mcp", "mcp:client")
}

// TestConnect_oauthSecrets: `hub connect` as users run it, with client
// secrets in a file and in the environment: the hub and the upstream
// server get tokens got with them, each its own, and the secrets show
// nowhere else: not in the process list, not in the log, not in the
// environment of the keeper and the child. On the command line a secret
// is refused, without being repeated.
func TestConnect_oauthSecrets(t *testing.T) {
	as := oauthtest.Start(t)
	hubClient := as.MachineClient("mcp:server")
	th, clientToken := oauthHub(t, as, hubClient.ID, "remote")
	d := demo.New(&demo.Options{Name: "remote", ClockInterval: time.Hour})
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{Open: func(r *http.Request, s *mcp.StreamSession) error {
		d.Serve(s.Context(), s.Conn())
		return nil
	}})
	t.Cleanup(h.Close)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	up := as.ResourceServer(srv.URL+"/mcp", "mcp:client")
	up.Handle(mux, "/mcp", h)
	upClient := as.MachineClient("mcp:client")

	secretFile := writeFile(t, filepath.Join(t.TempDir(), "hub-secret"), hubClient.Secret+"\n")
	p := startHubCommand(t, []string{connect.UpstreamClientSecretEnv + "=" + upClient.Secret},
		"connect", "--hub", th.base(), "--oauth-client-id", hubClient.ID, "--oauth-client-secret-file", secretFile,
		"--name", "remote", "--upstream", up.Resource, "--upstream-oauth-client-id", upClient.ID).start(t)
	c := th.client(t, &mcp.ClientOptions{Token: clientToken})
	waitTool(t, c, "remote__echo", true)
	res, err := c.CallTool(ctxFor(t), "remote__echo", map[string]string{"text": "with the connector's own tokens"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "with the connector's own tokens", res.Content[0].Text)
	require.NotEmpty(t, up.Tokens())
	assert.Equal(t, upClient.ID, up.Principals()[0].ClientID, "the upstream sees its own client of the connector")
	cmdline := procFile(t, p.cmd.Process.Pid, "cmdline")
	assert.Contains(t, cmdline, hubClient.ID)
	for _, s := range []string{hubClient.Secret, upClient.Secret} {
		assert.False(t, strings.Contains(cmdline, s), "a secret in the process list")
	}
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
	for _, s := range append(up.Tokens(), upClient.Secret, hubClient.Secret) {
		assert.NotContains(t, p.stderr.String(), s, "a secret in the log")
	}
	p.stderr.waitFor(t, 1, "OAuth: getting access tokens for the hub")

	// A stdio child and its keeper never see the connector's secrets (on a
	// hub without tokens, which takes the connector as it is).
	th = startHub(t)
	c = th.client(t, nil)
	secrets := []string{"SWITCHBOARD_TOKEN=static-secret", connect.ClientSecretEnv + "=hub-client-secret",
		connect.UpstreamClientSecretEnv + "=upstream-client-secret"}
	p = startHubCommand(t, secrets, "connect", "--hub", th.base(), "--name", "fake", "--", os.Args[0], stdioServerArg).start(t)
	waitTool(t, c, "fake__echo", true)
	pids := childPids(p.stderr.String())
	require.Len(t, pids, 1)
	keeper := parentOf(t, pids[0])
	require.NotEqual(t, p.cmd.Process.Pid, keeper, "the child runs under a keeper")
	for _, pid := range []int{pids[0], keeper} {
		env := procFile(t, pid, "environ")
		for _, s := range []string{"static-secret", "hub-client-secret", "upstream-client-secret"} {
			assert.False(t, strings.Contains(env, s), "the environment of pid %d holds %s", pid, s)
		}
	}
	assert.True(t, strings.Contains(procFile(t, p.cmd.Process.Pid, "environ"), "hub-client-secret"), "the connector itself has them")
	assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))

	for _, flag := range []string{"--oauth-client-secret", "--upstream-oauth-client-secret=", "-oauth-client-secret"} {
		args := []string{"connect", "--hub", th.base(), flag + "p4ssw0rd", "--", "server"}
		if !strings.HasSuffix(flag, "=") {
			args = []string{"connect", "--hub", th.base(), flag, "p4ssw0rd", "--", "server"}
		}
		err := Run(context.Background(), args, envOf(nil, &bytes.Buffer{}))
		require.ErrorIs(t, err, ErrUsage, flag)
		assert.ErrorContains(t, err, "never taken on the command line", flag)
		assert.NotContains(t, err.Error(), "p4ssw0rd")
	}
}

// TestConnect_oauthUsage: the OAuth flags that cannot work together are
// refused before anything starts, each with what to do.
func TestConnect_oauthUsage(t *testing.T) {
	dir := t.TempDir()
	secret := writeFile(t, dir+"/secret", "s3cret\n")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--oauth-client-id", "c", "--", "server"}, nil, "--oauth-client-id needs the client's secret: --oauth-client-secret-file FILE or " + connect.ClientSecretEnv},
		{[]string{"--oauth-client-id", "c", "--token", "t", "--", "server"}, map[string]string{connect.ClientSecretEnv: "s"}, "not both"},
		{[]string{"--oauth-client-id", "c", "--oauth-client-secret-file", dir + "/missing", "--", "server"}, nil, "secret: open "},
		{[]string{"--oauth-issuer", "https://idp.example", "--", "server"}, nil, "need --oauth-client-id"},
		{[]string{"--oauth-client-id", "c", "--oauth-client-secret-file", secret, "--oauth-issuer", "ftp://idp", "--", "server"}, nil, "issuer"},
		{[]string{"--upstream-oauth-client-id", "c", "--upstream-oauth-client-secret-file", secret, "--", "server"}, nil, "applies to --upstream"},
		{[]string{"--upstream-oauth-client-id", "c", "--name", "x", "--upstream", "http://127.0.0.1:1/mcp"}, nil, "needs the client's secret"},
		{[]string{"--upstream-oauth-refresh-token-file", secret, "--name", "x", "--upstream", "http://127.0.0.1:1/mcp"}, nil, "need --upstream-oauth-client-id"},
		{[]string{"--upstream-oauth-client-id", "c", "--upstream-oauth-client-secret-file", secret, "--header", "Authorization: Bearer x",
			"--name", "x", "--upstream", "http://127.0.0.1:1/mcp"}, nil, "an Authorization header or OAuth credentials, not both"},
	} {
		args := append([]string{"connect", "--hub", "ws://127.0.0.1:1"}, tc.args...)
		err := Run(context.Background(), args, envOf(tc.env, &bytes.Buffer{}))
		require.Error(t, err, tc.args)
		assert.Contains(t, err.Error(), tc.want, tc.args)
		assert.NotContains(t, err.Error(), "s3cret", tc.args)
	}
}
