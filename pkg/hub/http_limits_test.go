package hub

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The limits and admission rules of the Streamable HTTP face, each checked
// as the WebSocket face's are: a token's allow-list on per-server
// endpoints, rate limits, connections per token, idle sessions, and
// admission before a request is relayed to another instance.

// rawHTTP is a Streamable HTTP session driven by hand, one POST at a time.
type rawHTTP struct {
	t      *testing.T
	url    string
	header http.Header // the token, and the session's id once it is open
}

// openRawHTTP initializes a session at url with header (the token) and
// sends notifications/initialized.
func openRawHTTP(t *testing.T, url string, header http.Header) *rawHTTP {
	t.Helper()
	status, hdr, body := post(t, url, header, initializeBody)
	require.Equal(t, http.StatusOK, status, body)
	rh := &rawHTTP{t: t, url: url, header: header.Clone()}
	if rh.header == nil {
		rh.header = http.Header{}
	}
	rh.header.Set(mcp.HeaderSessionID, hdr.Get(mcp.HeaderSessionID))
	rh.header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
	require.NotEmpty(t, rh.header.Get(mcp.HeaderSessionID))
	status, _, body = post(t, url, rh.header, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, http.StatusAccepted, status, body)
	return rh
}

// call POSTs one request and returns the HTTP status and, for a 200, the
// answer (from a JSON body or the SSE stream that carries it).
func (rh *rawHTTP) call(id int, method, params string) (int, *jsonrpc.Response) {
	rh.t.Helper()
	status, hdr, body := post(rh.t, rh.url, rh.header, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	if status != http.StatusOK {
		return status, nil
	}
	frames := []string{body}
	if strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		frames = nil
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(data) != "" {
				frames = append(frames, data)
			}
		}
	}
	for _, f := range frames {
		m, err := jsonrpc.DecodeMessage([]byte(f))
		if resp, ok := m.(*jsonrpc.Response); err == nil && ok && resp.ID == jsonrpc.Int64ID(int64(id)) {
			return status, resp
		}
	}
	rh.t.Fatalf("no answer to request %d in %q", id, body)
	return status, nil
}

// TestHTTP_scopeOutsideTheAllowList: a token whose tool patterns leave a
// server out does not find that server's endpoint, over HTTP as over
// WebSocket: 404, as for a server that is not there (the endpoint does not
// exist for this client, and saying 403 would tell it the server is
// connected). A session opened on an allowed server's endpoint is not one
// of the other's either.
func TestHTTP_scopeOutsideTheAllowList(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	th.runServerWith(demo.New(&demo.Options{Name: "weather", ClockInterval: time.Hour}).Server, "weather", "weather-secret")
	limited := bearer("limited-secret") // tools: demo__echo, demo__a*

	for _, tc := range []struct {
		name   string
		path   string
		header http.Header
		http   int // the status of an initialize POST
		ws     int // the status of a WebSocket upgrade
	}{
		{"outside the allow-list", "/servers/weather/mcp", limited, http.StatusNotFound, http.StatusNotFound},
		{"within it", "/servers/demo/mcp", limited, http.StatusOK, http.StatusSwitchingProtocols},
		{"no server there", "/servers/nobody/mcp", limited, http.StatusNotFound, http.StatusNotFound},
		{"an admin", "/servers/weather/mcp", bearer("admin-secret"), http.StatusOK, http.StatusSwitchingProtocols},
		{"no token", "/servers/weather/mcp", nil, http.StatusUnauthorized, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := post(t, th.srv.URL+tc.path, tc.header, initializeBody)
			assert.Equal(t, tc.http, status, "HTTP: %s", body)
			if status == http.StatusNotFound {
				assert.NotContains(t, body, "forbidden", "nothing says the server exists")
			}
			assert.Equal(t, tc.ws, dialStatus(t, th.wsURL(tc.path), tc.header), "WebSocket")
		})
	}

	s := openRawHTTP(t, th.srv.URL+"/servers/demo/mcp", limited)
	status, resp := s.call(2, mcp.MethodToolsList, `{}`)
	require.Equal(t, http.StatusOK, status)
	require.Nil(t, resp.Error)
	s.url = th.srv.URL + "/servers/weather/mcp"
	status, _, body := post(t, s.url, s.header, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	assert.Equal(t, http.StatusNotFound, status, "the session is demo's, not weather's: %s", body)
}

// TestHTTP_rateLimit: over HTTP, a request beyond the token's rate gets
// -32004 with data.retryAfterMs in a 200 answer, as on a WebSocket, and the
// session goes on (pings are free).
func TestHTTP_rateLimit(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{RateLimit: 1, RateBurst: 3})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	s := openRawHTTP(t, th.srv.URL+"/mcp", nil)

	var limited *jsonrpc.Error
	for i := 0; i < 10 && limited == nil; i++ {
		status, resp := s.call(10+i, mcp.MethodToolsList, `{}`)
		require.Equal(t, http.StatusOK, status, "a rate-limited request is answered, not refused")
		limited = resp.Error
	}
	require.NotNil(t, limited, "beyond a burst of 3 at 1 a second, a request is limited")
	assert.Equal(t, mcp.CodeRateLimited, limited.Code)
	assert.Contains(t, limited.Message, "rate limited")
	var data struct {
		RetryAfterMs int64 `json:"retryAfterMs"`
	}
	require.NoError(t, json.Unmarshal(limited.Data, &data), "data: %s", limited.Data)
	assert.Positive(t, data.RetryAfterMs)
	assert.LessOrEqual(t, data.RetryAfterMs, int64(1000), "one request a second: never more than a second to wait")

	status, resp := s.call(99, mcp.MethodPing, `{}`)
	require.Equal(t, http.StatusOK, status)
	assert.Nil(t, resp.Error, "pings are free")
}

// TestHTTP_connectionsPerToken: an HTTP session counts against its token's
// connection limit like a WebSocket: beyond it, initialize gets 429 with
// Retry-After; a session that ends frees its slot.
func TestHTTP_connectionsPerToken(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	admin := bearer("admin-secret") // maxConnections: 2
	th.client(&mcp.ClientOptions{Token: "admin-secret"})
	s := openRawHTTP(t, th.srv.URL+"/mcp", admin)

	status, hdr, body := post(t, th.srv.URL+"/mcp", admin, initializeBody)
	assert.Equal(t, http.StatusTooManyRequests, status, body)
	assert.Equal(t, "5", hdr.Get("Retry-After"))
	assert.Contains(t, body, "429 too many connections")
	assert.Equal(t, http.StatusTooManyRequests, dialStatus(t, th.wsURL("/mcp"), admin), "HTTP sessions and WebSockets share the limit")

	req, err := http.NewRequest(http.MethodDelete, s.url, nil)
	require.NoError(t, err)
	req.Header = s.header
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Eventually(t, func() bool {
		status, _, _ := post(t, th.srv.URL+"/mcp", admin, initializeBody)
		return status == http.StatusOK
	}, wait, 10*time.Millisecond, "a deleted session frees its slot")
}

// TestHTTP_idleSessionReleasesSubscriptions: an HTTP session that is idle
// past SessionIdleTimeout ends like a WebSocket that closed: its
// subscriptions are released, and the server hears resources/unsubscribe.
func TestHTTP_idleSessionReleasesSubscriptions(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{SessionIdleTimeout: 200 * time.Millisecond})
	rs := startRawServer(th, "watched", subscribableCaps, listing("watched://x"))
	s := openRawHTTP(t, th.srv.URL+"/mcp", nil)
	status, resp := s.call(2, mcp.MethodResourcesSubscribe, `{"uri":"watched://x"}`)
	require.Equal(t, http.StatusOK, status)
	require.Nil(t, resp.Error)
	rs.expect("resources/subscribe watched://x")

	rs.expect("resources/unsubscribe watched://x") // no request comes: the session expires
	require.Eventually(t, func() bool { return th.streamable.Sessions() == 0 && len(th.sessionList()) == 0 }, wait, time.Millisecond,
		"the session is gone")
	status, _, body := post(t, s.url, s.header, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	assert.Equal(t, http.StatusNotFound, status, "an expired session is unknown: %s", body)
}

// TestHTTP_relayAdmitsFirst: a request for a session another instance owns
// is admitted where it lands (token, Origin) before it is relayed: one that
// would be refused never reaches the broker. It used to be relayed first,
// so that anyone could make an instance publish bodies of up to
// MaxMessageBytes onto the broker, and the owner refused them only there.
func TestHTTP_relayAdmitsFirst(t *testing.T) {
	t.Parallel()
	a, b, _, _ := startPair(t, Config{Tokens: writeTokens(t, fmt.Sprintf(testTokens, opsDigest()))})
	a.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
	b.waitServer("demo", 1)
	s := openRawHTTP(t, a.srv.URL+"/mcp", bearer("alice-secret")) // owned by a
	sid := s.header.Get(mcp.HeaderSessionID)
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`

	for _, tc := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"no token", http.Header{}, http.StatusUnauthorized},
		{"unknown token", bearer("nope"), http.StatusUnauthorized},
		{"a server's token", bearer("weather-secret"), http.StatusForbidden},
		{"foreign origin", http.Header{"Authorization": {"Bearer alice-secret"}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
	} {
		h := tc.header.Clone()
		h.Set(mcp.HeaderSessionID, sid)
		h.Set(mcp.HeaderProtocolVersion, "2025-11-25")
		status, _, body := post(t, b.srv.URL+"/mcp", h, ping)
		assert.Equal(t, tc.status, status, "%s: %s", tc.name, body)
	}
	assert.Zero(t, scrape(t, b, `switchboard_http_relayed_total{side="sent"}`), "nothing refused was relayed")
	assert.Zero(t, scrape(t, a, `switchboard_http_relayed_total{side="served"}`))

	s.url = b.srv.URL + "/mcp"
	status, resp := s.call(3, mcp.MethodPing, `{}`)
	require.Equal(t, http.StatusOK, status)
	assert.Nil(t, resp.Error, "the session's own token is relayed and served")
	assert.Equal(t, 1.0, scrape(t, b, `switchboard_http_relayed_total{side="sent"}`))
	assert.Equal(t, 1.0, scrape(t, a, `switchboard_http_relayed_total{side="served"}`))
}
