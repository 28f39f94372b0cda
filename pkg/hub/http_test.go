package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// httpClient connects an MCP client to url over Streamable HTTP, with a
// session.
func httpClient(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.Client {
	t.Helper()
	c, err := mcp.Connect(ctxFor(t), url, sessionOpts(opts))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestHTTP_aSessionIsASession runs everything a WebSocket client does over
// Streamable HTTP: the same session layer serves both.
func TestHTTP_aSessionIsASession(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	notes := newNotes()
	c := httpClient(t, th.srv.URL+"/mcp", &mcp.ClientOptions{
		OnNotification: notes.add,
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("sampled over HTTP")}, nil
		},
	})
	ctx := ctxFor(t)
	assert.Equal(t, "switchboard", c.InitializeResult().ServerInfo.Name)
	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.Len(t, tools, 5)

	res, err := c.CallTool(ctx, "demo__add", map[string]int{"a": 2, "b": 3}, nil)
	require.NoError(t, err)
	assert.Equal(t, "5", res.Content[0].Text)

	var steps atomic.Int64
	res, err = c.CallTool(ctx, "demo__slow", map[string]int{"steps": 3, "delayMs": 1},
		&mcp.CallOptions{Progress: func(*mcp.ProgressParams) { steps.Add(1) }})
	require.NoError(t, err)
	assert.Equal(t, "done after 3 steps", res.Content[0].Text)
	assert.Equal(t, int64(3), steps.Load(), "progress came on the call's stream")

	res, err = c.CallTool(ctx, "demo__ask", map[string]string{"question": "?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "sampled over HTTP", res.Content[0].Text, "the server's request reached the client and its answer came back")

	require.NoError(t, c.Subscribe(ctx, demo.CounterURI))
	_, err = c.CallTool(ctx, "demo__increment", nil, nil)
	require.NoError(t, err)
	notes.wait(t, mcp.NotificationResourceUpdated, 1, nil)

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(cctx, "demo__slow", map[string]int{"steps": 1000, "delayMs": 50}, &mcp.CallOptions{Progress: func(*mcp.ProgressParams) { cancel() }})
		errc <- err
	}()
	assert.ErrorIs(t, <-errc, context.Canceled)
	res, err = c.CallTool(ctx, "demo__echo", map[string]string{"text": "still here"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "still here", res.Content[0].Text)

	require.Equal(t, 1, th.streamable.Sessions())
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return th.streamable.Sessions() == 0 && len(th.sessionList()) == 0 }, wait, time.Millisecond,
		"DELETE ended the session")
}

// TestHTTP_perServerEndpoints: /servers/<name>/mcp is that server as if the
// client had connected to it directly, over both transports.
func TestHTTP_perServerEndpoints(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	other := mcp.NewServer(mcp.Implementation{Name: "other", Version: "2"}, nil)
	other.AddTool(&mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("other's echo")}}, nil
	})
	th.runServer(other, "other")
	for _, url := range []string{th.srv.URL + "/servers/demo/mcp", th.wsURL("/servers/demo/mcp")} {
		notes := newNotes()
		c := httpClient(t, url, &mcp.ClientOptions{OnNotification: notes.add})
		ctx := ctxFor(t)
		init := c.InitializeResult()
		assert.Equal(t, "demo", init.ServerInfo.Name, "%s: the server's own serverInfo", url)
		assert.NotNil(t, init.Capabilities.Tools)
		require.NotNil(t, init.Capabilities.Resources)
		tools, err := c.AllTools(ctx)
		require.NoError(t, err)
		var names []string
		for _, tool := range tools {
			names = append(names, tool.Name)
			assert.Empty(t, tool.Meta[mcp.MetaServer], "as the server sent it")
		}
		assert.Equal(t, []string{"add", "ask", "echo", "increment", "slow"}, names, "%s: its own names", url)
		res, err := c.CallTool(ctx, "echo", map[string]string{"text": "mine"}, nil)
		require.NoError(t, err)
		assert.Equal(t, "mine", res.Content[0].Text, "demo's echo, not other's")
		_, err = c.CallTool(ctx, "other__echo", nil, nil)
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err), "other servers are not here")
		resources, err := c.AllResources(ctx)
		require.NoError(t, err)
		for _, r := range resources {
			assert.False(t, strings.HasPrefix(r.URI, "switchboard://"), "the hub's own resources are not here")
		}
		read, err := c.ReadResource(ctx, "demo://greeting/ann")
		require.NoError(t, err)
		assert.Equal(t, "Hello, ann!", read.Contents[0].Text)
		_, err = c.ReadResource(ctx, "switchboard://servers")
		assert.Equal(t, mcp.CodeResourceNotFound, rpcCode(err))
		prompt, err := c.GetPrompt(ctx, "greet", map[string]string{"name": "x"})
		require.NoError(t, err)
		assert.NotEmpty(t, prompt.Messages)

		// Only its own server's list changes are news here.
		other.AddTool(&mcp.Tool{Name: fmt.Sprint("late", len(url))}, nil)
		th.waitFor("other's new tool", func(v *view) bool { return len(v.own["other"].lists[kindTools]) > 1 })
		assert.Zero(t, notes.count(mcp.NotificationToolsListChanged))
	}
	assert.Equal(t, http.StatusNotFound, dialStatus(t, th.wsURL("/servers/nobody/mcp"), nil))
	resp, err := http.Post(th.srv.URL+"/servers/nobody/mcp", "application/json", strings.NewReader(initializeBody))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// post sends one POST to the hub and returns its status and body.
func post(t *testing.T, url string, header http.Header, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, vs := range header {
		req.Header[k] = vs
	}
	return do(t, req)
}

// do sends req to the hub and returns the answer's status, header and body.
func do(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestHTTP_badInput: every way an HTTP request can be wrong gets its status,
// and the hub keeps serving everyone else.
func TestHTTP_badInput(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{MaxMessageBytes: 64 << 10})
	good := httpClient(t, th.srv.URL+"/mcp", &mcp.ClientOptions{HTTP: mcp.StreamableClientOptions{Header: bearer("alice-secret")}})
	mcpURL := th.srv.URL + "/mcp"
	status, hdr, body := post(t, mcpURL, bearer("alice-secret"), initializeBody)
	require.Equal(t, http.StatusOK, status, body)
	sid := http.Header{"Mcp-Session-Id": {hdr.Get("Mcp-Session-Id")}, "Authorization": {"Bearer alice-secret"}}
	require.NotEmpty(t, sid.Get("Mcp-Session-Id"))
	require.True(t, strings.HasPrefix(sid.Get("Mcp-Session-Id"), th.ID()+":"), "the session names its instance")

	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		status int
	}{
		{"no token", nil, initializeBody, http.StatusUnauthorized},
		{"unknown token", bearer("nope"), initializeBody, http.StatusUnauthorized},
		{"a server's token", bearer("weather-secret"), initializeBody, http.StatusForbidden},
		{"foreign origin", http.Header{"Authorization": {"Bearer alice-secret"}, "Origin": {"http://evil.example"}}, initializeBody, http.StatusForbidden},
		{"unknown session", http.Header{"Authorization": {"Bearer alice-secret"}, "Mcp-Session-Id": {th.ID() + ":00"}}, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, http.StatusNotFound},
		{"a session of another instance nobody knows", http.Header{"Authorization": {"Bearer alice-secret"}, "Mcp-Session-Id": {"gone-instance:00"}}, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, http.StatusNotFound},
		{"another token's session", http.Header{"Authorization": {"Bearer admin-secret"}, "Mcp-Session-Id": sid["Mcp-Session-Id"]}, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, http.StatusNotFound},
		{"no session", bearer("alice-secret"), `{"jsonrpc":"2.0","id":2,"method":"ping"}`, http.StatusBadRequest},
		{"malformed JSON", sid, `{"jsonrpc":`, http.StatusBadRequest},
		{"oversized body", sid, `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`, http.StatusRequestEntityTooLarge},
	} {
		status, _, body := post(t, mcpURL, tc.header, tc.body)
		assert.Equal(t, tc.status, status, "%s: %s", tc.name, body)
	}
	status, _, body = post(t, mcpURL, sid, `{"jsonrpc":`)
	require.Equal(t, http.StatusBadRequest, status)
	var resp struct {
		Error jsonrpc.Error `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	assert.Equal(t, jsonrpc.CodeParseError, resp.Error.Code)

	_, err := good.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "x"}, nil)
	require.NoError(t, err, "the well-behaved client kept working")
}

// roundRobin is a load balancer without affinity: each request goes to the
// next instance.
func roundRobin(t *testing.T, targets ...*testHub) *httptest.Server {
	var next atomic.Int64
	proxies := make([]*httputil.ReverseProxy, len(targets))
	for i, th := range targets {
		u, err := url.Parse(th.srv.URL)
		require.NoError(t, err)
		proxies[i] = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host },
			FlushInterval: -1}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[int(next.Add(1))%len(proxies)].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTP_noAffinity: behind a round-robin load balancer, a session opened
// on one instance is served wherever its requests land: the other instance
// relays them to the owner.
func TestHTTP_noAffinity(t *testing.T) {
	t.Parallel()
	_, hubs := startCluster(t, 2)
	a, b := hubs[0], hubs[1]
	b.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	a.waitServer("demo", 1)
	lb := roundRobin(t, a, b)
	notes := newNotes()
	c := httpClient(t, lb.URL+"/mcp", &mcp.ClientOptions{
		OnNotification: notes.add,
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("through the balancer")}, nil
		},
	})
	ctx := ctxFor(t)
	for i := range 6 {
		res, err := c.CallTool(ctx, "demo__echo", map[string]string{"text": fmt.Sprint(i)}, nil)
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, fmt.Sprint(i), res.Content[0].Text)
	}
	var steps atomic.Int64
	res, err := c.CallTool(ctx, "demo__slow", map[string]int{"steps": 3, "delayMs": 1},
		&mcp.CallOptions{Progress: func(*mcp.ProgressParams) { steps.Add(1) }})
	require.NoError(t, err)
	assert.Equal(t, "done after 3 steps", res.Content[0].Text)
	assert.Equal(t, int64(3), steps.Load())
	res, err = c.CallTool(ctx, "demo__ask", map[string]string{"question": "?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "through the balancer", res.Content[0].Text)
	require.NoError(t, c.Subscribe(ctx, demo.CounterURI))
	_, err = c.CallTool(ctx, "demo__increment", nil, nil)
	require.NoError(t, err)
	notes.wait(t, mcp.NotificationResourceUpdated, 1, nil)
	assert.Equal(t, 1, a.streamable.Sessions()+b.streamable.Sessions(), "one session, on one instance")
	owner, relay := a, b
	if b.streamable.Sessions() == 1 {
		owner, relay = b, a
	}
	assert.Positive(t, scrape(t, relay, `switchboard_http_relayed_total{side="sent"}`), "requests landed on the other instance")
	assert.Positive(t, scrape(t, owner, `switchboard_http_relayed_total{side="served"}`), "and its owner served them")
}

// TestHTTP_ownerDroppedForALagIsWaitedFor: an instance that dropped the
// owner of a session for a silence that was only a lag (its heartbeats
// judged missed under load) relays the session's next request once it
// hears the owner again, instead of answering 404, which would make the
// client give up a session that is alive. The session of an instance that
// left is still 404.
func TestHTTP_ownerDroppedForALagIsWaitedFor(t *testing.T) {
	t.Parallel()
	a, b := lagPair(t)
	s := openRawHTTP(t, a.srv.URL+"/mcp", nil)
	require.True(t, strings.HasPrefix(s.header.Get(mcp.HeaderSessionID), a.ID()+":"), "the session is A's")
	b.dropForALag(a)
	status, _, body := post(t, b.srv.URL+"/mcp", s.header, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	assert.Equal(t, http.StatusOK, status, "the request waited for A, alive, to be heard again: %s", body)
	assert.True(t, b.cluster.knows(a.ID()))

	// A leaves: its sessions are gone.
	a.Close()
	require.Eventually(t, func() bool { return !b.cluster.knows(a.ID()) }, wait, 10*time.Millisecond)
	status, _, body = post(t, b.srv.URL+"/mcp", s.header, `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	assert.Equal(t, http.StatusNotFound, status, body)
}

// TestHTTP_exchangesOutliveALag: what is under way with an instance when
// another drops it for a silence that was only a lag goes on: a request of
// a session relayed to its owner gets its answer, where it was a 502, and
// a call to a server on the dropped instance gets its result, where it
// failed ("instance left").
func TestHTTP_exchangesOutliveALag(t *testing.T) {
	t.Parallel()
	a, b := lagPair(t)
	started, release := make(chan struct{}, 2), make(chan struct{})
	a.runServer(slowServer(release, started), "w")
	b.waitServer("w", 1)

	session := openRawHTTP(t, a.srv.URL+"/mcp", nil)
	type answer struct {
		status int
		body   string
		err    error
	}
	relayed := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, b.srv.URL+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"w__slow","arguments":{}}}`))
		req.Header = session.header.Clone()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := scrapeClient.Do(req)
		if err != nil {
			relayed <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		relayed <- answer{status: resp.StatusCode, body: string(body), err: err}
	}()
	called := make(chan error, 1)
	c := b.client(nil)
	go func() {
		res, err := c.CallTool(ctxFor(t), "w__slow", map[string]any{}, nil)
		if err == nil && res.Content[0].Text != "slow and done" {
			err = fmt.Errorf("result %q", res.Content[0].Text)
		}
		called <- err
	}()
	within(t, started, "the first call at the server")
	within(t, started, "the second call at the server")

	b.dropForALag(a) // while both are under way
	close(release)
	got := within(t, relayed, "the relayed request's answer")
	require.NoError(t, got.err)
	assert.Equal(t, http.StatusOK, got.status, got.body)
	assert.Contains(t, got.body, "slow and done")
	assert.NoError(t, within(t, called, "the call's result"), "the call to A's server")
}
