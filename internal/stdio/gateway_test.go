package stdio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/internal/stdio"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 15 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

func testLogger(w io.Writer) *slog.Logger {
	if os.Getenv("SWITCHBOARD_TEST_LOG") != "" {
		w = io.MultiWriter(w, os.Stderr)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// logBuffer collects the gateway's messages for people.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) waitFor(t *testing.T, n int, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return l.count(s) >= n }, wait, 10*time.Millisecond, "never logged %q %d times:\n%s", s, n, l)
}

// proxy stands between the gateway and the hub, so that a test can cut
// the connection (as a hub restart or a network failure would) or refuse
// new ones.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	refuse  bool
	conns   map[net.Conn]bool
	accepts int
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.accepts++
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
			p.wg.Go(func() {
				_, _ = io.Copy(pair[0], pair[1])
				pair[0].Close()
				pair[1].Close()
			})
		}
	}
}

// cut drops every connection through the proxy.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) setRefuse(v bool) {
	p.mu.Lock()
	p.refuse = v
	p.mu.Unlock()
}

func (p *proxy) acceptCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

func (p *proxy) url(path string) string { return "ws://" + p.ln.Addr().String() + path }

// setup is a hub with the demo server on it, a proxy in front of it, and
// the gateway serving one end of a pipe.
type setup struct {
	hubURL string
	proxy  *proxy
	log    *logBuffer
	client peer.Conn // the client's end of the pipe
	done   chan error
}

func start(t *testing.T, cfg hub.Config, path string, header map[string][]string) *setup {
	t.Helper()
	cfg.Logger = testLogger(io.Discard)
	h, err := hub.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = h.NewHTTPServer()
	srv.Start()
	hubURL := "ws" + strings.TrimPrefix(srv.URL, "http")

	d := demo.New(&demo.Options{ClockInterval: time.Hour})
	demoCtx, stopDemo := context.WithCancel(context.Background())
	demoDone := make(chan struct{})
	go func() {
		defer close(demoDone)
		_ = d.Dial(demoCtx, hubURL+"/mcp/server", &mcp.DialOptions{Token: "server-token"})
	}()

	s := &setup{hubURL: hubURL, proxy: startProxy(t, srv.Listener.Addr().String()), log: &logBuffer{}, done: make(chan error, 1)}
	ours, theirs := peer.Pipe(64)
	s.client = theirs
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		s.done <- stdio.Serve(ctx, ours, &stdio.Options{
			URL: s.proxy.url(path), Header: header, Logger: testLogger(s.log),
			Retry: link.Retry{MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(wait):
			t.Error("Serve did not return")
		}
		stopDemo()
		<-demoDone
		srv.Close()
		require.NoError(t, h.Close())
	})
	return s
}

// connect initializes a Go MCP client through the gateway, with a session
// (initialize at mcp.LatestVersion unless opts name a version: pkg/mcp's
// client speaks 2026-07-28 first by default).
func (s *setup) connect(t *testing.T, opts *mcp.ClientOptions) *mcp.Client {
	t.Helper()
	o := mcp.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = mcp.LatestVersion
	}
	c, err := mcp.ConnectConn(ctxFor(t), s.client, &o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func waitTool(t *testing.T, c *mcp.Client, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		tools, err := c.AllTools(ctxFor(t))
		if err != nil {
			return false
		}
		for _, x := range tools {
			if x.Name == name {
				return true
			}
		}
		return false
	}, wait, 20*time.Millisecond, "tool %s never listed", name)
}

// notifications collects a client's notifications by method.
type notifications struct {
	mu sync.Mutex
	by map[string][]json.RawMessage
}

func (n *notifications) on(method string, params json.RawMessage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.by == nil {
		n.by = map[string][]json.RawMessage{}
	}
	n.by[method] = append(n.by[method], params)
}

func (n *notifications) count(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.by[method])
}

func sampler(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: mcp.TextContent("answer to " + p.Messages[0].Content.Text)}, nil
}

// TestServe_everythingPassesThrough: lists, a call with progress, a
// subscription, sampling answered by the client and logging, through the
// gateway.
func TestServe_everythingPassesThrough(t *testing.T) {
	s := start(t, hub.Config{}, "/mcp", nil)
	var notes notifications
	c := s.connect(t, &mcp.ClientOptions{Sampling: sampler, OnNotification: notes.on})
	waitTool(t, c, "demo__slow")
	ctx := ctxFor(t)

	var progress []float64
	res, err := c.CallTool(ctx, "demo__slow", map[string]int{"steps": 3, "delayMs": 5}, &mcp.CallOptions{
		Progress: func(p *mcp.ProgressParams) { progress = append(progress, p.Progress) }})
	require.NoError(t, err)
	assert.Equal(t, "done after 3 steps", res.Content[0].Text)
	assert.Equal(t, []float64{1, 2, 3}, progress)

	res, err = c.CallTool(ctx, "demo__ask", map[string]string{"question": "who?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "answer to who?", res.Content[0].Text, "the hub's sampling request reached the client through the gateway")

	require.NoError(t, c.Subscribe(ctx, demo.CounterURI))
	_, err = c.CallTool(ctx, "demo__increment", nil, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return notes.count(mcp.NotificationResourceUpdated) >= 1 }, wait, 10*time.Millisecond)
	assert.Contains(t, s.log.String(), "connected to the hub at "+s.proxy.url("/mcp"))
}

// TestServe_perServerView: with /servers/NAME/mcp, the client sees that
// server's own names.
func TestServe_perServerView(t *testing.T) {
	s := start(t, hub.Config{}, "/servers/demo/mcp", nil)
	c := s.connect(t, nil)
	waitTool(t, c, "echo")
	res, err := c.CallTool(ctxFor(t), "echo", map[string]string{"text": "own names"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "own names", res.Content[0].Text)
}

// TestServe_reconnectsAndRestoresTheSession: when the hub connection drops,
// calls in flight fail with -32000, the gateway reconnects by itself,
// replays initialize (the client hears nothing of it), the logging level
// and the subscriptions, and tells the client the lists may have changed.
func TestServe_reconnectsAndRestoresTheSession(t *testing.T) {
	s := start(t, hub.Config{}, "/mcp", nil)
	var notes notifications
	c := s.connect(t, &mcp.ClientOptions{Sampling: sampler, OnNotification: notes.on})
	waitTool(t, c, "demo__slow")
	ctx := ctxFor(t)
	require.NoError(t, c.Subscribe(ctx, demo.CounterURI))
	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelDebug))

	inFlight := make(chan error, 1)
	running := make(chan struct{}, 1)
	go func() {
		_, err := c.CallTool(ctx, "demo__slow", map[string]int{"steps": 1000, "delayMs": 10}, &mcp.CallOptions{
			Progress: func(*mcp.ProgressParams) {
				select {
				case running <- struct{}{}:
				default:
				}
			}})
		inFlight <- err
	}()
	select {
	case <-running: // the call is at the server
	case <-ctx.Done():
		t.Fatal("the call never started")
	}
	s.proxy.cut()
	select {
	case err := <-inFlight:
		require.Error(t, err)
		assert.Equal(t, mcp.CodeConnectionClosed, jsonrpc.CodeOf(err), "a call in flight fails with -32000: %v", err)
	case <-ctx.Done():
		t.Fatal("the call in flight never failed")
	}
	s.log.waitFor(t, 1, "lost the hub")
	s.log.waitFor(t, 1, "the client's session was restored on the hub")
	require.Eventually(t, func() bool { return notes.count(mcp.NotificationToolsListChanged) >= 1 }, wait, 10*time.Millisecond,
		"the client is told to list again")

	// The subscription was replayed: an update reaches the client.
	before := notes.count(mcp.NotificationResourceUpdated)
	res, err := c.CallTool(ctx, "demo__increment", nil, nil)
	require.NoError(t, err, "calls work on the new connection")
	assert.False(t, res.IsError)
	require.Eventually(t, func() bool { return notes.count(mcp.NotificationResourceUpdated) > before }, wait, 10*time.Millisecond,
		"the subscription was restored")
	res, err = c.CallTool(ctx, "demo__ask", map[string]string{"question": "again?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "answer to again?", res.Content[0].Text, "sampling works on the new connection")
}

// TestServe_waitsForTheHub: the client's initialize waits while the hub is
// unreachable, and is answered once it is reachable.
func TestServe_waitsForTheHub(t *testing.T) {
	st := start(t, hub.Config{}, "/mcp", nil)
	st.proxy.setRefuse(true)
	st.proxy.cut()
	type result struct {
		c   *mcp.Client
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := mcp.ConnectConn(ctxFor(t), st.client, &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion})
		got <- result{c, err}
	}()
	require.Eventually(t, func() bool { return st.proxy.acceptCount() >= 3 }, wait, 10*time.Millisecond, "the gateway retries")
	st.log.waitFor(t, 2, "retrying in")
	st.proxy.setRefuse(false)
	r := <-got
	require.NoError(t, r.err)
	defer r.c.Close()
	waitTool(t, r.c, "demo__echo")
}

// TestServe_refusedCredentials: a hub that refuses the token ends Serve
// with an error that says so, without the token.
func TestServe_refusedCredentials(t *testing.T) {
	file := t.TempDir() + "/tokens.yaml"
	require.NoError(t, os.WriteFile(file, []byte("tokens: [{name: s, token: server-token, roles: [server], servers: [demo]}]"), 0o600))
	tokens, err := hub.LoadTokens(file)
	require.NoError(t, err)
	s := start(t, hub.Config{Tokens: tokens}, "/mcp", map[string][]string{"Authorization": {"Bearer wrong-token"}})
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		require.Error(t, err)
		assert.True(t, link.Refused(err))
		assert.Contains(t, err.Error(), "401")
		assert.NotContains(t, err.Error(), "wrong-token")
	case <-time.After(wait):
		t.Fatal("Serve kept retrying refused credentials")
	}
	assert.Contains(t, s.log.String(), "giving up")
}

// TestServe_badInputFromTheClient: what is not JSON-RPC is answered by the
// gateway and the session goes on.
func TestServe_badInputFromTheClient(t *testing.T) {
	s := start(t, hub.Config{}, "/mcp", nil)
	ctx := ctxFor(t)
	for _, tc := range []struct {
		in   string
		code jsonrpc.Code
	}{
		{"this is not JSON", jsonrpc.CodeParseError},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"s\":\"\xff\"}}", jsonrpc.CodeParseError},
		{`{"jsonrpc":"1.0","id":7,"method":"ping"}`, jsonrpc.CodeInvalidRequest},
	} {
		require.NoError(t, s.client.Write(ctx, []byte(tc.in)))
		frame, err := s.client.Read(ctx)
		require.NoError(t, err)
		m, err := jsonrpc.DecodeMessage(frame)
		require.NoError(t, err, "%s", frame)
		resp, ok := m.(*jsonrpc.Response)
		require.True(t, ok, "%s", frame)
		require.NotNil(t, resp.Error, "%s", frame)
		assert.Equal(t, tc.code, resp.Error.Code, tc.in)
	}
	c := s.connect(t, nil)
	waitTool(t, c, "demo__echo")
}

// TestServe_hubCancelsItsRequest: a server that gives up on the sampling
// request it sent the client has the client's own request cancelled. The
// hub names it by the hub's id, the client knows it by the gateway's: after
// a reconnection the two no longer coincide (the hub counts from 1 on a new
// session, the gateway goes on), so the cancellation must be mapped.
func TestServe_hubCancelsItsRequest(t *testing.T) {
	s := start(t, hub.Config{}, "/mcp", nil)
	ctx := ctxFor(t)

	// A server whose tool asks the client to sample, then gives up when
	// the test says so.
	giveUp := make(chan struct{})
	// Of the session revisions: its tool blocks on CreateMessage.
	srv := mcp.NewServer(mcp.Implementation{Name: "hesitant", Version: "1"}, &mcp.ServerOptions{ProtocolVersions: mcp.SupportedVersions})
	mcp.AddTypedTool(srv, &mcp.Tool{Name: "hesitate"}, func(ctx context.Context, req *mcp.ToolRequest, _ struct{}) (*mcp.CallToolResult, error) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-giveUp:
				cancel()
			case <-sctx.Done():
			}
		}()
		_, err := req.CreateMessage(sctx, &mcp.CreateMessageParams{
			Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("never mind")}}, MaxTokens: 10})
		if err == nil {
			return nil, errors.New("the sampling request was answered, not cancelled")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("gave up")}}, nil
	})
	srvCtx, stopSrv := context.WithCancel(context.Background())
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		_ = srv.Dial(srvCtx, s.hubURL+"/mcp/server?name=hesitant", nil)
	}()
	t.Cleanup(func() { stopSrv(); <-srvDone })

	asked := make(chan struct{}, 1)
	cancelledAtClient := make(chan struct{})
	c := s.connect(t, &mcp.ClientOptions{Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		if p.Messages[0].Content.Text != "never mind" {
			return sampler(ctx, p)
		}
		asked <- struct{}{}
		<-ctx.Done() // only the client's cancellation of this very request ends it
		close(cancelledAtClient)
		return nil, ctx.Err()
	}})
	waitTool(t, c, "demo__ask")

	// One request of the hub's, then a new hub session.
	res, err := c.CallTool(ctx, "demo__ask", map[string]string{"question": "first"}, nil)
	require.NoError(t, err)
	require.Equal(t, "answer to first", res.Content[0].Text)
	s.proxy.cut()
	s.log.waitFor(t, 1, "the client's session was restored on the hub")
	waitTool(t, c, "hesitant__hesitate")

	called := make(chan error, 1)
	go func() {
		res, err := c.CallTool(ctx, "hesitant__hesitate", nil, nil)
		if err == nil && res.Content[0].Text != "gave up" {
			err = errors.New(res.Content[0].Text)
		}
		called <- err
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the sampling request never reached the client")
	}
	close(giveUp)
	select {
	case <-cancelledAtClient:
	case <-ctx.Done():
		t.Fatal("the client's sampling request was never cancelled: the cancellation did not name the client's id")
	}
	select {
	case err := <-called:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the call never ended")
	}
}
