package oauthtest_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
)

// claims decodes a JWT's payload, unverified: enough to see what the
// server issued.
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "a JWT")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

func header(t *testing.T, token string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(b, &h))
	return h
}

func TestServer_issuesTokens(t *testing.T) {
	as := oauthtest.Start(t)
	const resource = "http://127.0.0.1:1/mcp"

	// Client credentials: a JWT for the resource asked for.
	m := as.MachineClient("mcp:client", "mcp:server")
	c := claims(t, as.Token(m, resource, "mcp:server"))
	assert.Equal(t, as.Issuer(), c["iss"])
	assert.Equal(t, resource, c["aud"])
	assert.Equal(t, m.ID, c["client_id"])
	assert.Equal(t, "mcp:server", c["scope"])

	// Authorization code with PKCE, the login and consent done here.
	as.SetUserClaims("alice", map[string]any{"groups": []string{"support"}})
	p := as.PublicClient()
	tok := as.Authorize(p, "alice", resource, "mcp:client")
	c = claims(t, tok.AccessToken)
	assert.Equal(t, "alice", c["sub"])
	assert.Equal(t, resource, c["aud"])
	assert.Equal(t, "mcp:client", c["scope"])
	assert.Equal(t, []any{"support"}, c["groups"])

	// Per resource: algorithm, format.
	as.SetResource(oauthtest.Resource{Resource: resource + "/es", Alg: "ES256"})
	assert.Equal(t, "ES256", header(t, as.Token(m, resource+"/es"))["alg"])
	as.SetResource(oauthtest.Resource{Resource: resource + "/opaque", Format: "opaque"})
	assert.NotContains(t, as.Token(m, resource+"/opaque"), ".")
}

func TestServer_rotatesKeys(t *testing.T) {
	as := oauthtest.Start(t)
	m := as.MachineClient("mcp:client")
	before := header(t, as.Token(m, "http://127.0.0.1:1/mcp"))["kid"]
	kids := as.Rotate(false)
	require.Len(t, kids, 6, "three new keys, three old")
	after := header(t, as.Token(m, "http://127.0.0.1:1/mcp"))["kid"]
	assert.NotEqual(t, before, after)
	assert.Equal(t, kids[0], after, "the newest RSA key signs")
	assert.Contains(t, kids, before, "the old key is still published")
	assert.Len(t, as.Rotate(true), 3, "retired: only the newest keys")
}

func TestServer_faults(t *testing.T) {
	as := oauthtest.Start(t)
	get := func(path string) error {
		resp, err := http.Get(as.Issuer() + path)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	require.NoError(t, get("/jwks"))
	as.FailPath("/jwks")
	assert.Error(t, get("/jwks"))
	assert.NoError(t, get("/.well-known/openid-configuration"))
	as.HealPath("/jwks")
	assert.NoError(t, get("/jwks"))
	assert.Equal(t, 3, as.Requests("/jwks"))

	as.Down()
	err := get("/jwks")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connection refused")
	as.Up()
	assert.NoError(t, get("/jwks"), "the same server, back on the same address")
}
