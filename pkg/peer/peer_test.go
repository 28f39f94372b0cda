package peer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 5 * time.Second

// transport makes a connected pair: the first end is given to a Peer, the
// second is driven by a test script.
type transport struct {
	name string
	pair func(t *testing.T) (peer.Conn, peer.Conn)
}

var transports = []transport{
	{"pipe", func(t *testing.T) (peer.Conn, peer.Conn) {
		a, b := peer.Pipe(64)
		t.Cleanup(func() { a.Close(peer.CloseNormal, ""); b.Close(peer.CloseNormal, "") })
		return a, b
	}},
	{"websocket", func(t *testing.T) (peer.Conn, peer.Conn) {
		return wsPair(t, nil, nil)
	}},
}

// wsPair returns the two ends of a real WebSocket over loopback: the
// server's (accepted by the hub side) and the client's.
func wsPair(t *testing.T, accept *peer.AcceptOptions, dial *peer.DialOptions) (*peer.WebSocket, *peer.WebSocket) {
	t.Helper()
	accepted := make(chan *peer.WebSocket, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := peer.Accept(w, r, accept)
		if err != nil {
			return
		}
		accepted <- c
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	client, err := peer.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), dial)
	require.NoError(t, err)
	var server *peer.WebSocket
	select {
	case server = <-accepted:
	case <-ctx.Done():
		t.Fatal("the server never accepted")
	}
	t.Cleanup(func() {
		client.Close(peer.CloseNormal, "")
		server.Close(peer.CloseNormal, "")
	})
	return server, client
}

func eachTransport(t *testing.T, fn func(t *testing.T, a, b peer.Conn)) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			a, b := tr.pair(t)
			// The script's end closes first, as a remote would: the peer
			// then sees the close instead of waiting for a handshake that
			// a script which no longer reads would never finish.
			defer b.Close(peer.CloseNormal, "")
			fn(t, a, b)
		})
	}
}

// script drives the raw end of a connection with literal frames.
type script struct {
	t *testing.T
	c peer.Conn
}

func (s script) send(frame string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(s.t, s.c.Write(ctx, []byte(frame)))
}

func (s script) recv() string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	b, err := s.c.Read(ctx)
	require.NoError(s.t, err, "waiting for a frame")
	return string(b)
}

func (s script) recvRequest() *jsonrpc.Request {
	s.t.Helper()
	m, err := jsonrpc.DecodeMessage([]byte(s.recv()))
	require.NoError(s.t, err)
	req, ok := m.(*jsonrpc.Request)
	require.True(s.t, ok, "expected a request, got %T", m)
	return req
}

// recvClose reads until the connection ends and returns how it closed.
func (s script) recvClose() error {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	for {
		if _, err := s.c.Read(ctx); err != nil {
			require.NoError(s.t, ctx.Err(), "the connection did not close in time")
			return err
		}
	}
}

func start(t *testing.T, c peer.Conn, opts *peer.Options) *peer.Peer {
	t.Helper()
	p := peer.New(c, opts)
	p.Start(context.Background())
	t.Cleanup(func() { p.CloseWith(peer.CloseNormal, ""); p.Wait() })
	return p
}

func echo(ctx context.Context, req *jsonrpc.Request) (any, error) {
	switch req.Method {
	case "echo":
		return req.Params, nil
	case "fail":
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "always fails")
	case "panic":
		panic("boom")
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, jsonrpc.ErrMethodNotFound
}

func TestPeer_call(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, nil)
		s := script{t, b}
		got := make(chan error, 1)
		var result struct{ Sum int }
		go func() { got <- p.Call(context.Background(), "sum", []int{1, 2}, &result) }()

		req := s.recvRequest()
		assert.Equal(t, "sum", req.Method)
		assert.JSONEq(t, `[1,2]`, string(req.Params))
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"Sum":3}}`, req.ID))
		require.NoError(t, <-got)
		assert.Equal(t, 3, result.Sum)

		go func() { got <- p.Call(context.Background(), "boom", nil, nil) }()
		req = s.recvRequest()
		assert.Nil(t, req.Params, "nil params are left out")
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"bad","data":{"x":1}}}`, req.ID))
		err := <-got
		assert.ErrorIs(t, err, jsonrpc.ErrInvalidParams)
		var rpcErr *jsonrpc.Error
		require.ErrorAs(t, err, &rpcErr)
		assert.Equal(t, "bad", rpcErr.Message)
		assert.JSONEq(t, `{"x":1}`, string(rpcErr.Data))
	})
}

func TestPeer_answersOutOfOrder(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, nil)
		s := script{t, b}
		const n = 8
		results := make([]chan string, n)
		for i := range results {
			results[i] = make(chan string, 1)
			go func() {
				var r string
				err := p.Call(context.Background(), "m", []int{i}, &r)
				if err != nil {
					r = err.Error()
				}
				results[i] <- r
			}()
		}
		reqs := make([]*jsonrpc.Request, n)
		for i := range reqs {
			reqs[i] = s.recvRequest()
		}
		for i := n - 1; i >= 0; i-- { // answer in reverse order
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"answer to %s"}`, reqs[i].ID, reqs[i].Params))
		}
		for i := range results {
			assert.Equal(t, fmt.Sprintf("answer to [%d]", i), <-results[i])
		}
	})
}

func TestPeer_notify(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, nil)
		require.NoError(t, p.Notify(context.Background(), "notifications/progress", map[string]int{"progress": 1}))
		assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`, script{t, b}.recv())
	})
}

func TestPeer_answersCalls(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		start(t, a, &peer.Options{Handler: peer.HandlerFunc(echo)})
		s := script{t, b}
		for _, tt := range []struct{ in, want string }{
			{`{"jsonrpc":"2.0","id":"x","method":"echo","params":{"a":[1]}}`, `{"jsonrpc":"2.0","id":"x","result":{"a":[1]}}`},
			{`{"jsonrpc":"2.0","id":18446744073709551617,"method":"echo","params":[]}`, `{"jsonrpc":"2.0","id":18446744073709551617,"result":[]}`},
			{`{"jsonrpc":"2.0","id":0,"method":"fail"}`, `{"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"Invalid params: always fails"}}`},
			{`{"jsonrpc":"2.0","id":1,"method":"nope"}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`},
			{`{"jsonrpc":"2.0","id":2,"method":"panic"}`, `{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error"}}`},
			{`{"jsonrpc":"2.0","id":3,"method":1}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request: \"method\" must be a string"}}`},
			{`not json`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character 'o' in literal null (expecting 'u')"}}`},
		} {
			s.send(tt.in)
			assert.Equal(t, tt.want, s.recv(), tt.in)
		}
	})
}

// TestPeer_specBatch runs the mixed batch of section 7 of the specification
// through a peer: the answer is one array, notifications get nothing, and a
// batch of notifications gets no reply at all.
func TestPeer_specBatch(t *testing.T) {
	t.Parallel()
	handler := peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		switch req.Method {
		case "sum":
			return 7, nil
		case "subtract":
			return 19, nil
		case "get_data":
			return []any{"hello", 5}, nil
		case "notify_hello", "notify_sum":
			return nil, nil
		}
		return nil, jsonrpc.ErrMethodNotFound
	})
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		start(t, a, &peer.Options{Handler: handler})
		s := script{t, b}
		s.send(`[{"jsonrpc":"2.0","method":"notify_sum","params":[1,2,4]},{"jsonrpc":"2.0","method":"notify_hello","params":[7]}]`)
		s.send(`[
			{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
			{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
			{"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
			{"foo": "boo"},
			{"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
			{"jsonrpc": "2.0", "method": "get_data", "id": "9"}
		]`)
		// The all-notification batch was sent first; had it been answered,
		// its reply would come before this one.
		var got []struct {
			ID     jsonrpc.ID      `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct{ Code int }
		}
		require.NoError(t, json.Unmarshal([]byte(s.recv()), &got))
		byID := map[string]string{}
		for _, r := range got {
			if r.Error != nil {
				byID[r.ID.String()] = fmt.Sprint(r.Error.Code)
			} else {
				byID[r.ID.String()] = string(r.Result)
			}
		}
		assert.Equal(t, map[string]string{`"1"`: "7", `"2"`: "19", "null": "-32600", `"5"`: "-32601", `"9"`: `["hello",5]`}, byID)
	})
}

func TestPeer_ignoresUnsolicitedAndDuplicateResponses(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, &peer.Options{Handler: peer.HandlerFunc(echo)})
		s := script{t, b}
		s.send(`{"jsonrpc":"2.0","id":999,"result":1}`)
		s.send(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)

		got := make(chan error, 1)
		var n int
		go func() { got <- p.Call(context.Background(), "m", nil, &n) }()
		req := s.recvRequest()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":1}`, req.ID))
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":2}`, req.ID))
		require.NoError(t, <-got)
		assert.Equal(t, 1, n)

		s.send(`{"jsonrpc":"2.0","id":5,"method":"echo","params":["still here"]}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":5,"result":["still here"]}`, s.recv())
	})
}

// hooked is a Handler that takes the peer's hooks as its methods.
type hooked struct {
	peer.HandlerFunc
	cancelled chan jsonrpc.ID
	closed    chan error
	done      chan struct{}
}

func (h *hooked) OnCancel(id jsonrpc.ID, _ error) { h.cancelled <- id }
func (h *hooked) OnClose(err error)               { h.closed <- err }
func (h *hooked) OnDone()                         { close(h.done) }

// A Handler's Hooks methods run where Options leaves the funcs nil; a func
// set in Options is used in place of its method.
func TestPeer_hooksOfTheHandler(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		h := &hooked{HandlerFunc: echo, cancelled: make(chan jsonrpc.ID, 1), closed: make(chan error, 1), done: make(chan struct{})}
		optsClosed := make(chan error, 1)
		p := peer.New(a, &peer.Options{Handler: h, OnClose: func(err error) { optsClosed <- err }})
		p.Start(context.Background())
		s := script{t, b}
		cancelOneCall(t, p, s, h.cancelled)

		p.CloseWith(peer.CloseNormal, "")
		go b.Close(peer.CloseNormal, "") // the other side answers the close
		select {
		case <-optsClosed:
		case <-time.After(wait):
			t.Fatal("Options.OnClose was not called")
		}
		require.NoError(t, p.Wait())
		select {
		case <-h.done:
		case <-time.After(wait):
			t.Fatal("the Handler's OnDone was not called")
		}
		assert.Empty(t, h.closed, "the Handler's OnClose, with Options.OnClose set")
	})
}

// cancelOneCall makes a call of p's, cancels it, and checks that the OnCancel
// that sends on cancelled was told its id.
func cancelOneCall(t *testing.T, p *peer.Peer, s script, cancelled <-chan jsonrpc.ID) jsonrpc.ID {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- p.Call(ctx, "slow", nil, nil) }()
	req := s.recvRequest()
	cancel()
	assert.ErrorIs(t, <-got, context.Canceled)
	select {
	case id := <-cancelled:
		assert.Equal(t, req.ID, id)
	case <-time.After(wait):
		t.Fatal("OnCancel was not called")
	}
	return req.ID
}

func TestPeer_cancelOutgoing(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		cancelled := make(chan jsonrpc.ID, 1)
		p := start(t, a, &peer.Options{OnCancel: func(id jsonrpc.ID, cause error) {
			assert.ErrorIs(t, cause, context.Canceled)
			cancelled <- id
		}})
		s := script{t, b}
		id := cancelOneCall(t, p, s, cancelled)
		// A late answer is ignored, and the peer keeps working.
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":1}`, id))
		got := make(chan error, 1)
		go func() { got <- p.Call(context.Background(), "next", nil, nil) }()
		req2 := s.recvRequest()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":2}`, req2.ID))
		assert.NoError(t, <-got)
	})
}

func TestPeer_cancelIncoming(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		running := make(chan struct{})
		stopped := make(chan error, 1)
		handler := peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			switch req.Method {
			case "cancel": // a notification naming the call to cancel
				var params struct{ RequestID jsonrpc.ID }
				require.NoError(t, json.Unmarshal(req.Params, &params))
				assert.True(t, peer.FromContext(ctx).Cancel(params.RequestID))
				return nil, nil
			case "block":
				close(running)
				<-ctx.Done()
				stopped <- ctx.Err()
				return "too late", nil
			}
			return echo(ctx, req)
		})
		start(t, a, &peer.Options{Handler: handler})
		s := script{t, b}
		s.send(`{"jsonrpc":"2.0","id":7,"method":"block"}`)
		<-running
		s.send(`{"jsonrpc":"2.0","method":"cancel","params":{"requestId":7}}`)
		assert.ErrorIs(t, <-stopped, context.Canceled)
		// The cancelled call is never answered: the next frame is the echo.
		s.send(`{"jsonrpc":"2.0","id":8,"method":"echo","params":[8]}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":8,"result":[8]}`, s.recv())
	})
}

func TestPeer_closeMidCall(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, nil)
		s := script{t, b}
		got := make(chan error, 1)
		go func() { got <- p.Call(context.Background(), "slow", nil, nil) }()
		s.recvRequest()
		require.NoError(t, b.Close(peer.CloseGoingAway, "server restarting"))
		select {
		case err := <-got:
			assert.ErrorIs(t, err, peer.ErrClosed)
			assert.Equal(t, jsonrpc.Code(-32000), jsonrpc.CodeOf(err))
		case <-time.After(wait):
			t.Fatal("the pending call did not fail when the connection closed")
		}
		assert.NoError(t, p.Wait(), "1001 is a normal close")
		assert.Equal(t, peer.CloseGoingAway, peer.CloseStatus(p.Err()))
		assert.ErrorIs(t, p.Call(context.Background(), "after", nil, nil), peer.ErrClosed)
		assert.ErrorIs(t, p.Notify(context.Background(), "after", nil), peer.ErrClosed)
	})
}

func TestPeer_closeFailsPendingAndCancelsHandlers(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		running := make(chan struct{})
		handlerErr := make(chan error, 1)
		p := start(t, a, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			close(running)
			<-ctx.Done()
			handlerErr <- ctx.Err()
			return nil, ctx.Err()
		})})
		s := script{t, b}
		s.send(`{"jsonrpc":"2.0","id":1,"method":"block"}`)
		<-running
		got := make(chan error, 1)
		go func() { got <- p.Call(context.Background(), "pending", nil, nil) }()
		s.recvRequest()
		closed := make(chan error, 1)
		go func() { closed <- s.recvClose() }()
		require.NoError(t, p.Close())
		assert.ErrorIs(t, <-got, peer.ErrClosed)
		assert.ErrorIs(t, <-handlerErr, context.Canceled)
		assert.Equal(t, peer.CloseNormal, peer.CloseStatus(<-closed))
	})
}

func TestPeer_concurrencyIsBounded(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		var running, most atomic.Int32
		release := make(chan struct{})
		p := start(t, a, &peer.Options{MaxConcurrent: 2, Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			<-release
			return req.ID, nil
		})})
		_ = p
		s := script{t, b}
		for i := range 6 {
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"work"}`, i))
		}
		require.Eventually(t, func() bool { return running.Load() == 2 }, wait, time.Millisecond)
		close(release)
		seen := map[string]bool{}
		for range 6 {
			var r struct{ ID jsonrpc.ID }
			require.NoError(t, json.Unmarshal([]byte(s.recv()), &r))
			seen[r.ID.String()] = true
		}
		assert.Len(t, seen, 6, "every queued call is answered")
		assert.Equal(t, int32(2), most.Load(), "no more than MaxConcurrent handlers ran at once")
	})
}

func TestPeer_overloaded(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		release := make(chan struct{})
		start(t, a, &peer.Options{MaxConcurrent: 1, MaxPending: 2,
			Overloaded: jsonrpc.NewError(-32004, "rate limited"),
			Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
				<-release
				return "ok", nil
			})})
		s := script{t, b}
		s.send(`{"jsonrpc":"2.0","id":1,"method":"w"}`)
		s.send(`{"jsonrpc":"2.0","id":2,"method":"w"}`)
		s.send(`{"jsonrpc":"2.0","id":3,"method":"w"}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":3,"error":{"code":-32004,"message":"rate limited"}}`, s.recv())
		close(release)
		assert.Contains(t, []string{s.recv(), s.recv()}, `{"jsonrpc":"2.0","id":1,"result":"ok"}`)
	})
}

func TestPeer_duplicateIncomingID(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		release := make(chan struct{})
		start(t, a, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			<-release
			return "first", nil
		})})
		s := script{t, b}
		s.send(`{"jsonrpc":"2.0","id":"same","method":"w"}`)
		s.send(`{"jsonrpc":"2.0","id":"same","method":"w"}`)
		assert.Equal(t, `{"jsonrpc":"2.0","id":"same","error":{"code":-32600,"message":"Invalid Request: id \"same\" is already in flight"}}`, s.recv())
		close(release)
		assert.Equal(t, `{"jsonrpc":"2.0","id":"same","result":"first"}`, s.recv())
	})
}

// TestPeer_notificationsKeepOrder checks that notifications are handled in
// the order they arrive, before a response that follows them.
func TestPeer_notificationsKeepOrder(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		var mu sync.Mutex
		var seen []string
		p := start(t, a, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			mu.Lock()
			seen = append(seen, string(req.Params))
			mu.Unlock()
			return nil, nil
		})})
		s := script{t, b}
		got := make(chan error, 1)
		go func() { got <- p.Call(context.Background(), "m", nil, nil) }()
		req := s.recvRequest()
		for i := range 50 {
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"progress","params":[%d]}`, i))
		}
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":null}`, req.ID))
		require.NoError(t, <-got)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, seen, 50, "every notification was handled before the response was delivered")
		for i, s := range seen {
			assert.Equal(t, fmt.Sprintf("[%d]", i), s)
		}
	})
}

func TestPeer_slowConsumer(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, &peer.Options{SendQueue: 4})
		big := map[string]string{"pad": strings.Repeat("x", 64<<10)}
		var err error
		for i := 0; i < 100_000 && err == nil; i++ {
			err = p.Notify(context.Background(), "flood", big)
		}
		require.Error(t, err, "the queue never overflowed")
		assert.ErrorIs(t, err, peer.ErrSlowConsumer)
		assert.ErrorIs(t, err, peer.ErrClosed)
		assert.ErrorIs(t, p.Err(), peer.ErrSlowConsumer)
		// The consumer that finally reads finds the close code after the
		// frames that were already under way.
		closeErr := script{t, b}.recvClose()
		assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(closeErr), "got %v", closeErr)
		assert.Contains(t, closeErr.Error(), "slow consumer")
		assert.ErrorIs(t, p.Wait(), peer.ErrSlowConsumer)
	})
}

func TestPeer_twoPeersTalk(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		// Each side answers by calling the other back: both read loops and
		// both handler pools are exercised at once.
		var pa, pb *peer.Peer
		pa = start(t, a, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var n []int
			if err := json.Unmarshal(req.Params, &n); err != nil || len(n) != 1 {
				return nil, jsonrpc.ErrInvalidParams
			}
			return n[0] * 2, nil
		})})
		pb = start(t, b, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			var doubled int
			err := peer.FromContext(ctx).Call(ctx, "double", req.Params, &doubled)
			return doubled + 1, err
		})})
		var wg sync.WaitGroup
		for i := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var got int
				assert.NoError(t, pa.Call(context.Background(), "doublePlusOne", []int{i}, &got))
				assert.Equal(t, 2*i+1, got)
			}()
		}
		wg.Wait()
		require.NoError(t, pa.Close())
		require.NoError(t, pb.Wait())
	})
}

func TestPeer_startContextEnds(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		ctx, cancel := context.WithCancel(context.Background())
		p := peer.New(a, nil)
		p.Start(ctx)
		closed := make(chan error, 1)
		go func() { closed <- script{t, b}.recvClose() }()
		cancel()
		assert.NoError(t, p.Wait())
		assert.Equal(t, peer.CloseGoingAway, peer.CloseStatus(<-closed))
	})
}

func TestPeer_refusesScalarParams(t *testing.T) {
	t.Parallel()
	a, _ := peer.Pipe(1)
	p := peer.New(a, nil)
	assert.ErrorContains(t, p.Call(context.Background(), "m", 42, nil), "object or an array")
	assert.ErrorContains(t, p.Notify(context.Background(), "m", "x"), "object or an array")
	require.NoError(t, p.Close())
}

func TestCloseError(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("reading: %w", &peer.CloseError{Code: peer.CloseMessageTooBig, Reason: "too big"})
	assert.Equal(t, peer.CloseMessageTooBig, peer.CloseStatus(err))
	assert.Equal(t, peer.CloseCode(-1), peer.CloseStatus(errors.New("other")))
	assert.Equal(t, "connection closed with status 1009: too big", (&peer.CloseError{Code: 1009, Reason: "too big"}).Error())
}

// TestPeer_normalCloseWhileWriting: the other side closing normally while
// this side writes is a normal close, not a write error.
func TestPeer_normalCloseWhileWriting(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		p := start(t, a, &peer.Options{SendQueue: 1 << 20, SendQueueBytes: 1 << 30}) // never a slow consumer here
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 1_000_000 && p.Notify(context.Background(), "tick", []int{1}) == nil; i++ {
			}
		}()
		script{t, b}.recv()
		require.NoError(t, b.Close(peer.CloseNormal, "bye"))
		<-done
		assert.NoError(t, p.Wait())
	})
}

// TestPeer_idleWorkersAreReservedOneJobEach: calls that arrive while one
// worker waits for work must each get a worker, not one wake-up among them.
func TestPeer_idleWorkersAreReservedOneJobEach(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		started := make(chan struct{}, 16)
		start(t, a, &peer.Options{MaxConcurrent: 8, Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			if req.Method == "quick" {
				return "ok", nil
			}
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		})})
		s := script{t, b}
		s.send(`{"jsonrpc":"2.0","id":0,"method":"quick"}`)
		s.recv() // a worker now waits for more work
		for i := 1; i <= 6; i++ {
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"block"}`, i))
		}
		for i := range 6 {
			select {
			case <-started:
			case <-time.After(wait):
				t.Fatalf("only %d of 6 calls started", i)
			}
		}
	})
}

// TestPeer_handlerContexts: the handlers' contexts, made when a handler
// first needs them, carry the values of Start's context and the peer, for a
// notification and a call alike, and end when the peer closes.
func TestPeer_handlerContexts(t *testing.T) {
	t.Parallel()
	type key struct{}
	eachTransport(t, func(t *testing.T, a, b peer.Conn) {
		type seen struct {
			method string
			value  any
			peer   *peer.Peer
			ctx    context.Context
		}
		got := make(chan seen, 2)
		p := peer.New(a, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			got <- seen{req.Method, ctx.Value(key{}), peer.FromContext(ctx), ctx}
			return "ok", nil
		})})
		p.Start(context.WithValue(context.Background(), key{}, "start's"))
		s := script{t, b}
		s.send(`{"jsonrpc":"2.0","method":"note"}`)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"call"}`)
		var ctxs []context.Context
		var noteCtx context.Context
		for range 2 {
			select {
			case h := <-got:
				assert.Equal(t, "start's", h.value, "%s: the values of Start's context", h.method)
				assert.Same(t, p, h.peer, "%s: the peer", h.method)
				ctxs = append(ctxs, h.ctx)
				if h.method == "note" {
					noteCtx = h.ctx
				}
			case <-time.After(wait):
				t.Fatal("a handler never ran")
			}
		}
		s.recv() // the call's answer
		p.CloseWith(peer.CloseNormal, "")
		require.NoError(t, p.Wait())
		for _, ctx := range ctxs {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
				t.Fatal("a handler's context did not end with the peer")
			}
		}
		var closed *peer.CloseError
		assert.ErrorAs(t, context.Cause(noteCtx), &closed, "a notification's context ends with why the peer closed")
	})
}
