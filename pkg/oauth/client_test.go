package oauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// startResource serves a resource protected by v at /mcp (the example's
// protectResource) on a loopback port, and returns its URL.
func startResource(t *testing.T, v *oauth.Verifier, scopes ...string) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	base := "http://" + srv.Listener.Addr().String()
	protectResource(mux, v, base, "/mcp", scopes, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", principalOf(r.Context()).Subject)
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	return base + "/mcp"
}

// get requests u with token (if not empty) and returns the response, its
// body read.
func get(t *testing.T, u, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestResourceServer: the answers a client sees from a resource protected
// with this package: 401 pointing at the metadata, the metadata, 401
// invalid_token, 403 insufficient_scope, 200.
func TestResourceServer(t *testing.T) {
	as := oauthtest.Start(t)
	v := newVerifier(t, as, nil)
	u := startResource(t, v, "mcp:client")
	metadataURL := strings.Replace(u, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)

	resp, _ := get(t, u, "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, `Bearer resource_metadata="`+metadataURL+`", scope="mcp:client"`, resp.Header.Get("WWW-Authenticate"))

	resp, body := get(t, metadataURL, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	md, err := oauth.ParseResourceMetadata([]byte(body), u)
	require.NoError(t, err)
	assert.Equal(t, []string{as.Issuer()}, md.AuthorizationServers)

	m := as.MachineClient("mcp:client", "mcp:dashboard")
	resp, _ = get(t, u, as.Token(m, "http://127.0.0.1:9/elsewhere", "mcp:client"))
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, `Bearer resource_metadata="`+metadataURL+`", scope="mcp:client", error="invalid_token", error_description="the access token is not meant for this resource"`,
		resp.Header.Get("WWW-Authenticate"))

	resp, _ = get(t, u, as.Token(m, u, "mcp:dashboard"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope"`)

	resp, body = get(t, u, as.Token(m, u, "mcp:client"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "hello "+m.ID, body)
}

// TestSDKClientFlow: the official MCP TypeScript SDK's OAuth client, from
// the 401 to a token (dynamic registration, authorization code with PKCE
// and the resource indicator, login and consent completed headlessly),
// accepted by a resource protected with this package.
func TestSDKClientFlow(t *testing.T) {
	as := oauthtest.Start(t)
	u := startResource(t, newVerifier(t, as, nil), "mcp:client")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node: run `make deps`")
	cmd := exec.CommandContext(ctx, node, "sdkflow.mjs", "--url", u, "--user", "alice")
	cmd.Dir = oauthtest.Dir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "sdkflow.mjs: %s\nauthorization server: %s", stderr.String(), as.Log())

	var got struct {
		Status   int      `json:"status"`
		Body     string   `json:"body"`
		Steps    []string `json:"steps"`
		Resource string   `json:"resource"`
		Scope    string   `json:"scope"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	assert.Equal(t, []string{"401", "registered", "redirect", "login", "consent", "token"}, got.Steps)
	assert.Equal(t, u, got.Resource, "the SDK asked for a token for this resource")
	assert.Equal(t, "mcp:client", got.Scope, "with the scope of the challenge")
	assert.Equal(t, http.StatusOK, got.Status)
	assert.Equal(t, "hello alice", got.Body)
}

// TestDiscoverResource: what a connector does before reaching an
// OAuth-protected upstream: from its 401 (or without one, from the
// well-known address) to the authorization server's token endpoint, then
// a machine token for it.
func TestDiscoverResource(t *testing.T) {
	as := oauthtest.Start(t)
	u := startResource(t, newVerifier(t, as, nil), "mcp:client")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	resp, _ := get(t, u, "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	for name, challenges := range map[string][]string{
		"from the 401":        resp.Header.Values("WWW-Authenticate"),
		"from the well-known": nil,
	} {
		t.Run(name, func(t *testing.T) {
			d, err := oauth.DiscoverResource(ctx, http.DefaultClient, u, challenges)
			require.NoError(t, err)
			assert.Equal(t, u, d.Resource.Resource)
			assert.Equal(t, []string{"mcp:client"}, d.Scope)
			assert.Equal(t, as.Issuer(), d.Server.Issuer)
			assert.Equal(t, as.Issuer()+"/token", d.Server.TokenEndpoint)

			m := as.MachineClient("mcp:client")
			cc := oauth.ClientCredentials{TokenURL: d.Server.TokenEndpoint, ClientID: m.ID,
				Secret: oauth.NewSecret(m.Secret), Scopes: d.Scope, Resource: d.Resource.Resource}
			src, err := cc.TokenSource(ctx)
			require.NoError(t, err)
			tok, err := src.Token()
			require.NoError(t, err)
			resp, body := get(t, u, tok.AccessToken)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "hello "+m.ID, body)
		})
	}

	// Metadata that claims another resource is refused.
	_, err := oauth.DiscoverResource(ctx, http.DefaultClient, strings.Replace(u, "/mcp", "/other", 1),
		resp.Header.Values("WWW-Authenticate"))
	assert.ErrorContains(t, err, "does not cover")
}

// TestClientCredentials_renews: the token source renews its token before
// it expires, and never shows the secret.
func TestClientCredentials_renews(t *testing.T) {
	as := oauthtest.Start(t)
	const res = resource + "/short"
	as.SetResource(oauthtest.Resource{Resource: res, TTL: 32})
	m := as.MachineClient("mcp:client")
	cc := oauth.ClientCredentials{TokenURL: as.Issuer() + "/token", ClientID: m.ID,
		Secret: oauth.NewSecret(m.Secret), Scopes: []string{"mcp:client"}, Resource: res}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := cc.TokenSource(ctx)
	require.NoError(t, err)

	first, err := src.Token()
	require.NoError(t, err)
	again, err := src.Token()
	require.NoError(t, err)
	assert.Equal(t, first.AccessToken, again.AccessToken, "reused while far from its expiry")
	assert.Equal(t, 1, as.Requests("/token"))

	// 32 s tokens renewed 30 s before expiry: a new one within about 2 s,
	// while the first is still valid.
	v := newVerifier(t, as, nil)
	var renewed string
	waitFor(t, func() bool {
		tok, err := src.Token()
		require.NoError(t, err)
		renewed = tok.AccessToken
		return renewed != first.AccessToken
	})
	assert.True(t, time.Now().Before(first.Expiry), "renewed before the old one expired")
	for _, tok := range []string{first.AccessToken, renewed} {
		_, err := verify(t, v, tok, res)
		assert.NoError(t, err)
	}

	// The secret shows nowhere.
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cc", cc, "secret", cc.Secret)
	js, _ := json.Marshal(cc)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", cc, cc, cc, cc.Secret), logs.String(), string(js)} {
		assert.NotContains(t, s, m.Secret)
		assert.Contains(t, s, "[redacted]")
	}

	// Bad credentials: an error without the secret.
	bad := cc
	bad.Secret = oauth.NewSecret("not-" + m.Secret)
	src, err = bad.TokenSource(ctx)
	require.NoError(t, err)
	_, err = src.Token()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), m.Secret)
}

func TestSecretFrom(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(path, []byte("s3cret\n"), 0o600))
	s, err := oauth.SecretFromFile(path)
	require.NoError(t, err)
	assert.Equal(t, "s3cret", s.Reveal())

	require.NoError(t, os.WriteFile(path, []byte("\n"), 0o600))
	_, err = oauth.SecretFromFile(path)
	assert.ErrorContains(t, err, "is empty")

	t.Setenv("SB_TEST_SECRET", "from-env")
	s, err = oauth.SecretFromEnv("SB_TEST_SECRET")
	require.NoError(t, err)
	assert.Equal(t, "from-env", s.Reveal())
	_, err = oauth.SecretFromEnv("SB_TEST_SECRET_UNSET")
	assert.ErrorContains(t, err, "SB_TEST_SECRET_UNSET is not set")
}
