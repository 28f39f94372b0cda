package peer_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// directConn is a DirectConn as Streamable HTTP's session is one: frames
// are fed by the test's goroutines, and what the peer writes is recorded
// with the goroutine that wrote it.
type directConn struct {
	feed   chan peer.Feed
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	bound  *peer.Feed
	frames []string
	direct []bool // written with WriteDirect
}

func newDirectConn() *directConn {
	return &directConn{feed: make(chan peer.Feed, 1), closed: make(chan struct{})}
}

func (c *directConn) Bind(f peer.Feed) {
	c.mu.Lock()
	c.bound = &f
	c.mu.Unlock()
	c.feed <- f
}

// Read is never called: a DirectConn says when it ends (Close: Feed.End).
func (c *directConn) Read(context.Context) ([]byte, error) {
	panic("a peer read a DirectConn")
}

func (c *directConn) record(frame []byte, direct bool) error {
	select {
	case <-c.closed:
		return net.ErrClosed
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames = append(c.frames, string(frame))
	c.direct = append(c.direct, direct)
	return nil
}

func (c *directConn) Write(_ context.Context, frame []byte) error { return c.record(frame, false) }
func (c *directConn) WriteDirect(frame []byte) error              { return c.record(frame, true) }

func (c *directConn) Close(peer.CloseCode, string) error {
	c.once.Do(func() {
		close(c.closed)
		c.mu.Lock()
		f := c.bound
		c.mu.Unlock()
		if f != nil {
			f.End(&peer.CloseError{Code: peer.CloseNormal})
		}
	})
	return nil
}

func (c *directConn) written() ([]string, []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.frames...), append([]bool(nil), c.direct...)
}

// asyncEcho takes "fwd" calls and answers them later, from another
// goroutine, as the hub answers a routed call when its server does; it
// notes the goroutine each call was taken on.
type asyncEcho struct {
	taken chan *peer.Reply
}

func (a *asyncEcho) Handle(context.Context, *jsonrpc.Request) (any, error) { return "sync", nil }

func (a *asyncEcho) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	if req.Method != "fwd" {
		return false
	}
	a.taken <- reply
	return true
}

// startDirect starts a peer on a directConn with an asyncEcho handler, and
// returns them and the peer's Feed.
func startDirect(t *testing.T) (*directConn, *asyncEcho, *peer.Peer, peer.Feed) {
	conn := newDirectConn()
	h := &asyncEcho{taken: make(chan *peer.Reply, 1)}
	p := peer.New(conn, &peer.Options{Handler: h})
	p.Start(context.Background())
	t.Cleanup(func() { p.Close() })
	return conn, h, p, <-conn.feed
}

func TestDirectConn_fedCallsAreTakenByTheFeederAndAnsweredDirectly(t *testing.T) {
	t.Parallel()
	conn, h, _, feed := startDirect(t)

	// The feeder's own goroutine hands the call to HandleAsync: the reply
	// is there when Frame returns, with no reader woken in between.
	msg := &jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: "fwd", Params: []byte(`{}`)}
	require.True(t, feed.Frame(nil, jsonrpc.Frame{Messages: []jsonrpc.Message{msg}}, jsonrpc.Limits{}))
	var reply *peer.Reply
	select {
	case reply = <-h.taken:
	default:
		t.Fatal("the call was not taken on the feeding goroutine")
	}
	reply.Send([]byte(`"ok"`), nil)
	frames, direct := conn.written()
	require.Equal(t, []string{`{"jsonrpc":"2.0","id":1,"result":"ok"}`}, frames, "written before Send returns")
	assert.Equal(t, []bool{true}, direct, "by WriteDirect")

	// A call left to Handle runs on a worker, so that the feeder may go on.
	other := &jsonrpc.Request{ID: jsonrpc.Int64ID(2), Method: "other"}
	require.True(t, feed.Frame([]byte(jsonrpc.Encode(other)), jsonrpc.Frame{}, jsonrpc.Limits{}), "decoded from raw")
	require.Eventually(t, func() bool { f, _ := conn.written(); return len(f) == 2 }, 5*time.Second, time.Millisecond)
	frames, _ = conn.written()
	assert.Equal(t, `{"jsonrpc":"2.0","id":2,"result":"sync"}`, frames[1])
}

func TestDirectConn_answerStaysBehindQueuedNotices(t *testing.T) {
	t.Parallel()
	conn, h, p, feed := startDirect(t)

	msg := &jsonrpc.Request{ID: jsonrpc.Int64ID(7), Method: "fwd"}
	require.True(t, feed.Frame(nil, jsonrpc.Frame{Messages: []jsonrpc.Message{msg}}, jsonrpc.Limits{}))
	reply := <-h.taken
	// A progress report queues (notices coalesce in the queue); the
	// answer right after it must not overtake it.
	for range 50 {
		p.SendNotice([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`), "p1")
	}
	reply.Send([]byte(`"done"`), nil)
	require.Eventually(t, func() bool {
		f, _ := conn.written()
		return len(f) > 0 && f[len(f)-1] == `{"jsonrpc":"2.0","id":7,"result":"done"}`
	}, 5*time.Second, time.Millisecond)
	frames, _ := conn.written()
	assert.GreaterOrEqual(t, len(frames), 2, "the progress report came first")
	for _, f := range frames[:len(frames)-1] {
		assert.Contains(t, f, "notifications/progress")
	}
}

func TestDirectConn_feedAfterCloseIsRefused(t *testing.T) {
	t.Parallel()
	conn := newDirectConn()
	p := peer.New(conn, &peer.Options{Handler: &asyncEcho{taken: make(chan *peer.Reply, 1)}})
	p.Start(context.Background())
	feed := <-conn.feed
	conn.Close(peer.CloseNormal, "")
	require.NoError(t, p.Wait())
	msg := &jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: "fwd"}
	assert.False(t, feed.Frame(nil, jsonrpc.Frame{Messages: []jsonrpc.Message{msg}}, jsonrpc.Limits{}))
}
