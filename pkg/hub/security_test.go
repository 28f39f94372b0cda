package hub

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

const testTokens = `
tokens:
  - name: alice
    token: alice-secret
    roles: [client]
  - name: tools-only
    token: limited-secret
    roles: [client]
    tools: ["demo__echo", "demo__a*"]
  - name: ops
    # sha256 of "ops-secret": a file may hold digests only
    sha256: ` + "%s" + `
    roles: [dashboard]
  - name: weather
    token: weather-secret
    roles: [server]
    servers: [weather]
  - name: squatter
    token: squatter-secret
    roles: [server]
    servers: ["weather*"]
  - name: demo-server
    token: demo-secret
    roles: [server]
    servers: [demo]
  - name: admin
    token: admin-secret
    roles: [admin]
    maxConnections: 2
`

func writeTokens(t *testing.T, content string) *Tokens {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
	tokens, err := LoadTokens(file)
	require.NoError(t, err)
	return tokens
}

func opsDigest() string {
	p, _, _ := parseTokens([]byte("tokens: [{name: x, token: ops-secret, roles: [client]}]"))
	return fmt.Sprintf("%x", p[0].digest)
}

func authedHub(t *testing.T, cfg Config) *testHub {
	t.Helper()
	cfg.Tokens = writeTokens(t, fmt.Sprintf(testTokens, opsDigest()))
	th := startHub(t, cfg)
	th.runServerWith(demo.New(nil).Server, "demo", "demo-secret")
	return th
}

// runServerWith is runServer with a token.
func (th *testHub) runServerWith(s *mcp.Server, name, token string) {
	th.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Dial(ctx, th.wsURL("/mcp/server"), &mcp.DialOptions{Token: token, MinBackoff: 10 * time.Millisecond})
	}()
	th.t.Cleanup(func() { cancel(); <-done })
	th.waitFor(name+" registered", func(v *view) bool { return len(v.servers[name]) > 0 })
}

func dialStatus(t *testing.T, url string, header http.Header) int {
	t.Helper()
	c, err := peer.Dial(ctxFor(t), url, &peer.DialOptions{Header: header})
	var he *peer.HandshakeError
	if errors.As(err, &he) {
		return he.StatusCode
	}
	require.NoError(t, err)
	c.Close(peer.CloseNormal, "")
	return http.StatusSwitchingProtocols
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

func TestAuth_upgrades(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	for _, tt := range []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"no token", "/mcp", nil, http.StatusUnauthorized},
		{"wrong token", "/mcp", bearer("nope"), http.StatusUnauthorized},
		{"client token", "/mcp", bearer("alice-secret"), http.StatusSwitchingProtocols},
		{"token in the query", "/mcp?token=alice-secret", nil, http.StatusSwitchingProtocols},
		{"token in the cookie", "/mcp", http.Header{"Cookie": {CookieName + "=alice-secret"}}, http.StatusSwitchingProtocols},
		{"token by digest", "/mcp", bearer("ops-secret"), http.StatusSwitchingProtocols},
		{"server token on the client endpoint", "/mcp", bearer("weather-secret"), http.StatusForbidden},
		{"client token on the server endpoint", "/mcp/server", bearer("alice-secret"), http.StatusForbidden},
		{"dashboard token on the server endpoint", "/mcp/server", bearer("ops-secret"), http.StatusForbidden},
		{"foreign origin", "/mcp", http.Header{"Authorization": {"Bearer alice-secret"}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, dialStatus(t, th.wsURL(tt.path), tt.header))
		})
	}
}

func TestAuth_roles(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	ctx := ctxFor(t)

	ops := th.client(&mcp.ClientOptions{Token: "ops-secret"})
	tools, err := ops.AllTools(ctx)
	require.NoError(t, err)
	assert.Len(t, tools, 5, "a dashboard lists every tool")
	_, err = ops.ReadResource(ctx, demo.CounterURI)
	require.NoError(t, err, "a dashboard reads")
	require.NoError(t, ops.Subscribe(ctx, demo.ClockURI), "a dashboard subscribes")
	_, err = ops.CallTool(ctx, "demo__echo", map[string]string{"text": "x"}, nil)
	assert.Equal(t, mcp.CodeForbidden, rpcCode(err), "a dashboard does not call tools: %v", err)
	_, err = ops.GetPrompt(ctx, "demo__greet", map[string]string{"name": "x"})
	assert.Equal(t, mcp.CodeForbidden, rpcCode(err), "nor get prompts")

	limited := th.client(&mcp.ClientOptions{Token: "limited-secret"})
	tools, err = limited.AllTools(ctx)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"demo__add", "demo__ask", "demo__echo"}, names, "a client sees the tools its patterns allow")
	_, err = limited.CallTool(ctx, "demo__echo", map[string]string{"text": "x"}, nil)
	require.NoError(t, err)
	_, err = limited.CallTool(ctx, "demo__increment", nil, nil)
	assert.Equal(t, mcp.CodeForbidden, rpcCode(err))
	assert.ErrorContains(t, err, `"tools-only" may not call tool "demo__increment"`)
}

func TestAuth_serverNames(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	// The credentials name the server, whatever it calls itself.
	th.runServerWith(demo.New(&demo.Options{Name: "i-say-im-someone-else"}).Server, "weather", "weather-secret")

	refused := func(name, token string) error {
		s := mcp.NewServer(mcp.Implementation{Name: name, Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "t"}, nil)
		conn, err := peer.Dial(ctxFor(t), th.wsURL("/mcp/server"), &peer.DialOptions{Header: bearer(token)})
		require.NoError(t, err)
		ss := s.Serve(ctxFor(t), conn)
		return ss.Wait()
	}
	err := refused("weather", "squatter-secret")
	assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(err), "got %v", err)
	assert.ErrorContains(t, err, "held by another token", "a name held by another token cannot be taken over")

	err = refused("elsewhere", "squatter-secret")
	assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(err))
	assert.ErrorContains(t, err, `may not register server name "elsewhere"`)

	v := th.reg.view()
	require.Len(t, v.servers["weather"], 1)
	assert.Equal(t, "weather", v.servers["weather"][0].Owner)
}

func TestAuth_connectionsPerToken(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	a := th.client(&mcp.ClientOptions{Token: "admin-secret"})
	th.client(&mcp.ClientOptions{Token: "admin-secret"})
	assert.Equal(t, http.StatusTooManyRequests, dialStatus(t, th.wsURL("/mcp"), bearer("admin-secret")))
	a.Close()
	require.Eventually(t, func() bool {
		return dialStatus(t, th.wsURL("/mcp"), bearer("admin-secret")) == http.StatusSwitchingProtocols
	}, wait, 10*time.Millisecond, "a closed connection frees its slot")
}

func TestAuth_reload(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	c := th.client(&mcp.ClientOptions{Token: "alice-secret"})
	require.NoError(t, os.WriteFile(th.cfg.Tokens.path, []byte("tokens: [{name: bob, token: bob-secret, roles: [client]}]"), 0o600))
	require.NoError(t, th.cfg.Tokens.Reload())
	assert.Equal(t, http.StatusUnauthorized, dialStatus(t, th.wsURL("/mcp"), bearer("alice-secret")), "a removed token no longer connects")
	assert.Equal(t, http.StatusSwitchingProtocols, dialStatus(t, th.wsURL("/mcp"), bearer("bob-secret")))
	require.NoError(t, c.Ping(ctxFor(t)), "connections made before the reload stay up")

	require.NoError(t, os.WriteFile(th.cfg.Tokens.path, []byte("tokens: [{name: broken"), 0o600))
	assert.Error(t, th.cfg.Tokens.Reload())
	assert.Equal(t, http.StatusSwitchingProtocols, dialStatus(t, th.wsURL("/mcp"), bearer("bob-secret")), "a bad file keeps the old tokens")
}

func TestTokens_fileErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ content, want string }{
		{"tokens: [{token: x, roles: [client]}]", "no name"},
		{"tokens: [{name: a, roles: [client]}]", "exactly one of token and sha256"},
		{"tokens: [{name: a, token: x, sha256: ab, roles: [client]}]", "exactly one of token and sha256"},
		{"tokens: [{name: a, token: x}]", "no roles"},
		{"tokens: [{name: a, token: x, roles: [root]}]", `unknown role "root"`},
		{"tokens: [{name: a, token: x, roles: [server]}]", "no servers"},
		{"tokens: [{name: a, sha256: xyz, roles: [client]}]", "64 hex digits"},
		{"tokens: [{name: a, token: x, roles: [client]}, {name: a, token: y, roles: [client]}]", "twice"},
		{"tokens: [{name: a, token: x, roles: [client], tools: ['[']}]", "malformed pattern"},
		{"{", "not valid YAML or JSON"},
		{"tokens: [{name: a, token: x, roles: [client], tool: ['demo__*']}]", `line 1: unknown key "tool"`},
		{"tokens: [{name: a, token: x, roles: s3cret-value}]", "line 1: a value of the wrong type"},
		{"tokens: [{name: 'oauth:x', token: x, roles: [client]}]", "OAuth principals'"},
		{"policy: [{roles: [client]}]", "policy rule 1 matches nothing"},
		{"policy: [{claim: groups, roles: [client]}]", "policy rule 1 needs both a claim and a value"},
		{"policy: [{value: support, scope: x, roles: [client]}]", "policy rule 1 needs both a claim and a value"},
		{"policy: [{scope: crm, roles: []}]", "policy rule 1 has no roles"},
		{"policy: [{scope: crm, roles: [root]}]", `policy rule 1 has an unknown role "root"`},
		{"policy: [{scope: crm, roles: [client], tools: ['[']}]", "policy rule 1 has a malformed pattern"},
		{"policy: [{scope: crm, role: [client]}]", `unknown key "role"`},
		{"policy: {scope: crm}", "a value of the wrong type"},
	} {
		_, _, err := parseTokens([]byte(tt.content))
		assert.ErrorContains(t, err, tt.want, tt.content)
		if err != nil {
			assert.NotContains(t, err.Error(), "s3cret", "an error never quotes the file")
		}
	}
	_, _, err := parseTokens([]byte(`{"tokens":[{"name":"j","token":"x","roles":["client"]}]}`))
	assert.NoError(t, err, "JSON works too")
	_, pol, err := parseTokens([]byte("policy: [{scope: mcp:admin, roles: []}]"))
	require.NoError(t, err, "a default scope may be turned off")
	assert.NotContains(t, pol.scopes, "mcp:admin")
}

func TestLogin_setsAnHttpOnlyCookie(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	resp, err := http.PostForm(th.srv.URL+"/login", map[string][]string{"token": {"ops-secret"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	cookie := resp.Cookies()[0]
	assert.Equal(t, CookieName, cookie.Name)
	assert.True(t, cookie.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	assert.Equal(t, http.StatusSwitchingProtocols, dialStatus(t, th.wsURL("/mcp"), http.Header{"Cookie": {cookie.String()}}))

	resp, err = http.PostForm(th.srv.URL+"/login", map[string][]string{"token": {"wrong"}})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// TestLogout_refusesCrossSite: a page of another origin cannot sign the
// dashboard's user out (403, the cookie kept); the dashboard's own page,
// and a client that sends no Origin, can.
func TestLogout_refusesCrossSite(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	logout := func(origin string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, th.srv.URL+"/logout", nil)
		require.NoError(t, err)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.AddCookie(&http.Cookie{Name: CookieName, Value: "ops-secret"})
		resp, err := scrapeClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := logout("http://evil.example")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Empty(t, resp.Cookies(), "the cookie is kept")
	for _, origin := range []string{th.srv.URL, ""} {
		resp := logout(origin)
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, "origin %q", origin)
		require.Len(t, resp.Cookies(), 1)
		assert.Equal(t, -1, resp.Cookies()[0].MaxAge, "origin %q: the cookie is cleared", origin)
	}
}

func TestMetrics_needAnAdminTokenWhenTokensAreOn(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	get := func(token string) int {
		req, _ := http.NewRequest("GET", th.srv.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scrapeClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusUnauthorized, get(""))
	assert.Equal(t, http.StatusForbidden, get("alice-secret"))
	assert.Equal(t, http.StatusOK, get("admin-secret"))
}

func TestDashboard_securityHeaders(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	resp, err := http.Get(th.srv.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "script-src 'self'")
	assert.NotContains(t, csp, "unsafe-inline")
	assert.Contains(t, csp, "frame-ancestors 'none'")
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
}

// TestAbuse runs hostile peers against one hub while a well-behaved client
// keeps calling: each abuser gets its clear error or close code, the good
// client never fails, and goroutines and heap come back to their baseline.
// Not parallel: it measures the whole process.
func TestAbuse(t *testing.T) {
	th := startHub(t, Config{
		MaxMessageBytes:   64 << 10,
		MaxBatch:          10,
		MaxInFlight:       8,
		RateLimit:         50,
		RateBurst:         20,
		SendQueue:         16,
		InitializeTimeout: 300 * time.Millisecond,
		HandshakeTimeout:  300 * time.Millisecond,
	})
	chatty := sessionServer("chatty", nil) // pings the hub mid-call to pace itself
	var quiet atomic.Bool
	var shouted atomic.Int64
	chatty.AddTool(&mcp.Tool{Name: "shout"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		// Large log messages until told to stop: enough to fill any socket
		// buffer of a client that does not read.
		// Every 8 lines a ping waits for the hub to catch up, so that the
		// hub never has to drop chatty itself for not reading.
		line := strings.Repeat("x", 32<<10)
		for i := 0; ctx.Err() == nil && !quiet.Load(); i++ {
			req.Log(ctx, mcp.LevelDebug, "", line)
			shouted.Add(1)
			if i%8 == 7 {
				if err := req.Session.Peer().Call(ctx, mcp.MethodPing, nil, nil); err != nil {
					return nil, err
				}
			}
		}
		return &mcp.CallToolResult{}, nil
	})
	chatty.AddTool(&mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	th.runServer(chatty, "chatty")
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")

	// The well-behaved client calls steadily through everything below, at a
	// pace its rate limit allows.
	good := th.client(nil)
	require.NoError(t, good.SetLoggingLevel(ctxFor(t), mcp.LevelInfo))
	var goodCalls, goodFailures atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			res, err := good.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "still fine"}, nil)
			goodCalls.Add(1)
			if err != nil || res.Content[0].Text != "still fine" {
				goodFailures.Add(1)
				firstFailure.CompareAndSwap(nil, fmt.Sprint(err))
			}
		}
	}()

	runtime.GC()
	baseGoroutines := runtime.NumGoroutine()
	basebuf := make([]byte, 1<<20)
	baseDump := string(basebuf[:runtime.Stack(basebuf, true)])
	defer func() {
		if t.Failed() {
			t.Logf("baseline goroutines:\n%s", baseDump)
		}
	}()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapInuse

	t.Run("oversized frame", func(t *testing.T) {
		c := rawWS(t, th)
		require.NoError(t, c.Write(ctxFor(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":["`+strings.Repeat("a", 70<<10)+`"]}`)))
		assertClosed(t, c, websocket.StatusMessageTooBig)
	})
	t.Run("binary frame", func(t *testing.T) {
		c := rawWS(t, th)
		require.NoError(t, c.Write(ctxFor(t), websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
		assertClosed(t, c, websocket.StatusUnsupportedData)
	})
	t.Run("invalid UTF-8", func(t *testing.T) {
		c := rawWS(t, th)
		require.NoError(t, c.Write(ctxFor(t), websocket.MessageText, []byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc3\x28\"}")))
		assertClosed(t, c, websocket.StatusInvalidFramePayloadData)
	})
	t.Run("deep nesting", func(t *testing.T) {
		rc := th.rawClient(true)
		defer rc.conn.Close(peer.CloseNormal, "") // leaving ends what it asked for (the in-flight flood's 8 waits)
		rc.send(strings.Repeat("[", 30_000) + strings.Repeat("]", 30_000))
		resp := rc.recvResponse()
		require.NotNil(t, resp.Error)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, resp.Error.Code)
		assert.Contains(t, resp.Error.Message, "nesting")
		rc.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		assert.Nil(t, rc.recvResponse().Error, "the connection survives")
	})
	t.Run("huge batch", func(t *testing.T) {
		rc := th.rawClient(true)
		defer rc.conn.Close(peer.CloseNormal, "") // leaving ends what it asked for (the in-flight flood's 8 waits)
		rc.send("[" + strings.TrimSuffix(strings.Repeat(`{"jsonrpc":"2.0","method":"ping","id":1},`, 11), ",") + "]")
		resp := rc.recvResponse()
		require.NotNil(t, resp.Error)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, resp.Error.Code)
		assert.Contains(t, resp.Error.Message, "batch")
	})
	t.Run("request flood", func(t *testing.T) {
		// One at a time, so that only the rate limit (50/s, bursts of 20)
		// can refuse them, not the bound on requests in flight.
		rc := th.rawClient(true)
		defer rc.conn.Close(peer.CloseNormal, "") // leaving ends what it asked for (the in-flight flood's 8 waits)
		limited := 0
		for i := range 60 {
			rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i))
			resp := rc.recvResponse()
			if resp.Error != nil {
				require.Equal(t, mcp.CodeRateLimited, resp.Error.Code)
				assert.Contains(t, resp.Error.Message, "rate limited")
				var data struct{ RetryAfterMs int64 }
				require.NoError(t, json.Unmarshal(resp.Error.Data, &data))
				assert.Positive(t, data.RetryAfterMs)
				limited++
			}
		}
		assert.GreaterOrEqual(t, limited, 30, "beyond the burst of 20, requests are rate limited")
	})
	t.Run("refused flood", func(t *testing.T) {
		// Calls the hub refuses itself (an unknown tool, a missing name)
		// cost it as much as any: they draw on the limit too.
		rc := th.rawClient(true)
		defer rc.conn.Close(peer.CloseNormal, "")
		limited := 0
		for i := range 60 {
			params := `{"name":"nobody__nothing"}`
			if i%2 == 1 {
				params = `{}`
			}
			rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i, params))
			resp := rc.recvResponse()
			require.NotNil(t, resp.Error)
			if resp.Error.Code == mcp.CodeRateLimited {
				limited++
			} else {
				require.Equal(t, jsonrpc.CodeInvalidParams, resp.Error.Code, "%s", resp.Error.Message)
			}
		}
		assert.GreaterOrEqual(t, limited, 30, "beyond the burst of 20, refused requests are rate limited too")
	})
	t.Run("in-flight flood", func(t *testing.T) {
		rc := th.rawClient(true)
		defer rc.conn.Close(peer.CloseNormal, "") // leaving ends what it asked for (the in-flight flood's 8 waits)
		for i := range 12 {
			rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"chatty__wait"}}`, i))
		}
		resp := rc.recvResponse()
		require.NotNil(t, resp.Error, "calls beyond 8 in flight are refused at once")
		assert.Equal(t, mcp.CodeRateLimited, resp.Error.Code)
		assert.Contains(t, resp.Error.Message, "in flight")
	})
	t.Run("slow reader", func(t *testing.T) {
		// A client that asks for a flood of large log messages and never
		// reads: its queue overflows and it is dropped, alone. (Everyone
		// else has the default level, which does not admit debug lines.)
		c := rawWS(t, th)
		c.SetReadLimit(-1)
		for _, f := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"slow","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"chatty__shout"}}`,
		} {
			require.NoError(t, c.Write(ctxFor(t), websocket.MessageText, []byte(f)))
		}
		// Before its queue can fill, the kernel takes up to about 4 MiB
		// into the hub's socket (the send buffer grows to tcp_wmem's
		// maximum): some 130 of chatty's lines, each paced by a ping every
		// 8. On a machine loaded many times over, under the race
		// detector, that took more than wait (72 lines in 10 s), so the
		// drop gets longer.
		if !assert.Eventually(t, func() bool {
			return scrape(t, th, "switchboard_slow_consumers_dropped_total") >= 1
		}, 4*wait, 20*time.Millisecond, "the slow reader was dropped") {
			t.Logf("log lines fanned out: %v, shouted: %d", scrape(t, th, `switchboard_notifications_fanned_out_total{method="notifications/message"}`), shouted.Load())
			// What the hub told the slow reader, but the log lines: why
			// its call did not shout, if it did not.
			rctx, cancel := context.WithTimeout(ctxFor(t), time.Second)
			defer cancel()
			for {
				_, b, err := c.Read(rctx)
				if err != nil {
					t.Fatalf("the slow reader was not dropped; reading it: %v", err)
				}
				if !bytes.Contains(b, []byte(`"notifications/message"`)) {
					t.Logf("the slow reader got: %.300s", b)
				}
			}
		}
		quiet.Store(true)
		// When it reads at last, it finds what was under way and then the
		// close, with its reason.
		assertClosed(t, c, websocket.StatusPolicyViolation)
	})
	t.Run("slowloris upgrade", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(th.srv.URL, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write([]byte("GET /mcp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"))
		require.NoError(t, err)
		conn.SetReadDeadline(time.Now().Add(wait))
		start := time.Now()
		_, err = bufio.NewReader(conn).ReadString('\n')
		assert.True(t, errors.Is(err, io.EOF) || err != nil && strings.Contains(err.Error(), "reset"), "the hub hung up: %v", err)
		assert.Less(t, time.Since(start), 5*time.Second, "after the handshake timeout, not the test's")
	})
	t.Run("no initialize", func(t *testing.T) {
		c := rawWS(t, th)
		assertClosed(t, c, websocket.StatusPolicyViolation)
	})

	close(stop)
	wg.Wait()
	assert.Zero(t, goodFailures.Load(), "the well-behaved client's calls kept succeeding (first failure: %v)", firstFailure.Load())
	assert.Greater(t, goodCalls.Load(), int64(5))

	// Everything the abusers held is released.
	defer func() {
		if t.Failed() {
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		return runtime.NumGoroutine() <= baseGoroutines+2
	}, wait, 20*time.Millisecond, "goroutines back to the baseline of %d (now %d)", baseGoroutines, runtime.NumGoroutine())
	require.Eventually(t, func() bool {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse <= baseHeap+8<<20
	}, wait, 20*time.Millisecond, "heap back near its baseline of %d (now %d)", baseHeap, ms.HeapInuse)

	// What happened shows in /metrics.
	assert.GreaterOrEqual(t, scrape(t, th, "switchboard_rate_limited_total"), 30.0)
	assert.GreaterOrEqual(t, scrape(t, th, `switchboard_requests_total{method="tools/call",outcome="ok"}`), float64(goodCalls.Load()))
	assert.GreaterOrEqual(t, scrape(t, th, `switchboard_requests_total{method="tools/list",outcome="-32004"}`), 30.0)
	assert.Eventually(t, func() bool { return scrape(t, th, `switchboard_connections{role="client"}`) == 1 },
		wait, 20*time.Millisecond, "only the good client is left")
	assert.Equal(t, 2.0, scrape(t, th, `switchboard_connections{role="server"}`))
	assert.Positive(t, scrape(t, th, `switchboard_routed_request_duration_seconds_count{method="tools/call",where="local"}`))
	assert.Positive(t, scrape(t, th, `switchboard_broker_messages_total{direction="publish",outcome="ok"}`))
}

func rawWS(t *testing.T, th *testHub) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctxFor(t), th.wsURL("/mcp"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// assertClosed reads until the hub closes the connection and checks the code.
func assertClosed(t *testing.T, c *websocket.Conn, code websocket.StatusCode) {
	t.Helper()
	for {
		_, _, err := c.Read(ctxFor(t))
		if err != nil {
			assert.Equal(t, code, websocket.CloseStatus(err), "closed with %v", err)
			return
		}
	}
}

// scrapeClient keeps no connections open, so that scraping leaves no
// goroutines behind.
var scrapeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// scrape reads one sample from /metrics (0 when absent).
func scrape(t *testing.T, th *testHub, series string) float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, th.srv.URL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer admin-secret") // the test tokens' admin, when tokens are on
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, value, ok := strings.Cut(line, " "); ok && name == series {
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}
