package connect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// httpServer serves the demo server over Streamable HTTP (pkg/mcp's
// handler), and can be restarted: a new handler that knows none of the old
// sessions, as after a real restart.
type httpServer struct {
	srv     *httptest.Server
	demo    *demo.Server
	current atomic.Pointer[mcp.StreamableHandler]
	opened  atomic.Int32

	mu  sync.Mutex
	all []*mcp.StreamableHandler
}

func startHTTPServer(t *testing.T) *httpServer {
	hs := &httpServer{demo: demo.New(&demo.Options{Name: "remote", ClockInterval: time.Hour})}
	hs.restart()
	hs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.current.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		hs.srv.Close()
		hs.mu.Lock()
		defer hs.mu.Unlock()
		for _, h := range hs.all {
			h.Close()
		}
	})
	return hs
}

// restart swaps in a new handler and closes the old one with its sessions.
func (hs *httpServer) restart() {
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{Open: func(r *http.Request, s *mcp.StreamSession) error {
		hs.opened.Add(1)
		hs.demo.Serve(s.Context(), s.Conn())
		return nil
	}})
	hs.mu.Lock()
	hs.all = append(hs.all, h)
	hs.mu.Unlock()
	if old := hs.current.Swap(h); old != nil {
		old.Close()
	}
}

// TestRun_streamableHTTPUpstream: a server reached over Streamable HTTP is
// on the hub like a stdio one: calls, progress, sampling by the calling
// client; when the server forgets the session, the connector opens another.
func TestRun_streamableHTTPUpstream(t *testing.T) {
	th := startHub(t, hub.Config{})
	hs := startHTTPServer(t)
	r := runConnector(t, []connect.Server{{Name: "remote", Upstream: hs.srv.URL + "/mcp"}}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, &mcp.ClientOptions{
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: mcp.TextContent("sampled: " + p.Messages[0].Content.Text)}, nil
		},
	})
	waitTool(t, c, "remote__echo", true)
	ctx := ctxFor(t)
	call := func(tool string, args any, opts *mcp.CallOptions) *mcp.CallToolResult {
		t.Helper()
		res, err := c.CallTool(ctx, tool, args, opts)
		require.NoError(t, err, tool)
		return res
	}
	assert.Equal(t, "over HTTP", text(t, call("remote__echo", map[string]string{"text": "over HTTP"}, nil)))

	var progress []float64
	res := call("remote__slow", map[string]int{"steps": 3, "delayMs": 5}, &mcp.CallOptions{
		Progress: func(p *mcp.ProgressParams) { progress = append(progress, p.Progress) }})
	assert.Equal(t, "done after 3 steps", text(t, res))
	assert.Equal(t, []float64{1, 2, 3}, progress)
	assert.Equal(t, "sampled: why?", text(t, call("remote__ask", map[string]string{"question": "why?"}, nil)),
		"the server's sampling request crossed HTTP, the connector and the hub to the calling client")
	r.log.waitLog(t, 1, "upstream session opened", "transport=streamable-http")
	require.Equal(t, int32(1), hs.opened.Load())

	hs.restart() // the server forgets every session
	r.log.waitLog(t, 1, "the upstream session ended; opening a new one")
	r.log.waitLog(t, 2, "upstream session opened")
	require.Eventually(t, func() bool {
		res, err := c.CallTool(ctx, "remote__echo", map[string]string{"text": "again"}, nil)
		return err == nil && !res.IsError && res.Content[0].Text == "again"
	}, wait, 20*time.Millisecond, "the server is back on the hub through a new session")
	assert.Equal(t, int32(2), hs.opened.Load())
	assert.NotContains(t, r.log.String(), hs.srv.URL+"/mcp?", "no query in logs")
}

// modernOnly serves a server of the 2026-07-28 revision alone over HTTP: it
// refuses initialize with -32022, as the revision says, and answers
// server/discover and every request on POSTs of their own, without a
// session.
func modernOnly(t *testing.T) *httptest.Server { return modernOnlyWatched(t, nil) }

// modernOnlyWatched is modernOnly, telling seen of every request's headers.
func modernOnlyWatched(t *testing.T, seen func(http.Header)) *httptest.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "modern-only", Version: "1.0.0"},
		&mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}})
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Echo text."},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(args.Text)}}, nil
		})
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Stateless: func(r *http.Request, sess *mcp.StreamSession) error {
			s.Serve(sess.Context(), sess.Conn())
			return nil
		},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen(r.Header.Clone())
		}
		if r.Method == http.MethodPost && r.Header.Get(mcp.HeaderSessionID) == "" && r.Header.Get(mcp.HeaderMethod) == "" {
			body, _ := io.ReadAll(r.Body)
			if m, err := jsonrpc.DecodeMessage(body); err == nil {
				if req, ok := m.(*jsonrpc.Request); ok && req.Method == mcp.MethodInitialize {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					e := jsonrpc.NewError(mcp.CodeUnsupportedProtocolVersion, "unsupported protocol version").
						WithData(map[string]any{"supported": []string{mcp.ModernVersion}})
					w.Write((&jsonrpc.Response{ID: req.ID, Error: e}).Encode())
					return
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	return srv
}

// TestRun_modernUpstreamIsStarted: a server that speaks only 2026-07-28
// refuses initialize and answers server/discover; the connector counts the
// discovery as the start and keeps the session, call after call, well past
// its init timeout (it restarted the server every init timeout before).
func TestRun_modernUpstreamIsStarted(t *testing.T) {
	th := startHub(t, hub.Config{RateLimit: -1}) // it calls as fast as it can
	srv := modernOnly(t)
	const initTimeout = 200 * time.Millisecond
	r := runConnector(t, []connect.Server{{Name: "modern", Upstream: srv.URL + "/mcp"}},
		connect.Options{URL: th.url("/mcp/server"), InitTimeout: initTimeout})
	c := th.client(t, nil)
	waitTool(t, c, "modern__echo", true)

	ctx := ctxFor(t)
	calls := 0
	for start := time.Now(); time.Since(start) < 6*initTimeout; calls++ {
		res, err := c.CallTool(ctx, "modern__echo", map[string]string{"text": "still here"}, nil)
		require.NoError(t, err, "call %d", calls)
		require.Equal(t, "still here", text(t, res), "call %d", calls)
	}
	assert.Positive(t, calls)
	assert.Equal(t, 1, r.log.count("upstream session opened"), "one session all along; the log:\n%s", r.log)
	assert.Zero(t, r.log.count("did not answer initialize"), "the log:\n%s", r.log)
	assert.Equal(t, 1, r.log.count("the server answered the hub's server/discover", "server_info=modern-only"))
}

// TestRun_modernUpstreamOfVirtualServer: a 2026-07-28 server renamed by a
// virtual server of the catalog (SEP-2243): the client calls the alias, and
// the Mcp-Name header the server receives is its own name for the tool.
func TestRun_modernUpstreamOfVirtualServer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	require.NoError(t, os.WriteFile(file, []byte("virtualServers:\n  - name: curated\n    tools: [{server: modern, tool: echo, as: shout}]\n"), 0o644))
	th := startHub(t, hub.Config{CatalogFile: file})
	var mu sync.Mutex
	var names []string
	srv := modernOnlyWatched(t, func(h http.Header) {
		if h.Get(mcp.HeaderMethod) == mcp.MethodToolsCall {
			mu.Lock()
			names = append(names, h.Get(mcp.HeaderName))
			mu.Unlock()
		}
	})
	runConnector(t, []connect.Server{{Name: "modern", Upstream: srv.URL + "/mcp"}}, connect.Options{URL: th.url("/mcp/server")})
	waitTool(t, th.client(t, nil), "modern__echo", true)
	c, err := mcp.Connect(ctxFor(t), th.url("/servers/curated/mcp"), &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion})
	require.NoError(t, err)
	defer c.Close()
	res, err := c.CallTool(ctxFor(t), "shout", map[string]string{"text": "hi"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "hi", text(t, res))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"echo"}, names, "the server's own name in its Mcp-Name header")
}
