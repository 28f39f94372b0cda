package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests check what a real authorization server will not issue (a
// token without exp, a key whose alg disagrees): a verifier whose issuer's
// metadata and keys are set here, which never fetches anything.

const (
	testIssuer   = "https://issuer.test"
	testResource = "https://hub.test/mcp"
)

// testKeys are a signing key per family, made once.
var testKeys = func() struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
} {
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return struct {
		rsa *rsa.PrivateKey
		ec  *ecdsa.PrivateKey
	}{r, e}
}()

// offlineVerifier returns a verifier of testIssuer holding keys, at now.
func offlineVerifier(tb testing.TB, now time.Time, keys ...jose.JSONWebKey) *Verifier {
	tb.Helper()
	v, err := New(Config{
		Issuers: []IssuerConfig{{Issuer: testIssuer}},
		Now:     func() time.Time { return now },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		// Nothing may be fetched: any attempt fails at once.
		HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("offline")
		})},
	})
	require.NoError(tb, err)
	is := v.issuers[testIssuer]
	is.meta, is.metaAt = &ServerMetadata{Issuer: testIssuer, JWKSURI: testIssuer + "/jwks"}, now
	is.keys, is.keysAt, is.keysMaxAge = keys, now, KeysMaxAge
	is.onDemandAt = now.Add(time.Hour) // no fetch for an unknown kid either
	return v
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func publicJWK(key any, kid, alg string) jose.JSONWebKey {
	k := jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: alg, Use: "sig"}
	return k.Public()
}

// signed signs claims with key under kid (none if empty), as an issuer, a
// stranger or an attacker would; the external tests know it as SignForTest.
func signed(tb testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	tb.Helper()
	opts := (&jose.SignerOptions{}).WithType("at+jwt")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	require.NoError(tb, err)
	b, err := json.Marshal(claims)
	require.NoError(tb, err)
	obj, err := s.Sign(b)
	require.NoError(tb, err)
	out, err := obj.CompactSerialize()
	require.NoError(tb, err)
	return out
}

func validClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "sub": "alice", "aud": []string{testResource, "other"},
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "scope": "mcp:client mcp:admin",
		"client_id": "app", "groups": []string{"support"},
	}
}

func TestVerify_offline(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rsaKey := publicJWK(&testKeys.rsa.PublicKey, "r1", "")
	ecKey := publicJWK(&testKeys.ec.PublicKey, "e1", "ES256")
	rsaOnlyPS := publicJWK(&testKeys.rsa.PublicKey, "r2", "PS256")

	drop := func(name string) map[string]any {
		c := validClaims(now)
		delete(c, name)
		return c
	}
	set := func(name string, v any) map[string]any {
		c := validClaims(now)
		c[name] = v
		return c
	}
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"RS256", signed(t, jose.RS256, testKeys.rsa, "r1", validClaims(now)), nil},
		{"no kid: any key of the family", signed(t, jose.RS256, testKeys.rsa, "", validClaims(now)), nil},
		{"ES256", signed(t, jose.ES256, testKeys.ec, "e1", validClaims(now)), nil},
		{"PS256 by the key meant for it", signed(t, jose.PS256, testKeys.rsa, "r2", validClaims(now)), nil},
		{"RS256 by a key whose alg is PS256", signed(t, jose.RS256, testKeys.rsa, "r2", validClaims(now)), ErrUnknownKey},
		{"ES256 under an RSA kid", signed(t, jose.ES256, testKeys.ec, "r1", validClaims(now)), ErrUnknownKey},
		{"RS384 not allowed here", signed(t, jose.RS384, testKeys.rsa, "r1", validClaims(now)), ErrAlgorithm},
		{"no exp", signed(t, jose.RS256, testKeys.rsa, "r1", drop("exp")), ErrMalformed},
		{"exp a string", signed(t, jose.RS256, testKeys.rsa, "r1", set("exp", "tomorrow")), ErrMalformed},
		{"nbf a string", signed(t, jose.RS256, testKeys.rsa, "r1", set("nbf", "now")), ErrMalformed},
		{"nbf ahead", signed(t, jose.RS256, testKeys.rsa, "r1", set("nbf", now.Add(2*time.Minute).Unix())), ErrNotYetValid},
		{"nbf ahead within the skew", signed(t, jose.RS256, testKeys.rsa, "r1", set("nbf", now.Add(time.Minute).Unix())), nil},
		{"no sub, no client", signed(t, jose.RS256, testKeys.rsa, "r1", func() map[string]any {
			c := drop("sub")
			delete(c, "client_id")
			return c
		}()), ErrMalformed},
		{"iss absent", signed(t, jose.RS256, testKeys.rsa, "r1", drop("iss")), ErrUntrustedIssuer},
		{"aud absent", signed(t, jose.RS256, testKeys.rsa, "r1", drop("aud")), ErrAudience},
		{"aud a string", signed(t, jose.RS256, testKeys.rsa, "r1", set("aud", testResource)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := offlineVerifier(t, now, rsaKey, ecKey, rsaOnlyPS)
			v.algs = []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256}
			p, err := v.Verify(context.Background(), tc.token, testResource)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "alice", p.Subject)
			assert.Equal(t, "app", p.ClientID)
		})
	}
}

func TestPrincipal_claimsOfProviders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims string
		client string
		scopes []string
	}{
		{"RFC 9068", `{"sub":"s","client_id":"c","scope":"a b"}`, "c", []string{"a", "b"}},
		{"Keycloak", `{"sub":"s","azp":"c","scope":"openid a"}`, "c", []string{"openid", "a"}},
		{"Entra ID v2", `{"sub":"s","azp":"c","scp":"a b"}`, "c", []string{"a", "b"}},
		{"Entra ID v1", `{"sub":"s","appid":"c","scp":"a"}`, "c", []string{"a"}},
		{"Okta", `{"sub":"s","cid":"c","scp":["a","b"]}`, "c", []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims, err := decodeClaims([]byte(tc.claims))
			require.NoError(t, err)
			p := principalOf(testIssuer, claims, time.Time{})
			assert.Equal(t, tc.client, p.ClientID)
			assert.Equal(t, tc.scopes, p.Scopes)
		})
	}
}

func TestKeysMaxAge(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		headers map[string]string
		want    time.Duration
	}{
		{nil, KeysDefaultAge},
		{map[string]string{"Cache-Control": "public, max-age=3600"}, time.Hour},
		{map[string]string{"Cache-Control": "max-age=5"}, KeysMinAge},
		{map[string]string{"Cache-Control": "no-store"}, KeysMinAge},
		{map[string]string{"Cache-Control": "max-age=99999999999999"}, KeysMaxAge},
		{map[string]string{"Cache-Control": "max-age=bad"}, KeysDefaultAge},
		{map[string]string{"Expires": now.Add(2 * time.Hour).Format(http.TimeFormat), "Date": now.Format(http.TimeFormat)}, 2 * time.Hour},
		{map[string]string{"Expires": "0"}, KeysMinAge},
	} {
		h := http.Header{}
		for k, v := range tc.headers {
			h.Set(k, v)
		}
		assert.Equal(t, tc.want, keysMaxAge(h, now), "%v", tc.headers)
	}
}

func TestTokenCache_bounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := newTokenCache(100)
	for i := range 1000 {
		c.put(fmt.Sprint("token-", i), cacheEntry{until: now.Add(time.Hour)}, now)
		require.LessOrEqual(t, c.len(), 100)
	}
	_, ok := c.get("token-999", now)
	assert.True(t, ok, "the newest entry is in")
	_, ok = c.get("token-999", now.Add(time.Hour))
	assert.False(t, ok, "not past its expiry")

	// Expired entries go first.
	c = newTokenCache(10)
	for i := range 10 {
		c.put(fmt.Sprint("old-", i), cacheEntry{until: now.Add(time.Second)}, now)
	}
	later := now.Add(time.Minute)
	c.put("new", cacheEntry{until: later.Add(time.Hour)}, later)
	assert.Equal(t, 1, c.len())
}
