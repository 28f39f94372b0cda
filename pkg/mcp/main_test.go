package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait on a channel: a test that would hang fails instead.
const wait = 5 * time.Second

// testCtx returns a context that ends with the test or after wait.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return ctx
}

// recv waits for a value on ch, failing the test after wait.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("nothing received within %v", wait)
		panic("unreachable")
	}
}

// connect serves a new pipe with s and connects a client to its other end,
// with a session (initialize at LatestVersion unless opts ask for another
// session-based version: connectModern is the other era). It returns once
// the server has seen notifications/initialized. Cleanup
// closes the server side first: it flushes what it queued before closing,
// whereas a client closing while the server's writer is mid-write can end
// the session with a write error (see TestServer_sessionEndsWhenClientCloses).
func connect(t *testing.T, s *mcp.Server, opts *mcp.ClientOptions) (*mcp.Client, *mcp.ServerSession) {
	t.Helper()
	serverEnd, clientEnd := peer.Pipe(64)
	return connectConn(t, s, serverEnd, clientEnd, opts)
}

// legacy returns opts asking for a session at LatestVersion, unless they
// name a version.
func legacy(opts *mcp.ClientOptions) *mcp.ClientOptions {
	o := mcp.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = mcp.LatestVersion
	}
	return &o
}

// connectModern serves a new pipe with s and connects a client in its
// default mode (2026-07-28 first) to its other end. Cleanup closes both.
func connectModern(t *testing.T, s *mcp.Server, opts *mcp.ClientOptions) (*mcp.Client, *mcp.ServerSession) {
	t.Helper()
	serverEnd, clientEnd := peer.Pipe(64)
	return connectModernConn(t, s, serverEnd, clientEnd, opts)
}

// connectModernConn is connectModern on the two ends of a conn.
func connectModernConn(t *testing.T, s *mcp.Server, serverEnd, clientEnd peer.Conn, opts *mcp.ClientOptions) (*mcp.Client, *mcp.ServerSession) {
	t.Helper()
	ss := s.Serve(context.Background(), serverEnd)
	c, err := mcp.ConnectConn(testCtx(t), clientEnd, opts)
	if err != nil {
		_ = ss.Close()
		require.NoError(t, err, "connecting the client")
	}
	t.Cleanup(func() {
		assert.NoError(t, c.Close(), "closing the client")
		assert.NoError(t, ss.Wait(), "the server session ends with the client")
	})
	return c, ss
}

func connectConn(t *testing.T, s *mcp.Server, serverEnd, clientEnd peer.Conn, opts *mcp.ClientOptions) (*mcp.Client, *mcp.ServerSession) {
	t.Helper()
	ss := s.Serve(context.Background(), serverEnd)
	c, err := mcp.ConnectConn(testCtx(t), clientEnd, legacy(opts))
	if err != nil {
		_ = ss.Close()
		require.NoError(t, err, "connecting the client")
	}
	t.Cleanup(func() {
		assert.NoError(t, ss.Close(), "closing the server session")
		assert.NoError(t, c.Close(), "client end")
	})
	recv(t, ss.Ready())
	return c, ss
}

// note is one notification a client received.
type note struct {
	method string
	params json.RawMessage
}

// notifications returns an OnNotification callback that queues what it
// receives on the returned channel. It never blocks the read loop; a full
// queue fails the test.
func notifications(t *testing.T) (<-chan note, func(string, json.RawMessage)) {
	ch := make(chan note, 256)
	return ch, func(method string, params json.RawMessage) {
		select {
		case ch <- note{method, append(json.RawMessage(nil), params...)}:
		default:
			t.Errorf("notification queue full; dropped %s", method)
		}
	}
}

// barrierLogger names the log message barrier sends.
const barrierLogger = "test-barrier"

// barrier sends a log message to every session of s, then returns the
// notifications ch received before it. Notifications from one session arrive
// in order, so anything sent to the client before the barrier is in the
// result: this is how a test proves something was not sent, without sleeping.
func barrier(t *testing.T, s *mcp.Server, ch <-chan note) []note {
	t.Helper()
	s.Log(testCtx(t), mcp.LevelEmergency, barrierLogger, "barrier")
	var before []note
	for {
		n := recv(t, ch)
		if n.method == mcp.NotificationMessage {
			var p mcp.LoggingMessageParams
			require.NoError(t, json.Unmarshal(n.params, &p))
			if p.Logger == barrierLogger {
				return before
			}
		}
		before = append(before, n)
	}
}

// methods returns the methods of notes.
func methods(notes []note) []string {
	out := make([]string, 0, len(notes))
	for _, n := range notes {
		out = append(out, n.method)
	}
	return out
}

// rpcCode returns the JSON-RPC code of err, failing when err is not a
// *jsonrpc.Error.
func rpcCode(t *testing.T, err error) jsonrpc.Code {
	t.Helper()
	var e *jsonrpc.Error
	require.True(t, errors.As(err, &e), "want a *jsonrpc.Error, got %T: %v", err, err)
	return e.Code
}

// text returns the text content of a tool result.
func text(r *mcp.CallToolResult) string {
	var s string
	for _, c := range r.Content {
		s += c.Text
	}
	return s
}

// textResult returns a result holding one text block.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(s)}}
}
