package hub

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
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
