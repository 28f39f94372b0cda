package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// stallListener accepts connections that can be stalled: once stalled, a
// connection's next write first fills its socket with padding its client
// never reads, so that the write blocks in the kernel, as it would to a
// client that stopped reading, until the connection's write deadline
// (the real one: the padding goes through the real socket).
type stallListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[string]*stallConn // by the client's address
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &stallConn{Conn: c}
	l.mu.Lock()
	l.conns[c.RemoteAddr().String()] = sc
	l.mu.Unlock()
	return sc, nil
}

// stall stalls the server's end of the connection from client.
func (l *stallListener) stall(t *testing.T, client net.Addr) {
	t.Helper()
	l.mu.Lock()
	sc := l.conns[client.String()]
	l.mu.Unlock()
	require.NotNil(t, sc, "no connection from %v", client)
	sc.mu.Lock()
	sc.stalled = true
	sc.mu.Unlock()
}

type stallConn struct {
	net.Conn
	mu      sync.Mutex
	stalled bool
	padded  bool
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	pad := c.stalled && !c.padded
	c.padded = c.padded || pad
	c.mu.Unlock()
	if pad {
		// Far more than loopback's socket buffers hold (a few MiB).
		chunk := make([]byte, 1<<20)
		for range 64 {
			if _, err := c.Conn.Write(chunk); err != nil {
				return 0, err
			}
		}
		return 0, fmt.Errorf("64 MiB of padding went through: the client reads")
	}
	return c.Conn.Write(p)
}

// TestStreamableHandler_answerToAClientThatStoppedReading: an SSE answer's
// last event is not flushed by the handler, which returns and leaves it to
// net/http's last write of the response (with the final chunk, one write
// system call): that write is still bounded by WriteTimeout. A client that
// stopped reading before its answer came loses its connection within the
// deadline, and a well-behaved client beside it is served throughout.
func TestStreamableHandler_answerToAClientThatStoppedReading(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	release := make(chan struct{})
	s := testHTTPServer()
	s.AddTool(&mcp.Tool{Name: "gate", Description: "answers once released"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-release:
			return textResult("released"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	ln := &stallListener{conns: map[string]*stallConn{}}
	closed := make(chan string, 16) // the client addresses of connections closed
	hs := serveHTTPWith(t, s, &mcp.StreamableOptions{ResponseMode: mcp.ResponseSSE, WriteTimeout: writeTimeout}, func(srv *httptest.Server) {
		ln.Listener = srv.Listener
		srv.Listener = ln
		srv.Config.ConnState = func(c net.Conn, state http.ConnState) {
			if state == http.StateClosed {
				closed <- c.RemoteAddr().String()
			}
		}
	})
	good := connectHTTP(t, hs, nil)
	callEcho := func() {
		t.Helper()
		res, err := good.CallTool(testCtx(t), "echo", map[string]any{"x": 1}, nil)
		require.NoError(t, err)
		assert.Contains(t, res.Content[0].Text, "echo:")
	}
	callEcho()

	c := newRaw(t, hs)
	c.initialize()
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gate"}}`
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\n%s: %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n%s",
		mcp.HeaderSessionID, c.session, mcp.HeaderProtocolVersion, c.version, len(body), body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	br := bufio.NewReader(resp.Body)
	for { // the priming event, flushed at once; then the client reads no more
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if strings.TrimSpace(line) == "" {
			break
		}
	}

	ln.stall(t, conn.LocalAddr())
	released := time.Now()
	close(release)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for gone := false; !gone; {
		select {
		case addr := <-closed:
			gone = addr == conn.LocalAddr().String()
		case <-timer.C:
			t.Fatalf("the connection of a client that stopped reading was not closed within %v (its write deadline is %v)", wait, writeTimeout)
		}
	}
	took := time.Since(released)
	t.Logf("closed %v after the answer was released", took)
	assert.GreaterOrEqual(t, took, writeTimeout*3/4, "the last write blocked until its deadline")
	callEcho() // the well-behaved client beside it
}
