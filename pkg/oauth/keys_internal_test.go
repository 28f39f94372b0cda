package oauth

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerify_tokensOfANewKeyWaitForItsFetch: when a key rotation brings
// many requests with tokens of the new key at once, the first fetches the
// keys again and the others wait for that fetch, instead of being refused
// because another fetch is not due yet: no call fails during a rotation.
func TestVerify_tokensOfANewKeyWaitForItsFetch(t *testing.T) {
	now := time.Now()
	oldKey := publicJWK(&testKeys.rsa.PublicKey, "old", "RS256")
	newKey := publicJWK(&testKeys.ec.PublicKey, "new", "ES256")
	var mu sync.Mutex
	fetches := 0
	started := make(chan struct{}) // the second fetch of the keys began
	release := make(chan struct{}) // lets it answer
	serve := func(r *http.Request) (*http.Response, error) {
		var body any
		switch {
		case strings.HasSuffix(r.URL.Path, "/jwks"):
			mu.Lock()
			fetches++
			n := fetches
			mu.Unlock()
			keys := []jose.JSONWebKey{oldKey}
			if n > 1 {
				close(started)
				<-release
				keys = append(keys, newKey)
			}
			body = jose.JSONWebKeySet{Keys: keys}
		case strings.Contains(r.URL.Path, "/.well-known/"):
			body = ServerMetadata{Issuer: testIssuer, JWKSURI: testIssuer + "/jwks"}
		default:
			return &http.Response{StatusCode: 404, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, nil
		}
		b, _ := json.Marshal(body)
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(string(b))),
			Header: http.Header{"Content-Type": {"application/json"}}}, nil
	}
	v, err := New(Config{
		Issuers:    []IssuerConfig{{Issuer: testIssuer}},
		Now:        func() time.Time { return now },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		HTTPClient: &http.Client{Transport: roundTripFunc(serve)},
	})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = v.Verify(ctx, signed(t, jose.RS256, testKeys.rsa, "old", validClaims(now)), testResource)
	require.NoError(t, err)

	claims := func(sub string) map[string]any {
		c := validClaims(now)
		c["sub"] = sub
		return c
	}
	errs := make(chan error, 2)
	go func() {
		_, err := v.Verify(ctx, signed(t, jose.ES256, testKeys.ec, "new", claims("first")), testResource)
		errs <- err
	}()
	<-started // the first token's fetch is in flight
	go func() {
		_, err := v.Verify(ctx, signed(t, jose.ES256, testKeys.ec, "new", claims("second")), testResource)
		errs <- err
	}()
	// The second waits for the fetch in flight (it cannot be answered
	// before release); give it the time to get there, then release.
	select {
	case err := <-errs:
		t.Fatalf("a token was answered before the keys came: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	for range 2 {
		assert.NoError(t, <-errs)
	}
	assert.Equal(t, 2, fetches, "one fetch for both")
}
