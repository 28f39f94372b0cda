package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// fakeHub is an HTTP server standing in for the hub's server endpoint: it
// checks the bearer token and hands each accepted WebSocket to the test.
type fakeHub struct {
	url      string
	conns    chan *peer.WebSocket
	attempts atomic.Int32
}

func newFakeHub(t *testing.T, token string) *fakeHub {
	t.Helper()
	h := &fakeHub{conns: make(chan *peer.WebSocket, 8)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.attempts.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		ws, err := peer.Accept(w, r, nil)
		if err != nil {
			return
		}
		h.conns <- ws
	}))
	t.Cleanup(func() {
		srv.Close()
		close(h.conns)
		for ws := range h.conns { // accepted but never used by the test
			ws.Close(peer.CloseGoingAway, "")
		}
	})
	h.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/mcp/server"
	return h
}

func TestServer_Dial_reconnects(t *testing.T) {
	t.Parallel()
	hub := newFakeHub(t, "secret")
	s := mcp.NewServer(testInfo, nil)
	s.AddTool(echoTool("hello"))

	connected := make(chan *mcp.ServerSession, 4)
	disconnected := make(chan error, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialed := make(chan error, 1)
	go func() {
		dialed <- s.Dial(ctx, hub.url, &mcp.DialOptions{
			Token:        "secret",
			MinBackoff:   time.Millisecond,
			MaxBackoff:   10 * time.Millisecond,
			OnConnect:    func(ss *mcp.ServerSession) { connected <- ss },
			OnDisconnect: func(ss *mcp.ServerSession, err error) { disconnected <- err },
		})
	}()

	// The hub plays the client on each connection the server opens.
	session := func() *mcp.Client {
		t.Helper()
		c, err := mcp.ConnectConn(testCtx(t), recv(t, hub.conns), nil)
		require.NoError(t, err)
		recv(t, connected)
		res, err := c.CallTool(testCtx(t), "hello", nil, nil)
		require.NoError(t, err)
		assert.Equal(t, "hello", text(res))
		return c
	}

	first := session()
	require.NoError(t, first.Close(), "the hub goes away")
	assert.NoError(t, recv(t, disconnected), "a normal close is not an error")

	second := session()
	assert.EqualValues(t, 2, hub.attempts.Load(), "one attempt per connection")

	cancel()
	assert.ErrorIs(t, recv(t, dialed), context.Canceled, "Dial stops when its context ends")
	recv(t, disconnected)
	recv(t, second.Done())
	require.NoError(t, second.Close())
}

func TestServer_Dial_retriesUntilTheHubIsUp(t *testing.T) {
	t.Parallel()
	// A hub that refuses with 503 twice, then accepts.
	conns := make(chan *peer.WebSocket, 1)
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) <= 2 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		if ws, err := peer.Accept(w, r, nil); err == nil {
			conns <- ws
		}
	}))
	defer srv.Close()

	s := mcp.NewServer(testInfo, nil)
	ctx, cancel := context.WithCancel(context.Background())
	dialed := make(chan error, 1)
	go func() {
		dialed <- s.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &mcp.DialOptions{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	}()
	c, err := mcp.ConnectConn(testCtx(t), recv(t, conns), nil)
	require.NoError(t, err)
	require.NoError(t, c.Ping(testCtx(t)))
	assert.EqualValues(t, 3, attempts.Load())
	cancel()
	assert.ErrorIs(t, recv(t, dialed), context.Canceled)
	require.NoError(t, c.Close())
}

func TestServer_Dial_refusedCredentials(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			var attempts atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				attempts.Add(1)
				http.Error(w, "no", status)
			}))
			defer srv.Close()

			s := mcp.NewServer(testInfo, nil)
			dialed := make(chan error, 1)
			go func() {
				// No deadline: Dial must return by itself.
				dialed <- s.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), &mcp.DialOptions{
					Token:      "wrong",
					MinBackoff: time.Millisecond,
				})
			}()
			err := recv(t, dialed)
			require.Error(t, err)
			var he *peer.HandshakeError
			require.ErrorAs(t, err, &he)
			assert.Equal(t, status, he.StatusCode)
			assert.EqualValues(t, 1, attempts.Load(), "no retry with refused credentials")
			assert.NotContains(t, err.Error(), "wrong", "the token is not in the error")
		})
	}
}

func TestServer_Dial_tokenReachesTheHub(t *testing.T) {
	t.Parallel()
	hub := newFakeHub(t, "right")
	s := mcp.NewServer(testInfo, nil)
	err := s.Dial(context.Background(), hub.url, &mcp.DialOptions{Token: "wrong"})
	var he *peer.HandshakeError
	require.ErrorAs(t, err, &he, "a wrong token is refused")
	assert.Equal(t, http.StatusUnauthorized, he.StatusCode)

	ctx, cancel := context.WithCancel(context.Background())
	dialed := make(chan error, 1)
	go func() {
		dialed <- s.Dial(ctx, hub.url, &mcp.DialOptions{Header: http.Header{"Authorization": {"Bearer right"}}})
	}()
	c, err := mcp.ConnectConn(testCtx(t), recv(t, hub.conns), nil)
	require.NoError(t, err, "DialOptions.Header is sent with the handshake")
	cancel()
	assert.ErrorIs(t, recv(t, dialed), context.Canceled)
	require.NoError(t, c.Close())
}
