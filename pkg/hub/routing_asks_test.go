package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// askingServer is a session-based server whose tool "ask" asks the model
// of the client calling it (sampling/createMessage, naming the call),
// "times" times at once, and answers with what the first answer said; or,
// with "batch", asks once in a JSON-RPC batch of its own, and waits for the
// call's end (the answer is not waited for). It reports each request it
// sends, and each refused.
type askingServer struct {
	p       *peer.Peer
	asked   chan struct{}
	refused chan jsonrpc.Code
}

func startAskingServer(t *testing.T, th *testHub) *askingServer {
	t.Helper()
	conn, err := peer.Dial(ctxFor(t), th.wsURL("/mcp/server?name=asker"), nil)
	require.NoError(t, err)
	as := &askingServer{asked: make(chan struct{}, 1024), refused: make(chan jsonrpc.Code, 1024)}
	// Its own handlers are many: it serves every client's call at once.
	as.p = peer.New(conn, &peer.Options{Handler: peer.HandlerFunc(as.handle), MaxConcurrent: 256})
	as.p.Start(context.Background())
	t.Cleanup(func() { as.p.Close(); as.p.Wait() })
	th.waitFor("the asking server", func(v *view) bool { return len(v.servers["asker"]) == 1 })
	return as
}

func (as *askingServer) handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	switch req.Method {
	case mcp.MethodInitialize:
		return json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"asker","version":"1"}}`), nil
	case mcp.MethodToolsList:
		return json.RawMessage(`{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`), nil
	case mcp.MethodToolsCall:
		args, _ := jsonrpc.Member(req.Params, "arguments")
		times := 1
		if n, ok := jsonrpc.Member(args, "times"); ok {
			times, _ = strconv.Atoi(string(n))
		}
		params := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"?"}}],"maxTokens":5,` +
			`"_meta":{"` + mcp.MetaRelatedRequest + `":` + req.ID.String() + `}}`)
		if _, batch := jsonrpc.Member(args, "batch"); batch {
			frame := `[{"jsonrpc":"2.0","id":"batch-` + req.ID.String() + `","method":"` + mcp.MethodSamplingCreateMessage + `","params":` + string(params) + `}]`
			if err := as.p.SendEncoded([]byte(frame)); err != nil {
				return nil, err
			}
			as.asked <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		answers := make([]mcp.CreateMessageResult, times)
		errs := make([]error, times)
		var wg sync.WaitGroup
		for i := range times {
			wg.Go(func() {
				as.asked <- struct{}{}
				errs[i] = as.p.Call(ctx, mcp.MethodSamplingCreateMessage, params, &answers[i])
				if code := jsonrpc.CodeOf(errs[i]); errs[i] != nil && code != jsonrpc.CodeInternalError {
					as.refused <- code
				}
			})
		}
		wg.Wait()
		if errs[0] != nil {
			return nil, errs[0]
		}
		return json.RawMessage(`{"content":[{"type":"text","text":` + strconv.Quote(answers[0].Content.Text) + `}]}`), nil
	}
	if req.IsCall() {
		return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s", req.Method)
	}
	return nil, nil
}

// waitAsked waits until the server has sent n more requests.
func (as *askingServer) waitAsked(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(wait)
	for i := range n {
		select {
		case <-as.asked:
		case <-deadline:
			t.Fatalf("the server sent %d of %d requests", i, n)
		}
	}
}

// silentClient opens a session that declares sampling, calls asker__ask
// with args and never answers what it is asked.
func silentClient(t *testing.T, th *testHub, args string) {
	rc := th.rawClient(false)
	rc.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"silent","version":"1"}}}`)
	rc.recvResponse()
	rc.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"asker__ask","arguments":` + args + `}}`)
}

// TestAsks_silentClientsStallNoOne: a server's requests wait on the
// clients they go to without holding what the server's other requests
// need. Forty clients that never answer (ten sessions that do not answer
// sampling, twenty more asked in batches of the server's, ten 2026-07-28
// clients that never retry) leave another client's sampling round trip,
// and the server's own ping to the hub, as fast as ever (they used to wait
// for the call timeout: the server's requests ran on 16 handlers, each
// held until its client answered; a batch's, until the batches did not). A
// server that asks one client more than it may hold at once is refused
// (-32004) beyond the bound, so that the hub holds a bounded number for
// each client (and, by the peer's MaxPending, for each server).
func TestAsks_silentClientsStallNoOne(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CallTimeout: 30 * time.Second})
	as := startAskingServer(t, th)

	const silent = 10
	for i := range silent {
		st := modernPost(t, th.srv.URL+"/mcp", retryBody(i, "asker__ask", `{}`, `{"sampling":{}}`, "", ""), nil)
		inputRequests(t, st.next(t)) // asked, and never coming back
	}
	for range silent {
		silentClient(t, th, `{}`)
	}
	// And more batches of the server's requests than it has handlers: a
	// batch's requests wait on their clients as others do.
	const batched = 20
	for range batched {
		silentClient(t, th, `{"batch":true}`)
	}
	as.waitAsked(t, 2*silent+batched)

	bystander := th.client(&mcp.ClientOptions{Sampling: func(context.Context, *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("at once"), Model: "m"}, nil
	}})
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		assert.NoError(t, as.p.Call(ctx, mcp.MethodPing, nil, nil), "ping %d: the server's ping waited behind the silent clients", i)
		cancel()
		t.Logf("the server's ping %d took %v", i, time.Since(start))

		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		start = time.Now()
		res, err := bystander.CallTool(ctx, "asker__ask", map[string]any{}, nil)
		cancel()
		require.NoError(t, err, "round trip %d: the bystander's sampling waited behind the silent clients", i)
		assert.Equal(t, "at once", res.Content[0].Text)
		t.Logf("the bystander's round trip %d took %v", i, time.Since(start))
	}

	// One client asked more than it may hold at once, a session or a
	// modern client's call: the request beyond is refused at once, and the
	// others still wait.
	beyond := fmt.Sprintf(`{"times":%d}`, clientMaxAsks+1)
	for _, start := range []func(){
		func() { silentClient(t, th, beyond) },
		func() {
			st := modernPost(t, th.srv.URL+"/mcp", retryBody(99, "asker__ask", beyond, `{"sampling":{}}`, "", ""), nil)
			inputRequests(t, st.next(t))
		},
	} {
		start()
		as.waitAsked(t, clientMaxAsks+1)
		select {
		case code := <-as.refused:
			assert.Equal(t, mcp.CodeRateLimited, code)
		case <-time.After(wait):
			t.Fatal("a client was asked beyond its bound")
		}
	}
	select {
	case code := <-as.refused:
		t.Fatalf("a request within the bound was refused: %d", code)
	default:
	}
}
