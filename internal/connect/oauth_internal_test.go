package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// fakeServer stands for an authorization server in credentials: each
// fetch gives the next token, living ttl, or err.
type fakeServer struct {
	mu      sync.Mutex
	ttl     time.Duration
	err     error
	n       int
	started chan struct{} // when set, a fetch says so and waits for release
	release chan struct{}
}

func (f *fakeServer) fetch(context.Context) (*oauth2.Token, error) {
	f.mu.Lock()
	f.n++
	n, err, ttl, started, release := f.n, f.err, f.ttl, f.started, f.release
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
		<-release
	}
	if err != nil {
		return nil, err
	}
	return &oauth2.Token{AccessToken: fmt.Sprintf("token-%d", n), Expiry: time.Now().Add(ttl)}, nil
}

func (f *fakeServer) fetches() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func fakeCredentials(f *fakeServer) *credentials {
	return &credentials{ctx: context.Background(), what: "the hub", log: slog.New(slog.DiscardHandler), fetch: f.fetch}
}

func TestRenewAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		life, before time.Duration
	}{
		{time.Hour, 30 * time.Second},
		{10 * time.Minute, 30 * time.Second},
		{100 * time.Second, 20 * time.Second},
		{2 * time.Second, 400 * time.Millisecond},
	} {
		assert.Equal(t, now.Add(tc.life-tc.before), renewAt(now, now.Add(tc.life)), tc.life)
	}
	assert.True(t, renewAt(now, time.Time{}).After(now.Add(1000*24*time.Hour)), "a token without expiry is never renewed")
}

// TestCredentials_renewal: a token is reused until a fifth of its life is
// left (or 30 s), then renewed; while the renewal waits for the server,
// the token still valid is answered at once.
func TestCredentials_renewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeServer{ttl: 10 * time.Second}
		c := fakeCredentials(f)
		ctx := context.Background()
		tok, err := c.token(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, "token-1", tok)
		time.Sleep(7 * time.Second)
		tok, _ = c.token(ctx, nil)
		assert.Equal(t, "token-1", tok, "not due before 8 s")
		assert.Equal(t, 1, f.fetches())

		time.Sleep(1500 * time.Millisecond)
		f.started, f.release = make(chan struct{}), make(chan struct{})
		renewed := make(chan string)
		go func() {
			tok, _ := c.token(ctx, nil)
			renewed <- tok
		}()
		<-f.started
		tok, err = c.token(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, "token-1", tok, "the valid token meanwhile, without waiting for the server")
		close(f.release)
		assert.Equal(t, "token-2", <-renewed)
		f.started = nil
		tok, _ = c.token(ctx, nil)
		assert.Equal(t, "token-2", tok)
		assert.Equal(t, 2, f.fetches())
	})
}

// TestCredentials_failuresWait: a server that gives no token is asked again
// after waits that double, 1 s, 2 s, 4 s..., not at every request; the
// error is answered meanwhile.
func TestCredentials_failuresWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeServer{ttl: time.Hour, err: errors.New("refused")}
		c := fakeCredentials(f)
		ctx := context.Background()
		var at []time.Duration
		start := time.Now()
		for range 80 {
			before := f.fetches()
			_, err := c.token(ctx, nil)
			require.ErrorContains(t, err, "refused")
			if f.fetches() > before {
				at = append(at, time.Since(start).Round(100*time.Millisecond))
			}
			time.Sleep(100 * time.Millisecond)
		}
		assert.Equal(t, []time.Duration{0, time.Second, 3 * time.Second}, at[:3])
		assert.Len(t, at, 4, "at 0, 1, 3 and 7 s within 8 s")

		f.mu.Lock()
		f.err = nil
		f.mu.Unlock()
		time.Sleep(8 * time.Second)
		tok, err := c.token(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, "token-5", tok)
	})
}

// TestCredentials_refusals: a token the resource refuses is replaced at
// once; a new one refused right after starts waits that double, so that a
// resource that refuses every token does not make the connector ask the
// authorization server at every request.
func TestCredentials_refusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeServer{ttl: time.Hour}
		c := fakeCredentials(f)
		ctx := context.Background()
		tok, _ := c.token(ctx, nil)
		time.Sleep(10 * time.Minute)
		c.refused(tok)
		tok, err := c.token(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, "token-2", tok, "replaced at once")
		c.refused("token-1") // refused already: nothing changes
		again, _ := c.token(ctx, nil)
		assert.Equal(t, "token-2", again)

		c.refused(tok)
		_, err = c.token(ctx, nil)
		assert.EqualError(t, err, "the hub refused 2 new access tokens in a row")
		time.Sleep(time.Second)
		tok, err = c.token(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, "token-3", tok)
		c.refused(tok)
		time.Sleep(time.Second)
		_, err = c.token(ctx, nil)
		assert.EqualError(t, err, "the hub refused 3 new access tokens in a row", "now 2 s")
		time.Sleep(time.Second)
		tok, _ = c.token(ctx, nil)
		assert.Equal(t, "token-4", tok)
		assert.Equal(t, 4, f.fetches())

		time.Sleep(time.Minute) // a token that lived long is refused: replaced at once again
		c.refused(tok)
		tok, _ = c.token(ctx, nil)
		assert.Equal(t, "token-5", tok)
	})
}

func TestTokenError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&oauth2.RetrieveError{Response: &http.Response{StatusCode: 401}, ErrorCode: "invalid_client", ErrorDescription: "client authentication failed",
			Body: []byte(`{"error":"invalid_client","echo":"s3cret"}`)},
			"the authorization server refused the token request (HTTP 401 invalid_client): client authentication failed; check the client id and its secret"},
		{&oauth2.RetrieveError{Response: &http.Response{StatusCode: 400}, ErrorCode: "invalid_grant"},
			"the authorization server refused the token request (HTTP 400 invalid_grant); the refresh token is no longer valid: put a new one in its file"},
		{&oauth2.RetrieveError{Response: &http.Response{StatusCode: 500}, Body: []byte("s3cret stack trace")},
			"the authorization server refused the token request (HTTP 500)"},
		{errors.New("dial tcp: connection refused"), "token request: dial tcp: connection refused"},
	} {
		assert.Equal(t, tc.want, tokenError(tc.err).Error())
	}
}

// TestOAuthTransport_tokenOnlyToItsOrigin: the upstream's token goes to the
// upstream's origin only: a redirect elsewhere carries none.
func TestOAuthTransport_tokenOnlyToItsOrigin(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			seen[name] = r.Header.Get("Authorization") + " " + string(body)
			mu.Unlock()
		}
	}
	elsewhere := httptest.NewServer(record("elsewhere"))
	defer elsewhere.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", record("upstream"))
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	})
	up := httptest.NewServer(mux)
	defer up.Close()

	c := fakeCredentials(&fakeServer{ttl: time.Hour})
	client := &http.Client{Transport: newOAuthTransport(c, up.URL+"/mcp")}
	for _, path := range []string{"/mcp", "/moved"} {
		resp, err := client.Post(up.URL+path, "application/json", strings.NewReader(`{"n":1}`))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Equal(t, map[string]string{"upstream": `Bearer token-1 {"n":1}`, "elsewhere": ` {"n":1}`}, seen)
}
