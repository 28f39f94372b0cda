package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Subprotocol is the WebSocket subprotocol of MCP. Accept echoes it when the
// client asks for it (the TypeScript SDK fails otherwise); Dial asks for it.
const Subprotocol = "mcp"

// Defaults for WebSocketOptions.
const (
	DefaultReadLimit    = 4 << 20
	DefaultPingInterval = 30 * time.Second
	DefaultPingTimeout  = 15 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

// WebSocketOptions tune a WebSocket conn. The zero value means the defaults.
type WebSocketOptions struct {
	// ReadLimit is the largest frame accepted, in bytes; a larger one closes
	// the connection with 1009. Default 4 MiB.
	ReadLimit int64
	// PingInterval is how long the conn waits between keepalive pings.
	// Default 30 s; negative disables keepalive.
	PingInterval time.Duration
	// PingTimeout is how long a pong may take before the connection is
	// considered dead and dropped. Default 15 s.
	PingTimeout time.Duration
	// WriteTimeout bounds each write to the socket: a peer that reads
	// nothing for this long (at least half of it, for a write that follows
	// others closely) is dropped as a slow consumer. Default 10 s; negative
	// disables it.
	WriteTimeout time.Duration
}

func (o *WebSocketOptions) withDefaults() WebSocketOptions {
	var v WebSocketOptions
	if o != nil {
		v = *o
	}
	if v.ReadLimit == 0 {
		v.ReadLimit = DefaultReadLimit
	}
	if v.PingInterval == 0 {
		v.PingInterval = DefaultPingInterval
	}
	if v.PingTimeout == 0 {
		v.PingTimeout = DefaultPingTimeout
	}
	if v.WriteTimeout == 0 {
		v.WriteTimeout = DefaultWriteTimeout
	}
	return v
}

// AcceptOptions configure Accept.
type AcceptOptions struct {
	WebSocketOptions
	// OriginPatterns lists the hosts (path.Match patterns) whose pages may
	// open a WebSocket besides the request's own host. Allowing an origin lets
	// its pages act with the credentials of whoever visits them (cross-site
	// WebSocket hijacking): list only origins you trust.
	OriginPatterns []string
	// InsecureSkipVerify disables the origin check altogether. Only for
	// non-browser clients behind other protection.
	InsecureSkipVerify bool
}

// DialOptions configure Dial.
type DialOptions struct {
	WebSocketOptions
	// Header is sent with the handshake (e.g. Authorization).
	Header http.Header
	// HTTPClient performs the handshake. Nil means a client whose sockets
	// let the conn gather queued frames into one write; a client of your own
	// works the same, with one write per frame.
	HTTPClient *http.Client
}

// HandshakeError is returned by Dial when the server answered the upgrade
// with an HTTP status instead of switching protocols.
type HandshakeError struct {
	StatusCode int
}

// Error implements the error interface.
func (e *HandshakeError) Error() string {
	return fmt.Sprintf("websocket handshake refused: HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// WebSocket is a Conn over github.com/coder/websocket. It keeps the
// connection alive with pings, and closes it with the matching code and a
// reason on a binary frame (1003), invalid UTF-8 (1007) or an oversized frame
// (1009).
type WebSocket struct {
	ws   *websocket.Conn
	opts WebSocketOptions
	cork *corkConn // nil when the socket is not ours to wrap

	readHint int // the size of the last frame read; only Read uses it

	mu      sync.Mutex
	closed  bool
	pinging sync.WaitGroup
	local   *CloseError // why this side closed, if it did

	// When the next keepalive ping is due, and where the conn is in the
	// sweeper's heap (-1 when not there); guarded by pings.mu.
	pingAt  time.Time
	pingIdx int
}

var (
	_ Conn           = (*WebSocket)(nil)
	_ frameForgetter = (*WebSocket)(nil)
	_ pooledReader   = (*WebSocket)(nil)
)

// forgetsFrames: a frame is written to the socket, or copied to be, before
// Write returns.
func (*WebSocket) forgetsFrames() {}

// parkIdle lets the reader of an accepted connection leave while it is
// quiet (corkConn.parkIdle).
func (c *WebSocket) parkIdle(resume func()) bool {
	return c.cork != nil && c.cork.parkIdle(resume)
}

// Accept upgrades an HTTP request to a WebSocket conn. On failure it has
// already written an HTTP error to w.
func Accept(w http.ResponseWriter, r *http.Request, opts *AcceptOptions) (*WebSocket, error) {
	var o AcceptOptions
	if opts != nil {
		o = *opts
	}
	wo := o.WebSocketOptions.withDefaults()
	cw := &corkingWriter{ResponseWriter: w, timeout: wo.WriteTimeout}
	// After a ping or a pong, the reader may park again. The callbacks,
	// which the connection keeps, hold the socket only: cw holds the HTTP
	// response and its buffers (10 KiB an idle connection kept).
	var sock *corkConn // set before anything is read
	controlRead := func() {
		if sock != nil {
			sock.controlRead()
		}
	}
	ws, err := websocket.Accept(cw, r, &websocket.AcceptOptions{
		Subprotocols:       []string{Subprotocol},
		OriginPatterns:     o.OriginPatterns,
		InsecureSkipVerify: o.InsecureSkipVerify,
		OnPingReceived:     func(context.Context, []byte) bool { controlRead(); return true },
		OnPongReceived:     func(context.Context, []byte) { controlRead() },
	})
	if err != nil {
		return nil, err
	}
	sock = cw.conn
	// coder/websocket set its reader (ours, br) to read what it held
	// buffered, then the socket, through an io.MultiReader the idle
	// connection would keep; it held nothing (Hijack moved that to
	// sock.pre), so it reads sock directly.
	sock.br.Reset(sock)
	c := NewWebSocket(ws, &wo)
	c.cork = sock
	return c, nil
}

// Dial opens a WebSocket conn to url (ws:// or wss://), asking for the mcp
// subprotocol.
func Dial(ctx context.Context, url string, opts *DialOptions) (*WebSocket, error) {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	wo := o.WebSocketOptions.withDefaults()
	client := o.HTTPClient
	var slot *corkSlot
	if client == nil {
		client = dialClient
		slot = &corkSlot{timeout: wo.WriteTimeout}
		ctx = context.WithValue(ctx, corkSlotKey{}, slot)
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		Subprotocols: []string{Subprotocol},
		HTTPHeader:   o.Header,
		HTTPClient:   client,
	})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("dial %s: %w", redactURL(url), &HandshakeError{StatusCode: resp.StatusCode})
		}
		return nil, fmt.Errorf("dial %s: %w", redactURL(url), err)
	}
	c := NewWebSocket(ws, &wo)
	if slot != nil {
		c.cork = slot.conn
	}
	return c, nil
}

// NewWebSocket wraps an established coder/websocket connection.
func NewWebSocket(ws *websocket.Conn, opts *WebSocketOptions) *WebSocket {
	c := &WebSocket{ws: ws, opts: opts.withDefaults(), pingIdx: -1}
	ws.SetReadLimit(c.opts.ReadLimit)
	if c.opts.PingInterval > 0 {
		pings.start(c)
	}
	return c
}

// Subprotocol returns the negotiated subprotocol ("" when none).
func (c *WebSocket) Subprotocol() string { return c.ws.Subprotocol() }

// keepalive runs on a goroutine of its own as the conn's ping is due (the
// keepalive sweeper starts it): one ping, then the next one scheduled, or
// the end of the connection when no pong comes back in time.
func (c *WebSocket) keepalive() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.pinging.Add(1) // under mu, so that Close's Wait never races this Add
	c.mu.Unlock()
	defer c.pinging.Done()

	ctx, cancel := context.WithTimeout(context.Background(), c.opts.PingTimeout)
	err := c.ws.Ping(ctx)
	cancel()
	if err != nil {
		c.closeLocal(&CloseError{Code: ClosePolicyViolation, Reason: "keepalive ping timed out"}, false)
		return
	}
	c.mu.Lock()
	if !c.closed {
		pings.schedule(c, time.Now().Add(c.opts.PingInterval))
	}
	c.mu.Unlock()
}

// Read returns the next text frame.
func (c *WebSocket) Read(ctx context.Context) ([]byte, error) {
	frame, _, err := c.readPooled(ctx, false)
	return frame, err
}

// readPooled is Read into a buffer of the pools of frames when pooled is
// set (pooledReader), which it returns as buf; a frame much smaller than
// such a buffer is copied out and the buffer given back at once.
func (c *WebSocket) readPooled(ctx context.Context, pooled bool) (frame, buf []byte, err error) {
	typ, r, err := c.ws.Reader(ctx)
	if err != nil {
		return nil, nil, c.readErr(err)
	}
	if c.cork != nil {
		c.cork.inMessage.Store(true) // (corkConn.controlRead)
		defer c.cork.inMessage.Store(false)
	}
	// Read straight into a buffer of the size of the connection's last
	// frame (its frames tend to be alike), grown if this one is larger: one
	// copy of the frame, where a shared scratch buffer and a copy out of it
	// took two. No connection keeps a read buffer while idle; a buffer much
	// larger than its frame is traded for an exact copy.
	buf = frameBuffer(min(c.readHint, maxReadHint)+readSlack, pooled)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, c.readErr(err)
		}
	}
	c.readHint = len(buf)
	if typ != websocket.MessageText {
		return nil, nil, c.closeLocal(&CloseError{Code: CloseUnsupportedData, Reason: "binary frames are not supported; send JSON-RPC as text"}, true)
	}
	if !utf8.Valid(buf) {
		return nil, nil, c.closeLocal(&CloseError{Code: CloseInvalidData, Reason: "text frame is not valid UTF-8"}, true)
	}
	_, fromPool := poolOf(cap(buf))
	switch {
	case pooled && fromPool && len(buf) > minPooledFrame/2:
		return buf, buf, nil
	case pooled && fromPool:
		frame = bytes.Clone(buf)
		recycleFrame(buf)
		return frame, nil, nil
	case cap(buf)-len(buf) > len(buf)/4+readSlack:
		return bytes.Clone(buf), nil, nil
	}
	return buf, nil, nil
}

// readSlack is room beyond the last frame's size in the next read buffer:
// frames that differ a little fit, and the end of the frame is seen
// without growing it. maxReadHint bounds the buffer a frame gets before any
// of its bytes came: one large frame must not make every next one costly.
const (
	readSlack   = 64
	maxReadHint = 64 << 10
)

func (c *WebSocket) readErr(err error) error {
	c.mu.Lock()
	local := c.local
	c.mu.Unlock()
	switch {
	case local != nil:
		return local
	case errors.Is(err, errNoFrame):
		return errNoFrame
	case errors.Is(err, websocket.ErrMessageTooBig):
		return &CloseError{Code: CloseMessageTooBig, Reason: fmt.Sprintf("frame exceeds the limit of %d bytes", c.opts.ReadLimit)}
	case websocket.CloseStatus(err) != -1:
		var ce websocket.CloseError
		errors.As(err, &ce)
		return &CloseError{Code: CloseCode(ce.Code), Reason: ce.Reason}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &CloseError{Code: CloseAbnormal, Reason: "connection lost"}
	}
	return err
}

// Write sends one text frame.
func (c *WebSocket) Write(ctx context.Context, frame []byte) error {
	if c.cork == nil || len(frame)+maxFrameHeader <= connWriteBuffer {
		return c.writeErr(c.ws.Write(ctx, websocket.MessageText, frame))
	}
	// Larger than coder/websocket's write buffer: corked, its header and its
	// payload leave in one write instead of two.
	c.cork.cork()
	if err := c.ws.Write(ctx, websocket.MessageText, frame); err != nil {
		c.cork.uncork()
		return c.writeErr(err)
	}
	return c.writeErr(c.cork.uncork())
}

// maxFrameHeader is the longest WebSocket frame header: 2 bytes, 8 of
// extended length and 4 of mask.
const maxFrameHeader = 14

// WriteBatch sends frames, one text frame each, gathered into as few socket
// writes as the socket allows.
func (c *WebSocket) WriteBatch(ctx context.Context, frames [][]byte) error {
	if c.cork == nil || len(frames) == 1 {
		for _, f := range frames {
			if err := c.Write(ctx, f); err != nil {
				return err
			}
		}
		return nil
	}
	c.cork.cork()
	for _, f := range frames {
		if err := c.ws.Write(ctx, websocket.MessageText, f); err != nil {
			c.cork.uncork()
			return c.writeErr(err)
		}
	}
	return c.writeErr(c.cork.uncork())
}

func (c *WebSocket) writeErr(err error) error {
	if errors.Is(err, errWriteTimeout) {
		c.closeLocal(errWriteTimeout, false)
		return errWriteTimeout
	}
	return err
}

// Close closes the connection with code and reason (at most 123 bytes are
// sent). It waits for the close handshake for a few seconds at most.
func (c *WebSocket) Close(code CloseCode, reason string) error {
	c.closeLocal(&CloseError{Code: code, Reason: reason}, true)
	return nil
}

// closeLocal records why this side closes, stops keepalive and closes the
// socket: with a handshake when handshake is set, at once otherwise.
func (c *WebSocket) closeLocal(why *CloseError, handshake bool) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return why
	}
	c.closed = true
	c.local = why
	pings.remove(c)
	c.mu.Unlock()

	if handshake {
		if c.cork != nil {
			c.cork.stayAwaken() // the handshake reads what the reader would
		}
		_ = c.ws.Close(websocket.StatusCode(why.Code), closeReason(why.Reason))
	} else {
		_ = c.ws.CloseNow()
	}
	if !handshake {
		return why // called from keepalive itself: do not wait for it
	}
	c.pinging.Wait()
	return why
}

// closeReason fits a reason into a close frame: at most 123 bytes, cut on a
// character boundary.
func closeReason(s string) string {
	if len(s) <= 123 {
		return s
	}
	s = s[:123]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// redactURL drops the query (which may hold ?token=), the fragment and the
// user info from a URL before it is logged or returned in an error.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
