package peer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// corkConn sits between coder/websocket and the socket. coder/websocket
// flushes every frame with its own write system call; while the peer's
// writer has several frames queued it corks the conn, so that their bytes
// gather in memory and leave in one write when it uncorks. The frames on the
// wire are exactly the same; only the system calls are fewer.
//
// It also bounds every socket write with a deadline: a write that cannot
// finish in time means the other side stopped reading, and the connection is
// dropped rather than left to block its writer forever.
type corkConn struct {
	net.Conn
	timeout  time.Duration
	pre      []byte    // bytes the client sent behind its upgrade request, read first
	deadline time.Time // the socket's write deadline

	mu     sync.Mutex // coder/websocket writes from the writer, the reader (pongs) and keepalive
	corked bool
	buf    []byte
}

// Read serves what arrived with the upgrade request before the socket.
func (c *corkConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if len(c.buf) > 0 {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return c.writeLocked(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.writeLocked(c.buf)
	if cap(c.buf) > 64<<10 {
		c.buf = nil // do not keep a large buffer on a connection that may go idle
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

func (c *corkConn) writeLocked(p []byte) (int, error) {
	if c.timeout > 0 {
		// Moving the deadline costs a timer update on every write; moving
		// it only once half of it is used up keeps every write bounded by
		// between one half and one whole timeout.
		now := time.Now()
		if c.deadline.Sub(now) < c.timeout/2 {
			c.deadline = now.Add(c.timeout)
			_ = c.Conn.SetWriteDeadline(c.deadline)
		}
	}
	n, err := c.Conn.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errWriteTimeout
	}
	return n, err
}

var errWriteTimeout = &CloseError{Code: ClosePolicyViolation, Reason: "slow consumer: write timed out"}

// corkingWriter makes coder/websocket's Accept write through a corkConn: its
// Hijack hands out the socket wrapped, and the buffered writer pointed at it.
type corkingWriter struct {
	http.ResponseWriter
	timeout time.Duration
	conn    *corkConn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("peer: the http.ResponseWriter cannot be hijacked")
	}
	nc, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		nc.Close()
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: nc, timeout: w.timeout}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		w.conn.pre = bytes.Clone(b)
	}
	// Buffers of our own, smaller than net/http's 4 KiB each: they stay with
	// the connection for its whole life, idle or not, and what is large
	// (payloads, batches) bypasses them anyway.
	return w.conn, bufio.NewReadWriter(bufio.NewReaderSize(w.conn, connReadBuffer), bufio.NewWriterSize(w.conn, connWriteBuffer)), nil
}

// Buffer sizes of an accepted connection.
const (
	connReadBuffer  = 1024
	connWriteBuffer = 1024
)

// Unwrap lets http.ResponseController reach the original writer.
func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// corkSlot carries the corkConn that Dial's transport creates back to Dial.
type corkSlot struct {
	timeout time.Duration
	conn    *corkConn
}

type corkSlotKey struct{}

// dialClient is the HTTP client Dial uses unless told otherwise: its
// transport wraps each new socket in a corkConn.
var dialClient = &http.Client{Transport: func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if slot, ok := ctx.Value(corkSlotKey{}).(*corkSlot); ok && slot.conn == nil {
			slot.conn = &corkConn{Conn: nc, timeout: slot.timeout}
			return slot.conn, nil
		}
		return nc, nil
	}
	t.MaxIdleConnsPerHost = -1 // every connection is upgraded; none is pooled
	return t
}()}
