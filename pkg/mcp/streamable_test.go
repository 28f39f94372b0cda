package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	hs.Server = httptest.NewServer(hs.handler)
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
	ch := make(chan event, 64)
	done := make(chan struct{})
	t.Cleanup(func() {
		resp.Body.Close()
		<-done
	})
	go func() {
		defer close(done)
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev event
		has := false
		for sc.Scan() {
			line := sc.Text()
			switch {
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

var _ = errors.New
var _ = json.Marshal
var _ = peer.CloseNormal
