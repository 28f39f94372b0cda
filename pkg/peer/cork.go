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
	"syscall"
	"time"
)

// corkConn sits between coder/websocket and the socket. coder/websocket
// flushes every frame with its own write system call; while the peer's
// writer has several frames queued, or one larger than coder/websocket's
// small write buffer, it corks the conn, so that their bytes gather in memory
// and leave in one write when it uncorks. The frames on the wire are exactly
// the same; only the system calls are fewer.
//
// It also bounds every socket write with a deadline: a write that cannot
// finish in time means the other side stopped reading, and the connection is
// dropped rather than left to block its writer forever.
//
// Its buffers are borrowed from pools and given back as soon as they are
// empty, so that an idle connection holds none: the gathered writes until
// they are written, and what a read brings beyond what coder/websocket asked
// for (several frames, usually) until it is all read. On a socket it can
// wait on without a buffer (readAhead), that is also true while it waits.
type corkConn struct {
	net.Conn
	timeout  time.Duration
	pre      []byte    // bytes the client sent behind its upgrade request, read first
	deadline time.Time // the socket's write deadline

	// The read side belongs to the reading goroutine.
	raw    syscall.RawConn // nil when the socket offers none: reads then go straight to it
	ahead  *[]byte         // read ahead, from aheadPool
	unread []byte          // what is left of it
	readFn func(fd uintptr) bool
	rn     int   // bytes the last readFn read
	rerr   error // and its error

	mu     sync.Mutex // coder/websocket writes from the writer, the reader (pongs) and keepalive
	corked bool
	buf    *[]byte // gathered writes, from corkPool
}

// Pools of the buffers a connection only borrows.
var (
	aheadPool = sync.Pool{New: func() any { b := make([]byte, readAheadSize); return &b }}
	corkPool  = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}
)

const (
	// readAheadSize is how much one read asks the socket for, when
	// coder/websocket asks for less (a frame header, a small payload).
	readAheadSize = 4 << 10
	// maxPooledCork bounds the bytes gathered before they are written, and
	// so the buffers kept in corkPool.
	maxPooledCork = 64 << 10
)

func newCorkConn(nc net.Conn, timeout time.Duration) *corkConn {
	c := &corkConn{Conn: nc, timeout: timeout}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	return c
}

// Read serves, in this order, what arrived with the upgrade request, what
// was read ahead, and the socket: straight into p when p is large, else
// through a read-ahead buffer, so that one system call brings several
// small frames.
func (c *corkConn) Read(p []byte) (int, error) {
	switch {
	case len(c.pre) > 0:
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	case len(c.unread) > 0:
		n := copy(p, c.unread)
		c.unread = c.unread[n:]
		if len(c.unread) == 0 {
			aheadPool.Put(c.ahead)
			c.ahead, c.unread = nil, nil
		}
		return n, nil
	case len(p) >= readAheadSize || c.raw == nil:
		return c.Conn.Read(p)
	}
	return c.readAhead(p)
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		// Gathered bytes leave once they would pass maxPooledCork, so that
		// the buffer never grows beyond what the pool keeps (growing it
		// would copy everything gathered so far, again and again); and
		// what is that large alone gains nothing from gathering.
		if c.buf != nil && len(*c.buf)+len(p) > maxPooledCork {
			if err := c.flushLocked(); err != nil {
				return 0, err
			}
		}
		if len(p) >= maxPooledCork {
			return c.writeLocked(p)
		}
		if c.buf == nil {
			c.buf = corkPool.Get().(*[]byte)
		}
		if buf := *c.buf; cap(buf)-len(buf) < len(p) {
			*c.buf = append(make([]byte, 0, maxPooledCork), buf...) // once, to the most it holds
		}
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
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

// flushLocked writes the gathered bytes and gives their buffer back.
func (c *corkConn) flushLocked() error {
	if c.buf == nil {
		return nil
	}
	buf := c.buf
	c.buf = nil
	_, err := c.writeLocked(*buf)
	if cap(*buf) <= maxPooledCork {
		*buf = (*buf)[:0]
		corkPool.Put(buf)
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
	w.conn = newCorkConn(nc, w.timeout)
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		w.conn.pre = bytes.Clone(b)
	}
	// Buffers of our own, much smaller than net/http's 4 KiB each: they stay
	// with the connection for its whole life, idle or not, while the
	// corkConn below them borrows what it needs only while it needs it.
	return w.conn, bufio.NewReadWriter(bufio.NewReaderSize(w.conn, connReadBuffer), bufio.NewWriterSize(w.conn, connWriteBuffer)), nil
}

// Buffer sizes of an accepted connection: coder/websocket reads frame
// headers through the first, and the second holds any control frame (at
// most 127 bytes from a server) or small frame whole, so that it leaves in
// one write even uncorked. Larger frames are corked (see WebSocket.Write).
const (
	connReadBuffer  = 128
	connWriteBuffer = 128
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
			slot.conn = newCorkConn(nc, slot.timeout)
			return slot.conn, nil
		}
		return nc, nil
	}
	t.MaxIdleConnsPerHost = -1 // every connection is upgraded; none is pooled
	return t
}()}
