package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// httpServer is a pkg/mcp Server behind a StreamableHandler on loopback.
type httpServer struct {
	*httptest.Server
	handler  *mcp.StreamableHandler
	sessions chan *mcp.ServerSession // each session the handler opened
}

// serveHTTP serves s over Streamable HTTP. Cleanup ends every session and
// waits for their peers.
func serveHTTP(t *testing.T, s *mcp.Server, opts *mcp.StreamableOptions) *httpServer {
	t.Helper()
	return serveHTTPWith(t, s, opts, nil)
}

// serveHTTPWith is serveHTTP with prepare, when set, given the test server
// before it starts (its listener, its http.Server).
func serveHTTPWith(t *testing.T, s *mcp.Server, opts *mcp.StreamableOptions, prepare func(*httptest.Server)) *httpServer {
	t.Helper()
	var o mcp.StreamableOptions
	if opts != nil {
		o = *opts
	}
	hs := &httpServer{sessions: make(chan *mcp.ServerSession, 64)}
	var mu sync.Mutex
	var all []*mcp.ServerSession
	open := o.Open
	o.Open = func(r *http.Request, sess *mcp.StreamSession) error {
		if open != nil {
			if err := open(r, sess); err != nil {
				return err
			}
		}
		ss := s.Serve(sess.Context(), sess.Conn())
		mu.Lock()
		all = append(all, ss)
		mu.Unlock()
		hs.sessions <- ss
		return nil
	}
	hs.handler = mcp.NewStreamableHandler(&o)
	hs.Server = httptest.NewUnstartedServer(hs.handler)
	if prepare != nil {
		prepare(hs.Server)
	}
	hs.Start()
	t.Cleanup(func() {
		hs.handler.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, ss := range all {
			assert.NoError(t, ss.Wait(), "a server session ended badly")
		}
		hs.Close()
	})
	return hs
}

// connectHTTP connects a Client to hs over Streamable HTTP.
func connectHTTP(t *testing.T, hs *httpServer, opts *mcp.ClientOptions) *mcp.Client {
	t.Helper()
	var o mcp.ClientOptions
	if opts != nil {
		o = *opts
	}
	o.HTTP.HTTPClient = hs.Client()
	c, err := mcp.Connect(testCtx(t), hs.URL, &o)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// rawClient speaks Streamable HTTP by hand, to check the wire.
type rawClient struct {
	t       *testing.T
	url     string
	client  *http.Client
	session string
	version string
}

func newRaw(t *testing.T, hs *httpServer) *rawClient {
	return &rawClient{t: t, url: hs.URL, client: hs.Client()}
}

// do sends a request with the session's headers and extra ones.
func (c *rawClient) do(method, body string, header ...string) *http.Response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(testCtx(c.t), method, c.url, rd)
	require.NoError(c.t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if c.session != "" {
		req.Header.Set(mcp.HeaderSessionID, c.session)
	}
	if c.version != "" {
		req.Header.Set(mcp.HeaderProtocolVersion, c.version)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := c.client.Do(req)
	require.NoError(c.t, err)
	c.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}`

// initialize opens a session and sends notifications/initialized.
func (c *rawClient) initialize() {
	c.t.Helper()
	resp := c.do(http.MethodPost, initBody)
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	c.session = resp.Header.Get(mcp.HeaderSessionID)
	require.NotEmpty(c.t, c.session)
	msgs := readAll(c.t, resp)
	require.Len(c.t, msgs, 1)
	c.version = mcp.Version20251125
	resp = c.do(http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(c.t, http.StatusAccepted, resp.StatusCode)
}

// event is one SSE event as the raw client reads it.
type event struct {
	id, data string
	retry    bool
}

// sseStream reads SSE events from a response, each on a channel, until the
// body ends (the channel closes).
func sseStream(t *testing.T, resp *http.Response) <-chan event {
	t.Helper()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	lines := sseLines(t, resp)
	ch := make(chan event, 64)
	go func() {
		defer close(ch)
		var ev event
		has := false
		for l := range lines {
			switch line := l.text; {
			case l.end:
				return
			case line == "":
				if has {
					ch <- ev
				}
				ev, has = event{}, false
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.id, has = line[4:], true
			case strings.HasPrefix(line, "retry: "):
				ev.retry, has = true, true
			case strings.HasPrefix(line, "data: "):
				if ev.data != "" {
					ev.data += "\n"
				}
				ev.data += line[6:]
				has = true
			}
		}
	}()
	return ch
}

// nextEvent waits for the next event; ok is false when the stream ended.
func nextEvent(t *testing.T, ch <-chan event) (event, bool) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(wait):
		t.Fatalf("no SSE event within %v", wait)
		return event{}, false
	}
}

// readAll reads every message of a response: its JSON body, or the data of
// its SSE events until the stream ends.
func readAll(t *testing.T, resp *http.Response) []string {
	t.Helper()
	if resp.Header.Get("Content-Type") == "application/json" {
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return []string{string(b)}
	}
	var out []string
	for ev := range sseStream(t, resp) {
		if ev.data != "" {
			out = append(out, ev.data)
		}
	}
	return out
}

// memberOf returns a member of a JSON object message, raw.
func memberOf(t *testing.T, msg, key string) string {
	t.Helper()
	v, ok := jsonrpc.Member([]byte(msg), key)
	require.True(t, ok, "no %q in %s", key, msg)
	return string(v)
}

func testHTTPServer() *mcp.Server {
	s := mcp.NewServer(testInfo, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "echo"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return textResult("echo:" + string(req.Params.Arguments)), nil
	})
	s.AddTool(&mcp.Tool{Name: "progress", Description: "three reports"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		for i := range 3 {
			if err := req.Progress(ctx, float64(i+1), 3, ""); err != nil {
				return nil, err
			}
		}
		return textResult("done"), nil
	})
	s.AddTool(&mcp.Tool{Name: "sample", Description: "asks the model"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("hi")}},
			MaxTokens: 5,
		})
		if err != nil {
			return nil, err
		}
		return textResult("model said " + res.Content.Text), nil
	})
	s.AddTool(&mcp.Tool{Name: "block", Description: "waits for cancellation"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "r"}}}, nil
	})
	return s
}

func TestStreamable_clientLifecycle(t *testing.T) {
	s := testHTTPServer()
	hs := serveHTTP(t, s, nil)
	notes, onNote := notifications(t)
	c := connectHTTP(t, hs, &mcp.ClientOptions{
		OnNotification: onNote,
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("hello"), Model: "m"}, nil
		},
	})
	ctx := testCtx(t)
	ss := recv(t, hs.sessions)
	recv(t, ss.Ready())
	assert.Equal(t, mcp.LatestVersion, c.InitializeResult().ProtocolVersion)

	res, err := c.CallTool(ctx, "echo", map[string]int{"n": 1}, nil)
	require.NoError(t, err)
	assert.Equal(t, `echo:{"n":1}`, text(res))

	var got []float64
	res, err = c.CallTool(ctx, "progress", nil, &mcp.CallOptions{Progress: func(p *mcp.ProgressParams) { got = append(got, p.Progress) }})
	require.NoError(t, err)
	assert.Equal(t, "done", text(res))
	assert.Equal(t, []float64{1, 2, 3}, got, "progress comes on the POST stream, before the answer")

	res, err = c.CallTool(ctx, "sample", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "model said hello", text(res))

	require.NoError(t, c.Subscribe(ctx, "test://r"))
	s.ResourceUpdated(ctx, "test://r")
	for n := recv(t, notes); n.method != mcp.NotificationResourceUpdated; n = recv(t, notes) {
		require.Equal(t, mcp.NotificationProgress, n.method, "only progress came before")
	}

	callCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(callCtx, "block", nil, nil)
		errc <- err
	}()
	require.Eventually(t, func() bool { return ss.Peer().Pending() == 1 }, wait, time.Millisecond)
	cancel()
	assert.ErrorIs(t, recv(t, errc), context.Canceled)
	require.Eventually(t, func() bool { return ss.Peer().Pending() == 0 }, wait, time.Millisecond, "the server saw the cancellation")

	require.NoError(t, c.Ping(ctx))
	require.NoError(t, c.Close())
	assert.NoError(t, ss.Wait(), "DELETE ends the server's session normally")
	assert.Equal(t, 0, hs.handler.Sessions())
}

func ExampleNewStreamableHandler() {
	s := mcp.NewServer(mcp.Implementation{Name: "greeter", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Say hello"},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("Hello!")}}, nil
		})

	// Every session the handler opens is served by s. A real server must
	// check Origin and Host (and credentials) before the handler.
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Open: func(r *http.Request, sess *mcp.StreamSession) error {
			s.Serve(sess.Context(), sess.Conn())
			return nil
		},
	})
	defer h.Close()
	srv := httptest.NewServer(h) // or http.ListenAndServe("127.0.0.1:8000", h)
	defer srv.Close()

	ctx := context.Background()
	c, err := mcp.Connect(ctx, srv.URL, &mcp.ClientOptions{HTTP: mcp.StreamableClientOptions{HTTPClient: srv.Client()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	res, err := c.CallTool(ctx, "greet", nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].Text)
	// Output:
	// Hello!
}

func TestStreamableHandler_badInput(t *testing.T) {
	hs := serveHTTP(t, testHTTPServer(), &mcp.StreamableOptions{MaxBodyBytes: 1024})
	live := newRaw(t, hs)
	live.initialize()
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	tests := []struct {
		name    string
		method  string
		body    string
		session bool // send the live session's id
		header  []string
		status  int
		code    jsonrpc.Code // of the JSON-RPC error body, when one is expected
		allow   string
	}{
		{name: "POST accepting only JSON", method: "POST", body: ping, session: true, header: []string{"Accept", "application/json"}, status: 406},
		{name: "POST accepting only SSE", method: "POST", body: ping, session: true, header: []string{"Accept", "text/event-stream"}, status: 406},
		{name: "POST without Accept", method: "POST", body: ping, session: true, header: []string{"Accept", ""}, status: 406},
		{name: "POST refusing SSE with q=0", method: "POST", body: ping, session: true, header: []string{"Accept", "application/json, text/event-stream;q=0"}, status: 406},
		{name: "POST with wildcards", method: "POST", body: ping, session: true, header: []string{"Accept", "*/*"}, status: 200},
		{name: "POST as text/plain", method: "POST", body: ping, session: true, header: []string{"Content-Type", "text/plain"}, status: 415},
		{name: "POST without Content-Type", method: "POST", body: ping, session: true, header: []string{"Content-Type", ""}, status: 415},
		{name: "POST JSON with a charset", method: "POST", body: ping, session: true, header: []string{"Content-Type", "application/json; charset=utf-8"}, status: 200},
		{name: "malformed JSON", method: "POST", body: `{"jsonrpc":`, session: true, status: 400, code: jsonrpc.CodeParseError},
		{name: "empty body", method: "POST", body: "", session: true, status: 400, code: jsonrpc.CodeParseError},
		{name: "not JSON-RPC", method: "POST", body: `{"hello":1}`, session: true, status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "empty batch", method: "POST", body: `[]`, session: true, status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "body over the limit", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`, session: true, status: 413, code: jsonrpc.CodeInvalidRequest},
		{name: "only a notification", method: "POST", body: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, session: true, status: 202},
		{name: "only a response", method: "POST", body: `{"jsonrpc":"2.0","id":"nobody","result":{}}`, session: true, status: 202},
		{name: "a batch of notifications", method: "POST", body: `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`, session: true, status: 202},
		{name: "a call without a session", method: "POST", body: ping, status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "a notification without a session", method: "POST", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, status: 400},
		{name: "initialize in a batch", method: "POST", body: "[" + initBody + "]", status: 400},
		{name: "unknown session", method: "POST", body: ping, header: []string{mcp.HeaderSessionID, "nope"}, status: 404},
		{name: "unsupported protocol version", method: "POST", body: ping, session: true, header: []string{mcp.HeaderProtocolVersion, "1999-01-01"}, status: 400, code: mcp.CodeUnsupportedProtocolVersion},
		{name: "older protocol version", method: "POST", body: ping, session: true, header: []string{mcp.HeaderProtocolVersion, mcp.Version20250326}, status: 200},
		{name: "no protocol version", method: "POST", body: ping, session: true, header: []string{mcp.HeaderProtocolVersion, ""}, status: 200},
		{name: "GET without a session", method: "GET", status: 400},
		{name: "GET of an unknown session", method: "GET", header: []string{mcp.HeaderSessionID, "nope"}, status: 404},
		{name: "GET not accepting SSE", method: "GET", session: true, header: []string{"Accept", "application/json"}, status: 406},
		{name: "GET with a bad protocol version", method: "GET", session: true, header: []string{mcp.HeaderProtocolVersion, "x"}, status: 400},
		{name: "DELETE without a session", method: "DELETE", status: 400},
		{name: "DELETE of an unknown session", method: "DELETE", header: []string{mcp.HeaderSessionID, "nope"}, status: 404},
		{name: "PUT", method: "PUT", body: ping, session: true, status: 405, allow: "GET, POST, DELETE"},
		{name: "PATCH", method: "PATCH", status: 405, allow: "GET, POST, DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newRaw(t, hs)
			if tt.session {
				c.session, c.version = live.session, live.version
			}
			resp := c.do(tt.method, tt.body, tt.header...)
			assert.Equal(t, tt.status, resp.StatusCode)
			if tt.allow != "" {
				assert.Equal(t, tt.allow, resp.Header.Get("Allow"))
			}
			if tt.code != 0 {
				require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				msg := string(b)
				if strings.HasPrefix(msg, "[") {
					var arr []json.RawMessage
					require.NoError(t, json.Unmarshal(b, &arr))
					msg = string(arr[0])
				}
				assert.Equal(t, "null", memberOf(t, msg, "id"))
				e, err := jsonrpc.DecodeMessage([]byte(msg))
				require.NoError(t, err)
				assert.Equal(t, tt.code, e.(*jsonrpc.Response).Error.Code, msg)
			}
		})
	}
	// The session lived through all of it.
	resp := live.do(http.MethodPost, ping)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{`{"jsonrpc":"2.0","id":1,"result":{}}`}, readAll(t, resp))
}

// post sends a JSON-RPC body on the session and returns the response.
func (c *rawClient) post(body string) *http.Response {
	c.t.Helper()
	return c.do(http.MethodPost, body)
}

func TestStreamableHandler_sessionLife(t *testing.T) {
	s := testHTTPServer()
	gate := make(chan struct{})
	s.AddTool(&mcp.Tool{Name: "gated", Description: "reports, then waits for the gate"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if err := req.Progress(ctx, 1, 2, "half"); err != nil {
			return nil, err
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return textResult("through"), nil
	})
	hs := serveHTTP(t, s, nil)
	c := newRaw(t, hs)
	c.initialize()
	ss := recv(t, hs.sessions)
	recv(t, ss.Ready())

	t.Run("an answer alone goes as JSON", func(t *testing.T) {
		resp := c.post(`{"jsonrpc":"2.0","id":"e1","method":"tools/call","params":{"name":"echo","arguments":{"x":1}}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.Equal(t, c.session, resp.Header.Get(mcp.HeaderSessionID))
		msgs := readAll(t, resp)
		require.Len(t, msgs, 1)
		assert.Equal(t, `"e1"`, memberOf(t, msgs[0], "id"))
		assert.Contains(t, msgs[0], `echo:{\"x\":1}`)
	})

	t.Run("progress switches the POST to SSE, before its answer", func(t *testing.T) {
		resp := c.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"tok"}}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		events := sseStream(t, resp)
		prime, ok := nextEvent(t, events)
		require.True(t, ok)
		assert.Equal(t, "", prime.data, "a priming event first")
		assert.NotEmpty(t, prime.id)
		assert.True(t, prime.retry, "with the reconnection delay")
		var got []string
		for ev := range events {
			assert.NotEmpty(t, ev.id, "every event has an id")
			m, _ := jsonrpc.StringMember([]byte(ev.data), "method")
			if m == "" {
				m = "answer " + memberOf(t, ev.data, "id")
			}
			got = append(got, m)
		}
		assert.Equal(t, []string{mcp.NotificationProgress, mcp.NotificationProgress, mcp.NotificationProgress, "answer 2"}, got,
			"the stream ends after its answer")
	})

	t.Run("a server request goes on the POST stream and is answered by a POST", func(t *testing.T) {
		resp := c.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sample"}}`)
		events := sseStream(t, resp)
		_, _ = nextEvent(t, events) // priming
		ev, ok := nextEvent(t, events)
		require.True(t, ok)
		assert.Equal(t, `"sampling/createMessage"`, memberOf(t, ev.data, "method"))
		assert.NotContains(t, ev.data, mcp.MetaRelatedRequest, "the routing hint stays on this side")
		id := memberOf(t, ev.data, "id")
		answer := c.post(`{"jsonrpc":"2.0","id":` + id + `,"result":{"role":"assistant","content":{"type":"text","text":"yo"},"model":"m"}}`)
		assert.Equal(t, http.StatusAccepted, answer.StatusCode)
		ev, ok = nextEvent(t, events)
		require.True(t, ok)
		assert.Equal(t, "3", memberOf(t, ev.data, "id"))
		assert.Contains(t, ev.data, "model said yo")
		_, ok = nextEvent(t, events)
		assert.False(t, ok, "the stream ended")
	})

	t.Run("a batch is answered with one array", func(t *testing.T) {
		resp := c.post(`[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},` +
			`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo"}}]`)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		msgs := readAll(t, resp)
		require.Len(t, msgs, 1)
		var arr []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(msgs[0]), &arr))
		require.Len(t, arr, 2)
		ids := []string{memberOf(t, string(arr[0]), "id"), memberOf(t, string(arr[1]), "id")}
		assert.ElementsMatch(t, []string{"7", "8"}, ids)
	})

	t.Run("an id in flight is refused", func(t *testing.T) {
		done := make(chan []string, 1)
		resp := c.post(`{"jsonrpc":"2.0","id":"g1","method":"tools/call","params":{"name":"gated","_meta":{"progressToken":1}}}`)
		events := sseStream(t, resp)
		_, _ = nextEvent(t, events)
		_, _ = nextEvent(t, events) // progress: the call is in flight
		dup := c.post(`{"jsonrpc":"2.0","id":"g1","method":"ping"}`)
		assert.Equal(t, http.StatusBadRequest, dup.StatusCode)
		go func() {
			var rest []string
			for ev := range events {
				rest = append(rest, ev.data)
			}
			done <- rest
		}()
		gate <- struct{}{}
		rest := recv(t, done)
		require.Len(t, rest, 1)
		assert.Contains(t, rest[0], "through")
	})

	t.Run("notifications wait for the GET stream, which resumes", func(t *testing.T) {
		require.Equal(t, http.StatusOK, c.post(`{"jsonrpc":"2.0","id":10,"method":"resources/subscribe","params":{"uri":"test://r"}}`).StatusCode)
		ctx := testCtx(t)
		s.ResourceUpdated(ctx, "test://r") // no GET stream yet: kept
		get := c.do(http.MethodGet, "")
		require.Equal(t, http.StatusOK, get.StatusCode)
		events := sseStream(t, get)
		prime, _ := nextEvent(t, events)
		assert.Equal(t, "", prime.data)
		ev, _ := nextEvent(t, events)
		assert.Contains(t, ev.data, mcp.NotificationResourceUpdated)
		first := ev.id

		second := c.do(http.MethodGet, "")
		assert.Equal(t, http.StatusConflict, second.StatusCode, "one GET stream at a time")

		s.Log(ctx, mcp.LevelInfo, "t", "one")
		ev, _ = nextEvent(t, events)
		assert.Contains(t, ev.data, `"one"`)
		get.Body.Close() // the stream drops; the handler may not know yet

		s.Log(ctx, mcp.LevelInfo, "t", "two")
		s.Log(ctx, mcp.LevelInfo, "t", "three")
		resumed := c.do(http.MethodGet, "", mcp.HeaderLastEventID, first)
		require.Equal(t, http.StatusOK, resumed.StatusCode)
		events = sseStream(t, resumed)
		var got []string
		for len(got) < 3 {
			ev, ok := nextEvent(t, events)
			require.True(t, ok)
			if ev.data != "" {
				var p struct {
					Params mcp.LoggingMessageParams `json:"params"`
				}
				require.NoError(t, json.Unmarshal([]byte(ev.data), &p))
				got = append(got, fmt.Sprint(p.Params.Data))
			}
		}
		assert.Equal(t, []string{"one", "two", "three"}, got, "everything after the Last-Event-ID, in order")
		resumed.Body.Close()
	})

	t.Run("a dropped POST stream resumes with its answer", func(t *testing.T) {
		resp := c.post(`{"jsonrpc":"2.0","id":"g2","method":"tools/call","params":{"name":"gated","_meta":{"progressToken":"p"}}}`)
		events := sseStream(t, resp)
		_, _ = nextEvent(t, events)
		progress, ok := nextEvent(t, events)
		require.True(t, ok)
		resp.Body.Close() // dropped before the answer
		gate <- struct{}{}
		resumed := c.do(http.MethodGet, "", mcp.HeaderLastEventID, progress.id)
		require.Equal(t, http.StatusOK, resumed.StatusCode)
		msgs := readAll(t, resumed)
		require.Len(t, msgs, 1, "the answer, then the stream ends")
		assert.Equal(t, `"g2"`, memberOf(t, msgs[0], "id"))
	})

	t.Run("a Last-Event-ID of another session opens a fresh GET stream", func(t *testing.T) {
		var other *http.Response
		require.Eventually(t, func() bool { // 409 until the handler sees the last GET stream gone
			other = c.do(http.MethodGet, "", mcp.HeaderLastEventID, "someoneelse.0.1")
			return other.StatusCode == http.StatusOK
		}, wait, time.Millisecond)
		events := sseStream(t, other)
		prime, _ := nextEvent(t, events)
		assert.Equal(t, "", prime.data)
		s.Log(testCtx(t), mcp.LevelInfo, "t", "fresh")
		ev, _ := nextEvent(t, events)
		assert.Contains(t, ev.data, `"fresh"`)
		other.Body.Close()
	})

	t.Run("a cancelled request's stream ends without an answer", func(t *testing.T) {
		// The POST's response starts with its first message: none comes
		// before the cancellation, so it is sent from a goroutine.
		out := make(chan *http.Response, 1)
		go func() { out <- c.post(`{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"block"}}`) }()
		require.Eventually(t, func() bool { return ss.Peer().Pending() == 1 }, wait, time.Millisecond)
		cancel := c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b1"}}`)
		assert.Equal(t, http.StatusAccepted, cancel.StatusCode)
		resp := recv(t, out)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Empty(t, readAll(t, resp))
	})

	t.Run("DELETE ends the session", func(t *testing.T) {
		resp := c.do(http.MethodDelete, "")
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
		assert.NoError(t, ss.Wait(), "the server's peer ends normally")
		assert.Equal(t, http.StatusNotFound, c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`).StatusCode)
		assert.Equal(t, http.StatusNotFound, c.do(http.MethodGet, "").StatusCode)
		assert.Equal(t, http.StatusNotFound, c.do(http.MethodDelete, "").StatusCode)
	})
}

func TestStreamableHandler_idle(t *testing.T) {
	hs := serveHTTP(t, testHTTPServer(), &mcp.StreamableOptions{IdleTimeout: 50 * time.Millisecond})
	c := newRaw(t, hs)
	c.initialize()
	ss := recv(t, hs.sessions)
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	assert.NoError(t, recv(t, done), "an idle session ends, and the owner's peer with it")
	assert.Equal(t, http.StatusNotFound, c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`).StatusCode)

	// A session with a GET stream open is not idle.
	c = newRaw(t, hs)
	c.initialize()
	ss = recv(t, hs.sessions)
	get := c.do(http.MethodGet, "")
	require.Equal(t, http.StatusOK, get.StatusCode)
	time.Sleep(300 * time.Millisecond) // an absence check: six idle periods pass
	select {
	case <-ss.Peer().Done():
		t.Fatal("a session with an open stream expired")
	default:
	}
	assert.Equal(t, 1, hs.handler.Sessions())
}

func TestStreamableHandler_hooks(t *testing.T) {
	const token = "Bearer good"
	hs := serveHTTP(t, testHTTPServer(), &mcp.StreamableOptions{
		NewSessionID: func() string { return "instance7-" + fmt.Sprint(time.Now().UnixNano()) },
		Open: func(r *http.Request, s *mcp.StreamSession) error {
			if r.Header.Get("Authorization") != token {
				return &mcp.HTTPError{Status: http.StatusUnauthorized, Message: "who are you?",
					Header: http.Header{"Www-Authenticate": {`Bearer realm="test"`}}}
			}
			s.SetData("owner-a")
			return nil
		},
		Check: func(r *http.Request, s *mcp.StreamSession) error {
			if r.Header.Get("Authorization") != token || s.Data() != "owner-a" {
				return &mcp.HTTPError{Status: http.StatusForbidden, Code: mcp.CodeForbidden, Message: "not your session"}
			}
			return nil
		},
	})
	c := newRaw(t, hs)
	resp := c.do(http.MethodPost, initBody)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, `Bearer realm="test"`, resp.Header.Get("WWW-Authenticate"))
	assert.Empty(t, resp.Header.Get(mcp.HeaderSessionID))
	assert.Equal(t, 0, hs.handler.Sessions())

	resp = c.do(http.MethodPost, initBody, "Authorization", token)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	c.session = resp.Header.Get(mcp.HeaderSessionID)
	assert.True(t, strings.HasPrefix(c.session, "instance7-"), "NewSessionID names sessions")
	assert.NotNil(t, hs.handler.Session(c.session))

	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		resp = c.do(method, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization", "Bearer stolen")
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, method)
		b, _ := io.ReadAll(resp.Body)
		assert.Contains(t, string(b), `"code":-32003`)
	}
	resp = c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization", token)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the session is intact")
}

func TestStreamableHandler_replayWindow(t *testing.T) {
	s := testHTTPServer()
	hs := serveHTTP(t, s, &mcp.StreamableOptions{ReplayEvents: 3})
	c := newRaw(t, hs)
	c.initialize()
	ss := recv(t, hs.sessions)
	recv(t, ss.Ready())
	ctx := testCtx(t)
	for i := range 5 { // no GET stream: the handler keeps the last 3
		s.Log(ctx, mcp.LevelInfo, "t", i)
	}
	// The log messages are queued by the peer: wait until all are routed,
	// which a ping behind them proves.
	require.Equal(t, http.StatusOK, c.post(`{"jsonrpc":"2.0","id":"after","method":"ping"}`).StatusCode)
	get := c.do(http.MethodGet, "")
	events := sseStream(t, get)
	var got []string
	for len(got) < 3 {
		ev, ok := nextEvent(t, events)
		require.True(t, ok)
		if ev.data != "" {
			var p struct {
				Params mcp.LoggingMessageParams `json:"params"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev.data), &p))
			got = append(got, fmt.Sprint(p.Params.Data))
		}
	}
	assert.Equal(t, []string{"2", "3", "4"}, got, "the oldest left the window")
}

func TestStreamableHandler_closeEndsSessions(t *testing.T) {
	hs := serveHTTP(t, testHTTPServer(), nil)
	c := newRaw(t, hs)
	c.initialize()
	ss := recv(t, hs.sessions)
	get := c.do(http.MethodGet, "")
	events := sseStream(t, get)
	_, _ = nextEvent(t, events)
	hs.handler.Close()
	assert.NoError(t, ss.Wait(), "1001 going away: a normal end")
	_, ok := nextEvent(t, events)
	assert.False(t, ok, "open streams end")
	assert.Equal(t, http.StatusServiceUnavailable, newRaw(t, hs).do(http.MethodPost, initBody).StatusCode)
}

func TestStreamableHandler_ownerCloses(t *testing.T) {
	hs := serveHTTP(t, testHTTPServer(), nil)
	c := newRaw(t, hs)
	c.initialize()
	ss := recv(t, hs.sessions)
	require.NoError(t, ss.Close())
	assert.Equal(t, http.StatusNotFound, c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`).StatusCode)
	assert.Equal(t, 0, hs.handler.Sessions())
}

func TestStreamableHandler_alwaysSSE(t *testing.T) {
	hs := serveHTTP(t, testHTTPServer(), &mcp.StreamableOptions{ResponseMode: mcp.ResponseSSE, Retry: -1})
	c := newRaw(t, hs)
	c.initialize()
	resp := c.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	events := sseStream(t, resp)
	prime, _ := nextEvent(t, events)
	assert.False(t, prime.retry, "no retry when none is configured")
	ev, _ := nextEvent(t, events)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":{}}`, ev.data)
	_, ok := nextEvent(t, events)
	assert.False(t, ok)
}

// TestStreamableHandler_oldClientsGetNoPriming checks that a client of a
// revision before 2025-11-25 gets no priming event (it would try to parse
// the empty data) and that its streams cannot be closed for polling.
func TestStreamableHandler_oldClientsGetNoPriming(t *testing.T) {
	s := testHTTPServer()
	closed := make(chan bool, 1)
	s.AddTool(&mcp.Tool{Name: "poll", Description: "closes its stream"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		closed <- mcp.StreamSessionFromContext(ctx).CloseStream(req.ID)
		return textResult("ok"), nil
	})
	hs := serveHTTP(t, s, &mcp.StreamableOptions{ResponseMode: mcp.ResponseSSE})
	c := newRaw(t, hs)
	resp := c.do(http.MethodPost, strings.Replace(initBody, "2025-11-25", "2025-03-26", 1))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	c.session = resp.Header.Get(mcp.HeaderSessionID)
	for ev := range sseStream(t, resp) {
		assert.NotEmpty(t, ev.data, "no priming event")
	}
	resp = c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"poll"}}`)
	assert.False(t, recv(t, closed), "CloseStream refuses: the client could not resume")
	msgs := readAll(t, resp)
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], `"ok"`)
}

func TestStreamableHandler_stateless(t *testing.T) {
	s := testHTTPServer()
	var seen *mcp.StreamSession
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		ProtocolVersions: append(slicesClone(mcp.SupportedVersions), "2026-07-28"),
		Stateless: func(r *http.Request, sess *mcp.StreamSession) error {
			seen = sess
			s.Serve(sess.Context(), sess.Conn())
			return nil
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	c := &rawClient{t: t, url: srv.URL, client: srv.Client()}
	resp := c.do(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		mcp.HeaderProtocolVersion, "2026-07-28", mcp.HeaderMethod, mcp.MethodToolsCall, mcp.HeaderName, "echo")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(mcp.HeaderSessionID), "no session")
	msgs := readAll(t, resp)
	require.Len(t, msgs, 1)
	assert.Contains(t, msgs[0], "echo:")
	require.NotNil(t, seen)
	assert.Equal(t, "2026-07-28", seen.ProtocolVersion())
	assert.Empty(t, seen.ID())
	select {
	case <-seen.Done():
	case <-time.After(wait):
		t.Fatal("the one-request session did not end")
	}
	assert.Equal(t, 0, h.Sessions())
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestStreamableHandler_concurrent runs many clients, each with calls in
// parallel and server requests, against one handler, under -race.
func TestStreamableHandler_concurrent(t *testing.T) {
	s := testHTTPServer()
	hs := serveHTTP(t, s, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 256)
	for range 4 {
		c := connectHTTP(t, hs, &mcp.ClientOptions{
			Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("x"), Model: "m"}, nil
			},
		})
		for j := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := testCtx(t)
				for k := range 5 {
					var err error
					switch (j + k) % 3 {
					case 0:
						var res *mcp.CallToolResult
						res, err = c.CallTool(ctx, "echo", map[string]int{"k": k}, nil)
						if err == nil && text(res) != fmt.Sprintf(`echo:{"k":%d}`, k) {
							err = fmt.Errorf("wrong answer %q", text(res))
						}
					case 1:
						n := 0
						_, err = c.CallTool(ctx, "progress", nil, &mcp.CallOptions{Progress: func(*mcp.ProgressParams) { n++ }})
						if err == nil && n != 3 {
							err = fmt.Errorf("%d progress reports", n)
						}
					case 2:
						_, err = c.CallTool(ctx, "sample", nil, nil)
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStreamableClientConn_sessionGone(t *testing.T) {
	hs := serveHTTP(t, testHTTPServer(), nil)
	c, err := mcp.Connect(testCtx(t), hs.URL, &mcp.ClientOptions{HTTP: mcp.StreamableClientOptions{HTTPClient: hs.Client()}})
	require.NoError(t, err)
	ss := recv(t, hs.sessions)
	require.NoError(t, ss.Close()) // the server forgets the session
	err = c.Ping(testCtx(t))
	require.Error(t, err)
	assert.ErrorIs(t, err, peer.ErrClosed)
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("the client did not end")
	}
	assert.ErrorIs(t, c.Close(), mcp.ErrSessionGone, "the client says why it ended")
}

// TestStreamableClientConn_foreignCancellation: a POST of notifications
// that net/http fails with another request's "context canceled", its own
// context live (it does so when a request that took the connection of an
// empty 202 before that 202 reached its caller is cancelled:
// golang/go#41600), is sent again, and the session goes on. It used to end
// the conn ("peer: write: ... context canceled"), failing the next call.
func TestStreamableClientConn_foreignCancellation(t *testing.T) {
	hs := serveHTTP(t, testHTTPServer(), nil)
	rt := &cancelsOnce{base: hs.Client().Transport, method: mcp.NotificationInitialized}
	c, err := mcp.Connect(testCtx(t), hs.URL, &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion,
		HTTP: mcp.StreamableClientOptions{HTTPClient: &http.Client{Transport: rt}}})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ping(testCtx(t)), "the session outlived the failed POST")
	assert.Equal(t, int32(1), rt.failed.Load(), "the POST of %s failed once", rt.method)
}

// cancelsOnce passes requests on to base, but reports the first POST that
// carries method as failed with context.Canceled once the server answered
// it, as net/http does in the race of golang/go#41600.
type cancelsOnce struct {
	base   http.RoundTripper
	method string
	failed atomic.Int32
}

func (rt *cancelsOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.GetBody == nil || rt.failed.Load() > 0 {
		return rt.base.RoundTrip(r)
	}
	body, err := r.GetBody()
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(body)
	resp, err := rt.base.RoundTrip(r)
	if err != nil || !strings.Contains(string(b), `"`+rt.method+`"`) || !rt.failed.CompareAndSwap(0, 1) {
		return resp, err
	}
	resp.Body.Close()
	return nil, context.Canceled
}

// TestStreamableClientConn_resumes checks that the client conn resumes a
// POST stream the server closed mid-call (SSE polling), after the server's
// retry delay, and gets the answer.
func TestStreamableClientConn_resumes(t *testing.T) {
	s := testHTTPServer()
	release := make(chan struct{})
	s.AddTool(&mcp.Tool{Name: "poll", Description: "closes its stream, then answers"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if !mcp.StreamSessionFromContext(ctx).CloseStream(req.ID) {
			return nil, errors.New("CloseStream refused")
		}
		<-release
		return textResult("after the reconnection"), nil
	})
	rec := &getRecorder{}
	hs := serveHTTP(t, s, &mcp.StreamableOptions{Retry: 10 * time.Millisecond})
	hs.Config.Handler = rec.wrap(hs.handler)
	c := connectHTTP(t, hs, nil)
	ss := recv(t, hs.sessions)
	recv(t, ss.Ready())
	out := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := c.CallTool(testCtx(t), "poll", nil, nil)
		assert.NoError(t, err)
		out <- res
	}()
	require.Eventually(t, func() bool { return rec.resumptions() > 0 }, wait, time.Millisecond, "the client comes back with Last-Event-ID")
	close(release)
	assert.Equal(t, "after the reconnection", text(recv(t, out)))
}

type getRecorder struct {
	mu sync.Mutex
	n  int
}

func (g *getRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get(mcp.HeaderLastEventID) != "" {
			g.mu.Lock()
			g.n++
			g.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (g *getRecorder) resumptions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// TestStreamableClientConn_headers checks what the client conn sends: its
// own headers on every request, the session id and the negotiated version
// after initialize, and a DELETE on Close.
func TestStreamableClientConn_headers(t *testing.T) {
	type seen struct {
		method, auth, session, version string
	}
	var mu sync.Mutex
	var log []seen
	hs := serveHTTP(t, testHTTPServer(), nil)
	hs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		log = append(log, seen{r.Method, r.Header.Get("Authorization"), r.Header.Get(mcp.HeaderSessionID), r.Header.Get(mcp.HeaderProtocolVersion)})
		mu.Unlock()
		hs.handler.ServeHTTP(w, r)
	})
	c, err := mcp.Connect(testCtx(t), hs.URL, &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion, Token: "secret",
		HTTP: mcp.StreamableClientOptions{HTTPClient: hs.Client()}})
	require.NoError(t, err)
	require.NoError(t, c.Ping(testCtx(t)))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(log, func(s seen) bool { return s.method == http.MethodGet })
	}, wait, time.Millisecond, "the client opens the GET stream after initialize")
	require.NoError(t, c.Close())
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(log), 4)
	assert.Equal(t, seen{"POST", "Bearer secret", "", ""}, log[0], "initialize: no session yet")
	methods := []string{}
	for _, s := range log[1:] {
		methods = append(methods, s.method)
		assert.Equal(t, "Bearer secret", s.auth)
		assert.NotEmpty(t, s.session)
		assert.Equal(t, mcp.LatestVersion, s.version)
	}
	assert.Equal(t, http.MethodDelete, methods[len(methods)-1], "Close deletes the session")
}

// A client over Streamable HTTP, on a conn of its own: DialStreamable sends
// nothing until initialize, and Close deletes the session.
func ExampleDialStreamable() {
	s := mcp.NewServer(mcp.Implementation{Name: "clock", Version: "1.0.0"}, nil)
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Open: func(r *http.Request, sess *mcp.StreamSession) error {
			s.Serve(sess.Context(), sess.Conn())
			return nil
		},
	})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx := context.Background()
	conn, err := mcp.DialStreamable(ctx, srv.URL, &mcp.StreamableClientOptions{
		HTTPClient: srv.Client(),
		Header:     http.Header{"Authorization": {"Bearer example"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := mcp.ConnectConn(ctx, conn, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("server:", c.InitializeResult().ServerInfo.Name)
	fmt.Println("version:", conn.ProtocolVersion())
	fmt.Println("session:", conn.SessionID() != "")
	fmt.Println("sessions on the server:", h.Sessions())
	c.Close()
	fmt.Println("after Close:", h.Sessions())
	// Output:
	// server: clock
	// version: 2025-11-25
	// session: true
	// sessions on the server: 1
	// after Close: 0
}

// TestStreamableHandler_slowAnswerBecomesSSE checks that a POST waiting
// longer than the keep-alive period for its answer turns into an SSE stream
// (headers, priming event, keep-alive comments) instead of staying silent.
func TestStreamableHandler_slowAnswerBecomesSSE(t *testing.T) {
	s := testHTTPServer()
	hs := serveHTTP(t, s, &mcp.StreamableOptions{KeepAlive: 20 * time.Millisecond})
	c := newRaw(t, hs)
	c.initialize()
	ss := recv(t, hs.sessions)
	out := make(chan *http.Response, 1)
	go func() { out <- c.post(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"block"}}`) }()
	resp := recv(t, out) // the headers came while the call still runs
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, 1, ss.Peer().Pending(), "the call is still running")
	events := sseStream(t, resp)
	prime, _ := nextEvent(t, events)
	assert.Equal(t, "", prime.data)
	require.Equal(t, http.StatusAccepted, c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`).StatusCode)
	assert.Equal(t, http.StatusNoContent, c.do(http.MethodGet, "", mcp.HeaderLastEventID, prime.id).StatusCode,
		"the cancelled stream is not to be resumed (its response is held open until the client leaves)")
}

func TestSSEClientConn_dial(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{"not an event stream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}"))
		}, "Content-Type"},
		{"refused", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", http.StatusMethodNotAllowed)
		}, "HTTP 405"},
		{"an endpoint on another host", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: endpoint\ndata: http://elsewhere.example/messages\n\n"))
		}, "unusable endpoint"},
		{"no endpoint before the end", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: {}\n\n"))
		}, "no endpoint event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			_, err := mcp.DialSSE(testCtx(t), srv.URL, &mcp.StreamableClientOptions{HTTPClient: srv.Client()})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

// TestSSEClientConn_streamEnds checks that a client over HTTP+SSE ends,
// saying why, when the server closes the event stream.
func TestSSEClientConn_streamEnds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: endpoint\ndata: /messages?s=1\n\n"))
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	conn, err := mcp.DialSSE(testCtx(t), srv.URL, &mcp.StreamableClientOptions{HTTPClient: srv.Client()})
	require.NoError(t, err)
	assert.Equal(t, srv.URL+"/messages?s=1", conn.Endpoint())
	require.NoError(t, conn.Write(testCtx(t), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
	close(release)
	_, err = conn.Read(testCtx(t))
	assert.ErrorIs(t, err, mcp.ErrSSEStreamEnded)
	require.NoError(t, conn.Close(peer.CloseNormal, ""))
}

// TestStreamableClientConn_namesRelated: with NameRelated, the server's
// requests and log messages on a call's POST stream come out of the conn
// naming that call in _meta["switchboard/relatedRequest"], unless they
// name one already; what comes on the GET stream, and answers, are left as
// they are.
func TestStreamableClientConn_namesRelated(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"g1\",\"method\":\"roots/list\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.DecodeMessage(body)
		req, ok := m.(*jsonrpc.Request)
		switch {
		case err != nil || !ok || !req.IsCall():
			w.WriteHeader(http.StatusAccepted)
		case req.Method == mcp.MethodInitialize:
			w.Header().Set(mcp.HeaderSessionID, "s")
			w.Header().Set("Content-Type", "application/json")
			w.Write((&jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"x","version":"1"}}`)}).Encode())
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{
				`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"maxTokens":1,"messages":[]}}`,
				`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`,
				`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
				`{"jsonrpc":"2.0","id":"s2","method":"elicitation/create","params":{"_meta":{"switchboard/relatedRequest":77}}}`,
				string((&jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{"content":[]}`)}).Encode()),
			} {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
		}
	}))
	t.Cleanup(srv.Close)
	c, err := mcp.DialStreamable(testCtx(t), srv.URL, &mcp.StreamableClientOptions{NameRelated: true})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(peer.CloseNormal, "") })
	read := func() map[string]any {
		t.Helper()
		frame, err := c.Read(testCtx(t))
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(frame, &m))
		return m
	}
	related := func(m map[string]any) any {
		params, _ := m["params"].(map[string]any)
		meta, _ := params["_meta"].(map[string]any)
		return meta[mcp.MetaRelatedRequest]
	}
	ctx := testCtx(t)
	require.NoError(t, c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)))
	read()
	require.NoError(t, c.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)))
	fromGET := read()
	assert.Equal(t, "g1", fromGET["id"])
	assert.Nil(t, related(fromGET), "a request on the GET stream belongs to no call")

	require.NoError(t, c.Write(ctx, []byte(`{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{"name":"t"}}`)))
	sampling := read()
	assert.Equal(t, "sampling/createMessage", sampling["method"])
	assert.Equal(t, "call-7", related(sampling), "named after the POST that carried it")
	assert.Equal(t, float64(1), sampling["params"].(map[string]any)["maxTokens"], "the rest is kept")
	assert.Equal(t, "call-7", related(read()), "a log on the call's stream")
	assert.Nil(t, related(read()), "progress finds its call by its token")
	assert.Equal(t, float64(77), related(read()), "a request that names its call keeps it")
	answer := read()
	assert.Equal(t, "call-7", answer["id"])
	assert.NotContains(t, answer, "params")
}

// TestStreamableHandler_endAnswersPendingPOSTs checks that a POST waiting
// for its answer is answered 404 once its session ends (a DELETE here): its
// response waits on the stream's attachment alone, which the session's end
// must wake. A well-behaved POST of the same session, answered before the
// end, is unaffected.
func TestStreamableHandler_endAnswersPendingPOSTs(t *testing.T) {
	s := testHTTPServer()
	started := make(chan struct{})
	var once sync.Once
	s.AddTool(&mcp.Tool{Name: "hold", Description: "holds the call until cancelled"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return nil, ctx.Err()
	})
	hs := serveHTTP(t, s, nil)
	c := newRaw(t, hs)
	c.initialize()
	ok := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	assert.Equal(t, http.StatusOK, ok.StatusCode, "a call before the end is answered")

	status := make(chan int, 1)
	go func() {
		req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, c.url,
			strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hold","arguments":{}}}`))
		if err != nil {
			status <- -1
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderSessionID, c.session)
		req.Header.Set(mcp.HeaderProtocolVersion, c.version)
		resp, err := c.client.Do(req)
		if err != nil {
			status <- -1
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	recv(t, started)
	assert.Equal(t, http.StatusNoContent, c.do(http.MethodDelete, "").StatusCode)
	assert.Equal(t, http.StatusNotFound, recv(t, status), "the pending POST learns that its session ended")
}
