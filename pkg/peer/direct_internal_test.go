package peer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// quietConn is a DirectConn that records what the peer writes.
type quietConn struct {
	feed    Feed
	written chan string
}

func (c *quietConn) Bind(f Feed)                                 { c.feed = f }
func (c *quietConn) Read(context.Context) ([]byte, error)        { panic("a peer read a DirectConn") }
func (c *quietConn) Write(_ context.Context, frame []byte) error { return c.WriteDirect(frame) }
func (c *quietConn) WriteDirect(frame []byte) error              { c.written <- string(frame); return nil }
func (c *quietConn) Close(CloseCode, string) error {
	c.feed.End(&CloseError{Code: CloseNormal})
	return nil
}

// TestFeed_quietDropsTheMapsOfCalls: a quiet DirectConn's peer drops its
// maps of calls while none is in flight, keeps them while one is, and
// serves calls after as before.
func TestFeed_quietDropsTheMapsOfCalls(t *testing.T) {
	t.Parallel()
	conn := &quietConn{written: make(chan string, 4)}
	p := New(conn, &Options{Handler: HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.Method == "wait" {
			<-ctx.Done()
		}
		return "ok", nil
	})})
	p.Start(context.Background())
	t.Cleanup(func() { p.Close() })
	call := func(id int64, method string) {
		req := &jsonrpc.Request{ID: jsonrpc.Int64ID(id), Method: method}
		require.True(t, conn.feed.Frame(nil, jsonrpc.Frame{Messages: []jsonrpc.Message{req}}, jsonrpc.Limits{}))
	}
	incoming := func() (made bool, n int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.incoming != nil, len(p.incoming)
	}

	call(1, "ping")
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":"ok"}`, <-conn.written)
	made, _ := incoming()
	require.True(t, made, "the map of calls made by the first call")
	conn.feed.Quiet()
	made, _ = incoming()
	assert.False(t, made, "dropped while quiet with no call in flight")

	call(2, "wait")
	require.Eventually(t, func() bool { _, n := incoming(); return n == 1 }, 5*time.Second, time.Millisecond)
	conn.feed.Quiet()
	_, n := incoming()
	assert.Equal(t, 1, n, "a call in flight is kept")
	p.Cancel(jsonrpc.Int64ID(2))
	call(3, "ping")
	assert.Equal(t, `{"jsonrpc":"2.0","id":3,"result":"ok"}`, <-conn.written, "served after as before")
}

// TestPeer_doneMadeWhenAsked: a peer makes its Done channel only when
// asked for it (an idle client's session never is), and closes it as it
// closes, whether it was asked for before or after; OnDone runs once.
func TestPeer_doneMadeWhenAsked(t *testing.T) {
	t.Parallel()
	start := func() (*Peer, *quietConn, chan struct{}) {
		conn := &quietConn{written: make(chan string, 4)}
		ended := make(chan struct{})
		p := New(conn, &Options{OnDone: func() { close(ended) }}) // a second run would panic
		p.Start(context.Background())
		req := &jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: "ping"}
		require.True(t, conn.feed.Frame(nil, jsonrpc.Frame{Messages: []jsonrpc.Message{req}}, jsonrpc.Limits{}))
		<-conn.written
		return p, conn, ended
	}
	before, _, beforeEnded := start()
	before.mu.Lock()
	made := before.done != nil
	before.mu.Unlock()
	assert.False(t, made, "no Done channel made by serving a call")
	early := before.Done()
	select {
	case <-early:
		t.Fatal("Done closed before the peer closed")
	default:
	}
	require.NoError(t, before.Close())
	<-early
	<-beforeEnded

	after, conn, afterEnded := start()
	require.NoError(t, after.Close())
	<-afterEnded
	<-after.Done()
	require.NoError(t, after.Wait())
	assert.False(t, conn.feed.Frame(nil, jsonrpc.Frame{Messages: []jsonrpc.Message{&jsonrpc.Request{ID: jsonrpc.Int64ID(2), Method: "ping"}}}, jsonrpc.Limits{}), "nothing handled once closed")
}
