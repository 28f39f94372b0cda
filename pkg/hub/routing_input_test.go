package hub

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// ownerTokens are alice, whose call asks for input; bob, a client limited
// to another tool; carol, a client who may call every tool; ops, a
// dashboard; and the demo server's.
const ownerTokens = `
tokens:
  - {name: alice, token: alice-secret, roles: [client]}
  - {name: bob, token: bob-secret, roles: [client], tools: ["demo__echo"]}
  - {name: carol, token: carol-secret, roles: [client]}
  - {name: ops, token: ops-secret, roles: [dashboard]}
  - {name: demo-server, token: demo-secret, roles: [server], servers: [demo]}
`

// modernAsk sends a modern request with a token and returns its response;
// where says through which transport and instance.
type modernAsk func(t *testing.T, token, body string) json.RawMessage

// overHTTP sends each request as a stateless POST to url.
func overHTTP(url string) modernAsk {
	return func(t *testing.T, token, body string) json.RawMessage {
		resp, _ := modernPost(t, url, body, bearer(token)).answer(t)
		return resp
	}
}

// overWebSocket sends each request on a WebSocket of its token's own,
// opened at the first request.
func overWebSocket(th *testHub) modernAsk {
	conns := map[string]*rawClient{}
	return func(t *testing.T, token, body string) json.RawMessage {
		rc := conns[token]
		if rc == nil {
			conn, err := peer.Dial(ctxFor(t), th.wsURL("/mcp"), &peer.DialOptions{Header: bearer(token)})
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close(peer.CloseNormal, "") })
			rc = &rawClient{t: t, conn: conn}
			conns[token] = rc
		}
		rc.send(body)
		return rc.recvResponse().Encode()
	}
}

// TestInput_aRetryContinuesOnlyItsOwnersCall: a requestState continues a
// call only for the principal that made it. Another's retry, with its own
// inputResponses, is refused: by the checks every call passes (a token
// that may not call the tool, a dashboard), or as a state of no call of
// its own (-32602); the server never hears its answer, and the call waits
// for its owner, whose retry then completes it. Over HTTP, over a
// WebSocket, and through a second instance, which sends the retry to the
// one holding the call.
func TestInput_aRetryContinuesOnlyItsOwnersCall(t *testing.T) {
	t.Parallel()
	single := func(t *testing.T) *testHub {
		th := startHub(t, Config{Tokens: writeTokens(t, ownerTokens)})
		th.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
		return th
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (first, retry modernAsk)
	}{
		{"http", func(t *testing.T) (modernAsk, modernAsk) {
			ask := overHTTP(single(t).srv.URL + "/mcp")
			return ask, ask
		}},
		{"websocket", func(t *testing.T) (modernAsk, modernAsk) {
			ask := overWebSocket(single(t))
			return ask, ask
		}},
		{"another instance", func(t *testing.T) (modernAsk, modernAsk) {
			rs := redistest.Start(t)
			prefix := redistest.Prefix(t)
			tokens := writeTokens(t, ownerTokens)
			a := startHubOn(t, rs, prefix, Config{Tokens: tokens})
			b := startHubOn(t, rs, prefix, Config{Tokens: tokens})
			a.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
			b.waitServer("demo", 1)
			return overHTTP(a.srv.URL + "/mcp"), overHTTP(b.srv.URL + "/mcp")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			first, retry := tc.setup(t)
			takeOver(t, first, retry)
		})
	}
}

// takeOver has alice start a call that asks for input (first), others try
// to take it over with her state (retry), and alice finish it.
func takeOver(t *testing.T, first, retry modernAsk) {
	const caps = `{"sampling":{}}`
	args := `{"question":"What colour is the sky?"}`
	answer := func(text string) string {
		return `{"role":"assistant","content":{"type":"text","text":"` + text + `"},"model":"m"}`
	}
	key, _, state, _ := inputRequests(t, first(t, "alice-secret", retryBody(1, "demo__ask", args, caps, "", "")))

	for _, tc := range []struct {
		who, token string
		code       jsonrpc.Code
	}{
		{"a token limited to another tool", "bob-secret", mcp.CodeForbidden},
		{"a dashboard token", "ops-secret", mcp.CodeForbidden},
		{"a client who may call the tool", "carol-secret", jsonrpc.CodeInvalidParams},
	} {
		resp := retry(t, tc.token, retryBody(2, "demo__ask", args, caps, `"`+key+`":`+answer("words of "+tc.who), state))
		code, _ := errorOf(t, resp)
		assert.Equal(t, tc.code, code, "%s continued alice's call: %s", tc.who, resp)
	}

	resp := retry(t, "alice-secret", retryBody(3, "demo__ask", args, caps, `"`+key+`":`+answer("alice's own answer"), state))
	res := resultOf(t, resp)
	assert.Equal(t, "complete", str(res["resultType"]))
	assert.Equal(t, "alice's own answer", firstText(t, res), "the server heard alice's answer, and only hers")
}
