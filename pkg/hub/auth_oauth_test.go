package hub

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/internal/proctest"
	"github.com/switchboard-mcp/switchboard/internal/redistest"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// oauthTokens are the static tokens of the OAuth tests: the demo server's,
// to show that static tokens keep working beside OAuth, and an operator's.
const oauthTokens = `
tokens:
  - name: demo-server
    token: demo-secret
    roles: [server]
    servers: [demo, crm]
  - name: ops
    token: ops-secret
    roles: [dashboard]
`

// oauthHub starts a hub that trusts as, with the static tokens of
// oauthTokens and policy (a YAML list, or ""), and the demo server on it.
func oauthHub(t *testing.T, as *oauthtest.Server, cfg Config, policy string) *testHub {
	t.Helper()
	o := OAuthConfig{Issuers: []string{as.Issuer()}}
	if cfg.OAuth != nil {
		o = *cfg.OAuth
		o.Issuers = []string{as.Issuer()}
	}
	cfg.OAuth = &o
	tokens := oauthTokens
	if policy != "" {
		tokens += "policy:\n" + policy
	}
	cfg.Tokens = writeTokens(t, tokens)
	th := startHub(t, cfg)
	th.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
	return th
}

// resource returns the resource identifier of a path of th.
func (th *testHub) resource(path string) string { return th.srv.URL + path }

// metadataURL returns where the metadata of a path of th is.
func (th *testHub) metadataURL(path string) string {
	return th.srv.URL + "/.well-known/oauth-protected-resource" + path
}

// challenge is the WWW-Authenticate header the hub answers a refusal on
// path with.
func (th *testHub) challenge(path, scope, errCode, desc string) string {
	return oauth.Bearer{ResourceMetadata: th.metadataURL(path), Scope: strings.Fields(scope), Error: errCode, Description: desc}.String()
}

// refusal is how a request was answered: its status and challenge.
type refusal struct {
	Status    int
	Challenge string
}

// initializeWith POSTs initialize to url with header, as a Streamable HTTP
// client opening a session.
func initializeWith(t *testing.T, url string, header http.Header) refusal {
	t.Helper()
	status, h, _ := post(t, url, header, initializeBody)
	return refusal{status, h.Get("WWW-Authenticate")}
}

// upgradeWith asks for a WebSocket at url with header and subprotocols.
func upgradeWith(t *testing.T, url string, header http.Header, protocols ...string) refusal {
	t.Helper()
	c, resp, err := websocket.Dial(ctxFor(t), url, &websocket.DialOptions{HTTPHeader: header, Subprotocols: append([]string{"mcp"}, protocols...)})
	if err == nil {
		c.Close(websocket.StatusNormalClosure, "")
		return refusal{http.StatusSwitchingProtocols, ""}
	}
	require.NotNil(t, resp, "%v", err)
	return refusal{resp.StatusCode, resp.Header.Get("WWW-Authenticate")}
}

// machineToken gets a client credentials token of a new machine client for
// resource, with scopes.
func machineToken(as *oauthtest.Server, resource string, scopes ...string) string {
	return as.Token(as.MachineClient(scopes...), resource, scopes...)
}

// oauthCall connects over Streamable HTTP with token and calls demo__echo.
func oauthCall(t *testing.T, url, token string) error {
	t.Helper()
	c, err := mcp.Connect(ctxFor(t), url, sessionOpts(&mcp.ClientOptions{Token: token}))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "hi"}, nil)
	return err
}

// forge signs claims as a JWT with key (an *rsa.PrivateKey, or []byte for
// HMAC) under alg and kid: the tokens an attacker can make.
func forge(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	require.NoError(t, err)
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	require.NoError(t, err)
	return tok
}

// claimsFor returns valid claims for resource from issuer.
func claimsFor(issuer, resource string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": issuer, "sub": "mallory", "aud": resource, "client_id": "mallory",
		"scope": "mcp:client", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// unsigned returns claims as a JWT with "alg": "none".
func unsigned(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none", "typ": "at+jwt"}) + "." + enc(claims) + "."
}

// issuerRSAKey returns the issuer's published RSA key: its id, and its
// public key in PEM, the bytes an HMAC forgery signs with.
func issuerRSAKey(t *testing.T, as *oauthtest.Server) (string, []byte) {
	t.Helper()
	resp, err := http.Get(as.Issuer() + "/jwks")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	keys, _, err := oauth.ParseKeySet(body)
	require.NoError(t, err)
	for _, k := range keys {
		if pub, ok := k.Key.(*rsa.PublicKey); ok {
			der, err := x509.MarshalPKIXPublicKey(pub)
			require.NoError(t, err)
			return k.KeyID, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		}
	}
	t.Fatal("the issuer publishes no RSA key")
	return "", nil
}

// TestOAuth_resourceMetadata: every endpoint's Protected Resource Metadata,
// readable from any origin.
func TestOAuth_resourceMetadata(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, "")
	for _, tt := range []struct{ path, resource string }{
		{"", "/mcp"},
		{"/mcp", "/mcp"},
		{"/mcp/server", "/mcp/server"},
		{"/servers/weather/mcp", "/servers/weather/mcp"},
		{"/servers/demo/mcp", "/servers/demo/mcp"},
	} {
		resp, err := http.Get(th.metadataURL(tt.path))
		require.NoError(t, err)
		var md oauth.ResourceMetadata
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&md))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, tt.path)
		assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"), tt.path)
		assert.Equal(t, th.resource(tt.resource), md.Resource, tt.path)
		assert.Equal(t, []string{as.Issuer()}, md.AuthorizationServers, tt.path)
		assert.Equal(t, []string{"header"}, md.BearerMethodsSupported, tt.path)
		assert.NotEmpty(t, md.ResourceName, tt.path)
		if tt.resource == "/mcp/server" {
			assert.Equal(t, []string{"mcp:server", "mcp:admin"}, md.ScopesSupported)
		} else {
			assert.Equal(t, []string{"mcp:client", "mcp:dashboard", "mcp:admin"}, md.ScopesSupported)
		}
		// What a client does with it: the pkg/oauth client accepts it.
		_, err = oauth.ParseResourceMetadata(mustJSON(md), th.resource(tt.resource))
		assert.NoError(t, err, tt.path)
	}
	resp, err := http.Get(th.metadataURL("/servers/Not_A_Name/mcp"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodOptions, th.metadataURL("/mcp"), nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Headers", "mcp-protocol-version")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Headers"))
}

// TestOAuth_refusals: every bad token is refused with 401, a challenge that
// points at the endpoint's metadata and says what was wrong, on both
// faces, while a client with a good token and one with a static token
// keep working.
func TestOAuth_refusals(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	var skew atomic.Int64 // the hub's clock is this far ahead
	th := oauthHub(t, as, Config{OAuth: &OAuthConfig{Verification: oauth.Config{
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
	}}}, "")
	mcpURL, wsURL := th.srv.URL+"/mcp", th.wsURL("/mcp")
	resource := th.resource("/mcp")
	good := machineToken(as, resource, "mcp:client")
	// The well-behaved: an OAuth client, and a static token's, each with a
	// session open through all that follows.
	c, err := mcp.Connect(ctxFor(t), mcpURL, sessionOpts(&mcp.ClientOptions{Token: good}))
	require.NoError(t, err)
	defer c.Close()
	ops := th.client(&mcp.ClientOptions{Token: "ops-secret"})
	wellBehaved := func() {
		t.Helper()
		res, err := c.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "still here"}, nil)
		require.NoError(t, err)
		assert.Equal(t, "still here", res.Content[0].Text)
		_, err = ops.AllTools(ctxFor(t))
		require.NoError(t, err)
	}
	wellBehaved()

	kid, publicPEM := issuerRSAKey(t, as)
	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	as.SetResource(oauthtest.Resource{Resource: resource, NotBefore: 3600}) // valid in an hour
	notYet := machineToken(as, resource, "mcp:client")
	as.SetResource(oauthtest.Resource{Resource: resource})
	wrongAud := machineToken(as, "http://127.0.0.1:1/elsewhere/mcp", "mcp:client")

	const (
		noToken   = ""
		invalid   = oauth.ErrorInvalidToken
		challenge = "mcp:client"
	)
	t.Run("unknown kid: the keys are fetched again once, then refused", func(t *testing.T) {
		before := as.Requests("/jwks")
		want := refusal{http.StatusUnauthorized, th.challenge("/mcp", challenge, invalid, "the token is signed with an unknown key")}
		for i := range 3 {
			tok := forge(t, jose.RS256, attacker, fmt.Sprint("made-up-", i), claimsFor(as.Issuer(), resource))
			assert.Equal(t, want, initializeWith(t, mcpURL, bearer(tok)))
			assert.Equal(t, 1, as.Requests("/jwks")-before, "one fetch, then none for 30 s, however many made-up key ids")
		}
	})

	for _, tt := range []struct {
		name, token, want string
	}{
		{"no token", "", ""},
		{"garbage", "not-a-jwt", "the access token is malformed"},
		{"wrong issuer", forge(t, jose.RS256, attacker, "k1", claimsFor("http://127.0.0.1:9/other", resource)), "the token's issuer is not trusted"},
		{"wrong audience", wrongAud, "the access token is not meant for this resource"},
		{"not yet valid", notYet, "the access token is not valid yet"},
		{"alg none", unsigned(claimsFor(as.Issuer(), resource)), "the token's signature algorithm is not accepted"},
		{"HMAC with the public key", forge(t, jose.HS256, publicPEM, kid, claimsFor(as.Issuer(), resource)), "the token's signature algorithm is not accepted"},
		{"signed by another key under the issuer's kid", forge(t, jose.RS256, attacker, kid, claimsFor(as.Issuer(), resource)), "the token's signature is invalid"},
		{"unknown kid", forge(t, jose.RS256, attacker, "made-up", claimsFor(as.Issuer(), resource)), "the token is signed with an unknown key"},
		{"64 KiB", strings.Repeat("A", 64<<10), "the access token is too large"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := refusal{http.StatusUnauthorized, th.challenge("/mcp", challenge, "", "")}
			var header http.Header
			if tt.token != noToken {
				want.Challenge = th.challenge("/mcp", challenge, invalid, tt.want)
				header = bearer(tt.token)
			}
			assert.Equal(t, want, initializeWith(t, mcpURL, header), "Streamable HTTP")
			assert.Equal(t, want, upgradeWith(t, wsURL, header), "WebSocket")
		})
	}
	wellBehaved()

	t.Run("expired", func(t *testing.T) {
		tok := machineToken(as, resource, "mcp:client")
		require.NoError(t, oauthCall(t, mcpURL, tok))
		skew.Store(int64(2 * time.Hour))
		defer skew.Store(0)
		want := refusal{http.StatusUnauthorized, th.challenge("/mcp", challenge, invalid, "the access token expired")}
		assert.Equal(t, want, initializeWith(t, mcpURL, bearer(tok)), "even though verified and cached before")
		assert.Equal(t, want, upgradeWith(t, wsURL, bearer(tok)))
	})

	t.Run("in a query string", func(t *testing.T) {
		want := refusal{http.StatusUnauthorized, th.challenge("/mcp", challenge, invalid, errTokenInQuery.Error())}
		assert.Equal(t, want, upgradeWith(t, wsURL+"?token="+good, nil), "a valid access token, refused where logs keep it")
		assert.Equal(t, refusal{http.StatusSwitchingProtocols, ""}, upgradeWith(t, wsURL+"?token=ops-secret", nil),
			"a static token still may")
	})

	t.Run("no role", func(t *testing.T) {
		tok := machineToken(as, resource, "crm:read")
		want := refusal{http.StatusForbidden, th.challenge("/mcp", challenge, oauth.ErrorInsufficientScope, errNoScope.Error())}
		assert.Equal(t, want, initializeWith(t, mcpURL, bearer(tok)))
		assert.Equal(t, want, upgradeWith(t, wsURL, bearer(tok)))
	})
	wellBehaved()
	assert.Equal(t, http.StatusOK, readyz(t, th))
}

// stepUpPolicy restricts mcp:client to demo__echo; crm:write allows every
// demo tool; the support group, demo__add.
const stepUpPolicy = `
  - scope: mcp:client
    roles: [client]
    tools: ["demo__echo"]
  - scope: crm:write
    roles: [client]
    tools: ["demo__*"]
  - claim: groups
    value: support
    roles: [client]
    tools: ["demo__add"]
`

// openSession opens a Streamable HTTP session at url with token, by hand,
// and returns its id.
func openSession(t *testing.T, url, token string) string {
	t.Helper()
	status, h, body := post(t, url, bearer(token), initializeBody)
	require.Equal(t, http.StatusOK, status, body)
	id := h.Get(mcp.HeaderSessionID)
	require.NotEmpty(t, id)
	status, _, body = post(t, url, sessionHeader(id, token), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, http.StatusAccepted, status, body)
	return id
}

func sessionHeader(id, token string) http.Header {
	h := bearer(token)
	h.Set(mcp.HeaderSessionID, id)
	h.Set(mcp.HeaderProtocolVersion, "2025-11-25")
	return h
}

const addCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo__add","arguments":{"a":2,"b":3}}}`

// TestOAuth_stepUp: a call a scope of the policy would allow gets 403 with
// the scopes to ask for over HTTP (both eras), -32003 with them in data
// over WebSocket; a new token with the scope continues the same HTTP
// session. A refusal no scope would lift stays -32003.
func TestOAuth_stepUp(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, stepUpPolicy)
	url, resource := th.srv.URL+"/mcp", th.resource("/mcp")
	client := as.MachineClient("mcp:client", "crm:write")
	narrow := as.Token(client, resource, "mcp:client")
	wide := as.Token(client, resource, "mcp:client", "crm:write")
	stepUp := th.challenge("/mcp", "mcp:client crm:write", oauth.ErrorInsufficientScope, `the token lacks a scope to call tool "demo__add"`)

	id := openSession(t, url, narrow)
	status, h, body := post(t, url, sessionHeader(id, narrow), addCall)
	assert.Equal(t, http.StatusForbidden, status, body)
	assert.Equal(t, stepUp, h.Get("WWW-Authenticate"))
	status, _, body = post(t, url, sessionHeader(id, narrow), `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"allowed"}}}`)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "allowed", "what the token may do, it does")

	status, _, body = post(t, url, sessionHeader(id, wide), addCall)
	assert.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"text":"5"`, "the stepped-up token continues the session")
	status, h, _ = post(t, url, sessionHeader(id, narrow), addCall)
	assert.Equal(t, http.StatusForbidden, status, "each request is the token it carries: back to fewer scopes")
	assert.Equal(t, stepUp, h.Get("WWW-Authenticate"))

	// Beyond what any scope allows: the session's own -32003.
	status, h, body = post(t, url, sessionHeader(id, wide), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"other__x"}}`)
	assert.Equal(t, http.StatusOK, status)
	assert.Empty(t, h.Get("WWW-Authenticate"))
	assert.Contains(t, body, `"code":-32003`)

	// The stateless revision: the same 403.
	st := modernPost(t, url, modernBody(1, "tools/call", `"name":"demo__add","arguments":{"a":1,"b":1}`, "{}"), bearer(narrow))
	assert.Equal(t, http.StatusForbidden, st.status)
	assert.Equal(t, stepUp, st.header.Get("WWW-Authenticate"))
	st = modernPost(t, url, modernBody(2, "tools/call", `"name":"demo__add","arguments":{"a":1,"b":1}`, "{}"), bearer(wide))
	assert.Equal(t, http.StatusOK, st.status)

	// WebSocket: -32003, the scopes in data.
	c, err := mcp.Connect(ctxFor(t), th.wsURL("/mcp"), sessionOpts(&mcp.ClientOptions{Token: narrow}))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CallTool(ctxFor(t), "demo__add", map[string]int{"a": 1, "b": 2}, nil)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, mcp.CodeForbidden, rpcErr.Code)
	assert.JSONEq(t, `{"error":"insufficient_scope","scopes":["mcp:client","crm:write"]}`, string(rpcErr.Data))
}

// TestOAuth_claims: a user's groups (from an authorization code flow with
// PKCE, as a person logs in) grant what the policy says; another user's
// token is as its scopes say.
func TestOAuth_claims(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, stepUpPolicy)
	url, resource := th.srv.URL+"/mcp", th.resource("/mcp")
	as.SetUserClaims("bob", map[string]any{"groups": []string{"support", "sales"}})
	pub := as.PublicClient()
	bob := as.Authorize(pub, "bob", resource, "mcp:client").AccessToken
	carol := as.Authorize(pub, "carol", resource, "mcp:client").AccessToken

	for _, tt := range []struct {
		token string
		tools []string
	}{{bob, []string{"demo__add", "demo__echo"}}, {carol, []string{"demo__echo"}}} {
		c, err := mcp.Connect(ctxFor(t), url, sessionOpts(&mcp.ClientOptions{Token: tt.token}))
		require.NoError(t, err)
		tools, err := c.AllTools(ctxFor(t))
		require.NoError(t, err)
		var names []string
		for _, tool := range tools {
			names = append(names, tool.Name)
		}
		assert.ElementsMatch(t, tt.tools, names, "what a principal sees is what it may call")
		res, err := c.CallTool(ctxFor(t), "demo__add", map[string]int{"a": 1, "b": 2}, nil)
		if len(tt.tools) == 2 {
			require.NoError(t, err)
			assert.Equal(t, "3", res.Content[0].Text)
		} else {
			assert.Error(t, err)
		}
		c.Close()
	}
}

// runNamed dials s out to th as name, with token, and waits until it is
// registered under registered.
func (th *testHub) runNamed(s *mcp.Server, name, token, registered string) {
	th.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	url := th.wsURL("/mcp/server")
	if name != "" {
		url += "?name=" + name
	}
	go func() {
		defer close(done)
		s.Dial(ctx, url, &mcp.DialOptions{Token: token, MinBackoff: 10 * time.Millisecond})
	}()
	th.t.Cleanup(func() { cancel(); <-done })
	th.waitFor(registered+" registered", func(v *view) bool { return len(v.servers[registered]) > 0 })
}

// TestOAuth_perServerResources: /servers/<name>/mcp is a resource of its
// own: its token works there and nowhere else, and its 401 points at its
// own metadata.
func TestOAuth_perServerResources(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, "")
	th.runNamed(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "crm", "demo-secret", "crm")
	demoURL, crmURL := th.srv.URL+"/servers/demo/mcp", th.srv.URL+"/servers/crm/mcp"
	forDemo := machineToken(as, th.resource("/servers/demo/mcp"), "mcp:client")
	forHub := machineToken(as, th.resource("/mcp"), "mcp:client")

	c, err := mcp.Connect(ctxFor(t), demoURL, sessionOpts(&mcp.ClientOptions{Token: forDemo}))
	require.NoError(t, err)
	defer c.Close()
	res, err := c.CallTool(ctxFor(t), "echo", map[string]string{"text": "scoped"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "scoped", res.Content[0].Text)
	assert.Equal(t, refusal{http.StatusSwitchingProtocols, ""}, upgradeWith(t, th.wsURL("/servers/demo/mcp"), bearer(forDemo)))

	audience := "the access token is not meant for this resource"
	for _, tt := range []struct {
		url, path, token string
		want             refusal
	}{
		{crmURL, "/servers/crm/mcp", forDemo, refusal{401, th.challenge("/servers/crm/mcp", "mcp:client", oauth.ErrorInvalidToken, audience)}},
		{th.srv.URL + "/mcp", "/mcp", forDemo, refusal{401, th.challenge("/mcp", "mcp:client", oauth.ErrorInvalidToken, audience)}},
		{demoURL, "/servers/demo/mcp", forHub, refusal{401, th.challenge("/servers/demo/mcp", "mcp:client", oauth.ErrorInvalidToken, audience)}},
		{crmURL, "/servers/crm/mcp", "", refusal{401, th.challenge("/servers/crm/mcp", "mcp:client", "", "")}},
	} {
		var h http.Header
		if tt.token != "" {
			h = bearer(tt.token)
		}
		assert.Equal(t, tt.want, initializeWith(t, tt.url, h), tt.path)
		assert.Equal(t, tt.want, upgradeWith(t, th.wsURL(tt.path), h), tt.path)
	}
	res, err = c.CallTool(ctxFor(t), "echo", map[string]string{"text": "still"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "still", res.Content[0].Text)
}

// TestOAuth_dialOutServers: a server dialing out with a client credentials
// token of mcp:server registers the name of its client id, or the one the
// policy maps its claims to; other tokens are refused with the challenge
// of /mcp/server.
func TestOAuth_dialOutServers(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	weather := as.MachineClient("mcp:server")
	th := oauthHub(t, as, Config{}, fmt.Sprintf(`
  - claim: client_id
    value: %q
    roles: [server]
    servers: [weather]
`, weather.ID))
	serverURL := th.resource("/mcp/server")

	anon := as.MachineClient("mcp:server")
	th.runNamed(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "", as.Token(anon, serverURL, "mcp:server"), normalizeName(anon.ID))
	th.runNamed(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "", as.Token(weather, serverURL, "mcp:server"), "weather")
	c := th.client(&mcp.ClientOptions{Token: machineToken(as, th.resource("/mcp"), "mcp:client")})
	for _, name := range []string{normalizeName(anon.ID) + "__echo", "weather__echo"} {
		res, err := c.CallTool(ctxFor(t), name, map[string]string{"text": "via " + name}, nil)
		require.NoError(t, err)
		assert.Equal(t, "via "+name, res.Content[0].Text)
	}

	serverWS := th.wsURL("/mcp/server")
	assert.Equal(t, refusal{401, th.challenge("/mcp/server", "mcp:server", "", "")}, upgradeWith(t, serverWS, nil))
	assert.Equal(t, refusal{401, th.challenge("/mcp/server", "mcp:server", oauth.ErrorInvalidToken, "the access token is not meant for this resource")},
		upgradeWith(t, serverWS, bearer(machineToken(as, th.resource("/mcp"), "mcp:server"))), "a token for /mcp")
	assert.Equal(t, refusal{403, th.challenge("/mcp/server", "mcp:server", oauth.ErrorInsufficientScope, errNoScope.Error())},
		upgradeWith(t, serverWS, bearer(machineToken(as, serverURL, "mcp:client"))), "a client's scope")

	// A machine token names its server, whatever the server asks for.
	squatter := as.MachineClient("mcp:server")
	th.runNamed(demo.New(nil).Server, "weather", as.Token(squatter, serverURL, "mcp:server"), normalizeName(squatter.ID))
	v := th.reg.view()
	require.Len(t, v.servers["weather"], 1)
	assert.Equal(t, oauthPrefix+as.Issuer()+" "+weather.ID, v.servers["weather"][0].Owner)
}

// TestOAuth_expiryClosesWebSockets: a WebSocket session ends when its
// access token does, with 1008 and a reason; a session with a token still
// valid goes on. The token travels in a subprotocol, as a browser sends it.
func TestOAuth_expiryClosesWebSockets(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, "")
	short := th.resource("/mcp")
	good := th.client(&mcp.ClientOptions{Token: machineToken(as, short, "mcp:client")})
	as.SetResource(oauthtest.Resource{Resource: short, TTL: 1})
	tok := machineToken(as, short, "mcp:client")

	c, _, err := websocket.Dial(ctxFor(t), th.wsURL("/mcp"), &websocket.DialOptions{
		Subprotocols: []string{"mcp", ProtocolTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(tok))}})
	require.NoError(t, err)
	defer c.CloseNow()
	assert.Equal(t, "mcp", c.Subprotocol(), "the token is never echoed")
	require.NoError(t, c.Write(ctxFor(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"short","version":"1"}}}`)))
	for {
		_, _, err := c.Read(ctxFor(t))
		if err != nil {
			var ce websocket.CloseError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, websocket.StatusPolicyViolation, ce.Code)
			assert.Equal(t, "access token expired: connect again with a new one", ce.Reason)
			break
		}
	}
	res, err := good.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "unaffected"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "unaffected", res.Content[0].Text)
}

// logsTo returns a logger writing to b.
func logsTo(b *proctest.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// TestOAuth_sessionsBelongToTheirPrincipal: an HTTP session that one
// principal opened is no one else's, whichever instance a request reaches
// (two instances on a real Redis, no affinity): another principal's valid
// token gets 404, as for a session that does not exist, and the owner goes
// on.
func TestOAuth_sessionsBelongToTheirPrincipal(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	tokens := writeTokens(t, oauthTokens)
	const public = "http://hub.example" // the load balancer's: both instances are one resource
	cfg := Config{Tokens: tokens, OAuth: &OAuthConfig{PublicURL: public, Issuers: []string{as.Issuer()}}}
	a, b := startHubOn(t, rs, prefix, cfg), startHubOn(t, rs, prefix, cfg)
	a.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
	b.waitServer("demo", 1)
	require.Eventually(t, func() bool { return len(b.remoteInstances()) == 1 }, wait, 10*time.Millisecond)

	alice := machineToken(as, public+"/mcp", "mcp:client")
	bob := machineToken(as, public+"/mcp", "mcp:client", "mcp:admin")
	id := openSession(t, a.srv.URL+"/mcp", alice)
	echo := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"mine"}}}`
	for _, th := range []*testHub{a, b} {
		status, h, body := post(t, th.srv.URL+"/mcp", sessionHeader(id, bob), echo)
		assert.Equal(t, http.StatusNotFound, status, "bob on alice's session, at instance %s", shortID(th.ID()))
		assert.NotContains(t, body, "mine")
		assert.Empty(t, h.Get(mcp.HeaderSessionID))
		status, _, _ = post(t, th.srv.URL+"/mcp", sessionHeader(id, "ops-secret"), echo)
		assert.Equal(t, http.StatusNotFound, status, "a static token on alice's session")
		status, _, body = post(t, th.srv.URL+"/mcp", sessionHeader(id, alice), echo)
		assert.Equal(t, http.StatusOK, status, "alice at instance %s", shortID(th.ID()))
		assert.Contains(t, body, `"text":"mine"`)
	}
}

// TestOAuth_faults: the JWKS endpoint down changes nothing for the keys at
// hand, and a token of a new key gets 401 and a warning, never a 500; an
// issuer unreachable at start does not stop the hub, whose /readyz and log
// say why until it is back; keys rotated during a run fail no call.
func TestOAuth_faults(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	var skew atomic.Int64
	logs := &proctest.Buffer{}
	th := oauthHub(t, as, Config{Logger: logsTo(logs), RateLimit: -1, OAuth: &OAuthConfig{Verification: oauth.Config{
		Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
	}}}, "")
	url, resource := th.srv.URL+"/mcp", th.resource("/mcp")
	client := as.MachineClient("mcp:client")
	require.NoError(t, oauthCall(t, url, as.Token(client, resource, "mcp:client")))

	t.Run("JWKS down", func(t *testing.T) {
		as.FailPath("/jwks")
		require.NoError(t, oauthCall(t, url, as.Token(client, resource, "mcp:client")), "a new token of a known key")
		as.Rotate(false)
		newKey := as.Token(client, resource, "mcp:client")
		want := refusal{http.StatusUnauthorized, th.challenge("/mcp", "mcp:client", oauth.ErrorInvalidToken, "the token is signed with an unknown key")}
		assert.Equal(t, want, initializeWith(t, url, bearer(newKey)))
		assert.Contains(t, logs.String(), `level=WARN msg="oauth: a token could not be verified: its issuer is unavailable"`)
		assert.Contains(t, logs.String(), "its keys could not be fetched again")
		as.HealPath("/jwks")
		skew.Add(int64(oauth.KeyRefreshInterval + time.Second)) // the next fetch for an unknown key id is due
		require.NoError(t, oauthCall(t, url, newKey), "the JWKS back, the new key is fetched")
	})

	t.Run("rotation during a run", func(t *testing.T) {
		// The callers pause while the issuer rotates and the test moves the
		// verifier's clock past the refresh interval, so that each token of
		// a new key meets a verifier due to fetch it. Moved before the
		// rotation, the clock made the cached keys stale: a call then
		// started a fetch that could still be under way as the rotation
		// came, the first token of the new key shared that fetch's outcome
		// (without the key) and used up its on-demand fetch, and the new
		// key's tokens were refused until the next one was due. (And a
		// token of a key just retired is rightly refused.)
		var failed, calls atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var rotating sync.RWMutex
		current := as.Token(client, resource, "mcp:client")
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					rotating.RLock()
					err := oauthCall(t, url, current)
					rotating.RUnlock()
					if err != nil {
						failed.Add(1)
						t.Errorf("a call failed during the rotation: %v", err)
					}
					calls.Add(1)
				}
			})
		}
		callsGoOn := func() {
			n := calls.Load()
			require.Eventually(t, func() bool { return calls.Load() > n+4 }, wait, 5*time.Millisecond)
		}
		rotate := func(retire bool) {
			rotating.Lock()
			as.Rotate(retire)
			skew.Add(int64(oauth.KeyRefreshInterval + time.Second))
			current = as.Token(client, resource, "mcp:client")
			rotating.Unlock()
			callsGoOn()
		}
		callsGoOn()
		rotate(false) // a new key signs; the old one is still published
		rotate(true)  // the old keys retired
		close(stop)
		wg.Wait()
		assert.Zero(t, failed.Load())
	})

	t.Run("issuer unreachable at start", func(t *testing.T) {
		as.Down()
		late := &proctest.Buffer{}
		th2 := oauthHub(t, as, Config{Logger: logsTo(late)}, "")
		require.Eventually(t, func() bool {
			return strings.Contains(late.String(), "oauth: cannot fetch the issuer's metadata or keys")
		},
			wait, 10*time.Millisecond, "the log says why")
		assert.Contains(t, late.String(), "level=WARN")
		resp, err := http.Get(th2.srv.URL + "/readyz")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Contains(t, string(body), "not ready: access tokens cannot be verified yet: issuer "+as.Issuer())
		assert.Contains(t, string(body), "connection refused")
		// The hub serves meanwhile: static tokens, and a 401 (not a 500)
		// for a token it cannot verify yet.
		ops := th2.client(&mcp.ClientOptions{Token: "ops-secret"})
		_, err = ops.AllTools(ctxFor(t))
		require.NoError(t, err)
		want := refusal{http.StatusUnauthorized, th2.challenge("/mcp", "mcp:client", oauth.ErrorInvalidToken,
			"the token could not be verified now: the authorization server is unavailable")}
		assert.Equal(t, want, initializeWith(t, th2.srv.URL+"/mcp", bearer(forge(t, jose.RS256, mustKey(t), "k", claimsFor(as.Issuer(), th2.resource("/mcp"))))))
		as.Up()
		require.Eventually(t, func() bool { return readyz(t, th2) == http.StatusOK }, wait, 20*time.Millisecond, "ready once the issuer is back")
		require.NoError(t, oauthCall(t, th2.srv.URL+"/mcp", machineToken(as, th2.resource("/mcp"), "mcp:client")))
	})
}

func mustKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

// TestOAuth_dashboardLogin: the dashboard logs in through the issuer
// (authorization code with PKCE), and its WebSocket then carries the
// access token in an HttpOnly, SameSite=Strict cookie; a callback that the
// hub did not start is refused.
func TestOAuth_dashboardLogin(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	// A native client: its loopback redirect URI matches the hub's on any
	// port (RFC 8252).
	dash := as.Register(map[string]any{
		"client_name": "switchboard dashboard", "application_type": "native",
		"redirect_uris": []string{"http://127.0.0.1/login/oauth/callback"}, "grant_types": []string{"authorization_code"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": "none",
	})
	th := oauthHub(t, as, Config{OAuth: &OAuthConfig{Dashboard: &DashboardLogin{ClientID: dash.ID}}}, "")

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: wait}
	resp, page, err := as.Browse(browser, th.srv.URL+"/login/oauth", "dana")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", page)
	assert.Equal(t, th.srv.URL+"/", resp.Request.URL.String(), "back on the dashboard")
	var cookie *http.Cookie
	for _, c := range jar.Cookies(resp.Request.URL) {
		if c.Name == CookieName {
			cookie = c
		}
	}
	require.NotNil(t, cookie, "logged in")
	assert.Equal(t, 3, strings.Count(cookie.Value, ".")+1, "the cookie holds the access token")

	// The cookie's attributes, from the callback's own answer.
	login, err := http.NewRequest(http.MethodGet, th.srv.URL+"/login/oauth", nil)
	require.NoError(t, err)
	noFollow := &http.Client{Jar: jar, Timeout: wait, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noFollow.Do(login)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode)
	loc, err := neturl.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	assert.Equal(t, "S256", loc.Query().Get("code_challenge_method"))
	assert.Equal(t, th.resource("/mcp"), loc.Query().Get("resource"))
	assert.Equal(t, th.srv.URL+"/login/oauth/callback", loc.Query().Get("redirect_uri"))
	setCookie := resp.Header.Get("Set-Cookie")
	assert.Contains(t, setCookie, "HttpOnly")
	assert.Contains(t, setCookie, "SameSite=Lax", "the way back from the issuer is a cross-site navigation")

	// The dashboard's WebSocket, with the cookie as a browser sends it.
	header := http.Header{"Cookie": {CookieName + "=" + cookie.Value}}
	c, err := mcp.Connect(ctxFor(t), th.wsURL("/mcp"), sessionOpts(&mcp.ClientOptions{Header: header}))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.AllTools(ctxFor(t))
	require.NoError(t, err)

	// A callback the hub did not start (login CSRF), or with another state.
	for _, u := range []string{"/login/oauth/callback?code=x&state=y", "/login/oauth/callback?error=access_denied%3Cscript%3E"} {
		resp, err := http.Get(th.srv.URL + u)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusUnauthorized}, resp.StatusCode, u)
		assert.NotContains(t, string(body), "<script>")
	}
}

// TestOAuth_metricsAreForAdmins: /metrics takes an access token of the
// hub's resource with the admin scope.
func TestOAuth_metricsAreForAdmins(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, "")
	get := func(token string) refusal {
		req, _ := http.NewRequest(http.MethodGet, th.srv.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scrapeClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return refusal{resp.StatusCode, resp.Header.Get("WWW-Authenticate")}
	}
	resource := th.resource("/mcp")
	assert.Equal(t, refusal{http.StatusOK, ""}, get(machineToken(as, resource, "mcp:admin")))
	assert.Equal(t, refusal{http.StatusForbidden, th.challenge("/mcp", "mcp:admin", oauth.ErrorInsufficientScope, errNoScope.Error())},
		get(machineToken(as, resource, "mcp:client")))
	assert.Equal(t, refusal{http.StatusUnauthorized, th.challenge("/mcp", "mcp:admin", "", "")}, get(""))
}

// TestAudit_whoCalledWhat: the audit log has a line per authorization
// decision and per routed call, with the principal and never a token or
// an argument; it is reopened after a rotation.
func TestAudit_whoCalledWhat(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	file := filepath.Join(t.TempDir(), "audit.log")
	audit, err := OpenAuditLog(file)
	require.NoError(t, err)
	th := oauthHub(t, as, Config{Audit: audit}, stepUpPolicy)
	url, resource := th.srv.URL+"/mcp", th.resource("/mcp")
	client := as.MachineClient("mcp:client")
	tok := as.Token(client, resource, "mcp:client")
	const secretArgument = "an argument no log may hold"

	// A client of 2026-07-28: each request is a POST the client waits for,
	// so its line is queued before it returns. (A session's client opens
	// its GET stream in the background, which could reach the hub, and be
	// recorded, after the log is closed below: a drop the test would count.)
	c, err := mcp.Connect(ctxFor(t), url, &mcp.ClientOptions{Token: tok})
	require.NoError(t, err)
	_, err = c.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": secretArgument}, nil)
	require.NoError(t, err)
	c.Close()
	ws := th.client(&mcp.ClientOptions{Token: tok})
	_, err = ws.CallTool(ctxFor(t), "demo__add", map[string]any{"a": 1, "b": secretArgument}, nil)
	require.Error(t, err, "refused: the token may call demo__echo only")
	assert.Equal(t, http.StatusUnauthorized, initializeWith(t, url, bearer("forged."+tok)).Status)

	// Rotated: moved away, then reopened at its path.
	require.NoError(t, os.Rename(file, file+".1"))
	require.NoError(t, audit.Reopen())
	_, err = ws.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "after the rotation"}, nil)
	require.NoError(t, err)
	require.NoError(t, audit.Close())

	var lines []auditRecord
	for _, f := range []string{file + ".1", file} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NotContains(t, string(b), tok, "never a token")
		assert.NotContains(t, string(b), secretArgument, "never an argument")
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rec auditRecord
			require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
			assert.Equal(t, th.ID(), rec.Instance)
			lines = append(lines, rec)
		}
	}
	who := oauthPrefix + as.Issuer() + " " + client.ID
	find := func(ok func(auditRecord) bool) *auditRecord {
		for i := range lines {
			if ok(lines[i]) {
				return &lines[i]
			}
		}
		return nil
	}
	allowed := find(func(r auditRecord) bool {
		return r.Event == "authorization" && r.Principal == who && r.Method == http.MethodPost
	})
	require.NotNil(t, allowed, "%+v", lines)
	assert.Equal(t, auditRecord{Time: allowed.Time, Instance: th.ID(), Event: "authorization", Principal: who, Issuer: as.Issuer(),
		Subject: client.ID, ClientID: client.ID, Endpoint: "/mcp", Remote: allowed.Remote, Method: http.MethodPost, Decision: "allow",
		Status: http.StatusOK}, *allowed)
	call := find(func(r auditRecord) bool { return r.Event == "call" && r.Tool == "echo" && r.Decision == "allow" })
	require.NotNil(t, call)
	assert.Equal(t, who, call.Principal)
	assert.Equal(t, "demo", call.Server)
	assert.Equal(t, mcp.MethodToolsCall, call.Method)
	assert.Zero(t, call.Code)
	assert.Positive(t, call.DurationMs)
	refused := find(func(r auditRecord) bool { return r.Event == "call" && r.Decision == "deny" })
	require.NotNil(t, refused)
	assert.Equal(t, int64(mcp.CodeForbidden), refused.Code)
	assert.Equal(t, "demo__add", refused.Tool)
	assert.Contains(t, refused.Reason, "may not call tool")
	bad := find(func(r auditRecord) bool { return r.Event == "authorization" && r.Decision == "deny" })
	require.NotNil(t, bad)
	assert.Equal(t, http.StatusUnauthorized, bad.Status)
	assert.Equal(t, "invalid_token: the access token is malformed", bad.Reason)
	assert.NotNil(t, find(func(r auditRecord) bool { return r.Event == "call" && r.Tool == "echo" && r.Time.After(call.Time) }),
		"a line after the rotation, in the new file")
	assert.Zero(t, audit.Dropped())

	// What cannot be written is counted, never waited for: here, after Close.
	_, err = ws.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "unrecorded"}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), audit.Dropped())
	req, _ := http.NewRequest(http.MethodGet, th.srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+machineToken(as, resource, "mcp:admin"))
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// At least the call and the authorization of /metrics itself; more if
	// another line of the hub's came after Close meanwhile (one run under
	// load counted three), but never more than the log counted.
	m := regexp.MustCompile(`(?m)^switchboard_audit_dropped_total (\d+)$`).FindStringSubmatch(string(body))
	require.NotNil(t, m, "switchboard_audit_dropped_total in /metrics")
	n, _ := strconv.ParseInt(m[1], 10, 64)
	assert.GreaterOrEqual(t, n, int64(2), "the call, and the authorization of /metrics itself")
	assert.LessOrEqual(t, n, audit.Dropped())
}

// TestOAuth_aStaticTokenIsAStaticToken: a bearer value that is a static
// token is that token's principal, even one that verified as an access
// token before (and was remembered as such) until the tokens file made it
// a static one.
func TestOAuth_aStaticTokenIsAStaticToken(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, "")
	tok := machineToken(as, th.resource("/mcp"), "mcp:client")
	r := httptest.NewRequest(http.MethodPost, th.srv.URL+"/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	p := th.authenticate(httptest.NewRecorder(), r, "/mcp", RoleClient)
	require.NotNil(t, p)
	assert.True(t, strings.HasPrefix(string(p.identity()), oauthPrefix), "an access token's principal")
	assert.True(t, th.oauth.knownAccessToken(th.cfg.Tokens, tok))

	file := th.cfg.Tokens.path
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, append(b, fmt.Sprintf("  - {name: pinned, token: %q, roles: [dashboard]}\n", tok)...), 0o600))
	require.NoError(t, th.cfg.Tokens.Reload())
	p = th.authenticate(httptest.NewRecorder(), r, "/mcp", RoleClient, RoleDashboard)
	require.NotNil(t, p)
	assert.Equal(t, identity("token:pinned"), p.identity())
}

// TestOAuth_opaqueTokens: an opaque access token is checked at the
// issuer's introspection endpoint with the hub's own credentials, on both
// faces (the header, and the subprotocol a browser sends); once revoked it
// is refused when the introspection cache's period is over, and a client
// with a token still active goes on.
func TestOAuth_opaqueTokens(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	rs := as.MachineClient() // the hub's client at the introspection endpoint
	var skew atomic.Int64
	th := oauthHub(t, as, Config{RateLimit: -1, OAuth: &OAuthConfig{
		Introspection: map[string]*oauth.Introspection{as.Issuer(): {ClientID: rs.ID, Secret: oauth.NewSecret(rs.Secret)}},
		Verification:  oauth.Config{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }},
	}}, "")
	url, resource := th.srv.URL+"/mcp", th.resource("/mcp")
	as.SetResource(oauthtest.Resource{Resource: resource, Format: "opaque"})
	alice, bob := as.MachineClient("mcp:client"), as.MachineClient("mcp:client")
	revoked, kept := as.Token(alice, resource, "mcp:client"), as.Token(bob, resource, "mcp:client")
	require.NotContains(t, revoked, ".", "an opaque token")
	require.Eventually(t, func() bool { return as.Requests("/token/introspection") == 1 }, wait, 10*time.Millisecond,
		"the hub checks its credentials at start")

	require.NoError(t, oauthCall(t, url, revoked), "Streamable HTTP")
	ws := th.client(&mcp.ClientOptions{Token: revoked})
	_, err := ws.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "hi"}, nil)
	require.NoError(t, err, "WebSocket, the token in the Authorization header")
	subprotocol := ProtocolTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(revoked))
	assert.Equal(t, http.StatusSwitchingProtocols, upgradeWith(t, th.wsURL("/mcp"), nil, subprotocol).Status, "WebSocket, the token as a browser sends it")
	assert.Equal(t, 2, as.Requests("/token/introspection"), "introspected once, then cached")
	keeper, err := mcp.Connect(ctxFor(t), url, sessionOpts(&mcp.ClientOptions{Token: kept}))
	require.NoError(t, err)
	defer keeper.Close()

	as.Revoke(alice, revoked)
	require.NoError(t, oauthCall(t, url, revoked), "within the introspection cache's period, the answer stands")
	skew.Add(int64(oauth.DefaultIntrospectionCache))
	want := refusal{http.StatusUnauthorized, th.challenge("/mcp", "mcp:client", oauth.ErrorInvalidToken, "the access token is not active")}
	assert.Equal(t, want, initializeWith(t, url, bearer(revoked)), "Streamable HTTP, once the period is over")
	assert.Equal(t, want, upgradeWith(t, th.wsURL("/mcp"), nil, subprotocol), "WebSocket")
	assert.Equal(t, want, upgradeWith(t, th.wsURL("/mcp"), bearer(revoked)), "WebSocket")

	res, err := keeper.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "still here"}, nil)
	require.NoError(t, err, "a token still active goes on, in its open session")
	assert.Equal(t, "still here", res.Content[0].Text)
}

// TestOAuth_introspectionCredentials: an issuer that refuses the hub's
// introspection credentials makes opaque tokens 401 (not the client's
// fault: "could not be verified now"), never a 500; /readyz and the log say
// why, never with the secret; JWTs and static tokens go on meanwhile.
func TestOAuth_introspectionCredentials(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	rs := as.MachineClient()
	logs := &proctest.Buffer{}
	const secret = "a-wrong-secret-0123456789"
	th := oauthHub(t, as, Config{Logger: logsTo(logs), OAuth: &OAuthConfig{
		Introspection: map[string]*oauth.Introspection{as.Issuer(): {ClientID: rs.ID, Secret: oauth.NewSecret(secret)}},
	}}, "")
	url, resource := th.srv.URL+"/mcp", th.resource("/mcp")
	jwtClient, err := mcp.Connect(ctxFor(t), url, sessionOpts(&mcp.ClientOptions{Token: machineToken(as, resource, "mcp:client")}))
	require.NoError(t, err)
	defer jwtClient.Close()
	as.SetResource(oauthtest.Resource{Resource: resource, Format: "opaque"})
	opaque := machineToken(as, resource, "mcp:client")

	require.Eventually(t, func() bool { return readyz(t, th) == http.StatusServiceUnavailable }, wait, 20*time.Millisecond,
		"the hub checks its credentials at start, before any token")
	resp, err := http.Get(th.srv.URL + "/readyz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), "not ready: access tokens cannot be verified yet: issuer "+as.Issuer())
	assert.Contains(t, string(body), fmt.Sprintf(`the introspection endpoint refused the resource server's credentials: introspection at %s: client %q: HTTP status 401 (error "invalid_client")`, as.Issuer(), rs.ID))

	want := refusal{http.StatusUnauthorized, th.challenge("/mcp", "mcp:client", oauth.ErrorInvalidToken,
		"the token could not be verified now: the authorization server is unavailable")}
	assert.Equal(t, want, initializeWith(t, url, bearer(opaque)))
	assert.Equal(t, want, upgradeWith(t, th.wsURL("/mcp"), bearer(opaque)))
	assert.Contains(t, logs.String(), `level=ERROR msg="oauth: the issuer refused the introspection credentials: opaque tokens cannot be verified"`)
	assert.Contains(t, logs.String(), `level=WARN msg="oauth: an opaque token could not be verified: the issuer refuses the hub's introspection credentials"`)
	assert.NotContains(t, logs.String(), secret)
	assert.NotContains(t, string(body), secret)

	res, err := jwtClient.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "still here"}, nil)
	require.NoError(t, err, "a JWT goes on")
	assert.Equal(t, "still here", res.Content[0].Text)
	ops := th.client(&mcp.ClientOptions{Token: "ops-secret"})
	_, err = ops.AllTools(ctxFor(t))
	require.NoError(t, err, "a static token goes on")
}

// getStream opens the GET stream of an HTTP session with header (its id
// and token); the caller reads and closes the body.
func getStream(t *testing.T, ctx context.Context, url string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header = header.Clone()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	return resp
}

// jwtExpiry reads the "exp" of a JWT the test holds (not verified: the
// hub does that).
func jwtExpiry(t *testing.T, token string) time.Time {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3)
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Exp int64 `json:"exp"`
	}
	require.NoError(t, json.Unmarshal(b, &claims))
	return time.Unix(claims.Exp, 0)
}

// TestOAuth_expiryEndsHTTPStreams: an HTTP session's GET stream, which
// may stay open for hours while every other request is verified on its
// own, ends at its access token's expiry, on the instance that owns the
// session and on one that relays it; the same token is then refused (401,
// so the client renews it) and a fresh one resumes the stream. A session
// whose token is still valid, its stream relayed beside them, keeps
// receiving.
func TestOAuth_expiryEndsHTTPStreams(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	const public = "http://hub.example" // the load balancer's: both instances are one resource
	a, b, _, _ := startPair(t, Config{Tokens: writeTokens(t, oauthTokens), OAuth: &OAuthConfig{PublicURL: public, Issuers: []string{as.Issuer()}}})
	a.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
	b.waitServer("demo", 1)
	resource := public + "/mcp"

	goodToken := machineToken(as, resource, "mcp:client")
	goodID := openSession(t, a.srv.URL+"/mcp", goodToken)
	good := getStream(t, ctxFor(t), b.srv.URL+"/mcp", sessionHeader(goodID, goodToken))
	defer good.Body.Close()
	require.Equal(t, http.StatusOK, good.StatusCode)
	goodEvents := bufio.NewReader(good.Body)
	readEvent(t, goodEvents) // primed: the stream is open

	const ttl = 3 // seconds
	as.SetResource(oauthtest.Resource{Resource: resource, TTL: ttl})
	for i, th := range []*testHub{a, b} {
		t.Run(map[int]string{0: "on the owner", 1: "relayed by another instance"}[i], func(t *testing.T) {
			client := as.MachineClient("mcp:client")
			short := as.Token(client, resource, "mcp:client")
			exp := jwtExpiry(t, short)
			id := openSession(t, a.srv.URL+"/mcp", short)
			ctx, cancel := context.WithTimeout(context.Background(), (ttl+5)*time.Second)
			defer cancel()
			resp := getStream(t, ctx, th.srv.URL+"/mcp", sessionHeader(id, short))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			events := bufio.NewReader(resp.Body)
			prime := readEvent(t, events)
			_, err := io.Copy(io.Discard, events)
			resp.Body.Close()
			require.NoError(t, err, "the stream ends, cleanly, at the token's expiry (not at the test's deadline)")
			assert.False(t, time.Now().Before(exp), "not before it")

			header := sessionHeader(id, short)
			header.Set(mcp.HeaderLastEventID, prime.id)
			again := getStream(t, ctxFor(t), th.srv.URL+"/mcp", header)
			again.Body.Close()
			assert.Equal(t, refusal{http.StatusUnauthorized, oauth.Bearer{ResourceMetadata: public + "/.well-known/oauth-protected-resource/mcp",
				Scope: []string{"mcp:client"}, Error: oauth.ErrorInvalidToken, Description: "the access token expired"}.String()},
				refusal{again.StatusCode, again.Header.Get("WWW-Authenticate")}, "the expired token is refused: the client renews it")

			header.Set("Authorization", "Bearer "+as.Token(client, resource, "mcp:client"))
			resumed := getStream(t, ctxFor(t), th.srv.URL+"/mcp", header)
			defer resumed.Body.Close()
			assert.Equal(t, http.StatusOK, resumed.StatusCode, "a fresh token of the same principal resumes the stream")
		})
	}

	status, _, body := post(t, b.srv.URL+"/mcp", sessionHeader(goodID, goodToken),
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"still here"}}}`)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "still here")
	a.runNamed(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "crm", "demo-secret", "crm")
	for {
		ev := readEvent(t, goodEvents)
		if strings.Contains(ev.data, "notifications/tools/list_changed") {
			break // the well-behaved stream, relayed all along, still delivers
		}
	}
}

// TestOAuth_expiryEndsListenStreams: a subscriptions/listen stream of the
// 2026-07-28 revision, that revision's GET stream, is answered (its
// graceful end) at its access token's expiry; a listen with the same token
// is then refused (401, so the client renews it). A stream whose token is
// still valid keeps hearing of changes.
func TestOAuth_expiryEndsListenStreams(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{}, "")
	url, resource := th.srv.URL+"/mcp", th.resource("/mcp")
	listen := modernBody(7, mcp.MethodSubscriptionsListen, `"notifications":{"toolsListChanged":true}`, "{}")

	good := modernPost(t, url, listen, bearer(machineToken(as, resource, "mcp:client")))
	require.Equal(t, http.StatusOK, good.status)
	good.next(t) // acknowledged

	as.SetResource(oauthtest.Resource{Resource: resource, TTL: 3})
	short := machineToken(as, resource, "mcp:client")
	exp := jwtExpiry(t, short)
	st := modernPost(t, url, listen, bearer(short))
	require.Equal(t, http.StatusOK, st.status)
	st.next(t) // acknowledged
	resp, _ := st.answer(t)
	assert.False(t, time.Now().Before(exp), "answered at the token's expiry, not before")
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":7}}}`, string(resp),
		"the graceful end of a stream")

	again := modernPost(t, url, listen, bearer(short))
	assert.Equal(t, refusal{http.StatusUnauthorized, th.challenge("/mcp", "mcp:client", oauth.ErrorInvalidToken, "the access token expired")},
		refusal{again.status, again.header.Get("WWW-Authenticate")}, "the expired token is refused: the client renews it")

	th.runNamed(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "crm", "demo-secret", "crm")
	m := good.next(t)
	assert.Contains(t, string(m), "notifications/tools/list_changed", "the stream with a valid token goes on")
}
