package peer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// forwarder takes every call "fwd" asynchronously and passes it on to up,
// the way the hub routes a tools/call: no worker waits for the answer.
type forwarder struct {
	up *peer.Peer
}

func (f *forwarder) Handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	if req.Method == "cancel" { // a notification naming the call to cancel
		var p struct{ RequestID jsonrpc.ID }
		json.Unmarshal(req.Params, &p)
		peer.FromContext(ctx).Cancel(p.RequestID)
		return nil, nil
	}
	return "sync", nil
}

func (f *forwarder) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	if req.Method != "fwd" {
		return false
	}
	id := f.up.NextID()
	err := f.up.Go(id, "work", req.Params, func(resp *jsonrpc.Response, err error) {
		switch {
		case err != nil:
			reply.Send(nil, err)
		case resp.Error != nil:
			reply.Send(nil, resp.Error)
		default:
			reply.Send(resp.Result, nil)
		}
	})
	if err != nil {
		reply.Send(nil, err)
		return true
	}
	reply.OnCancel(func() { f.up.Abort(id, context.Canceled) })
	return true
}

func TestPeer_async(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		// The upstream side: the far end of a second pair, whose calls
		// "work" echo their params or block until cancelled.
		up1, up2 := peer.Pipe(64)
		t.Cleanup(func() { up1.Close(peer.CloseNormal, ""); up2.Close(peer.CloseNormal, "") })
		blocked := make(chan struct{}, 4)
		unblocked := make(chan error, 4)
		start(t, up2, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			switch {
			case req.Method == "cancel":
				var p struct{ RequestID jsonrpc.ID }
				json.Unmarshal(req.Params, &p)
				peer.FromContext(ctx).Cancel(p.RequestID)
				return nil, nil
			case string(req.Params) == `["block"]`:
				blocked <- struct{}{}
				<-ctx.Done()
				unblocked <- ctx.Err()
				return nil, ctx.Err()
			}
			return req.Params, nil
		})})
		cancelled := make(chan jsonrpc.ID, 4)
		var up *peer.Peer
		up = start(t, up1, &peer.Options{OnCancel: func(id jsonrpc.ID, cause error) {
			up.Notify(context.Background(), "cancel", map[string]any{"requestId": id})
			cancelled <- id
		}})
		start(t, a, &peer.Options{Handler: &forwarder{up: up}})
		s := script{t, b}

		// Forwarded and answered, under the caller's own id.
		s.send(`{"jsonrpc":"2.0","id":"x","method":"fwd","params":["hello"]}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":"x","result":["hello"]}`, s.recv())
		// Not taken by HandleAsync: answered on a worker.
		s.send(`{"jsonrpc":"2.0","id":2,"method":"other"}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":"sync"}`, s.recv())

		// Cancelled by the caller: the upstream call is aborted and told.
		s.send(`{"jsonrpc":"2.0","id":3,"method":"fwd","params":["block"]}`)
		<-blocked
		s.send(`{"jsonrpc":"2.0","method":"cancel","params":{"requestId":3}}`)
		select {
		case <-cancelled:
		case <-time.After(wait):
			t.Fatal("the upstream call was not aborted")
		}
		assert.ErrorIs(t, <-unblocked, context.Canceled)
		s.send(`{"jsonrpc":"2.0","id":4,"method":"fwd","params":["after"]}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":4,"result":["after"]}`, s.recv(), "the cancelled call got no answer")

		// The caller leaving aborts what it had in flight.
		s.send(`{"jsonrpc":"2.0","id":5,"method":"fwd","params":["block"]}`)
		<-blocked
		require.NoError(t, b.Close(peer.CloseNormal, ""))
		select {
		case <-cancelled:
		case <-time.After(wait):
			t.Fatal("closing did not abort the upstream call")
		}
	})
}

func TestPeer_goAndAbort(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		cancelled := make(chan error, 1)
		p := start(t, a, &peer.Options{OnCancel: func(id jsonrpc.ID, cause error) { cancelled <- cause }})
		s := script{t, b}
		done := make(chan error, 2)
		id := p.NextID()
		require.NoError(t, p.Go(id, "slow", nil, func(resp *jsonrpc.Response, err error) { done <- err }))
		s.recvRequest()
		assert.True(t, p.Abort(id, context.DeadlineExceeded))
		assert.ErrorIs(t, <-done, context.DeadlineExceeded)
		assert.ErrorIs(t, <-cancelled, context.DeadlineExceeded)
		assert.False(t, p.Abort(id, context.DeadlineExceeded), "a call is aborted once")

		// A call still pending when the connection closes gets the close.
		require.NoError(t, p.Go(p.NextID(), "slow", nil, func(resp *jsonrpc.Response, err error) { done <- err }))
		s.recvRequest()
		b.Close(peer.CloseGoingAway, "bye")
		select {
		case err := <-done:
			assert.True(t, errors.Is(err, peer.ErrClosed), "got %v", err)
		case <-time.After(wait):
			t.Fatal("the pending call was not failed on close")
		}
		assert.ErrorIs(t, p.Go(p.NextID(), "late", nil, func(*jsonrpc.Response, error) {}), peer.ErrClosed)
	})
}

// TestPeer_goRenamed: a call sent with a member of its params renamed
// reaches the other side renamed, the caller's params untouched, and is
// answered as any call; a member that is not within the params is refused.
func TestPeer_goRenamed(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, nil)
		s := script{t, b}
		params := json.RawMessage(`{"name":"demo__add","arguments":{"x":1}}`)
		old, _ := jsonrpc.Member(params, "name")
		done := make(chan *jsonrpc.Response, 1)
		id := p.NextID()
		require.NoError(t, p.GoRenamed(id, "tools/call", params, old, "add", func(resp *jsonrpc.Response, err error) {
			assert.NoError(t, err)
			done <- resp
		}))
		req := s.recvRequest()
		assert.JSONEq(t, `{"name":"add","arguments":{"x":1}}`, string(req.Params))
		assert.Equal(t, `{"name":"demo__add","arguments":{"x":1}}`, string(params), "the caller's params are left as they are")
		s.send(`{"jsonrpc":"2.0","id":` + req.ID.String() + `,"result":{"ok":true}}`)
		select {
		case resp := <-done:
			assert.JSONEq(t, `{"ok":true}`, string(resp.Result))
		case <-time.After(wait):
			t.Fatal("no answer")
		}
		assert.Error(t, p.GoRenamed(p.NextID(), "tools/call", params, []byte(`"demo__add"`), "add", nil), "not within the params")
	})
}

// appended is a result that encodes itself, as mcp.CallToolResult does; an
// empty one writes nothing, a failing one an error.
type appended struct {
	text string
	fail bool
}

func (a appended) AppendJSON(b []byte) ([]byte, error) {
	if a.fail {
		return append(b, "partial"...), errors.New("cannot encode")
	}
	if a.text == "" {
		return b, nil
	}
	return jsonrpc.AppendString(append(b, `{"text":`...), a.text), nil
}

func (a appended) SizeHint() int { return len(a.text) + 16 }

// TestPeer_appenderResults: a result that encodes itself is written into
// the answer's frame byte for byte as NewResult's response encodes, large
// (a pooled frame) or small, one that writes nothing as null; one that fails
// to encode is an internal error, and the peer goes on answering.
func TestPeer_appenderResults(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		large := strings.Repeat("é", 10<<10)
		results := map[string]appended{"small": {text: "ok"}, "large": {text: large}, "empty": {}, "fail": {fail: true}}
		start(t, a, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			return results[req.Method], nil
		})})
		s := script{t, b}
		for i, method := range []string{"small", "large", "empty", "fail", "small"} {
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, i, method))
			got := s.recv()
			if method == "fail" {
				assert.JSONEq(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"Internal error"}}`, i), got)
				continue
			}
			want, err := jsonrpc.NewResult(jsonrpc.Int64ID(int64(i)), results[method])
			require.NoError(t, err)
			assert.Equal(t, string(want.Encode()), got, method)
		}
	})
}

// TestPeer_goBorrowing: answers to calls whose done borrows them arrive
// whole, each in its own bytes, however many follow one another (their
// frames are read into buffers given back once done returns); an answer
// done keeps (a call sent with Go, an error to a borrowing call) keeps its
// bytes while later answers are read.
func TestPeer_goBorrowing(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, nil)
		s := script{t, b}
		borrow := func(i int) {
			t.Helper()
			got := make(chan string, 1)
			require.NoError(t, p.GoBorrowing(p.NextID(), "echo", nil, nil, "", func(resp *jsonrpc.Response, err error) {
				assert.NoError(t, err)
				got <- string(resp.Result) // a copy, made before done returns
			}))
			req := s.recvRequest()
			s.send(`{"jsonrpc":"2.0","id":` + req.ID.String() + `,"result":"` + bigPayload(i) + `"}`)
			select {
			case r := <-got:
				assert.Equal(t, `"`+bigPayload(i)+`"`, r, "answer %d", i)
			case <-time.After(wait):
				t.Fatal("no answer")
			}
		}
		keep := func(call func(done func(*jsonrpc.Response, error)) error, answer string) *jsonrpc.Response {
			t.Helper()
			kept := make(chan *jsonrpc.Response, 1)
			require.NoError(t, call(func(resp *jsonrpc.Response, err error) { kept <- resp }))
			return answerNext(t, s, answer, kept)
		}
		for i := range 3 {
			borrow(i)
		}
		result := keep(func(done func(*jsonrpc.Response, error)) error {
			return p.Go(p.NextID(), "keep", nil, done)
		}, `"result":"`+bigPayload(100)+`"`)
		failure := keep(func(done func(*jsonrpc.Response, error)) error {
			return p.GoBorrowing(p.NextID(), "fail", nil, nil, "", done)
		}, `"error":{"code":-32000,"message":"no","data":"`+bigPayload(200)+`"}`)
		for i := 3; i < 20; i++ {
			borrow(i)
		}
		assert.Equal(t, `"`+bigPayload(100)+`"`, string(result.Result), "a result kept by Go's done")
		require.NotNil(t, failure.Error)
		assert.Equal(t, `"`+bigPayload(200)+`"`, string(failure.Error.Data), "an error kept by a borrowing done")
	})
}

// bigPayload is 16 KiB of one letter, the i-th of the alphabet (round
// and round): the frames it is in come in buffers of the pools, and one
// overwritten by another shows.
func bigPayload(i int) string { return strings.Repeat(string(rune('a'+i%26)), 16<<10) }

// answerNext answers the next call s receives with answer (the members
// that follow its id) and returns what its caller then sent on got.
func answerNext[T any](t *testing.T, s script, answer string, got <-chan T) T {
	t.Helper()
	req := s.recvRequest()
	s.send(`{"jsonrpc":"2.0","id":` + req.ID.String() + `,` + answer + `}`)
	select {
	case v := <-got:
		return v
	case <-time.After(wait):
		t.Fatal("no answer")
		panic("unreachable")
	}
}

// taker is an AsyncHandler that takes every call and hands it to the test.
type taker chan taken

type taken struct {
	req   *jsonrpc.Request
	reply *peer.Reply
}

func (taker) Handle(context.Context, *jsonrpc.Request) (any, error) { return nil, nil }

func (tk taker) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	tk <- taken{req, reply}
	return true
}

// TestPeer_releasedCalls: calls an AsyncHandler takes arrive whole, each
// in its own bytes, however many follow one another when each is released
// once answered (their frames are read into buffers given back then); a
// call not released keeps its params while later calls are read.
func TestPeer_releasedCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		calls := make(taker, 1)
		start(t, a, &peer.Options{Handler: calls})
		s := script{t, b}
		take := func(i int) taken {
			t.Helper()
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"text":"%s"}}`, i, bigPayload(i)))
			select {
			case tk := <-calls:
				return tk
			case <-time.After(wait):
				t.Fatal("the call was not taken")
				return taken{}
			}
		}
		answer := func(i int, tk taken, release bool) {
			t.Helper()
			assert.Equal(t, `{"text":"`+bigPayload(i)+`"}`, string(tk.req.Params), "call %d", i)
			tk.reply.Send(json.RawMessage(`{}`), nil)
			if release {
				tk.reply.Release()
			}
			assert.Equal(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, i), s.recv())
		}
		for i := range 3 {
			answer(i, take(i), true)
		}
		for round := range 5 { // a buffer given back goes to one P's pool: several rounds meet it
			kept := take(100 + round)
			for i := 3; i < 15; i++ {
				answer(i, take(i), true)
			}
			answer(100+round, kept, false)
		}
	})
}

// lastByte returns a pointer to the last byte of the buffer b lies in,
// which tells one buffer from another whatever part of it b is.
func lastByte(b []byte) *byte { return &b[:cap(b)][cap(b)-1] }

// pooledReads reports whether the transport of the running subtest
// (eachTransport) reads frames into the peer's pools: the WebSocket.
func pooledReads(t *testing.T) bool { return strings.HasSuffix(t.Name(), "/websocket") }

// TestPeer_callBorrowing: answers borrowed with CallBorrowing arrive whole,
// each in its own bytes, however many follow one another when each is
// released; one not yet released keeps its bytes while later ones are
// read; an error answer is returned as an error, lending nothing, and
// keeps its bytes too. On a WebSocket the answers are read into buffers of
// the pools, and an answer comes in a buffer an earlier one released.
func TestPeer_callBorrowing(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, nil)
		s := script{t, b}
		call := func(ans *peer.Answer, answer string) error {
			t.Helper()
			errc := make(chan error, 1)
			go func() { errc <- p.CallBorrowing(context.Background(), "echo", nil, ans) }()
			return answerNext(t, s, answer, errc)
		}
		borrow := func(i int, ans *peer.Answer) {
			t.Helper()
			require.NoError(t, call(ans, `"result":"`+bigPayload(i)+`"`))
			assert.Equal(t, `"`+bigPayload(i)+`"`, string(ans.Result), "answer %d", i)
		}

		for i := range 3 { // the answers that follow a borrowed one are read into pooled buffers
			var ans peer.Answer
			borrow(i, &ans)
			ans.Release()
		}
		var kept peer.Answer
		borrow(100, &kept)
		var failed peer.Answer
		err := call(&failed, `"error":{"code":-32000,"message":"no","data":"`+bigPayload(200)+`"}`)
		var rpcErr *jsonrpc.Error
		require.ErrorAs(t, err, &rpcErr)
		assert.Nil(t, failed.Result, "an error lends nothing")
		failed.Release() // does nothing

		released := map[*byte]bool{}
		reused := 0
		for i := range 40 {
			var ans peer.Answer
			borrow(i, &ans)
			buf := lastByte(ans.Result)
			if released[buf] {
				reused++
			}
			ans.Release()
			assert.Nil(t, ans.Result, "a released Answer is empty")
			ans.Release() // twice: nothing more is given back
			released[buf] = true
		}
		assert.Equal(t, `"`+bigPayload(100)+`"`, string(kept.Result), "an answer not released keeps its bytes")
		assert.Equal(t, `"`+bigPayload(200)+`"`, string(rpcErr.Data), "an error answer keeps its bytes")
		kept.Release()
		if pooledReads(t) {
			assert.Positive(t, reused, "answers read into buffers earlier answers released")
		}
	})
}

// TestPeer_lendRequests: calls a peer lends its handler (LendRequests)
// arrive whole, each in its own bytes, however many follow one another,
// and a handler's result may be its params, which are valid until the
// answer is written: a call whose handler is still running keeps its
// params while later calls are read and answered. On a WebSocket the
// calls are read into buffers of the pools, given back once answered, and
// a call comes in a buffer an earlier one had.
func TestPeer_lendRequests(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		gate := make(chan struct{})
		var mu sync.Mutex
		seen := map[*byte]bool{}
		reused := 0
		start(t, a, &peer.Options{LendRequests: true, MaxConcurrent: 4, Handler: peer.HandlerFunc(
			func(ctx context.Context, req *jsonrpc.Request) (any, error) {
				mu.Lock()
				buf := lastByte(req.Params)
				if seen[buf] {
					reused++
				}
				seen[buf] = true
				mu.Unlock()
				if req.Method == "wait" {
					<-gate
				}
				return req.Params, nil
			})})
		s := script{t, b}
		call := func(method string, i int) {
			t.Helper()
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s","params":{"text":"%s"}}`, i, method, bigPayload(i)))
		}
		answer := func(i int) {
			t.Helper()
			assert.Equal(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"text":"%s"}}`, i, bigPayload(i)), s.recv(), "answer %d", i)
		}
		for i := range 3 { // the calls that follow a lent one are read into pooled buffers
			call("echo", i)
			answer(i)
		}
		call("wait", 100)
		for i := 3; i < 40; i++ {
			call("echo", i)
			answer(i)
		}
		close(gate)
		answer(100)
		mu.Lock()
		defer mu.Unlock()
		if pooledReads(t) {
			assert.Positive(t, reused, "calls read into buffers earlier calls had")
		}
	})
}

// TestPeer_asyncBatch: the calls of a batch go to the AsyncHandler too, so
// that a batch waiting on its answers holds no worker: the batch is
// answered once every call in it is answered (in any order, whoever
// answered it) or cancelled, with the answers of those answered; a result
// lent to Send is copied, as the batch is encoded later; a call the
// handler leaves goes to a worker as before; and meanwhile the workers
// serve other calls.
func TestPeer_asyncBatch(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		calls := make(taker, 8)
		start(t, a, &peer.Options{Handler: leaveSome{calls}, MaxConcurrent: 1})
		s := script{t, b}
		take := func() taken {
			t.Helper()
			select {
			case tk := <-calls:
				return tk
			case <-time.After(wait):
				t.Fatal("a call of the batch did not reach the AsyncHandler")
				return taken{}
			}
		}

		s.send(`[{"jsonrpc":"2.0","id":1,"method":"wait"},{"jsonrpc":"2.0","id":2,"method":"wait"},` +
			`{"jsonrpc":"2.0","id":3,"method":"wait"},{"jsonrpc":"2.0","id":4,"method":"sync"}]`)
		one, two, three := take(), take(), take()
		// The one worker is free: a call alone is served while the batch waits.
		s.send(`{"jsonrpc":"2.0","id":9,"method":"sync"}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":9,"result":"sync"}`, s.recv())

		lent := []byte(`{"n":3}`)
		three.reply.Send(lent, nil)
		copy(lent, `{"n":0}`) // the caller's buffer, reused once Send returned
		two.reply.Send(nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "no"))
		s.send(`{"jsonrpc":"2.0","method":"cancel","params":{"requestId":1}}`)
		select {
		case <-cancelledOnce(one.reply):
		case <-time.After(wait):
			t.Fatal("the cancelled call's OnCancel did not run")
		}
		got := s.recv()
		var answers []map[string]any
		require.NoError(t, json.Unmarshal([]byte(got), &answers), got)
		byID := map[string]map[string]any{}
		for _, a := range answers {
			byID[fmt.Sprint(a["id"])] = a
		}
		assert.Len(t, answers, 3, "the cancelled call has no answer: %s", got)
		assert.Equal(t, map[string]any{"n": float64(3)}, byID["3"]["result"], "a lent result copied: %s", got)
		assert.NotNil(t, byID["2"]["error"], got)
		assert.Equal(t, "sync", byID["4"]["result"], "the call left to a worker: %s", got)

		one.reply.Send(json.RawMessage(`"late"`), nil) // after its cancellation: dropped
		s.send(`{"jsonrpc":"2.0","id":10,"method":"sync"}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":10,"result":"sync"}`, s.recv(), "nothing else was sent")
	})
}

// leaveSome takes the calls "wait" (to the test, through taker) and leaves
// the others to Handle, which answers "sync", or cancels the call a
// "cancel" notification names.
type leaveSome struct{ taker }

func (l leaveSome) Handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	if req.Method == "cancel" {
		var p struct{ RequestID jsonrpc.ID }
		json.Unmarshal(req.Params, &p)
		peer.FromContext(ctx).Cancel(p.RequestID)
		return nil, nil
	}
	return "sync", nil
}

func (l leaveSome) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	return req.Method == "wait" && l.taker.HandleAsync(req, reply)
}

// cancelledOnce returns a channel closed when reply's call is cancelled.
func cancelledOnce(reply *peer.Reply) <-chan struct{} {
	ch := make(chan struct{})
	reply.OnCancel(func() { close(ch) })
	return ch
}
