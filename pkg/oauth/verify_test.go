package oauth_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/internal/proctest"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

func TestVerify_acceptsEveryAlgorithm(t *testing.T) {
	as := oauthtest.Start(t)
	v := newVerifier(t, as, nil)
	m := as.MachineClient("mcp:client", "mcp:admin")
	for _, alg := range []string{"RS256", "PS256", "ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			res := resource + "/" + strings.ToLower(alg)
			as.SetResource(oauthtest.Resource{Resource: res, Alg: alg})
			token := as.Token(m, res, "mcp:client", "mcp:admin")
			h, _ := jwtParts(t, token)
			require.Equal(t, alg, h["alg"])

			p, err := verify(t, v, token, res)
			require.NoError(t, err)
			assert.Equal(t, as.Issuer(), p.Issuer)
			assert.Equal(t, m.ID, p.Subject, "a machine token's subject is its client")
			assert.Equal(t, m.ID, p.ClientID)
			assert.Equal(t, []string{"mcp:client", "mcp:admin"}, p.Scopes)
			assert.True(t, p.HasScope("mcp:admin"))
			assert.Equal(t, []string{res}, p.Audience)
			assert.WithinDuration(t, time.Now().Add(time.Hour), p.Expiry, time.Minute)
		})
	}
}

func TestVerify_userToken(t *testing.T) {
	as := oauthtest.Start(t)
	as.SetUserClaims("alice", map[string]any{"groups": []string{"support", "sales"}})
	c := as.PublicClient()
	tok := as.Authorize(c, "alice", resource, "mcp:client")

	p, err := verify(t, newVerifier(t, as, nil), tok.AccessToken, resource)
	require.NoError(t, err)
	assert.Equal(t, "alice", p.Subject)
	assert.Equal(t, c.ID, p.ClientID)
	assert.Equal(t, []string{"mcp:client"}, p.Scopes)
	assert.Equal(t, []string{"support", "sales"}, p.ClaimStrings("groups"))
}

// TestVerify_refusals: each bad token is refused with its own error, and a
// good token verified beside them (by the same Verifier) is not hurt.
func TestVerify_refusals(t *testing.T) {
	as := oauthtest.Start(t)
	other := oauthtest.Start(t) // an authorization server the verifier does not trust
	m := as.MachineClient("mcp:client")
	good := as.Token(m, resource, "mcp:client")
	header, claims := jwtParts(t, good)

	// A public key of the issuer, used as an HMAC secret: the classic
	// algorithm confusion. Both its PEM form and its JWK form.
	jwks := fetchJWKS(t, as.Issuer()+"/jwks")
	var pub jose.JSONWebKey
	for _, k := range jwks.Keys {
		if k.KeyID == header["kid"] {
			pub = k
		}
	}
	require.NotNil(t, pub.Key, "the token's key is in the JWKS")
	der, err := x509.MarshalPKIXPublicKey(pub.Key)
	require.NoError(t, err)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	jwkJSON, err := json.Marshal(pub)
	require.NoError(t, err)

	as.SetResource(oauthtest.Resource{Resource: resource + "/later", NotBefore: 3600})
	otherMachine := other.MachineClient("mcp:client")
	goodSig := good[strings.LastIndex(good, "."):]

	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"not yet valid", as.Token(m, resource+"/later", "mcp:client"), oauth.ErrNotYetValid},
		{"untrusted issuer", other.Token(otherMachine, resource, "mcp:client"), oauth.ErrUntrustedIssuer},
		{"another resource", as.Token(m, "http://127.0.0.1:9/servers/b/mcp", "mcp:client"), oauth.ErrAudience},
		{"alg none", compact(t, map[string]any{"alg": "none", "typ": "at+jwt"}, claims) + ".", oauth.ErrAlgorithm},
		{"alg none, signature kept", compact(t, map[string]any{"alg": "none", "kid": header["kid"]}, claims) + goodSig, oauth.ErrAlgorithm},
		{"HMAC keyed by the PEM public key", oauth.SignForTest(t, jose.HS256, pemKey, header["kid"].(string), claims), oauth.ErrAlgorithm},
		{"HMAC keyed by the JWK", oauth.SignForTest(t, jose.HS256, jwkJSON, header["kid"].(string), claims), oauth.ErrAlgorithm},
		{"claims changed", compact(t, header, with(claims, "scope", "mcp:admin")) + goodSig, oauth.ErrSignature},
		{"signed by a stranger under the issuer's kid", oauth.SignForTest(t, jose.RS256, strangerKey(t), header["kid"].(string), claims), oauth.ErrSignature},
		{"oversized", strings.Repeat("a", 64<<10), oauth.ErrTooLarge},
		{"empty", "", oauth.ErrNoToken},
		{"three dots", "a.b.c", oauth.ErrMalformed},
		{"opaque, no introspection", "an-opaque-token", oauth.ErrMalformed},
		{"a JWE", "a.b.c.d.e", oauth.ErrMalformed},
	}
	v := newVerifier(t, as, nil)
	_, err = verify(t, v, good, resource)
	require.NoError(t, err)
	descriptions := map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := verify(t, v, tc.token, resource)
			require.ErrorIs(t, err, tc.want)
			assert.Nil(t, p)
			if tc.token != "" {
				assert.NotContains(t, err.Error(), tc.token[max(0, len(tc.token)-20):], "the error never holds the token")
			}
			descriptions[oauth.Describe(err)] = tc.name

			// The good token beside it still passes.
			_, err = verify(t, v, good, resource)
			assert.NoError(t, err)
		})
	}
	assert.Len(t, descriptions, 8, "a distinct description per kind of refusal: %v", descriptions)
	assert.Zero(t, other.Requests("/jwks")+other.Requests("/.well-known/openid-configuration"),
		"nothing is fetched from an untrusted issuer")
}

func TestVerify_oversizedRefusedBeforeParsing(t *testing.T) {
	as := oauthtest.Start(t)
	v := newVerifier(t, as, nil)
	big := strings.Repeat("a", 64<<10) + "." + strings.Repeat("b", 10) + ".c"
	_, err := verify(t, v, big, resource)
	require.ErrorIs(t, err, oauth.ErrTooLarge)
	assert.Contains(t, err.Error(), "65549 bytes, at most 16384")
	assert.Zero(t, as.Requests("/jwks")+as.Requests("/.well-known/openid-configuration"), "nothing fetched")
}

func TestVerify_expiry(t *testing.T) {
	as := oauthtest.Start(t)
	m := as.MachineClient("mcp:client")
	token := as.Token(m, resource)
	_, claims := jwtParts(t, token)
	exp := time.Unix(int64(claims["exp"].(float64)), 0)

	for _, tc := range []struct {
		name string
		at   time.Time
		want error
	}{
		{"just before exp", exp.Add(-time.Second), nil},
		{"within the 60 s skew", exp.Add(59 * time.Second), nil},
		{"past the skew", exp.Add(61 * time.Second), oauth.ErrExpired},
		{"iat beyond the skew ahead", exp.Add(-time.Hour - 61*time.Second), oauth.ErrNotYetValid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(t, as, func(c *oauth.Config) { c.Now = func() time.Time { return tc.at } })
			_, err := verify(t, v, token, resource)
			if tc.want == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.want)
			}
		})
	}

	// A cached token expires too.
	var clk clock
	v := newVerifier(t, as, func(c *oauth.Config) { c.Now = clk.now })
	_, err := verify(t, v, token, resource)
	require.NoError(t, err)
	clk.advance(time.Until(exp) + 61*time.Second)
	_, err = verify(t, v, token, resource)
	assert.ErrorIs(t, err, oauth.ErrExpired)
}

func TestVerify_audiences(t *testing.T) {
	as := oauthtest.Start(t)
	m := as.MachineClient("mcp:client")
	forB := as.Token(m, "http://127.0.0.1:9/servers/b/mcp")
	apiAud := as.Token(m, "api://switchboard")

	v := newVerifier(t, as, func(c *oauth.Config) { c.Audiences = []string{"api://switchboard"} })
	_, err := verify(t, v, forB, "http://127.0.0.1:9/servers/a/mcp")
	assert.ErrorIs(t, err, oauth.ErrAudience, "a token for /servers/b is no good at /servers/a")
	_, err = verify(t, v, forB, "http://127.0.0.1:9/servers/b/mcp")
	assert.NoError(t, err)
	_, err = verify(t, v, forB, "http://127.0.0.1:9/servers/a/mcp")
	assert.ErrorIs(t, err, oauth.ErrAudience, "nor once it is cached")
	_, err = verify(t, v, apiAud, "http://127.0.0.1:9/servers/a/mcp")
	assert.NoError(t, err, "an extra accepted audience")
	_, err = verify(t, v, forB, "")
	assert.ErrorIs(t, err, oauth.ErrAudience, "no resource: only the extra audiences")
}

func TestVerify_unknownKeyRefetchesOnceEvery30s(t *testing.T) {
	as := oauthtest.Start(t)
	var clk clock
	v := newVerifier(t, as, func(c *oauth.Config) { c.Now = clk.now })
	m := as.MachineClient("mcp:client")
	good := as.Token(m, resource)
	_, claims := jwtParts(t, good)
	_, err := verify(t, v, good, resource)
	require.NoError(t, err)
	require.Equal(t, 1, as.Requests("/jwks"))

	stranger := strangerKey(t)
	_, err = verify(t, v, oauth.SignForTest(t, jose.RS256, stranger, "stranger-1", claims), resource)
	require.ErrorIs(t, err, oauth.ErrUnknownKey)
	assert.Equal(t, 2, as.Requests("/jwks"), "an unknown kid fetches the keys again")

	clk.advance(29 * time.Second)
	_, err = verify(t, v, oauth.SignForTest(t, jose.RS256, stranger, "stranger-2", claims), resource)
	require.ErrorIs(t, err, oauth.ErrUnknownKey)
	assert.Contains(t, err.Error(), "at most every 30s")
	assert.Equal(t, 2, as.Requests("/jwks"), "another unknown kid within 30 s does not")

	clk.advance(2 * time.Second)
	_, err = verify(t, v, oauth.SignForTest(t, jose.RS256, stranger, "stranger-3", claims), resource)
	require.ErrorIs(t, err, oauth.ErrUnknownKey)
	assert.Equal(t, 3, as.Requests("/jwks"), "after 30 s, one more fetch")

	_, err = verify(t, v, as.Token(m, resource), resource)
	assert.NoError(t, err, "the issuer's own tokens are not hurt")
}

func TestVerify_keyRotation(t *testing.T) {
	as := oauthtest.Start(t)
	v := newVerifier(t, as, nil)
	m := as.MachineClient("mcp:client")
	before := as.Token(m, resource)
	_, err := verify(t, v, before, resource)
	require.NoError(t, err)

	as.Rotate(false)
	after := as.Token(m, resource)
	hb, _ := jwtParts(t, before)
	ha, _ := jwtParts(t, after)
	require.NotEqual(t, hb["kid"], ha["kid"])
	_, err = verify(t, v, after, resource)
	require.NoError(t, err, "a token signed by the new key passes at once")
	_, err = verify(t, v, as.Token(m, resource), resource)
	require.NoError(t, err)
	_, err = verify(t, v, before, resource)
	assert.NoError(t, err, "one signed by the old key too")
	assert.Equal(t, 2, as.Requests("/jwks"))

	// The old key retired: a fresh verifier refuses what it signed, the
	// new key's tokens pass.
	as.Rotate(true)
	fresh := newVerifier(t, as, nil)
	_, err = verify(t, fresh, before, resource)
	assert.ErrorIs(t, err, oauth.ErrUnknownKey)
	_, err = verify(t, fresh, as.Token(m, resource), resource)
	assert.NoError(t, err)
}

// TestVerify_rotationTokensAtOnce: the tokens of a new key that arrive at
// once after a rotation all pass, on one fetch of the keys: those that
// come while the fetch is decided but not yet started wait for it too
// (they were refused "unknown key" until the next fetch was due).
func TestVerify_rotationTokensAtOnce(t *testing.T) {
	as := oauthtest.Start(t)
	v := newVerifier(t, as, nil)
	m := as.MachineClient("mcp:client")
	_, err := verify(t, v, as.Token(m, resource), resource)
	require.NoError(t, err)
	as.Rotate(false)
	after := as.Token(m, resource)
	const n = 32
	start := make(chan struct{})
	errs := make(chan error, n)
	for range n {
		go func() {
			<-start
			_, err := verify(t, v, after, resource)
			errs <- err
		}()
	}
	close(start)
	for range n {
		assert.NoError(t, <-errs)
	}
	assert.Equal(t, 2, as.Requests("/jwks"), "one fetch for all of them")
}

// TestVerify_rotationDuringARefresh: a key the issuer rotates to while a
// fetch of its keys is under way (begun before the rotation: Run fetches
// them ahead of their age) is fetched again for its first token. That
// token used to share the fetch under way, whose keys lack it, and its
// on-demand fetch was spent: the new key's tokens were refused for up to
// 30 s. A hostile client flooding made-up key ids meanwhile costs the
// issuer nothing more than that one fetch, and the well-behaved client is
// served at once.
func TestVerify_rotationDuringARefresh(t *testing.T) {
	as := oauthtest.Start(t)
	var clk clock
	v := newVerifier(t, as, func(c *oauth.Config) { c.Now = clk.now })
	m := as.MachineClient("mcp:client")
	_, err := verify(t, v, as.Token(m, resource), resource)
	require.NoError(t, err)
	require.Equal(t, 1, as.Requests("/jwks"))

	// The keys near their age (not past it): Run fetches them again, and
	// the answer, current when asked for, is held on its way back.
	held := as.HoldNext("/jwks")
	clk.advance(oauth.KeysDefaultAge * 95 / 100)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- v.Run(ctx) }()
	t.Cleanup(func() {
		held.Release()
		cancel()
		<-ran
	})
	select {
	case <-held.Held():
	case <-time.After(10 * time.Second):
		t.Fatal("Run never fetched the keys again")
	}

	as.Rotate(false)
	rotated := as.Token(m, resource)
	served := make(chan error, 1)
	go func() {
		_, err := verify(t, v, rotated, resource)
		served <- err
	}()
	waitFor(t, func() bool { return oauth.OnDemandClaimedForTest(v) }) // its token asked for the keys

	// The hostile client: tokens naming key ids no one published, from
	// before the held fetch ends until well after.
	_, claims := jwtParts(t, rotated)
	stranger := strangerKey(t)
	var forged []string
	for i := range 64 {
		forged = append(forged, oauth.SignForTest(t, jose.RS256, stranger, fmt.Sprintf("made-up-%d", i), claims))
	}
	var refused atomic.Int64
	stop := make(chan struct{})
	var flood sync.WaitGroup
	for range 2 {
		flood.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := verify(t, v, forged[i%len(forged)], resource); !errors.Is(err, oauth.ErrUnknownKey) {
					t.Errorf("a made-up key id: %v", err)
					return
				}
				refused.Add(1)
			}
		})
	}
	held.Release()
	select {
	case err := <-served:
		require.NoError(t, err, "the new key's first token is served")
	case <-time.After(10 * time.Second):
		t.Fatal("the new key's first token waits")
	}
	_, err = verify(t, v, as.Token(m, resource), resource)
	require.NoError(t, err, "and the next")

	n := refused.Load()
	waitFor(t, func() bool { return refused.Load() >= n+200 })
	close(stop)
	flood.Wait()
	assert.Equal(t, 3, as.Requests("/jwks"), "one fetch for the new key, whatever the flood")
}

// TestVerify_jwksDown: with the JWKS endpoint failing, the keys at hand
// keep verifying (cached tokens and new ones); a token signed by a new key
// is refused with a clear error; once the endpoint is back and the rate
// limit allows, the new key is fetched.
func TestVerify_jwksDown(t *testing.T) {
	as := oauthtest.Start(t)
	var clk clock
	v := newVerifier(t, as, func(c *oauth.Config) { c.Now = clk.now })
	m := as.MachineClient("mcp:client")
	cached := as.Token(m, resource)
	_, err := verify(t, v, cached, resource)
	require.NoError(t, err)

	as.FailPath("/jwks")
	_, err = verify(t, v, cached, resource)
	assert.NoError(t, err, "a cached token")
	_, err = verify(t, v, as.Token(m, resource), resource)
	assert.NoError(t, err, "a new token by a key at hand")

	clk.advance(oauth.KeysDefaultAge + time.Minute) // the keys age out: fetching fails
	_, err = verify(t, v, as.Token(m, resource), resource)
	assert.NoError(t, err, "stale keys still verify while none can be fetched")
	st := v.Status()[0]
	assert.True(t, st.Ready)
	assert.ErrorIs(t, st.Err, oauth.ErrUnavailable)

	as.Rotate(false)
	newKey := as.Token(m, resource)
	_, err = verify(t, v, newKey, resource)
	require.ErrorIs(t, err, oauth.ErrUnknownKey)
	assert.ErrorIs(t, err, oauth.ErrUnavailable)
	assert.Contains(t, err.Error(), "could not be fetched again")
	assert.Equal(t, "the token is signed with an unknown key", oauth.Describe(err))

	as.HealPath("/jwks")
	clk.advance(oauth.KeyRefreshInterval)
	_, err = verify(t, v, newKey, resource)
	assert.NoError(t, err, "the endpoint back, the new key is fetched")
	assert.NoError(t, v.Ready())
}

// TestVerify_issuerDownAtStart: an unreachable issuer stops nothing: the
// verifier is built, reports why it is not ready, refuses tokens quickly
// meanwhile, and works once the issuer is up.
func TestVerify_issuerDownAtStart(t *testing.T) {
	as := oauthtest.Start(t)
	m := as.MachineClient("mcp:client")
	token := as.Token(m, resource)
	as.Down()

	var clk clock
	v := newVerifier(t, as, func(c *oauth.Config) { c.Now = clk.now })
	require.Error(t, v.Ready())
	assert.Contains(t, v.Ready().Error(), "not fetched yet")

	_, err := verify(t, v, token, resource)
	require.ErrorIs(t, err, oauth.ErrUnavailable)
	assert.Contains(t, v.Ready().Error(), "connection refused")
	start := time.Now()
	_, err = verify(t, v, token, resource)
	require.ErrorIs(t, err, oauth.ErrUnavailable)
	assert.Less(t, time.Since(start), 100*time.Millisecond, "within the retry wait, the last error at once")

	as.Up()
	clk.advance(2 * time.Second)
	_, err = verify(t, v, token, resource)
	require.NoError(t, err)
	assert.NoError(t, v.Ready())
}

// TestVerifier_Run fetches ahead of need and retries an issuer that is
// down until it is up.
func TestVerifier_Run(t *testing.T) {
	as := oauthtest.Start(t)
	as.Down()
	v := newVerifier(t, as, nil)
	ctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()

	waitFor(t, func() bool { st := v.Status()[0]; return st.Err != nil && st.Err.Error() != "not fetched yet" })
	assert.Contains(t, v.Ready().Error(), "connection refused")
	as.Up()
	waitFor(t, func() bool { return v.Ready() == nil })
	assert.Positive(t, v.Status()[0].Keys)
	assert.Equal(t, 1, as.Requests("/jwks"))

	cancel()
	assert.ErrorIs(t, <-done, ctxCanceled)
}

func TestVerify_cachesVerifiedTokens(t *testing.T) {
	as := oauthtest.Start(t)
	v := newVerifier(t, as, nil)
	m := as.MachineClient("mcp:client")
	token := as.Token(m, resource)
	p1, err := verify(t, v, token, resource)
	require.NoError(t, err)
	as.Down() // nothing more may be fetched
	p2, err := verify(t, v, token, resource)
	require.NoError(t, err)
	assert.Same(t, p1, p2)
}

func TestVerify_introspection(t *testing.T) {
	as := oauthtest.Start(t)
	as.SetResource(oauthtest.Resource{Resource: resource, Format: "opaque"})
	rs := as.MachineClient() // the resource server's own credentials
	var clk clock
	introspecting := func(secret string) func(*oauth.Config) {
		return func(c *oauth.Config) {
			c.Now = clk.now
			c.Issuers[0].Introspection = &oauth.Introspection{ClientID: rs.ID, Secret: oauth.NewSecret(secret)}
		}
	}
	v := newVerifier(t, as, introspecting(rs.Secret))
	m := as.MachineClient("mcp:client")
	token := as.Token(m, resource, "mcp:client")
	require.NotContains(t, token, ".", "an opaque token")

	p, err := verify(t, v, token, resource)
	require.NoError(t, err)
	assert.Equal(t, as.Issuer(), p.Issuer)
	assert.Equal(t, m.ID, p.ClientID)
	assert.Equal(t, m.ID, p.Subject, "no sub: the client")
	assert.Equal(t, []string{"mcp:client"}, p.Scopes)
	assert.WithinDuration(t, time.Now().Add(time.Hour), p.Expiry, time.Minute)
	_, err = verify(t, v, token, resource)
	require.NoError(t, err)
	assert.Equal(t, 1, as.Requests("/token/introspection"), "cached")

	_, err = verify(t, v, token, "http://127.0.0.1:9/servers/b/mcp")
	assert.ErrorIs(t, err, oauth.ErrAudience)

	as.Revoke(m, token)
	_, err = verify(t, v, token, resource)
	require.NoError(t, err, "within the cache's period, the answer stands")
	clk.advance(oauth.DefaultIntrospectionCache)
	_, err = verify(t, v, token, resource)
	require.ErrorIs(t, err, oauth.ErrInactive, "the revocation seen once the period is over")
	_, err = verify(t, v, token, resource)
	require.ErrorIs(t, err, oauth.ErrInactive)
	assert.Equal(t, 2, as.Requests("/token/introspection"), "not active: remembered a while too")

	_, err = verify(t, v, "made-up", resource)
	assert.ErrorIs(t, err, oauth.ErrInactive)

	untilExpiry := newVerifier(t, as, func(c *oauth.Config) {
		introspecting(rs.Secret)(c)
		c.Issuers[0].Introspection.CacheFor = -1
	})
	other := as.Token(m, resource, "mcp:client")
	_, err = verify(t, untilExpiry, other, resource)
	require.NoError(t, err)
	as.Revoke(m, other)
	clk.advance(time.Hour - time.Minute)
	_, err = verify(t, untilExpiry, other, resource)
	assert.NoError(t, err, "CacheFor < 0: trusted until the token's expiry")
}

// TestVerify_introspectionCredentials: an introspection endpoint that
// refuses the resource server's own credentials refuses no client's fault:
// ErrUnavailable beside ErrIntrospectionRefused, never the secret in the
// error or the log; Ready says why (Run finds out before any token), and
// the endpoint is asked again only when a retry is due.
func TestVerify_introspectionCredentials(t *testing.T) {
	as := oauthtest.Start(t)
	as.SetResource(oauthtest.Resource{Resource: resource, Format: "opaque"})
	rs := as.MachineClient()
	m := as.MachineClient("mcp:client")
	var clk clock
	logs := &proctest.Buffer{}
	wrong := newVerifier(t, as, func(c *oauth.Config) {
		c.Now = clk.now
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.Issuers[0].Introspection = &oauth.Introspection{ClientID: rs.ID, Secret: oauth.NewSecret("wrong-secret")}
	})
	ctx, cancel := contextWithCancel(t)
	done := make(chan error, 1)
	go func() { done <- wrong.Run(ctx) }()
	waitFor(t, func() bool { return wrong.Status()[0].Introspection != nil })
	assert.ErrorIs(t, wrong.Status()[0].Introspection, oauth.ErrIntrospectionRefused)
	assert.True(t, wrong.Status()[0].Ready, "its keys are at hand")
	assert.Contains(t, wrong.Ready().Error(), fmt.Sprintf(`client %q: HTTP status 401 (error "invalid_client")`, rs.ID))
	cancel()
	<-done

	asked := as.Requests("/token/introspection")
	_, err := verify(t, wrong, as.Token(m, resource), resource)
	require.ErrorIs(t, err, oauth.ErrUnavailable, "the resource server's own credentials are refused: not the client's fault")
	require.ErrorIs(t, err, oauth.ErrIntrospectionRefused)
	assert.Equal(t, asked, as.Requests("/token/introspection"), "refused a moment ago: not asked again before the retry")
	clk.advance(oauth.DefaultIntrospectionCache)
	_, err = verify(t, wrong, as.Token(m, resource), resource)
	require.ErrorIs(t, err, oauth.ErrIntrospectionRefused)
	assert.Equal(t, asked+1, as.Requests("/token/introspection"), "asked again once due")
	assert.NotContains(t, err.Error(), "wrong-secret")
	log := logs.String()
	assert.Equal(t, 1, strings.Count(log, "oauth: the issuer refused the introspection credentials"), "logged once: %s", log)
	assert.NotContains(t, log, "wrong-secret")
}

func fetchJWKS(t *testing.T, u string) jose.JSONWebKeySet {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&set))
	return set
}

// with returns a copy of claims with name set to value (removed if nil).
func with(claims map[string]any, name string, value any) map[string]any {
	out := make(map[string]any, len(claims))
	for k, v := range claims {
		out[k] = v
	}
	if value == nil {
		delete(out, name)
	} else {
		out[name] = value
	}
	return out
}
