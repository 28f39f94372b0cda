package hub

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Hostile clients of the Streamable HTTP face, each beside a well-behaved
// one: bodies that never end and bodies nobody should read (a request's
// body must arrive within BodyTimeout, a refused request's connection is
// closed without reading its body, and the streams that follow a body are
// not cut by its deadline), and routing headers given twice.

// slowAnswer is what a client that sends its body slowly got.
type slowAnswer struct {
	status int           // 0: no answer
	closed bool          // the hub closed (or reset) the connection after it
	took   time.Duration // from the headers to the answer
	err    error
}

// slowRequest sends head (a request line and headers, without the blank
// line), then body a byte every tick until the hub answers, and reads the
// answer and whether the connection ends after it. It gives up after
// giveUp.
func slowRequest(addr, head, body string, tick, giveUp time.Duration) slowAnswer {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return slowAnswer{err: err}
	}
	defer conn.Close()
	start := time.Now()
	_ = conn.SetDeadline(start.Add(giveUp))
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		return slowAnswer{err: err}
	}
	answered := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(tick)
		defer t.Stop()
		for i := 0; i < len(body); i++ {
			select {
			case <-answered:
				return
			case <-t.C:
			}
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(answered)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return slowAnswer{took: time.Since(start), err: err}
	}
	a := slowAnswer{status: resp.StatusCode, took: time.Since(start)}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, err = br.ReadByte()
	var ne net.Error
	a.closed = err != nil && !(errors.As(err, &ne) && ne.Timeout()) // an end or a reset, not our deadline
	return a
}

// TestHTTP_slowBodies: POSTs whose bodies come a byte at a time (with a
// length, chunked, and to the login form) are answered 408 once
// BodyTimeout has passed, and their connections closed, while a
// well-behaved client keeps calling; a POST answered as a long SSE stream,
// a GET stream and a WebSocket outlive the bound.
func TestHTTP_slowBodies(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	th := authedHub(t, Config{BodyTimeout: bound})
	addr := strings.TrimPrefix(th.srv.URL, "http://")

	// The well-behaved client: calls one after the other all along, with
	// a subscription whose updates come on its GET stream.
	updates := make(chan struct{}, 64)
	good := httpClient(t, th.srv.URL+"/mcp", &mcp.ClientOptions{
		HTTP: mcp.StreamableClientOptions{Header: bearer("alice-secret")},
		OnNotification: func(method string, _ json.RawMessage) {
			if method == mcp.NotificationResourceUpdated {
				select {
				case updates <- struct{}{}:
				default:
				}
			}
		}})
	require.NoError(t, good.Subscribe(ctxFor(t), demo.CounterURI))
	ws := th.client(&mcp.ClientOptions{Token: "alice-secret"})
	var calls, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Paced, as a well-behaved client is: calls back to back drew the
		// token's rate limit dry on a quiet machine, and the calls below
		// were refused with -32004.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := good.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "still here"}, nil); err != nil {
				failures.Add(1)
			}
			calls.Add(1)
		}
	}()

	mcpHead := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer alice-secret\r\n" +
		"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
	attacks := []struct {
		name, head, body string
		n                int
	}{
		{"a length", mcpHead + "Content-Length: 100000\r\n", strings.Repeat(" ", 100), 40},
		{"chunked", mcpHead + "Transfer-Encoding: chunked\r\n", strings.Repeat("1\r\n \r\n", 20), 20},
		{"the login form", "POST /login HTTP/1.1\r\nHost: " + addr + "\r\n" +
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n", "token=" + strings.Repeat("x", 90), 10},
	}
	answers := make([][]slowAnswer, len(attacks))
	var attack sync.WaitGroup
	for i, a := range attacks {
		answers[i] = make([]slowAnswer, a.n)
		for j := range a.n {
			attack.Add(1)
			go func() {
				defer attack.Done()
				answers[i][j] = slowRequest(addr, a.head, a.body, 50*time.Millisecond, 5*time.Second)
			}()
		}
	}
	// Meanwhile: a POST answered as an SSE stream that lasts longer than
	// the bound, and a WebSocket that waits as long.
	res, err := good.CallTool(ctxFor(t), "demo__slow", map[string]int{"steps": 4, "delayMs": 250},
		&mcp.CallOptions{Progress: func(*mcp.ProgressParams) {}})
	require.NoError(t, err, "an SSE answer is not cut by the body's deadline")
	assert.Equal(t, "done after 4 steps", res.Content[0].Text)
	attack.Wait()
	_, err = ws.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "x"}, nil)
	require.NoError(t, err, "a WebSocket is not cut by it")
	_, err = good.CallTool(ctxFor(t), "demo__increment", map[string]int{}, nil)
	require.NoError(t, err)
	select {
	case <-updates:
	case <-time.After(wait):
		t.Fatal("the GET stream, open longer than the bound, stopped carrying updates")
	}
	close(stop)
	wg.Wait()

	for i, a := range attacks {
		for _, ans := range answers[i] {
			require.NoError(t, ans.err, "%s: no answer, after %v", a.name, ans.took)
			assert.Equal(t, http.StatusRequestTimeout, ans.status, a.name)
			assert.True(t, ans.closed, "%s: the connection is closed after the answer", a.name)
			assert.GreaterOrEqual(t, ans.took, bound, "%s: answered only once the bound has passed", a.name)
		}
	}
	assert.Zero(t, failures.Load(), "the well-behaved client's calls all succeeded")
	assert.Greater(t, calls.Load(), int64(5), "and it kept calling meanwhile")
}

// TestHTTP_refusedBodiesAreNotRead: a request refused before its body is
// read (no token, a foreign origin, a wrong Accept) is answered at once
// and its connection closed, not after the hub read the body (net/http
// reads up to 256 KiB of it otherwise, with no deadline); so is one whose
// handler has no use for its body, and a WebSocket upgrade with a body,
// which is refused. The bound here is the default 10 s: the answers come
// long before.
func TestHTTP_refusedBodiesAreNotRead(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	addr := strings.TrimPrefix(th.srv.URL, "http://")
	good := httpClient(t, th.srv.URL+"/mcp", &mcp.ClientOptions{HTTP: mcp.StreamableClientOptions{Header: bearer("alice-secret")}})

	post := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n"
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"no token", post + "Accept: application/json, text/event-stream\r\n", http.StatusUnauthorized},
		{"an unknown token", post + "Accept: application/json, text/event-stream\r\nAuthorization: Bearer nope\r\n", http.StatusUnauthorized},
		{"a foreign origin", post + "Accept: application/json, text/event-stream\r\nAuthorization: Bearer alice-secret\r\nOrigin: http://evil.example\r\n", http.StatusForbidden},
		{"a server's token", post + "Accept: application/json, text/event-stream\r\nAuthorization: Bearer weather-secret\r\n", http.StatusForbidden},
		{"no Accept", post + "Authorization: Bearer alice-secret\r\n", http.StatusNotAcceptable},
		{"a logout", "POST /logout HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100000\r\n", http.StatusNoContent},
		{"the health check", "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 100000\r\n", http.StatusOK},
		{"a WebSocket upgrade", "GET /mcp HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer alice-secret\r\nContent-Length: 100000\r\n" +
			"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans := slowRequest(addr, tc.head, "", time.Hour, 5*time.Second)
			require.NoError(t, ans.err, "no answer after %v: the hub waits for the body", ans.took)
			assert.Equal(t, tc.status, ans.status)
			assert.True(t, ans.closed, "the connection is closed: the body is never read")
		})
	}
	_, err := good.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "x"}, nil)
	require.NoError(t, err, "the well-behaved client kept working")
}

// TestHTTP_doubledRoutingHeaders: a stateless request that gives
// Mcp-Method, Mcp-Name or MCP-Protocol-Version twice is refused with 400
// -32020 and not run, whichever value a proxy in front would have read; a
// balancer that keeps the last value would authorize one tool while the
// hub ran another. The well-behaved request beside it runs once.
func TestHTTP_doubledRoutingHeaders(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(nil).Server, "")
	url := th.srv.URL + "/mcp"
	increment := modernBody(1, mcp.MethodToolsCall, `"name":"demo__increment","arguments":{}`, "{}")
	for _, tc := range []struct {
		name   string
		header http.Header
	}{
		{"Mcp-Method", http.Header{mcp.HeaderMethod: {mcp.MethodToolsCall, mcp.MethodToolsList}}},
		{"Mcp-Method, the same twice", http.Header{mcp.HeaderMethod: {mcp.MethodToolsCall, mcp.MethodToolsCall}}},
		{"Mcp-Name", http.Header{mcp.HeaderName: {"demo__increment", "demo__echo"}}},
		{"MCP-Protocol-Version", http.Header{mcp.HeaderProtocolVersion: {mcp.ModernVersion, "2025-11-25"}}},
	} {
		st := modernPost(t, url, increment, tc.header)
		assert.Equal(t, http.StatusBadRequest, st.status, tc.name)
		resp, _ := st.answer(t)
		code, _ := errorOf(t, resp)
		assert.Equal(t, mcp.CodeHeaderMismatch, code, "%s: %s", tc.name, resp)
		assert.Contains(t, string(resp), "given 2 times", tc.name)
	}
	resp, _ := modernPost(t, url, increment, nil).answer(t)
	assert.Equal(t, "1", firstText(t, resultOf(t, resp)), "the well-behaved request ran, and none of the refused ones did")

	// A session's requests are held to it too.
	s := openRawHTTP(t, url, nil)
	s.header[mcp.HeaderProtocolVersion] = []string{"2025-11-25", "2025-06-18"}
	status, _, body := post(t, url, s.header, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	assert.Equal(t, http.StatusBadRequest, status)
	code, _ := errorOf(t, json.RawMessage(body))
	assert.Equal(t, mcp.CodeHeaderMismatch, code)
}

// smallBuffers makes the sockets a listener accepts from now on keep
// little of what is written to them (as over a slow link): a client that
// stops reading fills them at once.
func smallBuffers(t *testing.T, ln net.Listener) {
	t.Helper()
	raw, err := ln.(*net.TCPListener).SyscallConn()
	require.NoError(t, err)
	var serr error
	require.NoError(t, raw.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 16<<10) }))
	require.NoError(t, serr)
}

// stalledStream opens a session's GET stream at addr on a socket with a
// small receive buffer, reads its priming event, and stops reading: it
// returns the event's id and the connection, which stays open.
func stalledStream(t *testing.T, addr string, header http.Header) (string, net.Conn) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/mcp", nil)
	require.NoError(t, err)
	req.Header = header.Clone()
	req.Header.Set("Accept", "text/event-stream")
	require.NoError(t, req.Write(conn))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	primed := readEvent(t, bufio.NewReader(resp.Body))
	require.NotEmpty(t, primed.id, "the stream starts with a priming event")
	return primed.id, conn
}

// TestCluster_relayedStreamOfAClientThatStopsReading: a session's GET
// stream opened through B (the session is A's) by a client that stops
// reading is cut as a direct one is (StreamWriteTimeout); A detaches the
// stream and stops publishing it, the client resumes it with
// Last-Event-ID, and once it leaves the session idles out. A well-behaved
// session beside it keeps its stream and its calls. Real Redis between
// the instances.
func TestCluster_relayedStreamOfAClientThatStopsReading(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	// The session idles from the moment A lets go of its stream until the
	// client resumes it: under load (GOMAXPROCS=1, every core spinning)
	// that took up to 1.7 s, and an idle timeout of 2 s left no margin: the
	// session could end first, and the resumption be 404.
	const idle = 5 * time.Second
	cfg := Config{StreamWriteTimeout: 300 * time.Millisecond, SessionIdleTimeout: idle, HeartbeatInterval: time.Second}
	a, b := startHubOn(t, rs, prefix, cfg), startHubOn(t, rs, prefix, cfg)
	smallBuffers(t, b.srv.Listener)
	for _, th := range []*testHub{a, b} {
		require.Eventually(t, func() bool { return len(th.remoteInstances()) == 1 }, wait, 10*time.Millisecond)
	}
	server := startRawServer(a, "chatty", `{"logging":{}}`, nil)
	b.waitServer("chatty", 1)

	// The well-behaved session wants warnings only: the flood below is
	// the stalled client's alone.
	var logs atomic.Int64
	good := httpClient(t, b.srv.URL+"/mcp", &mcp.ClientOptions{OnNotification: func(method string, _ json.RawMessage) {
		if method == mcp.NotificationMessage {
			logs.Add(1)
		}
	}})
	require.NoError(t, good.SetLoggingLevel(ctxFor(t), mcp.LevelWarning))

	s := openRawHTTP(t, a.srv.URL+"/mcp", nil)
	require.True(t, strings.HasPrefix(s.header.Get(mcp.HeaderSessionID), a.ID()+":"), "the session is A's")
	primed, _ := stalledStream(t, strings.TrimPrefix(b.srv.URL, "http://"), s.header)
	require.Equal(t, 1, a.cluster.serving(), "A serves the stream B relays")

	// Logs until A lets go of the stream: soon more than the socket
	// between B and the client holds.
	stop := make(chan struct{})
	flooded := make(chan int)
	go func() {
		data := strings.Repeat("x", 8<<10)
		n := 0
		for ; n < 1000; n++ {
			select {
			case <-stop:
				flooded <- n
				return
			default:
			}
			server.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"%d %s"}}`, n, data))
		}
		flooded <- n
	}()
	released := assert.Eventually(t, func() bool { return a.cluster.serving() == 0 }, wait, 10*time.Millisecond,
		"A still serves (and publishes) the stream of a client that stopped reading")
	close(stop)
	t.Logf("A let go of the stream after %d logs", <-flooded)
	require.True(t, released)

	// The client comes back for what it missed.
	resumed := s.stream(ctxFor(t), http.MethodGet, b.srv.URL+"/mcp", "", mcp.HeaderLastEventID, primed)
	r := bufio.NewReader(resumed.Body)
	for {
		ev := readEvent(t, r)
		if strings.Contains(ev.data, mcp.NotificationMessage) {
			assert.NotEqual(t, primed, ev.id)
			break
		}
	}
	resumed.Body.Close()
	require.Eventually(t, func() bool { return a.streamable.Sessions() == 0 }, idle+wait, 10*time.Millisecond,
		"the session, with no stream left, idles out")

	server.write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"warning","data":"for everyone"}}`)
	require.Eventually(t, func() bool { return logs.Load() == 1 }, wait, 10*time.Millisecond, "the well-behaved session got its log")
	_, err := good.ListTools(ctxFor(t), "")
	require.NoError(t, err, "and it kept working")
}

// TestHTTP_sessionRunsWithTheRightsInForce: once SIGHUP narrows a token,
// its open HTTP session runs no request with the old rights: its next
// request finds it ended (404), and the session it initializes then has
// the new ones. A session whose token's entry did not change carries on.
func TestHTTP_sessionRunsWithTheRightsInForce(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	write := func(aliceTools string) {
		require.NoError(t, os.WriteFile(file, []byte(`tokens:
  - {name: alice, token: alice-secret, roles: [client], tools: `+aliceTools+`}
  - {name: bob, token: bob-secret, roles: [client]}
  - {name: demo-server, token: demo-secret, roles: [server], servers: [demo]}
`), 0o600))
	}
	write(`["demo__*"]`)
	tokens, err := LoadTokens(file)
	require.NoError(t, err)
	th := startHub(t, Config{Tokens: tokens})
	th.runServerWith(demo.New(nil).Server, "demo", "demo-secret")
	url := th.srv.URL + "/mcp"
	alice := openRawHTTP(t, url, bearer("alice-secret"))
	bob := openRawHTTP(t, url, bearer("bob-secret"))
	echo := `{"name":"demo__echo","arguments":{"text":"x"}}`
	status, resp := alice.call(2, mcp.MethodToolsCall, echo)
	require.Equal(t, http.StatusOK, status)
	require.Nil(t, resp.Error)

	write(`["demo__add"]`)
	require.NoError(t, tokens.Reload())
	status, _, body := post(t, url, alice.header, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`+echo+`}`)
	assert.Equal(t, http.StatusNotFound, status, "the old session runs nothing with the old rights: %s", body)
	assert.Contains(t, body, "rights changed")
	require.Eventually(t, func() bool { return th.streamable.Sessions() == 1 }, wait, 10*time.Millisecond, "the old session ended")

	again := openRawHTTP(t, url, bearer("alice-secret"))
	status, resp = again.call(4, mcp.MethodToolsCall, echo)
	require.Equal(t, http.StatusOK, status)
	require.NotNil(t, resp.Error, "the new session has the new rights")
	assert.Equal(t, mcp.CodeForbidden, resp.Error.Code)
	status, resp = again.call(5, mcp.MethodToolsCall, `{"name":"demo__add","arguments":{"a":1,"b":2}}`)
	require.Equal(t, http.StatusOK, status)
	assert.Nil(t, resp.Error)

	status, resp = bob.call(6, mcp.MethodToolsCall, echo)
	require.Equal(t, http.StatusOK, status, "a session whose token did not change carries on")
	assert.Nil(t, resp.Error)
}

// TestHTTP_sessionsWithoutTokensAreCapped: without tokens, HTTP sessions,
// which outlive their sockets until they idle out, are capped all together
// at MaxConnectionsPerToken: beyond, initialize is 429 and says why.
// WebSockets and stateless requests, which last as long as their sockets,
// are not counted, and a session that ends frees its place.
func TestHTTP_sessionsWithoutTokensAreCapped(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{MaxConnectionsPerToken: 3})
	th.runServer(demo.New(nil).Server, "")
	url := th.srv.URL + "/mcp"
	var open []*rawHTTP
	for range 3 {
		open = append(open, openRawHTTP(t, url, nil))
	}
	status, hdr, body := post(t, url, nil, initializeBody)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, "5", hdr.Get("Retry-After"))
	assert.Contains(t, body, "too many HTTP sessions: 3 are open without a token")

	for range 4 {
		c := th.client(nil)
		_, err := c.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "x"}, nil)
		require.NoError(t, err, "WebSockets are not counted")
	}
	resp, _ := modernPost(t, url, modernBody(1, mcp.MethodToolsCall, `"name":"demo__echo","arguments":{"text":"x"}`, "{}"), nil).answer(t)
	assert.Equal(t, "x", firstText(t, resultOf(t, resp)), "nor stateless requests")
	status, answer := open[0].call(2, mcp.MethodToolsList, `{}`)
	require.Equal(t, http.StatusOK, status, "the open sessions go on")
	require.Nil(t, answer.Error)

	req, err := http.NewRequest(http.MethodDelete, url, nil)
	require.NoError(t, err)
	req.Header = open[0].header
	del, err := scrapeClient.Do(req)
	require.NoError(t, err)
	del.Body.Close()
	require.Eventually(t, func() bool {
		status, _, _ := post(t, url, nil, initializeBody)
		return status == http.StatusOK
	}, wait, 10*time.Millisecond, "a session that ended frees its place")
}

// TestHTTP_updatesCoalesceAsOverWebSocket: updates of one resource reach
// an HTTP session as they reach a WebSocket at the same rate, side by
// side: the hub coalesces them per session by the same code for both
// faces (an update replaces the queued one of its URI while the session's
// writer is behind), so neither gets markedly fewer, and both get the
// last.
func TestHTTP_updatesCoalesceAsOverWebSocket(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	server := startRawServer(th, "watched", subscribableCaps, listing("watched://x"))
	type seen struct{ count, last atomic.Int64 }
	watch := func(s *seen) func(string, json.RawMessage) {
		return func(method string, params json.RawMessage) {
			var p struct{ N int64 }
			if method == mcp.NotificationResourceUpdated && json.Unmarshal(params, &p) == nil {
				s.count.Add(1)
				s.last.Store(p.N)
			}
		}
	}
	var overWS, overHTTP seen
	ws := th.client(&mcp.ClientOptions{OnNotification: watch(&overWS)})
	hc := httpClient(t, th.srv.URL+"/mcp", &mcp.ClientOptions{OnNotification: watch(&overHTTP)})
	require.NoError(t, ws.Subscribe(ctxFor(t), "watched://x"))
	require.NoError(t, hc.Subscribe(ctxFor(t), "watched://x"))

	const updates = 400
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for n := 1; n <= updates; n++ {
		server.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"watched://x","n":%d}}`, n))
		<-tick.C
	}
	require.Eventually(t, func() bool { return overWS.last.Load() == updates && overHTTP.last.Load() == updates }, wait, 10*time.Millisecond,
		"both faces get the last update")
	w, h := overWS.count.Load(), overHTTP.count.Load()
	t.Logf("of %d updates, %d reached the WebSocket and %d the HTTP session", updates, w, h)
	assert.InDelta(t, w, h, max(float64(max(w, h))/5, 20), "the same share reaches both faces")
}
