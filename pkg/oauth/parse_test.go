package oauth_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

func TestMetadataURLs(t *testing.T) {
	for _, tc := range []struct {
		issuer string
		want   []string
	}{
		{"https://as.example.com", []string{
			"https://as.example.com/.well-known/oauth-authorization-server",
			"https://as.example.com/.well-known/openid-configuration",
		}},
		{"https://tenant.auth0.com/", []string{
			"https://tenant.auth0.com/.well-known/oauth-authorization-server",
			"https://tenant.auth0.com/.well-known/openid-configuration",
		}},
		{"https://kc.example.com/realms/mcp", []string{
			"https://kc.example.com/.well-known/oauth-authorization-server/realms/mcp",
			"https://kc.example.com/.well-known/openid-configuration/realms/mcp",
			"https://kc.example.com/realms/mcp/.well-known/openid-configuration",
			"https://kc.example.com/realms/mcp/.well-known/oauth-authorization-server",
		}},
		{"http://127.0.0.1:8081", []string{
			"http://127.0.0.1:8081/.well-known/oauth-authorization-server",
			"http://127.0.0.1:8081/.well-known/openid-configuration",
		}},
	} {
		got, err := oauth.MetadataURLs(tc.issuer)
		require.NoError(t, err, tc.issuer)
		assert.Equal(t, tc.want, got, tc.issuer)
	}
	for _, bad := range []string{"http://as.example.com", "https://as.example.com/?x=1", "https://as.example.com/#f", "as.example.com", "https://u:p@as.example.com"} {
		_, err := oauth.MetadataURLs(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseServerMetadata(t *testing.T) {
	m, err := oauth.ParseServerMetadata([]byte(`{"issuer":"https://as.example.com","jwks_uri":"https://keys.example.com/jwks","token_endpoint":"https://as.example.com/token"}`), "https://as.example.com")
	require.NoError(t, err)
	assert.Equal(t, "https://keys.example.com/jwks", m.JWKSURI)

	_, err = oauth.ParseServerMetadata([]byte(`{"issuer":"https://evil.example.com"}`), "https://as.example.com")
	assert.ErrorContains(t, err, `issuer "https://evil.example.com", expected "https://as.example.com"`)
	_, err = oauth.ParseServerMetadata([]byte(`{"issuer":"https://as.example.com","jwks_uri":"http://keys.example.com/jwks"}`), "https://as.example.com")
	assert.ErrorContains(t, err, "jwks_uri")
}

func TestResourceMetadataURL(t *testing.T) {
	for resource, want := range map[string]string{
		"https://hub.example.com/mcp":           "https://hub.example.com/.well-known/oauth-protected-resource/mcp",
		"https://hub.example.com/servers/a/mcp": "https://hub.example.com/.well-known/oauth-protected-resource/servers/a/mcp",
		"https://hub.example.com":               "https://hub.example.com/.well-known/oauth-protected-resource",
		"https://hub.example.com/":              "https://hub.example.com/.well-known/oauth-protected-resource",
		"http://127.0.0.1:8080/mcp/server":      "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp/server",
	} {
		got, err := oauth.ResourceMetadataURL(resource)
		require.NoError(t, err, resource)
		assert.Equal(t, want, got, resource)
	}
	_, err := oauth.ResourceMetadataURL("https://hub.example.com/mcp#frag")
	assert.Error(t, err)
}

func TestResourceCovers(t *testing.T) {
	for _, tc := range []struct {
		resource, requested string
		want                bool
	}{
		{"https://h/mcp", "https://h/mcp", true},
		{"https://h", "https://h/mcp", true},
		{"https://H/", "https://h/mcp", true},
		{"https://h/mcp", "https://h/mcp/", true},
		{"https://h/mc", "https://h/mcp", false},
		{"https://h/mcp", "https://h", false},
		{"https://h/servers/a/mcp", "https://h/servers/b/mcp", false},
		{"http://h/mcp", "https://h/mcp", false},
		{"https://h:8443/mcp", "https://h/mcp", false},
	} {
		assert.Equal(t, tc.want, oauth.ResourceCovers(tc.resource, tc.requested), "%s covers %s", tc.resource, tc.requested)
	}
}

func TestBearer_String(t *testing.T) {
	assert.Equal(t, `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", scope="mcp:client mcp:admin"`,
		oauth.Bearer{ResourceMetadata: "https://h/.well-known/oauth-protected-resource/mcp", Scope: []string{"mcp:client", "mcp:admin"}}.String())
	assert.Equal(t, `Bearer error="insufficient_scope", error_description="needs \"mcp:admin\" \\ now"`,
		oauth.Bearer{Error: oauth.ErrorInsufficientScope, Description: `needs "mcp:admin" \ now`}.String())
	// No value can end the header or forge a parameter.
	h := oauth.Bearer{Description: "a\r\nSet-Cookie: x=1\", error=\"none"}.String()
	assert.Equal(t, `Bearer error_description="a??Set-Cookie: x=1\", error=\"none"`, h)
	cs, err := oauth.ParseChallenges(h)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Len(t, cs[0].Params, 1, "one parameter, whatever the description held")
	assert.Equal(t, "Bearer", oauth.Bearer{}.String())
}

func TestParseChallenges(t *testing.T) {
	cs, err := oauth.ParseChallenges(`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, "Newauth", cs[0].Scheme)
	assert.Equal(t, []oauth.Param{{"realm", "apps"}, {"type", "1"}, {"title", `Login to "apps"`}}, cs[0].Params)
	assert.Equal(t, "simple", cs[1].Param("realm"))

	cs, err = oauth.ParseChallenges(`Negotiate abc+/=, bearer Resource_Metadata="https://h/x",scope="a b"`)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, "abc+/=", cs[0].Token68)
	c, ok := oauth.BearerChallenge([]string{`Basic realm="x"`, `Negotiate abc+/=, bearer Resource_Metadata="https://h/x",scope="a b"`})
	require.True(t, ok)
	assert.Equal(t, "https://h/x", c.Param("resource_metadata"))
	assert.Equal(t, "a b", c.Param("scope"))

	for _, bad := range []string{``, `=`, `Bearer realm="x`, `Bearer a=b=c`, `Bearer realm="a", realm="b"`, `Bearer realm="a\`} {
		_, err := oauth.ParseChallenges(bad)
		assert.Error(t, err, bad)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		values []string
		token  string
		ok     bool
		err    bool
	}{
		{nil, "", false, false},
		{[]string{"Bearer abc.def-_~+/=="}, "abc.def-_~+/==", true, false},
		{[]string{"bearer  abc"}, "abc", true, false},
		{[]string{"Basic dXNlcjpwYXNz"}, "", false, false},
		{[]string{"Bearer"}, "", false, true},
		{[]string{"Bearer a b"}, "", false, true},
		{[]string{"Bearer a\"b"}, "", false, true},
		{[]string{"Bearer a", "Bearer b"}, "", false, true},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add("Authorization", v)
		}
		token, ok, err := oauth.BearerToken(h)
		assert.Equal(t, tc.token, token, "%q", tc.values)
		assert.Equal(t, tc.ok, ok, "%q", tc.values)
		if tc.err {
			assert.ErrorIs(t, err, oauth.ErrBadRequest, "%q", tc.values)
		} else {
			assert.NoError(t, err, "%q", tc.values)
		}
	}
}
