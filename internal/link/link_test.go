package link_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDial_errorsSayWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	ln.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/private":
			http.Error(w, "no", http.StatusUnauthorized)
		case "/forbidden":
			http.Error(w, "no", http.StatusForbidden)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	base := "ws" + strings.TrimPrefix(srv.URL, "http")
	for _, tc := range []struct {
		url, want string
		refused   bool
	}{
		{"ws://" + closed + "/mcp?token=secret", "cannot reach the hub at ws://" + closed + "/mcp: connection refused (is the hub running?)", false},
		{base + "/nothing?token=secret", "HTTP 404 Not Found (not a hub endpoint", false},
		{base + "/private", "HTTP 401 Unauthorized (a token is needed", true},
		{base + "/forbidden", "HTTP 403 Forbidden", true},
		{"ws://no-such-host.invalid/mcp", "cannot reach the hub at ws://no-such-host.invalid/mcp: ", false},
	} {
		_, err := link.Dial(context.Background(), tc.url, nil, peer.WebSocketOptions{})
		require.Error(t, err, tc.url)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "secret", "no query in errors")
		assert.Equal(t, tc.refused, link.Refused(err), tc.url)
	}
}

func TestBackoff_doublesWithJitterAndResets(t *testing.T) {
	b := link.Backoff{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	for i, ceiling := range []time.Duration{100, 200, 400, 400, 400} {
		d := b.Next()
		ceiling *= time.Millisecond
		assert.True(t, d >= ceiling/2 && d <= ceiling, "wait %d: %v not in [%v, %v]", i, d, ceiling/2, ceiling)
	}
	b.Reset()
	assert.LessOrEqual(t, b.Next(), 100*time.Millisecond)
}

func TestRedactAndRound(t *testing.T) {
	assert.Equal(t, "ws://h:1/mcp", link.Redact("ws://user:pw@h:1/mcp?token=x#frag"))
	assert.Equal(t, "(invalid URL)", link.Redact("::"))
	assert.Equal(t, 1200*time.Millisecond, link.Round(1234*time.Millisecond))
	assert.Equal(t, 120*time.Millisecond, link.Round(123*time.Millisecond))
}

func TestSleep(t *testing.T) {
	assert.True(t, link.Sleep(context.Background(), time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, link.Sleep(ctx, time.Hour))
}
