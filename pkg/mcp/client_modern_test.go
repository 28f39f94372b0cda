package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// answering are client options that answer every input request.
func answering(notes func(string, json.RawMessage)) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Info: mcp.Implementation{Name: "modern-client", Version: "2"},
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("Hello"), Model: "m"}, nil
		},
		Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		Roots: func(ctx context.Context) ([]mcp.Root, error) {
			return []mcp.Root{{URI: "file:///work"}}, nil
		},
		OnNotification: notes,
	}
}

// TestClient_modern runs a client in its default mode against a server
// that speaks both eras: it speaks 2026-07-28, every request carries the
// _meta triple, and input requests are fulfilled by its handlers.
func TestClient_modern(t *testing.T) {
	t.Parallel()
	s := modernServer(&mcp.ServerOptions{Instructions: "hello"})
	var rounds atomic.Int32
	askingTool(s, &rounds)
	seen := make(chan *mcp.RequestMeta, 16)
	s.AddTool(&mcp.Tool{Name: "meta"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		seen <- req.RequestMeta()
		return textResult("ok"), nil
	})
	c, ss := connectModern(t, s, answering(nil))
	ctx := testCtx(t)

	init := c.InitializeResult()
	assert.Equal(t, mcp.ModernVersion, init.ProtocolVersion)
	assert.Equal(t, testInfo, init.ServerInfo, "from discover's _meta")
	assert.Equal(t, "hello", init.Instructions)
	assert.NotNil(t, init.Capabilities.Tools)
	select {
	case <-ss.Ready():
		t.Fatal("the client initialized a session")
	default:
	}

	res, err := c.CallTool(ctx, "greet", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada!", text(res), "the client fulfilled the input requests and called again")
	assert.Equal(t, int32(2), rounds.Load())

	_, err = c.CallTool(ctx, "meta", nil, nil)
	require.NoError(t, err)
	m := recv(t, seen)
	require.NotNil(t, m, "a request of 2026-07-28")
	assert.Equal(t, mcp.ModernVersion, m.ProtocolVersion)
	assert.Equal(t, &mcp.Implementation{Name: "modern-client", Version: "2"}, m.ClientInfo)
	assert.Equal(t, mcp.ClientCapabilities{Sampling: &mcp.SamplingCap{}, Elicitation: &mcp.ElicitationCap{Form: &struct{}{}},
		Roots: &mcp.ListChangedCap{ListChanged: true}}, m.Capabilities)
	assert.Empty(t, m.LogLevel)

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.Len(t, tools, 3)
	read, err := c.ReadResource(ctx, "mem://a")
	require.NoError(t, err)
	assert.Equal(t, "a", read.Contents[0].Text)
	pr, err := c.GetPrompt(ctx, "p", nil)
	require.NoError(t, err)
	assert.Equal(t, "hi", pr.Messages[0].Content.Text)
	require.NoError(t, c.Ping(ctx))
	require.NoError(t, c.NotifyRootsChanged(ctx), "nothing to say in 2026-07-28")
}

// TestClient_modernLogging: SetLoggingLevel makes every later request ask
// for that level; a handler's log reaches its request's client at that
// level or above, and Server.Log, tied to no request, never does.
func TestClient_modernLogging(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	s.AddTool(&mcp.Tool{Name: "chatty"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		s.Log(ctx, mcp.LevelEmergency, "server", "to sessions only")
		req.Log(ctx, mcp.LevelDebug, "tool", "detail")
		req.Log(ctx, mcp.LevelError, "tool", "it broke")
		return textResult("ok"), nil
	})
	var mu sync.Mutex
	var logs []string
	c, _ := connectModern(t, s, &mcp.ClientOptions{OnNotification: func(method string, params json.RawMessage) {
		var p mcp.LoggingMessageParams
		if method == mcp.NotificationMessage && json.Unmarshal(params, &p) == nil {
			mu.Lock()
			logs = append(logs, string(p.Level)+":"+p.Data.(string))
			mu.Unlock()
		}
	}})
	ctx := testCtx(t)
	got := func() []string {
		// Notifications about a call come before its answer.
		_, err := c.CallTool(ctx, "chatty", nil, nil)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		out := logs
		logs = nil
		return out
	}
	assert.Empty(t, got(), "no log level asked for: no logs")
	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelInfo))
	assert.Equal(t, []string{"error:it broke"}, got())
	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelDebug))
	assert.Equal(t, []string{"debug:detail", "error:it broke"}, got())
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, c.SetLoggingLevel(ctx, "loud")))
}

// TestClient_modernListen: Subscribe opens a listen stream per URI, and a
// client with OnNotification one for the lists that may change.
func TestClient_modernListen(t *testing.T) {
	t.Parallel()
	s := modernServer(nil)
	s.AddResource(&mcp.Resource{URI: "mem://b", Name: "b"}, readText("b"))
	notes, on := notifications(t)
	c, _ := connectModern(t, s, &mcp.ClientOptions{OnNotification: on})
	ctx := testCtx(t)
	next := func() note {
		t.Helper()
		for {
			n := recv(t, notes)
			if n.method != mcp.NotificationSubscriptionsAcknowledged {
				return n
			}
		}
	}

	s.AddTool(echoTool("more"))
	assert.Equal(t, mcp.NotificationToolsListChanged, next().method, "the list-changed stream opened on Connect")
	s.AddPrompt(&mcp.Prompt{Name: "q"}, nil)
	assert.Equal(t, mcp.NotificationPromptsListChanged, next().method)

	require.NoError(t, c.Subscribe(ctx, "mem://a"))
	require.NoError(t, c.Subscribe(ctx, "mem://a"), "again: nothing more")
	require.NoError(t, c.Subscribe(ctx, "mem://b"))
	s.ResourceUpdated(ctx, "mem://a")
	n := next()
	assert.Equal(t, mcp.NotificationResourceUpdated, n.method)
	assert.Contains(t, string(n.params), `"uri":"mem://a"`)

	require.NoError(t, c.Unsubscribe(ctx, "mem://a"))
	require.NoError(t, c.Unsubscribe(ctx, "mem://a"), "again: nothing to do")
	// Unsubscribe waits for the stream's end, but the server hears of the
	// cancellation on its own time: a request after it is served after it.
	require.NoError(t, c.Ping(ctx))
	s.ResourceUpdated(ctx, "mem://a")
	s.ResourceUpdated(ctx, "mem://b") // the barrier: notifications come in order
	n = next()
	assert.Contains(t, string(n.params), `"uri":"mem://b"`, "nothing about mem://a once unsubscribed")

	// A server without resources honours no subscription.
	bare := mcp.NewServer(testInfo, nil)
	bare.AddTool(echoTool("x"))
	c2, _ := connectModern(t, bare, nil)
	err := c2.Subscribe(ctx, "mem://a")
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcCode(t, err))
}

// TestClient_eras checks which era a client speaks, by its options and the
// server's.
func TestClient_eras(t *testing.T) {
	t.Parallel()
	sessionsOnly := &mcp.ServerOptions{ProtocolVersions: []string{mcp.Version20250618, mcp.LatestVersion}}
	modernOnly := &mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}}
	tests := []struct {
		name    string
		server  *mcp.ServerOptions
		version string // the client's option
		want    string // the version spoken; "" for a failure
	}{
		{"default, both eras", nil, "", mcp.ModernVersion},
		{"default, sessions only", sessionsOnly, "", mcp.LatestVersion},
		{"default, 2026-07-28 only", modernOnly, "", mcp.ModernVersion},
		{"a session asked for", nil, mcp.Version20250618, mcp.Version20250618},
		{"a session asked of a 2026-07-28 server", modernOnly, mcp.LatestVersion, ""},
		{"2026-07-28 asked for", nil, mcp.ModernVersion, mcp.ModernVersion},
		{"2026-07-28 asked of a server of sessions", sessionsOnly, mcp.ModernVersion, ""},
		{"an unknown session version", sessionsOnly, "2024-01-01", mcp.LatestVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			serverEnd, clientEnd := peer.Pipe(64)
			ss := modernServer(tt.server).Serve(context.Background(), serverEnd)
			c, err := mcp.ConnectConn(testCtx(t), clientEnd, &mcp.ClientOptions{ProtocolVersion: tt.version})
			if tt.want == "" {
				require.Error(t, err)
				_ = ss.Close()
				return
			}
			require.NoError(t, err)
			defer func() {
				assert.NoError(t, c.Close())
				assert.NoError(t, ss.Wait())
			}()
			assert.Equal(t, tt.want, c.InitializeResult().ProtocolVersion)
			tools, err := c.AllTools(testCtx(t))
			require.NoError(t, err, "the era works")
			assert.Len(t, tools, 1)
		})
	}
}

// TestStreamable_modern runs a client in its default mode against a
// Streamable HTTP handler that serves stateless requests: every request is
// a POST of its own, without a session, its headers mirroring its body;
// a listen stream is a POST left open, and ends when the client leaves.
func TestStreamable_modern(t *testing.T) {
	s := modernServer(nil)
	var rounds atomic.Int32
	askingTool(s, &rounds)
	sessions := make(chan *mcp.ServerSession, 64)
	listens := make(chan *mcp.ServerSession, 2)
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Open: func(r *http.Request, sess *mcp.StreamSession) error {
			t.Error("a session was opened")
			return nil
		},
		Stateless: func(r *http.Request, sess *mcp.StreamSession) error {
			ss := s.Serve(sess.Context(), sess.Conn())
			sessions <- ss
			if r.Header.Get(mcp.HeaderMethod) == mcp.MethodSubscriptionsListen {
				listens <- ss
			}
			return nil
		},
	})
	type seen struct{ session, version, method, name string }
	var mu sync.Mutex
	var log []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		log = append(log, seen{r.Header.Get(mcp.HeaderSessionID), r.Header.Get(mcp.HeaderProtocolVersion),
			r.Header.Get(mcp.HeaderMethod), r.Header.Get(mcp.HeaderName)})
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)

	notes, on := notifications(t)
	opts := answering(on)
	opts.HTTP.HTTPClient = srv.Client()
	c, err := mcp.Connect(testCtx(t), srv.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() }) // first: the server's listens end with it
	ctx := testCtx(t)
	assert.Equal(t, mcp.ModernVersion, c.InitializeResult().ProtocolVersion)

	res, err := c.CallTool(ctx, "greet", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada!", text(res))
	read, err := c.ReadResource(ctx, "mem://a")
	require.NoError(t, err)
	assert.Equal(t, "a", read.Contents[0].Text)
	_, err = c.CallTool(ctx, "nope", nil, nil)
	e := rpcError(t, err)
	assert.Equal(t, jsonrpc.CodeInvalidParams, e.Code, "the JSON-RPC error under its 400, as sent: %v", err)
	assert.NotContains(t, e.Message, "HTTP 400")

	require.NoError(t, c.Subscribe(ctx, "mem://a"))
	s.ResourceUpdated(ctx, "mem://a")
	for n := recv(t, notes); n.method != mcp.NotificationResourceUpdated; n = recv(t, notes) {
	}
	changes, sub := recv(t, listens), recv(t, listens) // Connect's, for list changes; Subscribe's
	require.NoError(t, c.Unsubscribe(ctx, "mem://a"))
	recv(t, sub.Peer().Done()) // the client left: the server's listen ends
	select {
	case <-changes.Peer().Done():
		t.Fatal("the other listen stream ended too")
	default:
	}
	require.NoError(t, c.Close())
	for range len(sessions) {
		assert.NoError(t, (<-sessions).Wait(), "every request's session ends: the listen streams' with their POSTs")
	}
	assert.Equal(t, 0, h.Sessions())

	mu.Lock()
	defer mu.Unlock()
	methods := map[string]bool{}
	for _, r := range log {
		assert.Empty(t, r.session, "no session")
		assert.Equal(t, mcp.ModernVersion, r.version)
		methods[r.method] = true
		if r.method == mcp.MethodToolsCall {
			assert.Contains(t, []string{"greet", "nope"}, r.name)
		}
		if r.method == mcp.MethodResourcesRead {
			assert.Equal(t, "mem://a", r.name)
		}
	}
	for _, m := range []string{mcp.MethodServerDiscover, mcp.MethodSubscriptionsListen, mcp.MethodToolsCall,
		mcp.MethodResourcesRead, mcp.NotificationCancelled} {
		assert.True(t, methods[m], "a POST of %s", m)
	}
}

// TestStreamableHandler_statelessWire checks a stateless request's answers
// on the wire, in both response modes: an error refusing the request is
// JSON under its status, and an SSE stream has no event ids (it cannot be
// resumed).
func TestStreamableHandler_statelessWire(t *testing.T) {
	for _, mode := range []mcp.ResponseMode{mcp.ResponseAuto, mcp.ResponseSSE} {
		s := modernServer(nil)
		s.AddTool(&mcp.Tool{Name: "progress"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return textResult("done"), req.Progress(ctx, 1, 2, "half")
		})
		h := mcp.NewStreamableHandler(&mcp.StreamableOptions{ResponseMode: mode, Stateless: func(r *http.Request, sess *mcp.StreamSession) error {
			s.Serve(sess.Context(), sess.Conn())
			return nil
		}})
		srv := httptest.NewServer(h)
		c := &rawClient{t: t, url: srv.URL, client: srv.Client()}
		post := func(method, params string) *http.Response {
			body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + string(modern(t, params, `{}`)) + `}`
			name, _ := jsonrpc.StringMember([]byte(params), "name")
			return c.do(http.MethodPost, body, mcp.HeaderProtocolVersion, mcp.ModernVersion, mcp.HeaderMethod, method, mcp.HeaderName, name)
		}

		resp := post(mcp.MethodToolsCall, `{"name":"nope"}`)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "mode %d", mode)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		assert.Contains(t, readAll(t, resp)[0], `"id":7`)

		resp = post(mcp.MethodToolsCall, `{"name":"progress","_meta":{"progressToken":"p"}}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		var events []event
		for ev := range sseStream(t, resp) {
			events = append(events, ev)
		}
		require.Len(t, events, 2, "the progress, then the answer, and no priming event")
		for _, ev := range events {
			assert.Empty(t, ev.id, "no event ids")
		}
		assert.Contains(t, events[0].data, mcp.NotificationProgress)
		assert.Contains(t, events[1].data, `"resultType":"complete"`)
		srv.Close()
		h.Close()
	}
}

// TestClient_answersNoInputWithoutHandlers: a modern client without the
// handler an input request needs fails the call, naming the request.
func TestClient_answersNoInputWithoutHandlers(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	s.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"r": mcp.RootsInput()}}, nil
	})
	c, _ := connectModern(t, s, nil)
	_, err := c.CallTool(testCtx(t), "ask", nil, nil)
	assert.Equal(t, mcp.CodeMissingClientCapability, rpcCode(t, err), "the server checks the declared capabilities first")

	// A server that asks anyway: the client says which request it cannot
	// answer.
	serverEnd, clientEnd := peer.Pipe(64)
	fake := peer.New(serverEnd, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		switch req.Method {
		case mcp.MethodServerDiscover:
			return &mcp.DiscoverResult{SupportedVersions: []string{mcp.ModernVersion}, ResultType: mcp.ResultComplete}, nil
		case mcp.MethodToolsCall:
			return json.RawMessage(`{"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}`), nil
		}
		return nil, jsonrpc.ErrMethodNotFound
	})})
	fake.Start(context.Background())
	defer fake.Close()
	c3, err := mcp.ConnectConn(testCtx(t), clientEnd, nil)
	require.NoError(t, err)
	defer c3.Close()
	_, err = c3.CallTool(testCtx(t), "ask", nil, nil)
	require.Error(t, err)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcCode(t, err))
	assert.True(t, strings.Contains(err.Error(), `"r"`) && strings.Contains(err.Error(), "roots"), err.Error())
}
