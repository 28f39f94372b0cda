package peer_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// rawServer starts an HTTP server whose WebSocket connections are served by a
// Peer, and returns its ws:// URL and a channel that receives each peer.
func rawServer(t *testing.T, opts *peer.AcceptOptions) (string, <-chan *peer.Peer) {
	t.Helper()
	peers := make(chan *peer.Peer, 16)
	var (
		mu  sync.Mutex
		all []*peer.Peer
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := peer.Accept(w, r, opts)
		if err != nil {
			return
		}
		p := peer.New(c, &peer.Options{Handler: peer.HandlerFunc(echo)})
		mu.Lock()
		all = append(all, p)
		mu.Unlock()
		p.Start(context.Background())
		peers <- p
	}))
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, p := range all {
			p.CloseWith(peer.CloseNormal, "")
			p.Wait()
		}
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http"), peers
}

func dialRaw(t *testing.T, url string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// readClose reads from a raw client until the server closes it.
func readClose(t *testing.T, c *websocket.Conn) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			require.ErrorAs(t, err, &ce, "the server did not close with a status: %v", err)
			return ce
		}
	}
}

func TestWebSocket_closeCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		send   func(ctx context.Context, c *websocket.Conn) error
		code   websocket.StatusCode
		reason string
	}{
		{"binary frame", func(ctx context.Context, c *websocket.Conn) error {
			return c.Write(ctx, websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","method":"x"}`))
		}, websocket.StatusUnsupportedData, "binary frames are not supported"},
		{"invalid UTF-8", func(ctx context.Context, c *websocket.Conn) error {
			return c.Write(ctx, websocket.MessageText, []byte("{\"jsonrpc\":\"2.0\",\"method\":\"\xff\xfe\"}"))
		}, websocket.StatusInvalidFramePayloadData, "not valid UTF-8"},
		{"invalid UTF-8 after a long ASCII run", func(ctx context.Context, c *websocket.Conn) error {
			return c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"x","params":["`+strings.Repeat("a", 100)+"\xc3\x28\"]}"))
		}, websocket.StatusInvalidFramePayloadData, "not valid UTF-8"},
		{"oversized frame", func(ctx context.Context, c *websocket.Conn) error {
			return c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"x","params":["`+strings.Repeat("a", 2048)+`"]}`))
		}, websocket.StatusMessageTooBig, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, peers := rawServer(t, &peer.AcceptOptions{WebSocketOptions: peer.WebSocketOptions{ReadLimit: 1024}})
			c := dialRaw(t, url, nil)
			p := <-peers
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			require.NoError(t, tt.send(ctx, c))
			ce := readClose(t, c)
			assert.Equal(t, tt.code, ce.Code)
			assert.Contains(t, ce.Reason, tt.reason)
			<-p.Done()
			assert.Equal(t, peer.CloseCode(tt.code), peer.CloseStatus(p.Err()))
		})
	}
}

func TestWebSocket_subprotocol(t *testing.T) {
	t.Parallel()
	url, _ := rawServer(t, nil)
	withMCP := dialRaw(t, url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	assert.Equal(t, "mcp", withMCP.Subprotocol(), "the TypeScript SDK fails unless mcp is echoed")
	without := dialRaw(t, url, nil)
	assert.Equal(t, "", without.Subprotocol(), "clients that ask for none are still served")

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := peer.Dial(ctx, url, nil)
	require.NoError(t, err)
	assert.Equal(t, peer.Subprotocol, c.Subprotocol())
	c.Close(peer.CloseNormal, "")
}

func TestWebSocket_originCheck(t *testing.T) {
	t.Parallel()
	url, _ := rawServer(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
}

func TestWebSocket_dialRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := peer.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"?token=s3cret", nil)
	var he *peer.HandshakeError
	require.ErrorAs(t, err, &he)
	assert.Equal(t, http.StatusUnauthorized, he.StatusCode)
	assert.NotContains(t, err.Error(), "s3cret", "the token in the URL must not leak into errors")
}

func TestWebSocket_keepaliveDropsDeadPeer(t *testing.T) {
	t.Parallel()
	url, peers := rawServer(t, &peer.AcceptOptions{WebSocketOptions: peer.WebSocketOptions{
		PingInterval: 20 * time.Millisecond, PingTimeout: 50 * time.Millisecond,
	}})
	// A raw client that never reads never answers pings.
	dialRaw(t, url, nil)
	p := <-peers
	select {
	case <-p.Done():
	case <-time.After(wait):
		t.Fatal("a peer that never answered pings was not dropped")
	}
	assert.Contains(t, p.Err().Error(), "keepalive")
}

func TestWebSocket_keepaliveKeepsLivePeer(t *testing.T) {
	t.Parallel()
	url, peers := rawServer(t, &peer.AcceptOptions{WebSocketOptions: peer.WebSocketOptions{
		PingInterval: 5 * time.Millisecond, PingTimeout: time.Second,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	pings := make(chan struct{}, 100)
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
		select {
		case pings <- struct{}{}:
		default:
		}
		return true
	}})
	require.NoError(t, err)
	defer c.CloseNow()
	readErr := make(chan error, 1)
	go func() { _, _, err := c.Read(context.Background()); readErr <- err }()
	p := <-peers
	for range 5 {
		select {
		case <-pings:
		case <-ctx.Done():
			t.Fatal("the server stopped pinging")
		}
	}
	select {
	case <-p.Done():
		t.Fatalf("a peer that answered pings was dropped: %v", p.Err())
	default:
	}
	c.Close(websocket.StatusNormalClosure, "")
	<-readErr
}

// TestAccept_frameBehindTheUpgrade: a client may send its first frame in
// the same packet as its upgrade request; the bytes the HTTP server read
// ahead must reach the peer.
func TestAccept_frameBehindTheUpgrade(t *testing.T) {
	t.Parallel()
	url, _ := rawServer(t, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "ws://"))
	require.NoError(t, err)
	defer conn.Close()
	payload := []byte(`{"jsonrpc":"2.0","id":1,"method":"echo","params":["early"]}`)
	mask := [4]byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | byte(len(payload)), mask[0], mask[1], mask[2], mask[3]}
	for i, c := range payload {
		frame = append(frame, c^mask[i%4])
	}
	req := "GET / HTTP/1.1\r\nHost: " + strings.TrimPrefix(url, "ws://") + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	_, err = conn.Write(append([]byte(req), frame...)) // one write: the frame rides behind the request
	require.NoError(t, err)
	conn.SetReadDeadline(time.Now().Add(wait))
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if line == "\r\n" {
			break // end of the 101 response
		}
	}
	hdr := make([]byte, 2)
	_, err = io.ReadFull(r, hdr)
	require.NoError(t, err)
	body := make([]byte, hdr[1]&0x7f)
	_, err = io.ReadFull(r, body)
	require.NoError(t, err)
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":["early"]}`, string(body))
}

// TestWebSocket_controlBytes: a control byte in a string of a frame is
// invalid JSON wherever it lies in a long string, ASCII or not, answered
// with a parse error; line breaks and tabs between members are not, and
// the connection goes on. (A guard for any pass over the frame that would
// take over the strings' search for control bytes.)
func TestWebSocket_controlBytes(t *testing.T) {
	t.Parallel()
	url, peers := rawServer(t, nil)
	c := dialRaw(t, url, nil)
	<-peers
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	long := strings.Repeat("é", 100)
	for _, tc := range []struct{ frame, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"echo","params":["` + long + "\x01" + `"]}`, `"code":-32700`},
		{`{"jsonrpc":"2.0","id":2,"method":"echo","params":["` + strings.Repeat("a", 100) + "\x1f" + `"]}`, `"code":-32700`},
		{"{\n\t\"jsonrpc\":\"2.0\",\r\n\"id\":3,\"method\":\"echo\",\"params\":[\"" + long + "\"]}", `"result":["` + long + `"]`},
		{`{"jsonrpc":"2.0","id":4,"method":"echo","params":["` + long + `"]}`, `"result":["` + long + `"]`},
	} {
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(tc.frame)))
		_, got, err := c.Read(ctx)
		require.NoError(t, err)
		assert.Contains(t, string(got), tc.want)
	}
}
