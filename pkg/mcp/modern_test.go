package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// rawPeer serves s on a pipe and returns a bare peer on its other end: it
// sends requests exactly as written, with no help from the Client, and
// queues the notifications it receives.
func rawPeer(t *testing.T, s *mcp.Server) (*peer.Peer, <-chan note) {
	t.Helper()
	serverEnd, clientEnd := peer.Pipe(64)
	ss := s.Serve(context.Background(), serverEnd)
	notes, on := notifications(t)
	p := peer.New(clientEnd, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.IsNotification() {
			on(req.Method, req.Params)
			return nil, nil
		}
		return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s", req.Method)
	})})
	p.Start(context.Background())
	t.Cleanup(func() {
		assert.NoError(t, p.Close())
		assert.NoError(t, ss.Wait(), "the session ends with its client")
	})
	return p, notes
}

// modern returns params (a JSON object) as a request of 2026-07-28 sends
// them: with the _meta triple, the capabilities being caps.
func modern(t *testing.T, params, caps string) json.RawMessage {
	t.Helper()
	obj, err := mcp.ParseObject(json.RawMessage(params))
	require.NoError(t, err)
	obj.SetMeta(mcp.MetaProtocolVersion, mcp.ModernVersion)
	obj.SetMeta(mcp.MetaClientCapabilities, json.RawMessage(caps))
	obj.SetMeta(mcp.MetaClientInfo, mcp.Implementation{Name: "raw", Version: "1"})
	return obj.Raw()
}

// rpcError returns err as a *jsonrpc.Error, failing when it is not one.
func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var e *jsonrpc.Error
	require.True(t, errors.As(err, &e), "want a *jsonrpc.Error, got %T: %v", err, err)
	return e
}

// modernServer is a server with one of everything.
func modernServer(opts *mcp.ServerOptions) *mcp.Server {
	s := mcp.NewServer(testInfo, opts)
	s.AddTool(echoTool("echo"))
	s.AddResource(&mcp.Resource{URI: "mem://a", Name: "a"}, readText("a"))
	s.AddPrompt(&mcp.Prompt{Name: "p"}, func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("hi")}}}, nil
	})
	return s
}

// TestServer_modernRequests checks how the server tells a request of
// 2026-07-28 from one of a session, and the order of its checks: the
// method, then the _meta, then the version.
func TestServer_modernRequests(t *testing.T) {
	t.Parallel()
	const noCaps = `{}`
	withMeta := func(meta string) json.RawMessage { return json.RawMessage(`{"_meta":` + meta + `}`) }
	pv := `"io.modelcontextprotocol/protocolVersion":`
	tests := []struct {
		name   string
		opts   *mcp.ServerOptions
		method string
		params json.RawMessage
		code   jsonrpc.Code
		data   string // the error's data, when it matters
	}{
		{name: "unknown method", method: "tools/frobnicate", params: modern(t, `{}`, noCaps), code: jsonrpc.CodeMethodNotFound},
		{name: "initialize is removed", method: mcp.MethodInitialize, params: modern(t, `{}`, noCaps), code: jsonrpc.CodeMethodNotFound},
		{name: "ping is removed", method: mcp.MethodPing, params: modern(t, `{}`, noCaps), code: jsonrpc.CodeMethodNotFound},
		{name: "logging/setLevel is removed", method: mcp.MethodLoggingSetLevel, params: modern(t, `{}`, noCaps), code: jsonrpc.CodeMethodNotFound},
		{name: "resources/subscribe is removed", method: mcp.MethodResourcesSubscribe, params: modern(t, `{}`, noCaps), code: jsonrpc.CodeMethodNotFound},
		{name: "resources/unsubscribe is removed", method: mcp.MethodResourcesUnsubscribe, params: modern(t, `{}`, noCaps), code: jsonrpc.CodeMethodNotFound},
		{name: "a method before its _meta", method: mcp.MethodPing, params: withMeta(`{` + pv + `"2026-07-28"}`), code: jsonrpc.CodeMethodNotFound},
		{name: "a method of a capability the server lacks", method: mcp.MethodCompletionComplete, params: modern(t, `{}`, noCaps), code: jsonrpc.CodeMethodNotFound},
		{name: "no capabilities", method: mcp.MethodToolsList, params: withMeta(`{` + pv + `"2026-07-28"}`), code: jsonrpc.CodeInvalidParams},
		{name: "capabilities not an object", method: mcp.MethodToolsList,
			params: withMeta(`{` + pv + `"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}`), code: jsonrpc.CodeInvalidParams},
		{name: "a bad log level", method: mcp.MethodToolsList,
			params: withMeta(`{` + pv + `"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}`),
			code:   jsonrpc.CodeInvalidParams},
		{name: "the _meta before the version", method: mcp.MethodToolsList, params: withMeta(`{` + pv + `"2099-01-01"}`), code: jsonrpc.CodeInvalidParams},
		{name: "an unknown version", method: mcp.MethodToolsList,
			params: withMeta(`{` + pv + `"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}`),
			code:   mcp.CodeUnsupportedProtocolVersion,
			data:   `{"requested":"2099-01-01","supported":["2024-11-05","2025-03-26","2025-06-18","2025-11-25","2026-07-28"]}`},
		{name: "a server of sessions only", opts: &mcp.ServerOptions{ProtocolVersions: []string{mcp.LatestVersion}},
			method: mcp.MethodServerDiscover, params: modern(t, `{}`, noCaps),
			code: mcp.CodeUnsupportedProtocolVersion, data: `{"requested":"2026-07-28","supported":["2025-11-25"]}`},
		{name: "discover without _meta, on a session", method: mcp.MethodServerDiscover, code: jsonrpc.CodeMethodNotFound},
		{name: "listen without _meta, on a session", method: mcp.MethodSubscriptionsListen, params: json.RawMessage(`{"notifications":{}}`),
			code: jsonrpc.CodeMethodNotFound},
		{name: "listen without a filter", method: mcp.MethodSubscriptionsListen, params: modern(t, `{}`, noCaps), code: jsonrpc.CodeInvalidParams},
		{name: "a 2026-07-28 server answers initialize", opts: &mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}},
			method: mcp.MethodInitialize, params: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`),
			code: jsonrpc.CodeMethodNotFound},
		{name: "a 2026-07-28 server takes every request for one of its version", opts: &mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}},
			method: mcp.MethodToolsList, code: jsonrpc.CodeInvalidParams},
		{name: "an unknown resource", method: mcp.MethodResourcesRead, params: modern(t, `{"uri":"mem://nope"}`, noCaps),
			code: jsonrpc.CodeInvalidParams, data: `{"uri":"mem://nope"}`},
		{name: "an unknown tool", method: mcp.MethodToolsCall, params: modern(t, `{"name":"nope"}`, noCaps), code: jsonrpc.CodeInvalidParams},
		{name: "inputResponses not an object", method: mcp.MethodToolsCall, params: modern(t, `{"name":"echo","inputResponses":5}`, noCaps),
			code: jsonrpc.CodeInvalidParams},
		{name: "requestState not a string", method: mcp.MethodPromptsGet, params: modern(t, `{"name":"p","requestState":{}}`, noCaps),
			code: jsonrpc.CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, _ := rawPeer(t, modernServer(tt.opts))
			err := p.Call(testCtx(t), tt.method, tt.params, nil)
			e := rpcError(t, err)
			assert.Equal(t, tt.code, e.Code, "%v", err)
			if tt.data != "" {
				assert.JSONEq(t, tt.data, string(e.Data))
			}
		})
	}
}

// TestServer_modernResults checks what every result of 2026-07-28 carries:
// resultType, the server's name, and cache hints on lists, reads and
// discover.
func TestServer_modernResults(t *testing.T) {
	t.Parallel()
	type hints struct {
		ResultType string                     `json:"resultType"`
		TTLMs      *int64                     `json:"ttlMs"`
		CacheScope string                     `json:"cacheScope"`
		Meta       map[string]json.RawMessage `json:"_meta"`
	}
	ttl := func(n int64) *int64 { return &n }
	tests := []struct {
		method, params string
		ttl            *int64
		scope          string
	}{
		{mcp.MethodServerDiscover, `{}`, ttl(1500), mcp.CachePublic},
		{mcp.MethodToolsList, `{}`, ttl(1500), mcp.CachePublic},
		{mcp.MethodResourcesList, `{}`, ttl(1500), mcp.CachePublic},
		{mcp.MethodResourcesTemplatesList, `{}`, ttl(1500), mcp.CachePublic},
		{mcp.MethodPromptsList, `{}`, ttl(1500), mcp.CachePublic},
		{mcp.MethodResourcesRead, `{"uri":"mem://a"}`, ttl(1500), mcp.CachePrivate},
		{mcp.MethodToolsCall, `{"name":"echo"}`, nil, ""},
		{mcp.MethodPromptsGet, `{"name":"p"}`, nil, ""},
	}
	p, _ := rawPeer(t, modernServer(&mcp.ServerOptions{CacheTTL: 1500 * time.Millisecond, Instructions: "be kind"}))
	for _, tt := range tests {
		var raw json.RawMessage
		require.NoError(t, p.Call(testCtx(t), tt.method, modern(t, tt.params, `{}`), &raw), tt.method)
		var h hints
		require.NoError(t, json.Unmarshal(raw, &h))
		assert.Equal(t, mcp.ResultComplete, h.ResultType, tt.method)
		assert.Equal(t, tt.ttl, h.TTLMs, tt.method)
		assert.Equal(t, tt.scope, h.CacheScope, tt.method)
		assert.JSONEq(t, `{"name":"test-server","version":"1.2.3"}`, string(h.Meta[mcp.MetaServerInfo]), tt.method)
	}

	var d mcp.DiscoverResult
	require.NoError(t, p.Call(testCtx(t), mcp.MethodServerDiscover, modern(t, `{}`, `{}`), &d))
	assert.Equal(t, mcp.AllVersions, d.SupportedVersions)
	assert.Equal(t, "be kind", d.Instructions)
	assert.NotNil(t, d.Capabilities.Tools)
	assert.NotNil(t, d.Capabilities.Prompts)
}

// askingTool asks for a name by elicitation and a sample, then greets.
func askingTool(s *mcp.Server, rounds *atomic.Int32) {
	s.AddTool(&mcp.Tool{Name: "greet"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		rounds.Add(1)
		form, named := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name")
		msg, sampled := mcp.InputResponse[mcp.CreateMessageResult](req.InputResponses, "word")
		if !named || !sampled || req.RequestState != "asked" {
			return &mcp.CallToolResult{RequestState: "asked", InputRequests: map[string]mcp.InputRequest{
				"name": mcp.ElicitInput(&mcp.ElicitParams{Message: "Your name?", RequestedSchema: mcp.SchemaFor[struct {
					Name string `json:"name"`
				}]()}),
				"word": mcp.SamplingInput(&mcp.CreateMessageParams{MaxTokens: 5,
					Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("a greeting?")}}}),
			}}, nil
		}
		return textResult(fmt.Sprintf("%s, %v!", msg.Content.Text, form.Content["name"])), nil
	})
}

// TestServer_inputRequired runs a tool that asks for input, for a client of
// 2026-07-28 by hand: it gets an InputRequiredResult, retries with the
// answers and the state, and gets the result.
func TestServer_inputRequired(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	var rounds atomic.Int32
	askingTool(s, &rounds)
	p, _ := rawPeer(t, s)
	ctx := testCtx(t)
	const caps = `{"sampling":{},"elicitation":{}}`

	var ir mcp.InputRequiredResult
	require.NoError(t, p.Call(ctx, mcp.MethodToolsCall, modern(t, `{"name":"greet"}`, caps), &ir))
	assert.Equal(t, mcp.ResultInputRequired, ir.ResultType)
	assert.Equal(t, "asked", ir.RequestState)
	require.Len(t, ir.InputRequests, 2)
	assert.Equal(t, mcp.MethodElicitationCreate, ir.InputRequests["name"].Method)
	assert.Equal(t, mcp.MethodSamplingCreateMessage, ir.InputRequests["word"].Method)

	retry := modern(t, `{"name":"greet","requestState":"asked","inputResponses":{`+
		`"name":{"action":"accept","content":{"name":"Ada"}},`+
		`"word":{"role":"assistant","content":{"type":"text","text":"Hello"},"model":"m"},`+
		`"extra":{"action":"accept","content":{}}}}`, caps)
	var raw json.RawMessage
	require.NoError(t, p.Call(ctx, mcp.MethodToolsCall, retry, &raw))
	assert.Equal(t, mcp.ResultComplete, mcp.ResultTypeOf(raw))
	var res mcp.CallToolResult
	require.NoError(t, json.Unmarshal(raw, &res))
	assert.Equal(t, "Hello, Ada!", text(&res))
	assert.Equal(t, int32(2), rounds.Load(), "one round each: the server keeps nothing")

	err := p.Call(ctx, mcp.MethodToolsCall, modern(t, `{"name":"greet"}`, `{"elicitation":{}}`), nil)
	e := rpcError(t, err)
	assert.Equal(t, mcp.CodeMissingClientCapability, e.Code, "input the request's client cannot give: %v", err)
	assert.JSONEq(t, `{"requiredCapabilities":{"sampling":{}}}`, string(e.Data))
}

// TestServer_inputRequests checks the rules of input requests, for prompts
// and reads as for tools, in both eras.
func TestServer_inputRequests(t *testing.T) {
	t.Parallel()
	both := &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("x")},
		InputRequests: map[string]mcp.InputRequest{"r": mcp.RootsInput()}}
	urlForm := mcp.ElicitInput(&mcp.ElicitParams{Mode: "url", Message: "go there", URL: "https://example.com"})
	s := mcp.NewServer(testInfo, nil)
	s.AddTool(&mcp.Tool{Name: "both"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return both, nil
	})
	s.AddTool(&mcp.Tool{Name: "url"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"u": urlForm}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "bogus"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"x": {Method: mcp.MethodToolsList}}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "forever"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"r": mcp.RootsInput()}}, nil
	})
	s.AddTool(&mcp.Tool{Name: "blocking"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		_, e1 := req.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1})
		_, e2 := req.Elicit(ctx, &mcp.ElicitParams{Message: "?"})
		_, e3 := req.ListRoots(ctx)
		return textResult(fmt.Sprint(errors.Is(e1, mcp.ErrNoServerRequests), errors.Is(e2, mcp.ErrNoServerRequests),
			errors.Is(e3, mcp.ErrNoServerRequests))), nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "ctx"}, func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
		if r, ok := mcp.InputResponse[mcp.ListRootsResult](req.InputResponses, "roots"); ok {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: mcp.TextContent(r.Roots[0].URI)}}}, nil
		}
		return &mcp.GetPromptResult{InputRequests: map[string]mcp.InputRequest{"roots": mcp.RootsInput()}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "mem://secret", Name: "secret"}, func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		if f, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "ok"); ok && f.Action == "accept" {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "granted"}}}, nil
		}
		return &mcp.ReadResourceResult{InputRequests: map[string]mcp.InputRequest{"ok": mcp.ElicitInput(&mcp.ElicitParams{Message: "May I?"})}}, nil
	})
	const all = `{"sampling":{},"elicitation":{},"roots":{}}`
	p, _ := rawPeer(t, s)
	ctx := testCtx(t)
	call := func(method, params, caps string) (json.RawMessage, error) {
		var raw json.RawMessage
		err := p.Call(ctx, method, modern(t, params, caps), &raw)
		return raw, err
	}

	_, err := call(mcp.MethodToolsCall, `{"name":"both"}`, all)
	assert.Equal(t, jsonrpc.CodeInternalError, rpcError(t, err).Code, "content and input requests at once: %v", err)
	_, err = call(mcp.MethodToolsCall, `{"name":"url"}`, all)
	assert.Equal(t, mcp.CodeMissingClientCapability, rpcError(t, err).Code, "url mode needs elicitation.url: %v", err)
	raw, err := call(mcp.MethodToolsCall, `{"name":"url"}`, `{"elicitation":{"url":{}}}`)
	require.NoError(t, err)
	assert.Equal(t, mcp.ResultInputRequired, mcp.ResultTypeOf(raw))
	_, err = call(mcp.MethodToolsCall, `{"name":"bogus"}`, all)
	assert.Equal(t, jsonrpc.CodeInternalError, rpcError(t, err).Code, "no client answers tools/list: %v", err)
	raw, err = call(mcp.MethodToolsCall, `{"name":"blocking"}`, all)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "true true true", "the blocking helpers refuse a request of 2026-07-28 without a session")

	raw, err = call(mcp.MethodPromptsGet, `{"name":"ctx"}`, all)
	require.NoError(t, err)
	assert.JSONEq(t, `{"resultType":"input_required","inputRequests":{"roots":{"method":"roots/list","params":{}}},`+
		`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"test-server","version":"1.2.3"}}}`, string(raw))
	raw, err = call(mcp.MethodPromptsGet, `{"name":"ctx","inputResponses":{"roots":{"roots":[{"uri":"file:///w"}]}}}`, all)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "file:///w")

	raw, err = call(mcp.MethodResourcesRead, `{"uri":"mem://secret"}`, all)
	require.NoError(t, err)
	assert.Equal(t, mcp.ResultInputRequired, mcp.ResultTypeOf(raw))
	assert.NotContains(t, string(raw), "ttlMs", "an input_required result is not cacheable")
	raw, err = call(mcp.MethodResourcesRead, `{"uri":"mem://secret","inputResponses":{"ok":{"action":"accept"}}}`, all)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "granted")

	// A client that also opened a session (the hub, forwarding a modern
	// client's call to a server it initialized) has one to send on.
	p2, _ := rawPeer(t, s)
	require.NoError(t, p2.Call(ctx, mcp.MethodInitialize, &mcp.InitializeParams{ProtocolVersion: mcp.LatestVersion}, nil))
	raw = nil
	require.NoError(t, p2.Call(ctx, mcp.MethodToolsCall, modern(t, `{"name":"blocking"}`, all), &raw))
	assert.Contains(t, string(raw), "false false false", "the helpers sent their requests (which this peer refuses)")

	// The same handlers, for a client of a session: the server asks it.
	var asked atomic.Int32
	c, _ := connect(t, s, &mcp.ClientOptions{
		Roots: func(ctx context.Context) ([]mcp.Root, error) {
			asked.Add(1)
			return []mcp.Root{{URI: "file:///legacy"}}, nil
		},
	})
	pr, err := c.GetPrompt(ctx, "ctx", nil)
	require.NoError(t, err)
	require.Len(t, pr.Messages, 1)
	assert.Equal(t, "file:///legacy", pr.Messages[0].Content.Text)
	_, err = c.ReadResource(ctx, "mem://secret")
	assert.Equal(t, mcp.CodeMissingClientCapability, rpcCode(t, err), "a session's client without elicitation")
	asked.Store(0)
	_, err = c.CallTool(ctx, "forever", nil, nil)
	assert.Equal(t, jsonrpc.CodeInternalError, rpcCode(t, err), "a handler that never stops asking")
	assert.Equal(t, int32(9), asked.Load(), "asked for as many rounds as the bound allows")
}

// TestServer_inputForASession runs the same asking tool for a client of a
// session: the Server asks the client itself (each request naming the
// call), both at once, and calls the handler again with the answers.
func TestServer_inputForASession(t *testing.T) {
	t.Parallel()
	s := mcp.NewServer(testInfo, nil)
	var rounds atomic.Int32
	askingTool(s, &rounds)
	both := make(chan struct{})
	var waiting atomic.Int32
	meet := func() { // each handler waits for the other: they run at once
		if waiting.Add(1) == 2 {
			close(both)
		}
		<-both
	}
	related := make(chan any, 2)
	c, _ := connect(t, s, &mcp.ClientOptions{
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			related <- p.Meta[mcp.MetaRelatedRequest]
			meet()
			return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("Hi"), Model: "m"}, nil
		},
		Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			related <- p.Meta[mcp.MetaRelatedRequest]
			meet()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Grace"}}, nil
		},
	})
	id := c.Peer().NextID()
	var res mcp.CallToolResult
	require.NoError(t, c.Peer().CallID(testCtx(t), id, mcp.MethodToolsCall, &mcp.CallToolParams{Name: "greet"}, &res))
	assert.Equal(t, "Hi, Grace!", text(&res))
	assert.Equal(t, int32(2), rounds.Load())
	for range 2 {
		assert.EqualValues(t, id.String(), fmt.Sprint(recv(t, related)), "each request names the call")
	}
}

// TestServer_listen checks subscriptions/listen by hand: the
// acknowledgement first, with what the server honours; then only what the
// stream asked for, tagged with its id; nothing once cancelled.
func TestServer_listen(t *testing.T) {
	t.Parallel()
	s := modernServer(nil)
	p, notes := rawPeer(t, s)
	ctx := testCtx(t)

	type tagged struct {
		Notifications mcp.SubscriptionFilter `json:"notifications"`
		URI           string                 `json:"uri"`
		Meta          map[string]any         `json:"_meta"`
	}
	next := func() (string, tagged) {
		t.Helper()
		n := recv(t, notes)
		var v tagged
		require.NoError(t, json.Unmarshal(n.params, &v), n.params)
		return n.method, v
	}
	listen := func(filter string) (jsonrpc.ID, <-chan error) {
		id := p.NextID()
		done := make(chan error, 1)
		params := modern(t, `{"notifications":`+filter+`}`, `{}`)
		go func() { done <- p.CallID(ctx, id, mcp.MethodSubscriptionsListen, params, nil) }()
		return id, done
	}

	id, done := listen(`{"toolsListChanged":true,"resourceSubscriptions":["mem://a","mem://a","mem://b"],"unknownKind":true}`)
	method, ack := next()
	require.Equal(t, mcp.NotificationSubscriptionsAcknowledged, method)
	assert.Equal(t, mcp.SubscriptionFilter{ToolsListChanged: true, ResourceSubscriptions: []string{"mem://a", "mem://b"}}, ack.Notifications)
	assert.EqualValues(t, id.String(), fmt.Sprint(ack.Meta[mcp.MetaSubscriptionID]), "tagged with the listen request's id")

	s.AddPrompt(&mcp.Prompt{Name: "q"}, nil) // not asked for
	s.AddTool(echoTool("more"))
	s.ResourceUpdated(ctx, "mem://c") // not asked for
	s.ResourceUpdated(ctx, "mem://b")
	method, v := next()
	assert.Equal(t, mcp.NotificationToolsListChanged, method, "the prompt change is not sent")
	assert.EqualValues(t, id.String(), fmt.Sprint(v.Meta[mcp.MetaSubscriptionID]))
	method, v = next()
	assert.Equal(t, mcp.NotificationResourceUpdated, method)
	assert.Equal(t, "mem://b", v.URI)
	assert.EqualValues(t, id.String(), fmt.Sprint(v.Meta[mcp.MetaSubscriptionID]))

	// A second stream, the barrier: notifications come in order.
	id2, done2 := listen(`{"promptsListChanged":true}`)
	method, v = next()
	require.Equal(t, mcp.NotificationSubscriptionsAcknowledged, method)
	assert.Equal(t, mcp.SubscriptionFilter{PromptsListChanged: true}, v.Notifications)

	require.NoError(t, p.Notify(ctx, mcp.NotificationCancelled, &mcp.CancelledParams{RequestID: id}))
	// The server reads in order: once a later request is answered, the
	// cancellation is done.
	require.NoError(t, p.Call(ctx, mcp.MethodToolsList, modern(t, `{}`, `{}`), nil))
	s.AddTool(echoTool("more")) // the first stream is gone: nothing
	s.AddPrompt(&mcp.Prompt{Name: "q"}, nil)
	method, v = next()
	assert.Equal(t, mcp.NotificationPromptsListChanged, method, "nothing for the cancelled stream")
	assert.EqualValues(t, id2.String(), fmt.Sprint(v.Meta[mcp.MetaSubscriptionID]))

	// A stream that asks for nothing the server offers ends at once.
	var res struct {
		ResultType string         `json:"resultType"`
		Meta       map[string]any `json:"_meta"`
	}
	require.NoError(t, p.Call(ctx, mcp.MethodSubscriptionsListen, modern(t, `{"notifications":{"unknownKind":true}}`, `{}`), &res))
	assert.Equal(t, mcp.ResultComplete, res.ResultType)
	assert.Contains(t, res.Meta, mcp.MetaSubscriptionID)
	method, v = next()
	assert.Equal(t, mcp.NotificationSubscriptionsAcknowledged, method, "acknowledged all the same")
	assert.Equal(t, mcp.SubscriptionFilter{}, v.Notifications)

	require.NoError(t, p.Notify(ctx, mcp.NotificationCancelled, &mcp.CancelledParams{RequestID: id2}))
	// A round trip after the cancellations: an answer to a cancelled
	// stream would have come before its answer.
	require.NoError(t, p.Call(ctx, mcp.MethodToolsList, modern(t, `{}`, `{}`), nil))
	select { // cancelled requests get no answer: the calls end with the test's context
	case err := <-done:
		t.Fatalf("a cancelled listen was answered: %v", err)
	case err := <-done2:
		t.Fatalf("a cancelled listen was answered: %v", err)
	default:
	}
}
