package gosdk_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// oauthPolicy: mcp:client may call one__add only, crm:write every tool of
// one (one__slow too).
const oauthPolicy = `
tokens:
  - {name: fixture, token: fixture-secret, roles: [server], servers: [one]}
policy:
  - scope: mcp:client
    roles: [client]
    tools: ["one__add"]
  - scope: crm:write
    roles: [client]
    tools: ["one__*"]
`

// TestGoSDK_oauth: the Go SDK's OAuth client (auth.AuthorizationCodeHandler)
// through the hub, against a real authorization server: 401, the hub's
// resource metadata, the server's metadata, dynamic registration,
// authorization code with PKCE (the login completed by a headless
// browser), token, calls; then a 403 insufficient_scope, the SDK's login
// for the union of its scopes, and the same session goes on. In both
// revisions: in 2026-07-28 every request is its own, and carries the token.
func TestGoSDK_oauth(t *testing.T) { bothEras(t, testGoSDK_oauth) }

func testGoSDK_oauth(t *testing.T, version string) {
	as := oauthtest.Start(t)
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	require.NoError(t, os.WriteFile(file, []byte(oauthPolicy), 0o600))
	tokens, err := hub.LoadTokens(file)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String() // the public URL, known before the hub starts
	h, err := hub.New(hub.Config{Tokens: tokens, Logger: slog.New(slog.DiscardHandler),
		OAuth: &hub.OAuthConfig{PublicURL: base, Issuers: []string{as.Issuer()}}})
	require.NoError(t, err)
	srv.Config = h.NewHTTPServer()
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- newFixture().Server.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/mcp/server?name=one",
			&mcp.DialOptions{Token: "fixture-secret", MinBackoff: 10 * time.Millisecond})
	}()
	t.Cleanup(func() { cancel(); <-done })

	const redirect = "http://127.0.0.1/callback"
	var logins []string // the scopes of each login
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "go-sdk-oauth", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"},
		}},
		RedirectURL: redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			u, err := url.Parse(args.URL)
			if err != nil {
				return nil, err
			}
			logins = append(logins, u.Query().Get("scope"))
			return browserLogin(as, args.URL, redirect)
		},
	})
	require.NoError(t, err)

	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-oauth", Version: "1.8.0"}, nil)
	cs, err := c.Connect(testCtx(t), &sdk.StreamableClientTransport{Endpoint: base + "/mcp", OAuthHandler: handler},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	defer cs.Close()
	negotiated(t, cs, version)
	require.Eventually(t, func() bool {
		res, err := cs.ListTools(testCtx(t), nil)
		return err == nil && len(res.Tools) == 1
	}, wait, 10*time.Millisecond, "the fixture's one__add, all mcp:client sees")
	res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: "one__add", Arguments: map[string]int{"a": 40, "b": 2}})
	require.NoError(t, err)
	assert.Equal(t, "42", res.Content[0].(*sdk.TextContent).Text)
	assert.Equal(t, []string{"mcp:client"}, logins, "one login, for the scope of the hub's challenge")

	session := cs.ID()
	res, err = cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: "one__slow"})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	require.Len(t, logins, 2, "a second login, for the step-up's scopes")
	assert.ElementsMatch(t, []string{"mcp:client", "crm:write"}, strings.Fields(logins[1]))
	assert.Equal(t, session, cs.ID(), "the same session")
}

// browserLogin follows an authorization URL as a person would, logging in
// and consenting, and returns the code the authorization server sends to
// redirect.
func browserLogin(as *oauthtest.Server, start, redirect string) (*auth.AuthorizationResult, error) {
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: wait, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, page, err := as.Browse(browser, start, "alice")
	if err != nil {
		return nil, err
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), redirect) {
		return nil, &url.Error{Op: "login", URL: start, Err: errorString(resp.Status + ": " + string(page))}
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

type errorString string

func (e errorString) Error() string { return string(e) }
