package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

func TestHub_subscriptionsAreReferenceCounted(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := mcp.NewServer(mcp.Implementation{Name: "rc", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "rc://x", Name: "x"}, func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "x"}}}, nil
	})
	th.runServer(s, "rc")

	na, nb := newNotes(), newNotes()
	a := th.client(&mcp.ClientOptions{OnNotification: na.add})
	b := th.client(&mcp.ClientOptions{OnNotification: nb.add})
	ctx := ctxFor(t)
	require.NoError(t, a.Subscribe(ctx, "rc://x"))
	require.NoError(t, b.Subscribe(ctx, "rc://x"))
	require.NoError(t, b.Subscribe(ctx, "rc://x"), "subscribing twice is harmless")

	th.subs.mu.Lock()
	assert.Len(t, th.subs.local["rc://x"], 2)
	th.subs.mu.Unlock()
	instances, replicas := th.subs.coordOf("rc://x")
	require.Equal(t, 1, replicas)
	assert.Equal(t, 1, instances, "one upstream subscription for the whole hub")

	s.ResourceUpdated(ctx, "rc://x")
	na.wait(t, mcp.NotificationResourceUpdated, 1, nil)
	nb.wait(t, mcp.NotificationResourceUpdated, 1, nil)

	require.NoError(t, a.Unsubscribe(ctx, "rc://x"))
	_, replicas = th.subs.coordOf("rc://x")
	assert.Equal(t, 1, replicas, "b still needs it")

	s.ResourceUpdated(ctx, "rc://x")
	nb.wait(t, mcp.NotificationResourceUpdated, 2, nil)

	b.Close() // leaving drops the last subscription
	require.Eventually(t, func() bool {
		_, replicas := th.subs.coordOf("rc://x")
		return replicas == 0
	}, wait, wait/1000, "the last subscriber leaving unsubscribes upstream")
	assert.Equal(t, 1, na.count(mcp.NotificationResourceUpdated), "a unsubscribed: it got only the first update")

	_, err := subscribeErr(th, "nowhere://x")
	assert.Equal(t, mcp.CodeResourceNotFound, rpcCode(err))
}

func subscribeErr(th *testHub, uri string) (*mcp.Client, error) {
	c := th.client(nil)
	return c, c.Subscribe(ctxFor(th.t), uri)
}

// TestHub_upstreamSubscribeOnce checks from the server's side that two
// subscribers make one resources/subscribe, and that the last unsubscribe
// makes one resources/unsubscribe.
func TestHub_upstreamSubscribeOnce(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	conn, err := peerDial(t, th.wsURL("/mcp/server?name=raw"))
	require.NoError(t, err)
	seen := make(chan string, 16)
	go fakeServer(t, conn, `{"resources":{"subscribe":true}}`, map[string]string{
		"resources/list": `{"resources":[{"uri":"raw://r","name":"r"}]}`,
	}, seen)
	th.waitFor("raw registered", func(v *view) bool { return len(v.servers["raw"]) == 1 })

	a, b := th.client(nil), th.client(nil)
	ctx := ctxFor(t)
	require.NoError(t, a.Subscribe(ctx, "raw://r"))
	require.NoError(t, b.Subscribe(ctx, "raw://r"))
	require.NoError(t, a.Unsubscribe(ctx, "raw://r"))
	require.NoError(t, b.Unsubscribe(ctx, "raw://r"))
	assert.Equal(t, "resources/subscribe raw://r", <-seen)
	assert.Equal(t, "resources/unsubscribe raw://r", <-seen, "exactly one subscribe came before the unsubscribe")
}

// fakeServer answers the hub on conn from canned results, reporting the
// subscriptions it is asked for.
func fakeServer(t *testing.T, conn interface {
	Read(context.Context) ([]byte, error)
	Write(context.Context, []byte) error
}, caps string, results map[string]string, seen chan<- string) {
	for {
		b, err := conn.Read(context.Background())
		if err != nil {
			return
		}
		m, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return
		}
		req, ok := m.(*jsonrpc.Request)
		if !ok || req.IsNotification() {
			continue
		}
		res := `{}`
		switch req.Method {
		case "initialize":
			res = `{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"serverInfo":{"name":"raw","version":"1"}}`
		case "resources/subscribe", "resources/unsubscribe":
			var p struct{ URI string }
			json.Unmarshal(req.Params, &p)
			seen <- req.Method + " " + p.URI
		default:
			if r, ok := results[req.Method]; ok {
				res = r
			} else if strings.HasSuffix(req.Method, "/list") {
				res = `{}`
			}
		}
		frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, res)
		if err := conn.Write(context.Background(), []byte(frame)); err != nil {
			return
		}
	}
}

// sampler is a client that answers sampling with its own name.
func sampler(th *testHub, name string) *mcp.Client {
	return th.client(&mcp.ClientOptions{
		Info: mcp.Implementation{Name: name, Version: "1"},
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: name, Content: mcp.TextContent(name + " answers " + p.Messages[0].Content.Text)}, nil
		},
	})
}

func TestHub_serverRequestsReachTheRightClient(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(nil).Server, "")
	a, b := sampler(th, "alice"), sampler(th, "bob")
	var wg sync.WaitGroup
	for i := range 20 {
		for _, c := range []struct {
			cl   *mcp.Client
			name string
		}{{a, "alice"}, {b, "bob"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := fmt.Sprintf("q%d", i)
				res, err := c.cl.CallTool(ctxFor(t), "demo__ask", map[string]string{"question": q}, nil)
				if assert.NoError(t, err) {
					assert.Equal(t, c.name+" answers "+q, res.Content[0].Text, "sampling went to the wrong client")
				}
			}()
		}
	}
	wg.Wait()
}

func TestHub_serverRequestRouting(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	release := make(chan struct{})
	var relMu sync.Mutex
	var reqs []*mcp.ToolRequest
	held := make(chan struct{}, 4)
	s := sessionServer("r", nil)
	s.AddTool(&mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		relMu.Lock()
		reqs = append(reqs, req)
		relMu.Unlock()
		held <- struct{}{}
		<-release
		return &mcp.CallToolResult{}, nil
	})
	th.runServer(s, "r")
	session := func() *mcp.ServerSession {
		relMu.Lock()
		defer relMu.Unlock()
		return reqs[0].Session
	}
	noRelated := func(ctx context.Context, method string) error {
		return session().Peer().Call(ctx, method, map[string]any{"messages": []any{}, "maxTokens": 1}, nil)
	}

	// No call in flight: nobody to route to.
	noCaller := th.client(nil)
	go noCaller.CallTool(context.Background(), "r__hold", nil, nil)
	<-held
	// One client (without the capability) has a call in flight.
	err := noRelated(ctxFor(t), mcp.MethodSamplingCreateMessage)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcCode(err), "a client without the sampling capability: %v", err)

	// A second client, with the capability: now the hub cannot choose.
	withCap := sampler(th, "carol")
	go withCap.CallTool(context.Background(), "r__hold", nil, nil)
	<-held
	err = noRelated(ctxFor(t), mcp.MethodSamplingCreateMessage)
	assert.Equal(t, jsonrpc.CodeInvalidRequest, rpcCode(err))
	assert.ErrorContains(t, err, "several clients")

	// With relatedRequest, the hub routes to the right one.
	relMu.Lock()
	carolReq := reqs[1]
	relMu.Unlock()
	res, err := carolReq.CreateMessage(ctxFor(t), &mcp.CreateMessageParams{
		Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("hi")}}, MaxTokens: 5})
	require.NoError(t, err)
	assert.Equal(t, "carol answers hi", res.Content.Text)

	// An id that is not in flight is refused, never guessed.
	err = session().Peer().Call(ctxFor(t), mcp.MethodSamplingCreateMessage,
		map[string]any{"messages": []any{}, "maxTokens": 1, "_meta": map[string]any{mcp.MetaRelatedRequest: 999999}}, nil)
	assert.Equal(t, jsonrpc.CodeInvalidRequest, rpcCode(err))
	close(release)
}

func TestHub_elicitationAndRoots(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := sessionServer("e", nil)
	s.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		el, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)})
		if err != nil {
			return nil, err
		}
		roots, err := req.ListRoots(ctx)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprintf("%s %v %s", el.Action, el.Content["name"], roots.Roots[0].URI))}}, nil
	})
	th.runServer(s, "e")
	c := th.client(&mcp.ClientOptions{
		Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		Roots: func(ctx context.Context) ([]mcp.Root, error) {
			return []mcp.Root{{URI: "file:///work", Name: "work"}}, nil
		},
	})
	res, err := c.CallTool(ctxFor(t), "e__ask", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "accept Ada file:///work", res.Content[0].Text)
}

// A call's log lines go to that call's client, at that client's level.
func TestHub_logLevelsPerClient(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := mcp.NewServer(mcp.Implementation{Name: "logger", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "log"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		req.Log(ctx, mcp.LevelInfo, "", "an info line")
		req.Log(ctx, mcp.LevelError, "app", "an error line")
		return &mcp.CallToolResult{}, nil
	})
	th.runServer(s, "logger")
	quiet, chatty := newNotes(), newNotes()
	q := th.client(&mcp.ClientOptions{OnNotification: quiet.add})
	ch := th.client(&mcp.ClientOptions{OnNotification: chatty.add})
	ctx := ctxFor(t)
	require.NoError(t, q.SetLoggingLevel(ctx, mcp.LevelError))
	require.NoError(t, ch.SetLoggingLevel(ctx, mcp.LevelDebug))
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(ch.SetLoggingLevel(ctx, "loud")))
	_, err := ch.CallTool(ctx, "logger__log", nil, nil)
	require.NoError(t, err)

	info := chatty.wait(t, mcp.NotificationMessage, 1, nil)
	var p mcp.LoggingMessageParams
	require.NoError(t, json.Unmarshal(info, &p))
	assert.Equal(t, mcp.LevelInfo, p.Level)
	assert.Equal(t, "logger", p.Logger, "the server's name stands in for a missing logger")
	assert.Equal(t, "logger", p.Meta[mcp.MetaServer])
	chatty.wait(t, mcp.NotificationMessage, 2, nil)

	_, err = q.CallTool(ctx, "logger__log", nil, nil)
	require.NoError(t, err)
	errLine := quiet.wait(t, mcp.NotificationMessage, 1, nil)
	require.NoError(t, json.Unmarshal(errLine, &p))
	assert.Equal(t, mcp.LevelError, p.Level)
	assert.Equal(t, "app", p.Logger)
	assert.Equal(t, 1, quiet.count(mcp.NotificationMessage), "the quiet client got no info line, and none of the other's call")
	assert.Equal(t, 2, chatty.count(mcp.NotificationMessage), "the chatty client got none of the other's call")
}

func TestHub_listChanged(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	n := newNotes()
	c := th.client(&mcp.ClientOptions{OnNotification: n.add})
	s := sessionServer("lc", nil)
	s.AddTool(&mcp.Tool{Name: "one"}, nil)
	th.runServer(s, "lc")
	n.wait(t, mcp.NotificationToolsListChanged, 1, nil) // connect

	s.AddTool(&mcp.Tool{Name: "two"}, nil) // the server announces a change; the hub re-lists
	n.wait(t, mcp.NotificationToolsListChanged, 2, nil)
	tools, err := c.AllTools(ctxFor(t))
	require.NoError(t, err)
	assert.Len(t, tools, 2)

	s.AddPrompt(&mcp.Prompt{Name: "p"}, nil)
	n.wait(t, mcp.NotificationPromptsListChanged, 1, nil)
	assert.Equal(t, 2, n.count(mcp.NotificationToolsListChanged), "an unchanged list is not announced")
}

// A server's request reaches the client naming, in
// _meta["switchboard/relatedRequest"], the client's own call that it serves
// (exactly as the client sent its id), never the hub's id for it.
func TestHub_serverRequestNamesTheClientsCall(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(nil).Server, "")
	rc := th.rawClient(false)
	rc.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	rc.recvResponse()
	rc.send(`{"jsonrpc":"2.0","id":"my call","method":"tools/call","params":{"name":"demo__ask","arguments":{"question":"?"}}}`)
	m, err := jsonrpc.DecodeMessage([]byte(rc.recv()))
	require.NoError(t, err)
	req, ok := m.(*jsonrpc.Request)
	require.True(t, ok, "the server's sampling request comes first")
	assert.Equal(t, mcp.MethodSamplingCreateMessage, req.Method)
	meta, _ := jsonrpc.Member(req.Params, "_meta")
	related, _ := jsonrpc.Member(meta, mcp.MetaRelatedRequest)
	assert.Equal(t, `"my call"`, string(related))
	rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"role":"assistant","model":"m","content":{"type":"text","text":"42"}}}`, req.ID))
	resp := rc.recvResponse()
	assert.Equal(t, `"my call"`, resp.ID.String())
	assert.Contains(t, string(resp.Result), "42")
}

// A server's requests outside any client's call: roots/list gets the roots
// given on its URL (published servers ask as they start), sampling gets a
// clear -32601, a ping the hub's answer.
func TestHub_serverRequestsOutsideACall(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"", `{"roots":[]}`},
		{"&root=file:///srv/a&root=file:///srv/b", `{"roots":[{"uri":"file:///srv/a"},{"uri":"file:///srv/b"}]}`},
	} {
		conn, err := peerDial(t, th.wsURL("/mcp/server?name=alone"+tc.query))
		require.NoError(t, err)
		p := peer.New(conn, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			if req.Method == mcp.MethodInitialize {
				return &mcp.InitializeResult{ProtocolVersion: mcp.LatestVersion, ServerInfo: mcp.Implementation{Name: "alone", Version: "1"}}, nil
			}
			return nil, nil
		})})
		p.Start(context.Background())
		th.waitFor("alone registered", func(v *view) bool { return len(v.servers["alone"]) == 1 })
		var roots json.RawMessage
		require.NoError(t, p.Call(ctxFor(t), mcp.MethodRootsList, nil, &roots))
		assert.JSONEq(t, tc.want, string(roots))
		require.NoError(t, p.Call(ctxFor(t), mcp.MethodPing, nil, nil))
		err = p.Call(ctxFor(t), mcp.MethodSamplingCreateMessage, &mcp.CreateMessageParams{MaxTokens: 1}, nil)
		assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcCode(err))
		assert.ErrorContains(t, err, "outside a client's call")
		require.NoError(t, p.Close())
		th.waitFor("alone gone", func(v *view) bool { return len(v.servers["alone"]) == 0 })
	}
}

// A server that leaves, or never gets through its handshake, shows in
// switchboard://servers with the close code and reason, until it is back:
// how an operator sees hub connect's child fail.
func TestHub_departuresAreVisible(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	c := th.client(nil)
	departed := func() string {
		res, err := c.ReadResource(ctxFor(t), "switchboard://servers")
		require.NoError(t, err)
		var doc struct {
			Departed []departure `json:"departed"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &doc))
		for _, d := range doc.Departed {
			if d.Name == "kid" {
				return fmt.Sprintf("%d %s", d.Code, d.Reason)
			}
		}
		return ""
	}
	stop := th.runServer(mcp.NewServer(mcp.Implementation{Name: "kid", Version: "1"}, nil), "kid")
	assert.Empty(t, departed())
	stop()
	th.waitFor("kid gone", func(v *view) bool { return len(v.servers["kid"]) == 0 })
	assert.Equal(t, "1001 going away", departed(), "the server stopped dialing")

	// A connector whose child died dials in and says so.
	conn, err := peerDial(t, th.wsURL("/mcp/server?name=kid"))
	require.NoError(t, err)
	require.NoError(t, conn.Close(4000, "child exited with status 1; restarting in 2s"))
	require.Eventually(t, func() bool { return departed() == "4000 child exited with status 1; restarting in 2s" },
		wait, time.Millisecond)

	th.runServer(mcp.NewServer(mcp.Implementation{Name: "kid", Version: "1"}, nil), "kid")
	assert.Empty(t, departed(), "back: no longer departed")
}

// A client that reads more slowly than log lines come loses some, never
// its connection, and is told how many it lost: a warning line, before the
// next line that gets through, with the exact count.
func TestSession_droppedLogsAreCounted(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{SendQueue: 8})
	pipe, client := peer.Pipe(0) // nothing is written until the client reads
	conn := &gatedConn{Conn: pipe, writing: make(chan struct{})}
	s := th.newSession(conn, anonymous, func() {}, "test", "")
	require.True(t, s.start(conn))
	logLine := func(text string) []byte {
		return encodeNotification(mcp.NotificationMessage, &mcp.LoggingMessageParams{Level: mcp.LevelInfo, Data: text})
	}
	s.sendLog(logLine("first"))
	<-conn.writing // the writer holds the first line until the client reads: the rest queue
	const sent = 20
	for i := range sent {
		s.sendLog(logLine(fmt.Sprint(i)))
	}
	queued := th.cfg.SendQueue / 2 // notices fill half the queue at most
	dropped := int(s.logsDropped.Load())
	require.Equal(t, sent-queued, dropped, "the lines beyond half the queue are dropped and counted")

	frames := make(chan string, sent+2)
	go func() {
		for {
			b, err := client.Read(context.Background())
			if err != nil {
				close(frames)
				return
			}
			frames <- string(b)
		}
	}()
	next := func() string {
		t.Helper()
		return within(t, frames, "nothing more came")
	}
	assert.Contains(t, next(), `"data":"first"`)
	for i := range queued {
		assert.Contains(t, next(), fmt.Sprintf(`"data":"%d"`, i), "the lines queued, in order")
	}
	s.sendLog(logLine("after"))
	gap := next()
	assert.Contains(t, gap, fmt.Sprintf(`%d log messages were dropped`, dropped))
	assert.Contains(t, gap, `"level":"warning"`)
	assert.Contains(t, next(), `"data":"after"`)
	assert.Zero(t, s.logsDropped.Load(), "told: the count starts again")
	s.sendLog(logLine("again"))
	assert.Contains(t, next(), `"data":"again"`, "no gap line when nothing was lost")
	assert.NoError(t, s.peer.Err(), "the client was not dropped")
}

// gatedConn says when its first Write begins.
type gatedConn struct {
	peer.Conn
	writing chan struct{}
	once    sync.Once
}

func (g *gatedConn) Write(ctx context.Context, frame []byte) error {
	g.once.Do(func() { close(g.writing) })
	return g.Conn.Write(ctx, frame)
}

// TestHub_toldOfLaterChangesOnly: a view is swapped in before its changes
// are told, so a client that initializes in between already got the new
// lists: it is told of later changes only (it once got a stray
// list_changed, which made the golden conversations flake under load).
func TestHub_toldOfLaterChangesOnly(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	th.rawClient(true)
	sessions := th.sessionList()
	require.Len(t, sessions, 1)
	s := sessions[0]
	require.Eventually(t, s.isInitialized, wait, time.Millisecond)
	gen := th.reg.view().gen
	assert.Nil(t, s.owe(mcp.NotificationToolsListChanged, gen), "it initialized in this view: its lists came from it")
	assert.NotNil(t, s.owe(mcp.NotificationToolsListChanged, gen+1), "of a later change it is told")
}
