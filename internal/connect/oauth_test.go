package connect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// oauthHub is a hub that is an OAuth 2.1 resource server trusting as: a
// server dialing out needs a token for <hub>/mcp/server with mcp:server,
// and registers what the policy lets its client register. It can restart
// on the same address, as a new process would.
type oauthHub struct {
	*testHub
	t        *testing.T
	as       *oauthtest.Server
	addr     string
	tokens   string // the tokens file
	audit    *hub.AuditLog
	auditLog string
	resource string // <hub>/mcp/server
}

// startOAuthHub starts a hub trusting as, where each machine client of
// servers may register the server of the name it maps to.
func startOAuthHub(t *testing.T, as *oauthtest.Server, servers map[string]string) *oauthHub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dir := t.TempDir()
	oh := &oauthHub{t: t, as: as, addr: ln.Addr().String(), tokens: filepath.Join(dir, "tokens.yaml"), auditLog: filepath.Join(dir, "audit.log")}
	oh.resource = "http://" + oh.addr + "/mcp/server"
	oh.audit, err = hub.OpenAuditLog(oh.auditLog)
	require.NoError(t, err)
	t.Cleanup(func() { oh.audit.Close() }) // after the hub's own cleanup
	policy := "tokens: []\npolicy:\n"
	for client, name := range servers {
		policy += fmt.Sprintf("  - {claim: client_id, value: %q, roles: [server], servers: [%q]}\n", client, name)
	}
	require.NoError(t, os.WriteFile(oh.tokens, []byte(policy), 0o600))
	oh.start(ln)
	return oh
}

func (oh *oauthHub) start(ln net.Listener) {
	tokens, err := hub.LoadTokens(oh.tokens)
	require.NoError(oh.t, err)
	oh.testHub = startHubOn(oh.t, ln, hub.Config{Tokens: tokens, Audit: oh.audit,
		OAuth: &hub.OAuthConfig{PublicURL: "http://" + oh.addr, Issuers: []string{oh.as.Issuer()}}})
}

// client connects a client with a token of a machine client of its own.
func (oh *oauthHub) client(t *testing.T) *mcp.Client {
	tok := oh.as.Token(oh.as.MachineClient("mcp:client"), "http://"+oh.addr+"/mcp", "mcp:client")
	return oh.testHub.client(t, &mcp.ClientOptions{Token: tok})
}

// decision is a line of the hub's audit log: an authorization.
type decision struct {
	Event, Endpoint, Method, Decision, Reason, ClientID string
}

// upgrades waits until the audit log holds n decisions about WebSocket
// upgrades of /mcp/server, and returns them.
func (oh *oauthHub) upgrades(n int) []decision {
	oh.t.Helper()
	var out []decision
	require.Eventually(oh.t, func() bool {
		out = out[:0]
		b, _ := os.ReadFile(oh.auditLog)
		for _, line := range strings.Split(string(b), "\n") {
			var d decision
			if json.Unmarshal([]byte(line), &d) == nil && d.Event == "authorization" && d.Endpoint == "/mcp/server" && d.Method == "websocket" {
				out = append(out, d)
			}
		}
		return len(out) >= n
	}, wait, 10*time.Millisecond, "fewer than %d upgrades of /mcp/server in the audit log", n)
	return out
}

// restart stops the hub and starts another on its address: every
// connection ends, and the connector must dial again.
func (oh *oauthHub) restart() {
	oh.stop()
	ln, err := net.Listen("tcp", oh.addr)
	require.NoError(oh.t, err)
	oh.start(ln)
}

// machine registers a machine client and returns its OAuth credentials.
func machine(as *oauthtest.Server, scopes ...string) (*connect.OAuthClient, oauthtest.Client) {
	m := as.MachineClient(scopes...)
	return &connect.OAuthClient{ClientID: m.ID, Secret: oauth.NewSecret(m.Secret)}, m
}

// callUntil calls tool on c, a call every 5 ms (well under the hub's rate
// limit), until stop is closed, and returns how many calls were made and
// how many failed, with the first failure.
func callUntil(c *mcp.Client, tool string, stop <-chan struct{}) (calls, failed int, first error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return calls, failed, first
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		res, err := c.CallTool(ctx, tool, map[string]string{"text": "on and on"}, nil)
		cancel()
		calls++
		if err == nil && (res.IsError || res.Content[0].Text != "on and on") {
			err = fmt.Errorf("unexpected result %+v", res)
		}
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
}

// noSecrets checks that none of the secrets shows in the log.
func noSecrets(t *testing.T, log string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.NotEmpty(t, s)
		assert.NotContains(t, log, s, "a secret in the log")
	}
}

// TestOAuth_hubByClientCredentials: a connector with a machine client's
// credentials finds the hub's authorization server from the hub's 401
// (its resource metadata), gets a token for <hub>/mcp/server with
// mcp:server by client credentials, and registers its server with it.
func TestOAuth_hubByClientCredentials(t *testing.T) {
	as := oauthtest.Start(t)
	creds, m := machine(as, "mcp:server")
	creds.Scopes = []string{"mcp:server"}
	oh := startOAuthHub(t, as, map[string]string{m.ID: "fake"})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: oh.url("/mcp/server"), OAuth: creds})
	c := oh.client(t)
	waitTool(t, c, "fake__echo", true)
	res, err := c.CallTool(ctxFor(t), "fake__echo", map[string]string{"text": "with a machine token"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "with a machine token", text(t, res))

	assert.Equal(t, []decision{{Event: "authorization", Endpoint: "/mcp/server", Method: "websocket", Decision: "allow", ClientID: m.ID}},
		oh.upgrades(1), "the hub let the connector in as its machine client")
	r.log.waitLog(t, 1, "OAuth: getting access tokens for the hub", "issuer="+as.Issuer(), "resource="+oh.resource,
		"scopes=mcp:server", "grant=client_credentials", "client_id="+m.ID)
	assert.Equal(t, 1, r.log.count("got an access token for the hub"))
	noSecrets(t, r.log.String(), m.Secret)
}

// TestOAuth_hubWithoutOAuth: a hub that is no resource server (no
// metadata) gets a connector with OAuth credentials nowhere, said clearly,
// and no child is started.
func TestOAuth_hubWithoutOAuth(t *testing.T) {
	as := oauthtest.Start(t)
	th := startHub(t, hub.Config{})
	creds, _ := machine(as, "mcp:server")
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: th.url("/mcp/server"), OAuth: creds})
	r.log.waitLog(t, 1, "cannot get an access token for the hub", "no protected resource metadata for "+strings.TrimSuffix(th.srv.URL, "/")+"/mcp/server")
	assert.Empty(t, r.pids(), "no child without a token")
	assert.Zero(t, as.Requests("/token"))
}

// TestOAuth_hubTokenAcrossExpiry: tokens of 2 s. The connector's WebSocket,
// admitted once, outlives its token while a client calls the server all
// along (no call fails, no reconnection); when the hub goes away later,
// the connector dials again with a new token, the old one having expired.
func TestOAuth_hubTokenAcrossExpiry(t *testing.T) {
	as := oauthtest.Start(t)
	creds, m := machine(as, "mcp:server")
	oh := startOAuthHub(t, as, map[string]string{m.ID: "fake"})
	const ttl = 2
	as.SetResource(oauthtest.Resource{Resource: oh.resource, TTL: ttl})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: oh.url("/mcp/server"), OAuth: creds})
	c := oh.client(t)
	waitTool(t, c, "fake__echo", true)

	stop := make(chan struct{})
	time.AfterFunc(ttl*time.Second+500*time.Millisecond, func() { close(stop) })
	n, failed, first := callUntil(c, "fake__echo", stop)
	assert.Zero(t, failed, "calls that failed across the token's expiry, the first: %v", first)
	assert.Greater(t, n, 20, "calls all along")
	assert.Equal(t, 1, r.log.count("server started"), "one connection all along")
	assert.Zero(t, r.log.count("lost the hub"))
	assert.Len(t, oh.upgrades(1), 1)

	oh.restart()
	c = oh.client(t)
	waitTool(t, c, "fake__echo", true)
	assert.Equal(t, 2, r.log.count("got an access token for the hub"), "a new token for the new connection, the first having expired")
	ups := oh.upgrades(2)
	require.Len(t, ups, 2, "the first dial after the restart was let in")
	assert.Equal(t, "allow", ups[1].Decision)
}

// TestOAuth_hubRefusesAToken: a token the hub refuses is replaced at once,
// without waiting: here the authorization server retired the key that
// signed it, and the hub restarted (a hub that had the key keeps
// accepting it). A connector whose every token is refused (they are for
// another resource) retries with waits that grow, each refusal said in the
// hub's words.
func TestOAuth_hubRefusesAToken(t *testing.T) {
	as := oauthtest.Start(t)
	creds, m := machine(as, "mcp:server")
	oh := startOAuthHub(t, as, map[string]string{m.ID: "fake"})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")},
		connect.Options{URL: oh.url("/mcp/server"), OAuth: creds, Retry: link.Retry{MinBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}})
	c := oh.client(t)
	waitTool(t, c, "fake__echo", true)
	as.Rotate(true)
	oh.restart()
	c = oh.client(t)
	waitTool(t, c, "fake__echo", true)
	ups := oh.upgrades(3)
	assert.Equal(t, []string{"allow", "deny", "allow"}, []string{ups[0].Decision, ups[1].Decision, ups[2].Decision})
	assert.Equal(t, "invalid_token: the token is signed with an unknown key", ups[1].Reason)
	assert.Equal(t, 2, r.log.count("got an access token for the hub"), "the refused token was replaced")
	assert.Zero(t, r.log.count("refused"), "a refusal mended at once is no error; the log:\n%s", r.log)
	require.NoError(t, r.stop(t))

	// Tokens for /mcp, refused at /mcp/server.
	creds.Issuer, creds.Resource = as.Issuer(), "http://"+oh.addr+"/mcp"
	r = runConnector(t, []connect.Server{selfServer("fake", "server")},
		connect.Options{URL: oh.url("/mcp/server"), OAuth: creds, Retry: link.Retry{MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}})
	r.log.waitLog(t, 2, "the hub refused the access token (HTTP 401 invalid_token: the access token is not meant for this resource); retrying")
	time.Sleep(2500 * time.Millisecond) // the waits of the credentials, not the connector's 50 ms, pace the token requests
	got := r.log.count("got an access token for the hub")
	assert.LessOrEqual(t, got, 5, "two tokens, then one after 1 s and after 2 s more")
	assert.GreaterOrEqual(t, got, 3)
	assert.Empty(t, r.pids(), "no child without the hub")
}

// TestOAuth_wrongSecret: a secret the authorization server refuses is said
// clearly (invalid_client, check the secret) and asked again after waits
// that grow, not in a loop; the secret is in no log line.
func TestOAuth_wrongSecret(t *testing.T) {
	as := oauthtest.Start(t)
	creds, m := machine(as, "mcp:server")
	oh := startOAuthHub(t, as, map[string]string{m.ID: "fake"})
	creds.Secret = oauth.NewSecret("not-the-secret-at-all")
	r := runConnector(t, []connect.Server{selfServer("fake", "server")},
		connect.Options{URL: oh.url("/mcp/server"), OAuth: creds, Retry: link.Retry{MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}})
	r.log.waitLog(t, 1, "cannot get an access token for the hub",
		`the authorization server refused the token request (HTTP 401 invalid_client)`, "check the client id and its secret", "retry_in=1s")
	before := as.Requests("/token")
	time.Sleep(2500 * time.Millisecond)
	asked := as.Requests("/token") - before
	assert.LessOrEqual(t, asked, 2, "after 1 s and 3 s at most, whatever the connector's backoff")
	assert.GreaterOrEqual(t, asked, 1, "asked again after 1 s")
	assert.Empty(t, r.pids())
	noSecrets(t, r.log.String(), "not-the-secret-at-all")
}

// protectedUpstream is a Streamable HTTP MCP server (the demo) whose /mcp
// wants access tokens for itself.
type protectedUpstream struct {
	*oauthtest.ResourceServer
	srv *httptest.Server
}

func startProtectedUpstream(t *testing.T, as *oauthtest.Server, scope string) *protectedUpstream {
	t.Helper()
	d := demo.New(&demo.Options{Name: "remote", ClockInterval: time.Hour})
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{Open: func(r *http.Request, s *mcp.StreamSession) error {
		d.Serve(s.Context(), s.Conn())
		return nil
	}})
	t.Cleanup(h.Close)
	mux := http.NewServeMux()
	pu := &protectedUpstream{srv: httptest.NewServer(mux)}
	t.Cleanup(pu.srv.Close)
	pu.ResourceServer = as.ResourceServer(pu.srv.URL+"/mcp", scope)
	pu.Handle(mux, "/mcp", h)
	return pu
}

// TestOAuth_upstreamByClientCredentials: an upstream server that wants
// tokens of its own is reached with the connector's own client of it,
// found from its 401; its tokens (of 2 s) are renewed before they expire
// while a client calls all along, and no call fails. The hub's token never
// reaches it.
func TestOAuth_upstreamByClientCredentials(t *testing.T) {
	as := oauthtest.Start(t)
	hubCreds, hubClient := machine(as, "mcp:server")
	oh := startOAuthHub(t, as, map[string]string{hubClient.ID: "remote"})
	up := startProtectedUpstream(t, as, "mcp:client")
	const ttl = 2
	as.SetResource(oauthtest.Resource{Resource: up.Resource, TTL: ttl})
	upCreds, upClient := machine(as, "mcp:client")
	r := runConnector(t, []connect.Server{{Name: "remote", Upstream: up.Resource, OAuth: upCreds}},
		connect.Options{URL: oh.url("/mcp/server"), OAuth: hubCreds})
	c := oh.client(t)
	waitTool(t, c, "remote__echo", true)

	stop := make(chan struct{})
	time.AfterFunc(2*ttl*time.Second+500*time.Millisecond, func() { close(stop) })
	n, failed, first := callUntil(c, "remote__echo", stop)
	assert.Zero(t, failed, "calls that failed across the upstream tokens' expiry, the first: %v", first)
	assert.Greater(t, n, 20, "calls all along")

	assert.Equal(t, 1, up.Refused(), "one 401, the first request's, which led to the authorization server")
	upTokens := up.Tokens()
	assert.GreaterOrEqual(t, len(upTokens), 3, "renewed at least twice in two lifetimes and more")
	for _, p := range up.Principals() {
		assert.Equal(t, upClient.ID, p.ClientID, "the upstream sees only the connector's client of it, never the hub's")
		assert.Equal(t, []string{up.Resource}, p.Audience)
		assert.True(t, p.HasScope("mcp:client"))
	}
	assert.Equal(t, hubClient.ID, oh.upgrades(1)[0].ClientID)
	assert.Equal(t, 1, r.log.count("upstream session opened"), "one upstream session all along")
	r.log.waitLog(t, 1, "OAuth: getting access tokens for the upstream server", "server=remote", "resource="+up.Resource, "scopes=mcp:client")
	noSecrets(t, r.log.String(), append(upTokens, upClient.Secret, hubClient.Secret)...)
}

// TestOAuth_upstreamByRefreshToken: an upstream reached with a refresh
// token from a file: a public client's, which the authorization server
// rotates at every use. Each new refresh token is written back to the
// file, which stays the owner's alone, and the calls go on across the
// access tokens' expiry.
func TestOAuth_upstreamByRefreshToken(t *testing.T) {
	as := oauthtest.Start(t)
	th := startHub(t, hub.Config{})
	up := startProtectedUpstream(t, as, "mcp:client")
	const ttl = 2
	as.SetResource(oauthtest.Resource{Resource: up.Resource, TTL: ttl})
	pub := as.PublicClient()
	tok := as.Authorize(pub, "alice", up.Resource, "offline_access", "mcp:client")
	require.NotEmpty(t, tok.RefreshToken, "the authorization server gave a refresh token")
	file := filepath.Join(t.TempDir(), "crm.refresh")
	require.NoError(t, os.WriteFile(file, []byte(tok.RefreshToken+"\n"), 0o600))

	r := runConnector(t, []connect.Server{{Name: "remote", Upstream: up.Resource,
		OAuth: &connect.OAuthClient{ClientID: pub.ID, RefreshTokenFile: file}}}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, nil)
	waitTool(t, c, "remote__echo", true)
	stop := make(chan struct{})
	time.AfterFunc(ttl*time.Second+500*time.Millisecond, func() { close(stop) })
	n, failed, first := callUntil(c, "remote__echo", stop)
	assert.Zero(t, failed, "calls that failed across the access tokens' expiry, the first: %v", first)
	assert.Greater(t, n, 20, "calls all along")

	refreshes := len(up.Tokens())
	assert.GreaterOrEqual(t, refreshes, 2)
	for _, p := range up.Principals() {
		assert.Equal(t, "alice", p.Subject)
		assert.Equal(t, []string{up.Resource}, p.Audience)
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	rotated := strings.TrimSpace(string(b))
	assert.NotEqual(t, tok.RefreshToken, rotated, "the rotated refresh token was written back")
	info, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	entries, err := os.ReadDir(filepath.Dir(file))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left beside it")
	r.log.waitLog(t, 1, "OAuth: getting access tokens for the upstream server", "grant=refresh_token")
	noSecrets(t, r.log.String(), append(up.Tokens(), tok.RefreshToken, rotated)...)

	// The file's token is the one a new connector starts from.
	require.NoError(t, r.stop(t))
	waitTool(t, c, "remote__echo", false)
	r = runConnector(t, []connect.Server{{Name: "remote", Upstream: up.Resource,
		OAuth: &connect.OAuthClient{ClientID: pub.ID, RefreshTokenFile: file}}}, connect.Options{URL: th.url("/mcp/server")})
	waitTool(t, c, "remote__echo", true)
	res, err := c.CallTool(ctxFor(t), "remote__echo", map[string]string{"text": "from the file's token"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "from the file's token", text(t, res))
	assert.Zero(t, r.log.count("cannot get an access token"), "the log:\n%s", r.log)
}
