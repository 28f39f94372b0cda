//go:build linux

package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Readers park after 50 to 100 ms of quiet in the tests.
func init() { idleSweep = 50 * time.Millisecond }

// parkedNow reports whether the reader of c is parked.
func parkedNow(c *WebSocket) bool {
	idle.mu.Lock()
	defer idle.mu.Unlock()
	return c.cork.resume != nil
}

// waitUntil polls cond every 10ms for up to 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servePair starts an echoing peer on the accepted end of a WebSocket
// (opts tune its conn) and a peer on the dialled end, whose notifications
// go to notes.
func servePair(t *testing.T, opts *WebSocketOptions) (server, client *Peer, sc *WebSocket, notes chan string) {
	t.Helper()
	a, b := wsPairInternal(t)
	if opts != nil {
		a.opts = opts.withDefaults()
		if a.opts.PingInterval > 0 {
			pings.schedule(a, time.Now().Add(a.opts.PingInterval))
		}
	}
	notes = make(chan string, 16)
	server, client = startPair(t, a, b, HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.IsNotification() {
			notes <- req.Method
			return nil, nil
		}
		return req.Params, nil
	}))
	return server, client, a, notes
}

// startPair starts a peer with handler on the accepted end a and one on
// the dialled end b, both closed when the test ends.
func startPair(t *testing.T, a, b *WebSocket, handler Handler) (server, client *Peer) {
	t.Helper()
	server = New(a, &Options{Handler: handler})
	server.Start(context.Background())
	client = New(b, nil)
	client.Start(context.Background())
	t.Cleanup(func() {
		client.CloseWith(CloseNormal, "")
		server.CloseWith(CloseNormal, "")
		_ = client.Wait()
		_ = server.Wait()
	})
	return server, client
}

// TestIdle_readerParksAndResumes: the reader of a quiet accepted
// connection leaves, and one is back for whatever comes next: a call, a
// notification, keepalive's pongs, after each of which it leaves again.
func TestIdle_readerParksAndResumes(t *testing.T) {
	t.Parallel()
	// Pings further apart than a reader takes to park: each pong must
	// bring a reader back, or the ping times out and drops the connection.
	// (The timeout is long: a loaded machine must not drop it.)
	_, client, sc, notes := servePair(t, &WebSocketOptions{PingInterval: 400 * time.Millisecond, PingTimeout: 5 * time.Second})
	call := func(s string) {
		t.Helper()
		var got json.RawMessage
		require.NoError(t, client.Call(context.Background(), "echo", []string{s}, &got))
		assert.JSONEq(t, `["`+s+`"]`, string(got))
	}
	call("first")
	waitUntil(t, "the reader parks", func() bool { return parkedNow(sc) })
	call("while parked")
	require.NoError(t, client.Notify(context.Background(), "note", nil))
	select {
	case m := <-notes:
		assert.Equal(t, "note", m)
	case <-time.After(10 * time.Second):
		t.Fatal("the notification never reached the handler")
	}
	waitUntil(t, "the reader parks again", func() bool { return parkedNow(sc) })
	// Nothing but pongs comes now: each wakes the reader, which reads it
	// and parks again. (A wake missed between two looks is only a wait for
	// the next ping.)
	for range 3 {
		waitUntil(t, "a pong wakes the reader", func() bool { return !parkedNow(sc) })
		waitUntil(t, "the reader parks again after the pong", func() bool { return parkedNow(sc) })
	}
	call("after the pings")
}

// TestIdle_closeWhileParked: a peer whose reader is parked closes, by
// either side, and every goroutine of its ends.
func TestIdle_closeWhileParked(t *testing.T) {
	t.Parallel()
	for _, side := range []string{"server", "client"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel()
			server, client, sc, _ := servePair(t, nil)
			require.NoError(t, client.Call(context.Background(), "echo", []int{1}, nil))
			waitUntil(t, "the reader parks", func() bool { return parkedNow(sc) })
			if side == "server" {
				server.CloseWith(CloseNormal, "bye")
			} else {
				client.CloseWith(CloseGoingAway, "bye")
			}
			done := make(chan error, 1)
			go func() { done <- server.Wait() }()
			select {
			case err := <-done:
				require.NoError(t, err)
				if side == "client" {
					assert.Equal(t, CloseGoingAway, CloseStatus(server.Err()), "the client's close, read by a reader started again")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server peer did not end")
			}
			assert.False(t, parkedNow(sc))
		})
	}
}

// TestIdle_parkedPeerKeepsNoFrame: a parked reader's peer does not keep
// the last message it read (the decoder held it, and through its params
// the frame's bytes, until the next frame came).
func TestIdle_parkedPeerKeepsNoFrame(t *testing.T) {
	t.Parallel()
	a, b := wsPairInternal(t)
	last := make(chan weak.Pointer[jsonrpc.Request], 1)
	_, client := startPair(t, a, b, HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		last <- weak.Make(req)
		return nil, nil
	}))
	require.NoError(t, client.Notify(context.Background(), "note", map[string]string{"text": strings.Repeat("x", 4<<10)}))
	var req weak.Pointer[jsonrpc.Request]
	select {
	case req = <-last:
	case <-time.After(10 * time.Second):
		t.Fatal("the notification never reached the handler")
	}
	waitUntil(t, "the reader parks", func() bool { return parkedNow(a) })
	waitUntil(t, "the message is collected", func() bool {
		runtime.GC()
		return req.Value() == nil
	})
	require.NoError(t, client.Notify(context.Background(), "note", nil))
	select {
	case <-last:
	case <-time.After(10 * time.Second):
		t.Fatal("the next notification never reached the handler")
	}
}

// TestIdle_parkedReadersHoldNoGoroutine: quiet accepted connections hold
// no reader goroutine; dialled ones keep theirs. Nor does the package: with
// every reader parked, the sweeper has nothing to look at, and stops.
// (Not parallel: the sweeper is the package's.)
func TestIdle_parkedReadersHoldNoGoroutine(t *testing.T) {
	const n = 20
	var conns []*WebSocket
	for range n {
		_, client, sc, _ := servePair(t, nil)
		require.NoError(t, client.Call(context.Background(), "echo", []int{1}, nil))
		conns = append(conns, sc)
	}
	waitUntil(t, "every reader parks", func() bool {
		for _, c := range conns {
			if !parkedNow(c) {
				return false
			}
		}
		return true
	})
	assert.Equal(t, n, readers(), "the clients' readers only")
	idle.mu.Lock()
	for _, c := range conns {
		assert.False(t, c.cork.watched, "a parked reader is not swept")
	}
	idle.mu.Unlock()
	waitUntil(t, "the sweeper stops", func() bool {
		idle.mu.Lock()
		defer idle.mu.Unlock()
		return len(idle.watched) == 0 && idle.sweeping == nil
	})
}

// readers counts the goroutines waiting for a frame to read: in a conn's
// Read, or in corkConn.await.
func readers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("peer.(*Peer).readFrame(")) + bytes.Count(buf, []byte("peer.(*corkConn).await("))
}

// TestIdle_pingBetweenFragments: a ping between the fragments of a
// message is answered, and the reader reads the message on to its end
// rather than looking for a next one.
func TestIdle_pingBetweenFragments(t *testing.T) {
	t.Parallel()
	url, accepted := wsAccepting(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, _, err := websocket.Dial(ctx, url, nil) // its own writer sends fragments
	require.NoError(t, err)
	defer cc.CloseNow()
	var sc *WebSocket
	select {
	case sc = <-accepted:
	case <-ctx.Done():
		t.Fatal("the server never accepted")
	}
	notes := make(chan string, 1)
	server := New(sc, &Options{Handler: HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		notes <- req.Method
		return nil, nil
	})})
	server.Start(context.Background())
	t.Cleanup(func() {
		server.CloseWith(CloseNormal, "")
		_ = server.Wait()
	})
	cc.CloseRead(ctx) // reads the pong; nothing else comes

	w, err := cc.Writer(ctx, websocket.MessageText)
	require.NoError(t, err)
	_, err = w.Write([]byte(`{"jsonrpc":"2.0",`))
	require.NoError(t, err)
	require.NoError(t, cc.Ping(ctx), "the ping between two fragments (which it sends with the first)")
	_, err = w.Write([]byte(`"method":"note"}`))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	select {
	case m := <-notes:
		assert.Equal(t, "note", m)
	case <-server.Done():
		t.Fatalf("the server peer ended: %v", server.Err())
	case <-ctx.Done():
		t.Fatal("the fragmented notification never reached the handler")
	}
}
