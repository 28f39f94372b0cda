package oauth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// resource is the resource identifier the tests' tokens are for: only a
// name here (nothing listens there).
const resource = "http://127.0.0.1:9/mcp"

// clock is a clock a test moves forward: the real time plus an offset.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// newVerifier returns a Verifier trusting as (and the issuers of more),
// logging to the test, changed by edit if not nil.
func newVerifier(t testing.TB, as *oauthtest.Server, edit func(*oauth.Config)) *oauth.Verifier {
	t.Helper()
	cfg := oauth.Config{
		Issuers: []oauth.IssuerConfig{{Issuer: as.Issuer()}},
		Logger:  slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	v, err := oauth.New(cfg)
	require.NoError(t, err)
	return v
}

// verify verifies token for resource with a deadline.
func verify(t testing.TB, v *oauth.Verifier, token, res string) (*oauth.Principal, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return v.Verify(ctx, token, res)
}

// jwtParts splits a JWT into its decoded header and claims.
func jwtParts(t testing.TB, token string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3)
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, dst))
	}
	return header, claims
}

// compact encodes a header and claims as the first two parts of a JWT.
func compact(t testing.TB, header, claims map[string]any) string {
	t.Helper()
	h, err := json.Marshal(header)
	require.NoError(t, err)
	c, err := json.Marshal(claims)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
}

// strangerKey is an RSA key no issuer publishes.
func strangerKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return k
}

var ctxCanceled = context.Canceled

// contextWithCancel returns a context canceled when the test ends, if not
// before.
func contextWithCancel(t testing.TB) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}

// waitFor waits until cond holds, failing the test after 10 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
