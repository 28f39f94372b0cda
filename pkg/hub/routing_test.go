package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

func TestHub_initialize(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	for _, tt := range []struct{ asked, want string }{
		{"2024-11-05", "2024-11-05"},
		{"2025-03-26", "2025-03-26"},
		{"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"},
		{"2099-01-01", "2025-11-25"},
		{"", "2025-11-25"},
	} {
		rc := th.rawClient(false)
		rc.send(`{"jsonrpc":"2.0","id":0,"method":"ping"}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":0,"result":{}}`, rc.recv(), "ping works before initialize")
		rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		resp := rc.recvResponse()
		require.NotNil(t, resp.Error)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, resp.Error.Code)
		assert.Contains(t, resp.Error.Message, "initialize")

		rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, tt.asked))
		resp = rc.recvResponse()
		require.Nil(t, resp.Error)
		var res mcp.InitializeResult
		require.NoError(t, json.Unmarshal(resp.Result, &res))
		assert.Equal(t, tt.want, res.ProtocolVersion, "asked %q", tt.asked)
		assert.Equal(t, "switchboard", res.ServerInfo.Name)
		require.NotNil(t, res.Capabilities.Resources)
		assert.True(t, res.Capabilities.Resources.Subscribe)
		assert.True(t, res.Capabilities.Resources.ListChanged)
		assert.NotNil(t, res.Capabilities.Tools)
		assert.NotNil(t, res.Capabilities.Prompts)
		assert.NotNil(t, res.Capabilities.Completions)
		assert.NotNil(t, res.Capabilities.Logging)

		rc.send(`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		resp = rc.recvResponse()
		require.NotNil(t, resp.Error, "a second initialize is refused")
		assert.Equal(t, jsonrpc.CodeInvalidRequest, resp.Error.Code)
	}
}

func TestHub_aggregatesAndRoutes(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(nil).Server, "")
	c := th.client(nil)
	ctx := ctxFor(t)

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		assert.Equal(t, "demo", tool.Meta[mcp.MetaServer])
	}
	assert.Equal(t, []string{"demo__add", "demo__ask", "demo__echo", "demo__increment", "demo__slow"}, names)

	res, err := c.CallTool(ctx, "demo__add", map[string]any{"a": 2, "b": 40}, nil)
	require.NoError(t, err)
	assert.Equal(t, "42", res.Content[0].Text)
	assert.Equal(t, map[string]any{"sum": 42.0}, res.StructuredContent)

	_, err = c.CallTool(ctx, "demo__nope", nil, nil)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err))
	assert.ErrorContains(t, err, `unknown tool "demo__nope"`)
	_, err = c.CallTool(ctx, "nosuchserver__echo", nil, nil)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err))

	resources, err := c.AllResources(ctx)
	require.NoError(t, err)
	var uris []string
	for _, r := range resources {
		uris = append(uris, r.URI)
	}
	assert.Equal(t, []string{"demo://clock", "demo://counter", "switchboard://calls", "switchboard://catalog", "switchboard://clients", "switchboard://instances",
		"switchboard://servers", "switchboard://stats"}, uris)
	templates, err := c.AllResourceTemplates(ctx)
	require.NoError(t, err)
	require.Len(t, templates, 1)
	assert.Equal(t, "demo://greeting/{name}", templates[0].URITemplate)

	read, err := c.ReadResource(ctx, "demo://greeting/ada")
	require.NoError(t, err, "a URI matching a template reaches its server")
	assert.Equal(t, "Hello, ada!", read.Contents[0].Text)
	_, err = c.ReadResource(ctx, "nowhere://x")
	assert.Equal(t, mcp.CodeResourceNotFound, rpcCode(err))

	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	require.Len(t, prompts, 1)
	assert.Equal(t, "demo__greet", prompts[0].Name)
	got, err := c.GetPrompt(ctx, "demo__greet", map[string]string{"name": "Ada", "style": "formal"})
	require.NoError(t, err)
	assert.Equal(t, "Write a formal greeting for Ada.", got.Messages[0].Content.Text)

	comp, err := c.Complete(ctx, &mcp.CompleteParams{Ref: mcp.CompleteRef{Type: "ref/prompt", Name: "demo__greet"},
		Argument: mcp.CompleteArgument{Name: "style", Value: "fo"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"formal"}, comp.Completion.Values)
	comp, err = c.Complete(ctx, &mcp.CompleteParams{Ref: mcp.CompleteRef{Type: "ref/resource", URI: "demo://greeting/{name}"},
		Argument: mcp.CompleteArgument{Name: "style", Value: "c"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"casual"}, comp.Completion.Values)
}

func TestHub_pagination(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{PageSize: 3})
	for i := range 3 {
		s := mcp.NewServer(mcp.Implementation{Name: "s", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
		for j := range 4 {
			s.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", j)}, nil)
		}
		th.runServer(s, fmt.Sprintf("srv%d", i))
	}
	c := th.client(nil)
	ctx := ctxFor(t)
	var names []string
	cursor := ""
	pages := 0
	for {
		page, err := c.ListTools(ctx, cursor)
		require.NoError(t, err)
		pages++
		assert.LessOrEqual(t, len(page.Tools), 3)
		for _, tool := range page.Tools {
			names = append(names, tool.Name)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	assert.Equal(t, 4, pages)
	assert.Len(t, names, 12, "the hub read every page of every server (2 per page) and served 3 per page")
	assert.Equal(t, "srv0__t0", names[0])
	assert.Equal(t, "srv2__t3", names[11])

	_, err := c.ListTools(ctx, "!!not-a-cursor!!")
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err))
}

// TestHub_sameIDsFromTwoClients has two clients use the same request ids at
// the same time against the same server: every answer reaches its own
// client.
func TestHub_sameIDsFromTwoClients(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(nil).Server, "")
	a, b := th.rawClient(true), th.rawClient(true)
	const n = 50
	var wg sync.WaitGroup
	for _, c := range []struct {
		rc   *rawClient
		name string
	}{{a, "A"}, {b, "B"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				c.rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"%s-%d"}}}`, i, c.name, i))
			}
		}()
	}
	wg.Wait()
	for _, c := range []struct {
		rc   *rawClient
		name string
	}{{a, "A"}, {b, "B"}} {
		seen := map[int64]bool{}
		for range n {
			resp := c.rc.recvResponse()
			require.Nil(t, resp.Error)
			id, ok := resp.ID.Int64()
			require.True(t, ok)
			var res mcp.CallToolResult
			require.NoError(t, json.Unmarshal(resp.Result, &res))
			assert.Equal(t, fmt.Sprintf("%s-%d", c.name, id), res.Content[0].Text, "an answer crossed to the wrong client")
			seen[id] = true
		}
		assert.Len(t, seen, n)
	}
}

func TestHub_preservesUnknownFields(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := sessionServer("raw", nil)
	const NAME = "raw"
	s.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object","x-custom":{"deep":[1,2]}}`),
		Annotations: map[string]any{"readOnlyHint": true}, Meta: mcp.Meta{"vendor/key": "v"}},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprint(args["future"]))}, Meta: mcp.Meta{"vendor/result": 7}}, nil
		})
	th.runServer(s, NAME)
	rc := th.rawClient(true)
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	resp := rc.recvResponse()
	assert.JSONEq(t, `{"tools":[{"name":"raw__t","inputSchema":{"type":"object","x-custom":{"deep":[1,2]}},
		"annotations":{"readOnlyHint":true},"_meta":{"vendor/key":"v","switchboard/server":"raw"}}]}`, string(resp.Result))

	rc.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"raw__t","arguments":{"future":"kept"},"futureField":1}}`)
	resp = rc.recvResponse()
	assert.JSONEq(t, `{"content":[{"type":"text","text":"kept"}],"_meta":{"vendor/result":7}}`, string(resp.Result))
}

func TestHub_progressTokensAreRewritten(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	seen := make(chan string, 2)
	s := mcp.NewServer(mcp.Implementation{Name: "p", Version: "1"}, nil)
	const NAME = "p"
	s.AddTool(&mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		o, _ := mcp.ParseObject(json.RawMessage(mustJSON(req.Params.Meta)))
		seen <- string(o["progressToken"])
		for i := 1; i <= 3; i++ {
			require.NoError(t, req.Progress(ctx, float64(i), 3, fmt.Sprintf("step %d", i)))
		}
		return &mcp.CallToolResult{}, nil
	})
	th.runServer(s, NAME)
	a, b := th.rawClient(true), th.rawClient(true)
	// Both clients use the same token; the server must see two different
	// ones. The second spells the key with an escape: it is the same key.
	a.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p__work","_meta":{"progressToken":"tok"}}}`)
	b.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p__work","\u005fmeta":{"progressToken":"tok"}}}`)
	for _, rc := range []*rawClient{a, b} {
		var progress []string
		for {
			m, err := jsonrpc.DecodeMessage([]byte(rc.recv()))
			require.NoError(t, err)
			if req, ok := m.(*jsonrpc.Request); ok {
				require.Equal(t, mcp.NotificationProgress, req.Method)
				var p mcp.ProgressParams
				require.NoError(t, json.Unmarshal(req.Params, &p))
				assert.Equal(t, "tok", p.ProgressToken, "the client gets its own token back")
				progress = append(progress, p.Message)
				continue
			}
			break // the response: after every progress report
		}
		assert.Equal(t, []string{"step 1", "step 2", "step 3"}, progress)
	}
	t1, t2 := <-seen, <-seen
	assert.NotEqual(t, t1, t2, "two clients' tokens never collide at the server")
	assert.NotContains(t, t1, "tok")
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// blocker is a server whose tool "block" waits until cancelled, recording
// what the hub told it.
type blocker struct {
	*mcp.Server
	started   chan jsonrpc.ID
	cancelled chan error
}

func newBlocker(name string) *blocker {
	b := &blocker{
		Server:    mcp.NewServer(mcp.Implementation{Name: name, Version: "1"}, nil),
		started:   make(chan jsonrpc.ID, 16),
		cancelled: make(chan error, 16),
	}
	b.AddTool(&mcp.Tool{Name: "block"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		b.started <- req.ID
		<-ctx.Done()
		b.cancelled <- ctx.Err()
		return nil, ctx.Err()
	})
	return b
}

func TestHub_clientCancelReachesServer(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	b := newBlocker("b")
	th.runServer(b.Server, "b")
	c := th.client(nil)
	ctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "b__block", nil, nil)
		errc <- err
	}()
	<-b.started
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	select {
	case err := <-b.cancelled:
		assert.ErrorIs(t, err, context.Canceled, "the server's handler was cancelled by notifications/cancelled")
	case <-time.After(wait):
		t.Fatal("the server never heard of the cancellation")
	}
	// The hub keeps serving the client.
	require.NoError(t, c.Ping(ctxFor(t)))
}

func TestHub_timeout(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CallTimeout: 200 * time.Millisecond})
	b := newBlocker("b")
	th.runServer(b.Server, "b")
	c := th.client(nil)
	start := time.Now()
	_, err := c.CallTool(ctxFor(t), "b__block", nil, nil)
	assert.Equal(t, mcp.CodeRequestTimeout, rpcCode(err), "got %v", err)
	assert.Less(t, time.Since(start), 5*time.Second)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.JSONEq(t, `{"server":"b","timeoutMs":200}`, string(rpcErr.Data))
	select {
	case <-b.cancelled:
	case <-time.After(wait):
		t.Fatal("the timed-out call was not cancelled upstream")
	}
}

func TestHub_serverDeathFailsCallsAtOnce(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	b := newBlocker("b")
	stop := th.runServer(b.Server, "b")
	notes := newNotes()
	c := th.client(&mcp.ClientOptions{OnNotification: notes.add})
	errc := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctxFor(t), "b__block", nil, nil)
		errc <- err
	}()
	<-b.started
	start := time.Now()
	stop()
	select {
	case err := <-errc:
		assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "got %v", err)
		assert.ErrorContains(t, err, `server "b" disconnected`)
		assert.Less(t, time.Since(start), 2*time.Second)
	case <-time.After(wait):
		t.Fatal("the call hung after its server died")
	}
	notes.wait(t, mcp.NotificationToolsListChanged, 1, nil)
	tools, err := c.AllTools(ctxFor(t))
	require.NoError(t, err)
	assert.Empty(t, tools, "the server's tools left the list")
}

func TestHub_clientDisconnectCancelsUpstream(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	b := newBlocker("b")
	th.runServer(b.Server, "b")
	c := th.client(nil)
	go c.CallTool(context.Background(), "b__block", nil, nil)
	<-b.started
	c.Close()
	select {
	case err := <-b.cancelled:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(wait):
		t.Fatal("the server's call outlived its client")
	}
}

func TestHub_replicas(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	var calls [2]atomic.Int64
	stops := make([]func(), 2)
	for i := range 2 {
		s := mcp.NewServer(mcp.Implementation{Name: "rep", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "who"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			calls[i].Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprint(i))}}, nil
		})
		stops[i] = th.runServer(s, "rep")
	}
	c := th.client(nil)
	tools, err := c.AllTools(ctxFor(t))
	require.NoError(t, err)
	require.Len(t, tools, 1, "replicas' lists are merged")
	for range 20 {
		_, err := c.CallTool(ctxFor(t), "rep__who", nil, nil)
		require.NoError(t, err)
	}
	assert.Positive(t, calls[0].Load(), "replica 0 served calls")
	assert.Positive(t, calls[1].Load(), "replica 1 served calls")
	assert.Equal(t, int64(20), calls[0].Load()+calls[1].Load())

	stops[0]()
	th.waitFor("one replica left", func(v *view) bool { return len(v.servers["rep"]) == 1 })
	for range 5 {
		res, err := c.CallTool(ctxFor(t), "rep__who", nil, nil)
		require.NoError(t, err)
		assert.Equal(t, "1", res.Content[0].Text)
	}
}

func TestHub_serverNames(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := mcp.NewServer(mcp.Implementation{Name: "My Fancy_Server!", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "x"}, nil)
	th.runServer(s, "my-fancy-server")
	th.waitFor("normalized name", func(v *view) bool { return v.lookup(kindTools, "my-fancy-server__x") != nil })

	for _, bad := range []string{"!!!", "switchboard"} {
		conn, err := mcp.Connect(ctxFor(t), th.wsURL("/mcp"), sessionOpts(nil)) // a bystander
		require.NoError(t, err)
		srv := mcp.NewServer(mcp.Implementation{Name: bad, Version: "1"}, nil)
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		var once sync.Once
		go func() {
			done <- srv.Dial(ctx, th.wsURL("/mcp/server"), &mcp.DialOptions{
				OnDisconnect: func(_ *mcp.ServerSession, err error) { once.Do(func() { done <- err; cancel() }) },
			})
		}()
		err = <-done
		assert.ErrorContains(t, err, "name", "server %q", bad)
		<-done
		cancel()
		require.NoError(t, conn.Ping(ctxFor(t)))
		conn.Close()
	}
}

func TestHub_garbageServerIsDropped(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(nil).Server, "")
	c := th.client(nil)
	conn, err := peerDial(t, th.wsURL("/mcp/server?name=junk"))
	require.NoError(t, err)
	// Whatever the hub sends first (initialize), answer with garbage.
	_, err = conn.Read(ctxFor(t))
	require.NoError(t, err)
	require.NoError(t, conn.Write(ctxFor(t), []byte(`{this is not json`)))
	_, err = conn.Read(ctxFor(t))
	var ce interface{ Error() string }
	require.Error(t, err)
	ce = err
	assert.Contains(t, ce.Error(), "1008")
	assert.Contains(t, ce.Error(), "invalid JSON-RPC")
	res, err := c.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "unbothered"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "unbothered", res.Content[0].Text)
	assert.Nil(t, th.reg.view().servers["junk"])
}

func TestHub_builtinResources(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	notes := newNotes()
	c := th.client(&mcp.ClientOptions{OnNotification: notes.add})
	ctx := ctxFor(t)
	require.NoError(t, c.Subscribe(ctx, "switchboard://servers"))
	th.runServer(demo.New(nil).Server, "")
	notes.wait(t, mcp.NotificationResourceUpdated, 1, func(p json.RawMessage) bool {
		return strings.Contains(string(p), "switchboard://servers")
	})
	read, err := c.ReadResource(ctx, "switchboard://servers")
	require.NoError(t, err)
	var doc struct {
		Servers []struct {
			Name     string
			Tools    int
			Replicas []struct{ ID, Instance string }
		}
		Counts map[string]int
	}
	require.NoError(t, json.Unmarshal([]byte(read.Contents[0].Text), &doc))
	require.Len(t, doc.Servers, 1)
	assert.Equal(t, "demo", doc.Servers[0].Name)
	assert.Equal(t, 5, doc.Servers[0].Tools)
	assert.Len(t, doc.Servers[0].Replicas, 1)
	assert.Equal(t, th.ID(), doc.Servers[0].Replicas[0].Instance)
	assert.Equal(t, 1, doc.Counts["clients"])

	read, err = c.ReadResource(ctx, "switchboard://instances")
	require.NoError(t, err)
	assert.Contains(t, read.Contents[0].Text, th.ID())
}

// TestLarge_answersWhole: large calls in flight at once from several
// clients, each with arguments of its own, are each answered with exactly
// their own arguments, byte for byte: the hub reads a server's answers
// into buffers it reuses once each is copied into its client's frame, and
// a client's calls into buffers it reuses once the call has ended (the
// call log, with arguments here, reads them as the call ends). A buffer
// reused too early would show here as another call's bytes, or as a data
// race under -race. The server is named (its replicas shared) or not (each
// client leases one).
func TestLarge_answersWhole(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"big", ""} {
		t.Run("server="+name, func(t *testing.T) {
			t.Parallel()
			th := startHub(t, Config{RateLimit: -1})
			th.stats.watched(uriCallsArgs, false)
			s := sessionServer(cmp.Or(name, "demo"), nil) // registered by its name when untagged
			s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: req.Params.Arguments}, nil
				})
			th.runServer(s, name)
			tool := cmp.Or(name, "demo") + "__echo"
			const clients, callers, calls = 4, 8, 12
			var wg sync.WaitGroup
			for c := range clients {
				client := th.client(nil)
				for g := range callers {
					wg.Go(func() {
						for i := range calls {
							n := (c*callers+g)*calls + i
							args := fmt.Sprintf(`{"text":"%d-%s"}`, n, strings.Repeat(string(rune('a'+n%26)), 16<<10+n))
							params := `{"name":"` + tool + `","arguments":` + args + `}`
							var out json.RawMessage
							if !assert.NoError(t, client.Peer().Call(ctxFor(t), mcp.MethodToolsCall, json.RawMessage(params), &out)) {
								return
							}
							got, _ := jsonrpc.Member(out, "structuredContent")
							if !assert.Equal(t, args, string(got), "call %d", n) {
								return
							}
						}
					})
				}
			}
			wg.Wait()
		})
	}
}
