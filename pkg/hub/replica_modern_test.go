package hub

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// bothErasServer is a pkg/mcp Server of every revision (the default) with
// two tools: era says which revision a call came in, and ask needs a
// message from the client's model, which it asks for with an input request
// and a requestState of its own.
func bothErasServer() *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "both", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "era", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			era := "a session"
			if m := req.RequestMeta(); m != nil {
				era = m.ProtocolVersion
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(era)}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if raw, ok := req.InputResponses["q"]; ok && req.RequestState == "the server's own" {
				var msg mcp.CreateMessageResult
				if err := json.Unmarshal(raw, &msg); err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("the model said " + msg.Content.Text)}}, nil
			}
			return &mcp.CallToolResult{
				InputRequests: map[string]mcp.InputRequest{"q": mcp.SamplingInput(&mcp.CreateMessageParams{
					Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("?")}}, MaxTokens: 5})},
				RequestState: "the server's own",
			}, nil
		})
	return s
}

// TestReplica_bothErasServerSpokenToInTheNewest: a server that speaks both
// eras is spoken to in 2026-07-28, the newest revision both sides support
// (the hub asks server/discover first). It sees every call as a request of
// that revision, a session client's too; a modern client gets its input
// requests as the server made them, with its own requestState (the hub
// passes them through); a session client's input is asked by the hub and
// the call retried, so that it sees one answer. (The hub initialized every
// server before, and saw this one as a session-based server.)
func TestReplica_bothErasServerSpokenToInTheNewest(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(bothErasServer(), "both")
	ri := th.reg.view().servers["both"][0]
	assert.Equal(t, mcp.ModernVersion, ri.ProtocolVersion, "the hub speaks 2026-07-28 to it")

	// A session client.
	c := th.client(&mcp.ClientOptions{
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("yes")}, nil
		},
	})
	ctx := ctxFor(t)
	res, err := c.CallTool(ctx, "both__era", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, mcp.ModernVersion, res.Content[0].Text, "the server saw a request of 2026-07-28")
	res, err = c.CallTool(ctx, "both__ask", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "the model said yes", res.Content[0].Text, "the hub asked the session client and retried")

	// A modern client, over HTTP.
	url := th.srv.URL + "/mcp"
	resp, _ := modernPost(t, url, modernBody(1, "tools/call", `"name":"both__ask"`, `{"sampling":{}}`), nil).answer(t)
	var got struct {
		Result struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(resp, &got), "%s", resp)
	assert.Equal(t, "input_required", got.Result.ResultType, "%s", resp)
	assert.Contains(t, got.Result.InputRequests, "q", "the server's own keys: %s", resp)
	assert.Equal(t, "the server's own", got.Result.RequestState, "the server's own state, passed through: %s", resp)
	retry := modernBody(2, "tools/call", `"name":"both__ask","inputResponses":{"q":{"role":"assistant","model":"m","content":{"type":"text","text":"no"}}},"requestState":"the server's own"`, `{"sampling":{}}`)
	resp, _ = modernPost(t, url, retry, nil).answer(t)
	assert.Contains(t, string(resp), "the model said no")
	resp, _ = modernPost(t, url, modernBody(3, "tools/call", `"name":"both__era"`, `{}`), nil).answer(t)
	assert.Contains(t, string(resp), `"text":"`+mcp.ModernVersion+`"`)
}

// TestReplica_sessionWhenAsked: a server of both eras that says it needs a
// session (?era=session, hub connect --session: its tools send the client
// requests of their own mid-call) is initialized and never discovered.
func TestReplica_sessionWhenAsked(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.dial(bothErasServer(), "?name=both&era=session")
	th.waitFor("both registered", func(v *view) bool { return len(v.servers["both"]) == 1 })
	assert.Equal(t, mcp.LatestVersion, th.reg.view().servers["both"][0].ProtocolVersion)
	res, err := th.client(nil).CallTool(ctxFor(t), "both__era", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "a session", res.Content[0].Text)
}

// TestReplica_sessionServerIsInitialized: a server of the session
// revisions refuses server/discover, and the hub opens a session with it.
func TestReplica_sessionServerIsInitialized(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := sessionServer("old", nil)
	s.AddTool(&mcp.Tool{Name: "era", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			era := "a session"
			if req.RequestMeta() != nil {
				era = "2026"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(era)}}, nil
		})
	th.runServer(s, "old")
	assert.Equal(t, mcp.LatestVersion, th.reg.view().servers["old"][0].ProtocolVersion)
	resp, _ := modernPost(t, th.srv.URL+"/mcp", modernBody(1, "tools/call", `"name":"old__era"`, `{}`), nil).answer(t)
	assert.Contains(t, string(resp), `"text":"a session"`, "a modern client's call reaches it in its session's revision")
}

// scriptedServer dials the hub's /mcp/server?name=name and answers its
// requests with answer (a result or error object, JSON; "" to send
// nothing, "close" to close the connection). It returns the methods of the
// requests it was sent (notifications/cancelled as well), in order, as they
// come.
func scriptedServer(t *testing.T, th *testHub, name string, answer func(method string) string) <-chan string {
	t.Helper()
	conn, err := peer.Dial(ctxFor(t), th.wsURL("/mcp/server?name="+name), nil)
	require.NoError(t, err)
	methods := make(chan string, 64)
	done := make(chan struct{})
	t.Cleanup(func() {
		conn.Close(peer.CloseNormal, "")
		<-done
	})
	go func() {
		defer close(done)
		for {
			b, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			m, err := jsonrpc.DecodeMessage(b)
			req, ok := m.(*jsonrpc.Request)
			if err != nil || !ok {
				continue
			}
			if req.IsNotification() {
				if req.Method == mcp.NotificationCancelled {
					methods <- req.Method
				}
				continue
			}
			methods <- req.Method
			switch a := answer(req.Method); a {
			case "":
			case "close":
				conn.Close(peer.CloseInternalError, "an unknown method is fatal here")
				return
			default:
				member := "result"
				if _, isErr := jsonrpc.Member([]byte(a), "code"); isErr {
					member = "error"
				}
				_ = conn.Write(context.Background(), []byte(`{"jsonrpc":"2.0","id":`+string(req.ID.AppendJSON(nil))+`,"`+member+`":`+a+`}`))
			}
		}
	}()
	return methods
}

// sessionAnswers answers as a server of the session revisions with a tool.
func sessionAnswers(onDiscover string) func(string) string {
	return func(method string) string {
		switch method {
		case mcp.MethodServerDiscover:
			return onDiscover
		case mcp.MethodInitialize:
			return `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}`
		case mcp.MethodToolsList:
			return `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`
		}
		return `{}`
	}
}

// nextMethod returns the next method a scripted server was sent.
func nextMethod(t *testing.T, methods <-chan string) string {
	t.Helper()
	return within(t, methods, "the server was sent nothing more")
}

// TestReplica_silentOnDiscover: a server that ignores server/discover (no
// answer at all) is initialized once DiscoverTimeout has passed, and
// registered as a server of the session revisions.
func TestReplica_silentOnDiscover(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{DiscoverTimeout: 100 * time.Millisecond})
	methods := scriptedServer(t, th, "mute", sessionAnswers(""))
	assert.Equal(t, mcp.MethodServerDiscover, nextMethod(t, methods))
	assert.Equal(t, mcp.NotificationCancelled, nextMethod(t, methods), "the hub gives up on discover, and says so")
	assert.Equal(t, mcp.MethodInitialize, nextMethod(t, methods))
	th.waitFor("mute registered", func(v *view) bool { return len(v.servers["mute"]) == 1 })
	assert.Equal(t, mcp.LatestVersion, th.reg.view().servers["mute"][0].ProtocolVersion)
}

// TestReplica_closesOnDiscover: a server that closes its connection when
// it is sent a method it does not know (server/discover) is sent
// initialize first when it comes back, and registers; a server of the
// same name that speaks 2026-07-28 only, refusing initialize, is still
// discovered after it. A well-behaved server beside them is unaffected.
func TestReplica_closesOnDiscover(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(bothErasServer(), "both")

	first := scriptedServer(t, th, "fragile", sessionAnswers("close"))
	assert.Equal(t, mcp.MethodServerDiscover, nextMethod(t, first))
	var again <-chan string
	require.Eventually(t, func() bool {
		// It comes back (as hub connect restarts a server that exited).
		again = scriptedServer(t, th, "fragile", sessionAnswers("close"))
		return nextMethod(t, again) == mcp.MethodInitialize
	}, wait, 10*time.Millisecond, "the hub remembers it closed on discover")
	th.waitFor("fragile registered", func(v *view) bool { return len(v.servers["fragile"]) == 1 })
	assert.Equal(t, mcp.LatestVersion, th.reg.view().servers["fragile"][0].ProtocolVersion)

	var discovered atomic.Bool
	modern := scriptedServer(t, th, "fragile", func(method string) string {
		switch method {
		case mcp.MethodInitialize:
			return `{"code":-32601,"message":"initialize is not a method of 2026-07-28"}`
		case mcp.MethodServerDiscover:
			discovered.Store(true)
			return `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fragile","version":"2"}}}`
		case mcp.MethodToolsList:
			return `{"tools":[{"name":"t","inputSchema":{"type":"object"}}],"resultType":"complete"}`
		}
		return `{"resultType":"complete"}`
	})
	assert.Equal(t, mcp.MethodInitialize, nextMethod(t, modern), "initialize first, for this name")
	assert.Equal(t, mcp.MethodServerDiscover, nextMethod(t, modern), "then discover, once initialize is refused")
	th.waitFor("the modern replica registered", func(v *view) bool { return len(v.servers["fragile"]) == 2 })
	assert.True(t, discovered.Load())

	c := th.client(nil)
	res, err := c.CallTool(ctxFor(t), "both__era", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, mcp.ModernVersion, res.Content[0].Text, "the server beside them was served throughout")
}

// TestRequestMeta_asEdited: the _meta requestMeta writes as bytes says
// what setting each member on its own says, for the hub's own requests and
// clients of every capability, with and without a log level, and whatever
// params and _meta the request had; a request of 2026-07-28 passes as it is.
func TestRequestMeta_asEdited(t *testing.T) {
	t.Parallel()
	paramsCases := []string{``, `null`, `{}`, ` { } `, `{"name":"x"}`, `{ "name":"x", "arguments":{"a":[1,2]} }`,
		`{"_meta":{}}`, `{"name":"x","_meta":{"progressToken":7}}`, `{"_meta":null,"name":"x"}`, `{"_meta":{ "progressToken":"p" },"arguments":{}}`,
		`{"_meta":{"io.modelcontextprotocol/logLevel":"debug"}}`, `{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"spoof"}}}`}
	callers := []caller{nil}
	for i := range capsTable {
		for _, level := range []mcp.LoggingLevel{"", "warning"} {
			callers = append(callers, metaCaller{declared: capsTable[i], level: level})
		}
	}
	for _, p := range paramsCases {
		for _, c := range callers {
			got := requestMeta(c, json.RawMessage(p))
			in := json.RawMessage(p)
			if len(in) == 0 || in[0] != '{' {
				in = json.RawMessage(`{}`)
			}
			meta, ok := jsonrpc.Member(in, "_meta")
			if !ok || len(meta) == 0 || meta[0] != '{' {
				meta = []byte(`{}`)
			}
			want := requestMetaEdited(c, in, meta)
			require.True(t, json.Valid(got), "%s: %s", p, got)
			assert.JSONEq(t, string(want), string(got), "params %s, caller %+v", p, c)
		}
	}
	modern := json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"}`)
	assert.Equal(t, string(modern), string(requestMeta(callers[1], modern)))
}

// metaCaller is a caller with capabilities and a log level, for
// TestRequestMeta_asEdited.
type metaCaller struct {
	caller
	declared clientCaps
	level    mcp.LoggingLevel
}

func (c metaCaller) caps() clientCaps           { return c.declared }
func (c metaCaller) logLevel() mcp.LoggingLevel { return c.level }
