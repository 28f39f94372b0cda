package gosdk_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkrpc "github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait: a test that would hang fails instead.
const wait = 10 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return ctx
}

// recv waits for a value on ch, failing the test after wait.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("nothing received within %v", wait)
		panic("unreachable")
	}
}

// exchange is one POST the server received: the MCP method it carried (""
// for answers) and the HTTP status it got.
type exchange struct {
	httpMethod, mcpMethod string
	status                int
}

// recorder notes every request that reaches the server.
type recorder struct {
	mu  sync.Mutex
	log []exchange
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			h.ServeHTTP(w, r) // a server dialing out to the hub: not the SDK's
			return
		}
		ex := exchange{httpMethod: r.Method}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytesReader(body))
			ex.mcpMethod, _ = jsonrpc.StringMember(body, "method")
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		ex.status = sw.status
		rec.mu.Lock()
		rec.log = append(rec.log, ex)
		rec.mu.Unlock()
	})
}

func (rec *recorder) exchanges() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.log)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// urlFunc serves s and returns the URL an MCP client connects to, and the
// HTTP client to use; rec, when set, records every request the endpoint
// gets.
type urlFunc func(t *testing.T, s *mcp.Server, rec *recorder) (string, *http.Client)

// endpoint is one way of reaching a server: where, and which protocol
// version the SDK asks for ("" for its default: 2026-07-28 first, with
// fallback).
type endpoint struct {
	url     urlFunc
	version string
	modern  bool // the SDK ends up speaking 2026-07-28
}

// connect connects the SDK to s served this way.
func (e endpoint) connect(t *testing.T, s *mcp.Server, rec *recorder, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	url, hc := e.url(t, s, rec)
	return connectVersion(t, url, hc, e.version, opts)
}

// everywhere runs a test against each endpoint: the fixture served by
// pkg/mcp's Streamable HTTP handler directly (which speaks the
// session-based revisions only: the SDK falls back to 2025-11-25), and the
// hub's own endpoint of the fixture (/servers/switchboard-fixture/mcp),
// with the fixture dialed out to the hub over a WebSocket, where the SDK
// in its default mode speaks 2026-07-28 and, asked to, 2025-11-25. What
// the SDK sees must not differ but for what the revisions differ in.
func everywhere(t *testing.T, test func(t *testing.T, e endpoint)) {
	t.Run("direct", func(t *testing.T) { test(t, endpoint{url: directURL}) })
	t.Run("hub", func(t *testing.T) { test(t, endpoint{url: hubURL, modern: true}) })
	t.Run("hub-2025-11-25", func(t *testing.T) { test(t, endpoint{url: hubURL, version: "2025-11-25"}) })
}

// directURL serves s with pkg/mcp's Streamable HTTP handler.
func directURL(t *testing.T, s *mcp.Server, rec *recorder) (string, *http.Client) {
	t.Helper()
	var mu sync.Mutex
	var sessions []*mcp.ServerSession
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Open: func(r *http.Request, sess *mcp.StreamSession) error {
			ss := s.Serve(sess.Context(), sess.Conn())
			mu.Lock()
			sessions = append(sessions, ss)
			mu.Unlock()
			return nil
		},
	})
	var handler http.Handler = h
	if rec != nil {
		handler = rec.wrap(h)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(func() {
		h.Close()
		mu.Lock()
		for _, ss := range sessions {
			assert.NoError(t, ss.Wait())
		}
		mu.Unlock()
		srv.Close()
	})
	return srv.URL, srv.Client()
}

// hubURL starts a hub, dials s out to it and returns its own endpoint on
// the hub.
func hubURL(t *testing.T, s *mcp.Server, rec *recorder) (string, *http.Client) {
	t.Helper()
	srv := startHub(t, nil, rec)
	dialOut(t, s, srv, "")
	return srv.URL + "/servers/switchboard-fixture/mcp", srv.Client()
}

// startHub starts a hub instance on broker (nil: its own).
func startHub(t *testing.T, broker pubsub.Broker, rec *recorder) *httptest.Server {
	t.Helper()
	return startHubConfig(t, hub.Config{Broker: broker}, rec)
}

// startHubConfig starts a hub instance configured by cfg.
func startHubConfig(t *testing.T, cfg hub.Config, rec *recorder) *httptest.Server {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	h, err := hub.New(cfg)
	require.NoError(t, err)
	handler := h.Handler()
	if rec != nil {
		// Only the SDK's requests, to a server's own endpoint.
		all, recorded := handler, rec.wrap(handler)
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/servers/") {
				recorded.ServeHTTP(w, r)
				return
			}
			all.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ReadHeaderTimeout = 10 * time.Second
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		assert.NoError(t, h.Close())
	})
	return srv
}

// dialOut dials s out to the hub at srv (as name, when set) until the test
// ends, and waits until the hub lists it.
func dialOut(t *testing.T, s *mcp.Server, srv *httptest.Server, name string) {
	t.Helper()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http") + "/mcp/server"
	if name != "" {
		ws += "?name=" + name
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Dial(ctx, ws, &mcp.DialOptions{MinBackoff: 10 * time.Millisecond}) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.Eventually(t, func() bool {
		c, err := mcp.Connect(ctx, srv.URL+"/mcp", &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion})
		if err != nil {
			return false
		}
		defer c.Close()
		res, err := c.ReadResource(ctx, "switchboard://servers")
		return err == nil && strings.Contains(res.Contents[0].Text, `"name":"`+cmp.Or(name, "switchboard-fixture")+`"`)
	}, wait, 10*time.Millisecond, "the server registers on the hub")
}

// connect connects the Go SDK's client over its StreamableClientTransport,
// in its default mode.
func connect(t *testing.T, url string, hc *http.Client, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return connectVersion(t, url, hc, "", opts)
}

// connectVersion connects the SDK asking for version ("" for its default).
func connectVersion(t *testing.T, url string, hc *http.Client, version string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-client", Version: "1.8.0"}, opts)
	cs, err := c.Connect(testCtx(t), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// stillWorks checks that a session goes on after what a test did: a ping in
// a session, a list in 2026-07-28 (which has no ping).
func stillWorks(t *testing.T, cs *sdk.ClientSession, modern bool) {
	t.Helper()
	if !modern {
		require.NoError(t, cs.Ping(testCtx(t), nil), "the session keeps working")
		return
	}
	_, err := cs.ListTools(testCtx(t), nil)
	require.NoError(t, err, "the client keeps working")
}

// fixture is a server with one of everything the tests call, of the
// session revisions (its tools ask the client with requests of their own,
// which 2026-07-28 has not: the hub, which speaks to a server in the newest
// revision it has, opens a session with it, and translates for a client
// of 2026-07-28).
type fixture struct {
	*mcp.Server
	cancelled  chan struct{} // a tool saw its call cancelled
	subscribed chan string   // a client subscribed to this URI ("-" before it when it unsubscribed)
}

func newFixture() *fixture {
	f := &fixture{cancelled: make(chan struct{}, 1), subscribed: make(chan string, 16)}
	f.Server = mcp.NewServer(mcp.Implementation{Name: "switchboard-fixture", Version: "1.0.0"}, &mcp.ServerOptions{
		ProtocolVersions: mcp.SupportedVersions,
		PageSize:         2, Instructions: "be kind",
		OnSubscribe: func(_ *mcp.ServerSession, uri string, on bool) {
			if !on {
				uri = "-" + uri
			}
			f.subscribed <- uri
		},
	})
	s := f.Server
	type addArgs struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	mcp.AddTypedTool(s, &mcp.Tool{Name: "add", Description: "adds"}, func(ctx context.Context, req *mcp.ToolRequest, a addArgs) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprint(a.A + a.B))}, StructuredContent: map[string]int{"sum": a.A + a.B}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "reports progress"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			if err := req.Progress(ctx, float64(i), 3, fmt.Sprintf("step %d", i)); err != nil {
				return nil, err
			}
			req.Log(ctx, mcp.LevelInfo, "slow", fmt.Sprintf("step %d", i))
			req.Log(ctx, mcp.LevelDebug, "slow", "too verbose")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("done")}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "ask", Description: "samples"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("capital of France?")}}, MaxTokens: 10,
		})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("model: " + res.Content.Text)}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "form", Description: "elicits"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "your name?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(res.Action + " " + fmt.Sprint(res.Content["name"]))}}, nil
	})
	for _, name := range []string{"one", "two", "three"} {
		s.AddResource(&mcp.Resource{URI: "test://" + name, Name: name, MIMEType: "text/plain"},
			func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, MIMEType: "text/plain", Text: "text of " + name}}}, nil
			})
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://items/{id}", Name: "item"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "item"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "greets", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("Hello, " + req.Params.Arguments["who"])}}}, nil
		})
	s.SetCompletionHandler(func(ctx context.Context, ss *mcp.ServerSession, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
		return &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{p.Argument.Value + "-1", p.Argument.Value + "-2"}}}, nil
	})
	return f
}

// TestGoSDK_connect checks the handshake. v1.8.0 first tries the 2026-07-28
// revision's server/discover: the hub answers it, and the SDK speaks that
// revision, without a session; pkg/mcp's handler alone refuses it (400,
// -32022 listing the versions it speaks) and the SDK falls back to
// initialize with 2025-11-25, as it does when asked for that version.
func TestGoSDK_connect(t *testing.T) { everywhere(t, testGoSDK_connect) }

func testGoSDK_connect(t *testing.T, e endpoint) {
	f := newFixture()
	rec := &recorder{}
	cs := e.connect(t, f.Server, rec, nil)

	init := cs.InitializeResult()
	assert.Equal(t, "switchboard-fixture", init.ServerInfo.Name)
	assert.Equal(t, "be kind", init.Instructions)
	assert.NotNil(t, init.Capabilities.Tools)
	stillWorks(t, cs, e.modern)
	ex := rec.exchanges()
	t.Logf("requests: %v", ex)
	if e.modern {
		assert.Equal(t, "2026-07-28", init.ProtocolVersion, "no fallback")
		assert.Empty(t, cs.ID(), "no session")
		assert.Equal(t, exchange{"POST", "server/discover", http.StatusOK}, ex[0])
		for _, x := range ex {
			assert.NotEqual(t, "initialize", x.mcpMethod, "the session-based handshake never happens")
		}
		return
	}
	assert.Equal(t, "2025-11-25", init.ProtocolVersion)
	assert.NotEmpty(t, cs.ID(), "the session id from Mcp-Session-Id")
	if e.version == "" {
		require.GreaterOrEqual(t, len(ex), 3)
		assert.Equal(t, exchange{"POST", "server/discover", http.StatusBadRequest}, ex[0], "v1.8.0 tries the stateless revision first")
		ex = ex[1:]
	}
	assert.Equal(t, exchange{"POST", "initialize", http.StatusOK}, ex[0], "the session-based handshake")
	assert.Equal(t, exchange{"POST", "notifications/initialized", http.StatusAccepted}, ex[1])
}

func TestGoSDK_lists(t *testing.T) { everywhere(t, testGoSDK_lists) }

func testGoSDK_lists(t *testing.T, e endpoint) {
	f := newFixture()
	cs := e.connect(t, f.Server, nil, nil)
	ctx := testCtx(t)

	var tools []string
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err)
		tools = append(tools, tool.Name)
	}
	// Every page, through cursors (the server's order; the hub's is by name).
	assert.ElementsMatch(t, []string{"add", "slow", "ask", "form"}, tools)

	var resources []string
	for r, err := range cs.Resources(ctx, nil) {
		require.NoError(t, err)
		resources = append(resources, r.URI)
	}
	assert.ElementsMatch(t, []string{"test://one", "test://two", "test://three"}, resources)

	var templates []string
	for r, err := range cs.ResourceTemplates(ctx, nil) {
		require.NoError(t, err)
		templates = append(templates, r.URITemplate)
	}
	assert.Equal(t, []string{"test://items/{id}"}, templates)

	read, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://two"})
	require.NoError(t, err)
	assert.Equal(t, "text of two", read.Contents[0].Text)

	_, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://nothing"})
	var rpcErr *sdkrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	if e.modern {
		assert.EqualValues(t, jsonrpc.CodeInvalidParams, rpcErr.Code, "2026-07-28: invalid params naming the URI")
		assert.JSONEq(t, `{"uri":"test://nothing"}`, string(rpcErr.Data))
	} else {
		assert.EqualValues(t, mcp.CodeResourceNotFound, rpcErr.Code)
	}

	prompt, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "Ada"}})
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada", prompt.Messages[0].Content.(*sdk.TextContent).Text)

	comp, err := cs.Complete(ctx, &sdk.CompleteParams{
		Ref:      &sdk.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: sdk.CompleteParamsArgument{Name: "who", Value: "a"},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"a-1", "a-2"}, comp.Completion.Values)
}

func TestGoSDK_calls(t *testing.T) { everywhere(t, testGoSDK_calls) }

func testGoSDK_calls(t *testing.T, e endpoint) {
	f := newFixture()
	progress := make(chan float64, 16)
	logs := make(chan string, 16)
	cs := e.connect(t, f.Server, nil, &sdk.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
			progress <- req.Params.Progress
		},
		LoggingMessageHandler: func(ctx context.Context, req *sdk.LoggingMessageRequest) {
			logs <- fmt.Sprint(req.Params.Data)
		},
	})
	ctx := testCtx(t)

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]int{"a": 2, "b": 40}})
	require.NoError(t, err)
	assert.Equal(t, "42", res.Content[0].(*sdk.TextContent).Text)
	assert.Equal(t, map[string]any{"sum": float64(42)}, res.StructuredContent)

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]any{"a": "two"}})
	var rpcErr *sdkrpc.Error
	require.ErrorAs(t, err, &rpcErr, "bad arguments are invalid params, got %v", res)
	assert.EqualValues(t, jsonrpc.CodeInvalidParams, rpcErr.Code)

	params := &sdk.CallToolParams{Name: "slow"}
	if e.modern {
		params.Meta = sdk.Meta{"io.modelcontextprotocol/logLevel": "info"} // 2026-07-28: a level per request
	} else {
		require.NoError(t, cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}))
	}
	params.SetProgressToken("tok-1")
	res, err = cs.CallTool(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "done", res.Content[0].(*sdk.TextContent).Text)
	for want := 1.0; want <= 3; want++ {
		assert.Equal(t, want, recv(t, progress), "progress on the call's stream, in order")
	}
	for i := 1; i <= 3; i++ {
		assert.Equal(t, fmt.Sprintf("step %d", i), recv(t, logs), "info logs, and no debug ones")
	}

	if e.modern {
		_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow"})
		require.NoError(t, err)
		select {
		case l := <-logs:
			t.Fatalf("a call that asked for no log level got a log: %q", l)
		default:
		}
	}
	stillWorks(t, cs, e.modern)
}

// TestGoSDK_cancel checks that cancelling a call's context reaches the
// tool (in a session the SDK sends notifications/cancelled in a POST of its
// own; in 2026-07-28 it drops the call's request, and the hub cancels the
// call upstream) and that the client goes on.
func TestGoSDK_cancel(t *testing.T) { everywhere(t, testGoSDK_cancel) }

func testGoSDK_cancel(t *testing.T, e endpoint) {
	f := newFixture()
	started := f.addWait()
	cs := e.connect(t, f.Server, nil, nil)
	cancelCall(t, cs, f, "wait", started)
	stillWorks(t, cs, e.modern)
}

// addWait adds a tool "wait" that waits until its call is cancelled; the
// channel is closed once it is called.
func (f *fixture) addWait() <-chan struct{} {
	started := make(chan struct{})
	f.AddTool(&mcp.Tool{Name: "wait", Description: "waits"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		f.cancelled <- struct{}{}
		return nil, ctx.Err()
	})
	return started
}

// cancelCall calls tool (f's "wait") and cancels the call once it started:
// the SDK returns context.Canceled and the tool sees its call cancelled.
func cancelCall(t *testing.T, cs *sdk.ClientSession, f *fixture, tool string, started <-chan struct{}) {
	t.Helper()
	callCtx, cancel := context.WithCancel(testCtx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(callCtx, &sdk.CallToolParams{Name: tool})
		errc <- err
	}()
	recv(t, started)
	cancel()
	assert.ErrorIs(t, recv(t, errc), context.Canceled)
	recv(t, f.cancelled)
}

func TestGoSDK_serverRequests(t *testing.T) { everywhere(t, testGoSDK_serverRequests) }

func testGoSDK_serverRequests(t *testing.T, e endpoint) {
	f := newFixture()
	rec := &recorder{}
	cs := e.connect(t, f.Server, rec, &sdk.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			if len(req.Params.Messages) != 1 {
				return nil, errors.New("want one message")
			}
			return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "Paris"}}, nil
		},
		ElicitationHandler: func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			if req.Params.Message != "your name?" {
				return nil, errors.New("unexpected message")
			}
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	ctx := testCtx(t)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask"})
	require.NoError(t, err)
	assert.Equal(t, "model: Paris", res.Content[0].(*sdk.TextContent).Text, "sampling on the call's stream, answered by a POST")

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "form"})
	require.NoError(t, err)
	assert.Equal(t, "accept Ada", res.Content[0].(*sdk.TextContent).Text)
	if e.modern {
		// The server asked as a session-based server does, by a request of
		// its own; the SDK got input requests and sent each call again.
		calls := 0
		for _, x := range rec.exchanges() {
			if x.mcpMethod == "tools/call" {
				calls++
			}
		}
		assert.Equal(t, 4, calls, "each call twice: input requests, then the answer")
	}
}

func TestGoSDK_subscribe(t *testing.T) { everywhere(t, testGoSDK_subscribe) }

func testGoSDK_subscribe(t *testing.T, e endpoint) {
	f := newFixture()
	updated := make(chan string, 16)
	cs := e.connect(t, f.Server, nil, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(ctx context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
	})
	ctx := testCtx(t)
	// The SDK's Subscribe may return before its listen stream is open in
	// 2026-07-28: the server says when the subscription reaches it.
	require.NoError(t, cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "test://one"}))
	assert.Equal(t, "test://one", recv(t, f.subscribed))
	f.ResourceUpdated(ctx, "test://one")
	f.ResourceUpdated(ctx, "test://two") // not subscribed
	assert.Equal(t, "test://one", recv(t, updated), "on the GET stream, or the listen stream")

	require.NoError(t, cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: "test://one"}))
	assert.Equal(t, "-test://one", recv(t, f.subscribed))
	f.ResourceUpdated(ctx, "test://one")
	f.ResourceUpdated(ctx, "test://three")
	require.NoError(t, cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "test://three"}))
	assert.Equal(t, "test://three", recv(t, f.subscribed))
	f.ResourceUpdated(ctx, "test://three")
	assert.Equal(t, "test://three", recv(t, updated), "nothing about test://one after unsubscribing")
}

func TestGoSDK_listChanged(t *testing.T) { everywhere(t, testGoSDK_listChanged) }

func testGoSDK_listChanged(t *testing.T, e endpoint) {
	f := newFixture()
	changed := make(chan struct{}, 16)
	cs := e.connect(t, f.Server, nil, &sdk.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, req *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	})
	f.AddTool(&mcp.Tool{Name: "late", Description: "added later"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("late")}}, nil
	})
	recv(t, changed)
	res, err := cs.CallTool(testCtx(t), &sdk.CallToolParams{Name: "late"})
	require.NoError(t, err)
	assert.Equal(t, "late", res.Content[0].(*sdk.TextContent).Text)
}

// TestGoSDK_close checks that closing the SDK's session DELETEs it: the
// server's session ends. In 2026-07-28 there is no session to delete: the
// SDK's listen streams end, and nothing else is sent.
func TestGoSDK_close(t *testing.T) { everywhere(t, testGoSDK_close) }

func testGoSDK_close(t *testing.T, e endpoint) {
	f := newFixture()
	rec := &recorder{}
	url, hc := e.url(t, f.Server, rec)
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-client", Version: "1.8.0"}, nil)
	cs, err := c.Connect(testCtx(t), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: e.version})
	require.NoError(t, err)
	require.NoError(t, cs.Close())
	if e.modern {
		for _, x := range rec.exchanges() {
			assert.NotEqual(t, http.MethodDelete, x.httpMethod, "nothing to delete")
		}
		return
	}
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(rec.exchanges(), func(e exchange) bool {
			return e.httpMethod == http.MethodDelete && e.status == http.StatusNoContent
		})
	}, wait, 5*time.Millisecond)
}

func bytesReader(b []byte) io.Reader { return &byteReader{b: b} }

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
