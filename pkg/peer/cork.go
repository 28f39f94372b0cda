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
	"sync/atomic"
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
//
// On an accepted connection, a corked write larger than coder/websocket's
// write buffer can only be a frame's payload that coder/websocket passes
// straight through: it is kept as it is, not copied, and the gathered
// bytes leave in one vectored write (the frame is not modified before the
// write that sends it returns).
//
// The reader of an accepted connection waits for its next frame here
// (await), where it may find the connection quiet and leave it (parkIdle,
// idle_linux.go).
type corkConn struct {
	net.Conn
	timeout  time.Duration
	pre      []byte        // bytes the client sent behind its upgrade request, read first
	deadline time.Duration // the socket's write deadline, since epoch (8 bytes where a time.Time takes 24)

	// rmu guards the read side: the reader's, and coder/websocket's while
	// it closes with a handshake.
	rmu    sync.Mutex
	raw    syscall.RawConn // nil when the socket offers none: reads then go straight to it
	ahead  *[]byte         // read ahead, from aheadPool
	unread []byte          // what is left of it
	readFn func(fd uintptr) bool
	rn     int   // bytes the last readFn read
	rerr   error // and its error
	// failed is what the socket said when a wait read no bytes: the next
	// Read's.
	failed error
	// br is coder/websocket's reader of an accepted connection (the
	// hub's, from Hijack): nil on a dialled one, whose reader never parks.
	br *bufio.Reader

	// Parking the reader (idle_linux.go). waitMu guards waiting, kicked,
	// since and stayAwake; idle.mu guards watched, closed and resume.
	fd              int32 // the socket; -1 when none
	waitMu          sync.Mutex
	waiting, kicked bool   // the reader waits in await; its wait was ended by a sweep
	since           uint64 // the sweep epoch its wait began in
	// stayAwake is set as coder/websocket starts closing with a handshake,
	// reading br itself: the reader no longer looks at br, nor parks.
	stayAwake bool
	// between says that coder/websocket has just read a ping or a pong
	// whole, and nothing of the next frame: its next Read is for that
	// frame's first byte. Guarded by rmu.
	between bool
	// inMessage is set while the reader reads a message's fragments,
	// between which control frames may come too: it must read on.
	inMessage       atomic.Bool
	watched, closed bool
	resume          func() // the parked reader's, while parked

	mu     sync.Mutex // coder/websocket writes from the writer, the reader (pongs) and keepalive
	corked bool
	buf    *[]byte // gathered writes, from corkPool
	// keepAbove, when not 0, is the size above which a corked write is
	// the caller's own bytes (see above), kept in vec rather than copied.
	keepAbove int
	// vec is what leaves before buf's bytes from mark on, in order:
	// earlier pieces of buf and bytes kept; gathered counts all of it.
	vec      net.Buffers
	mark     int
	gathered int
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
	// maxPooledCork bounds the bytes copied before they are written, and
	// so the buffers kept in corkPool.
	maxPooledCork = 64 << 10
	// maxGathered bounds the bytes gathered, copied or kept, before they
	// are written.
	maxGathered = 256 << 10
)

func newCorkConn(nc net.Conn, timeout time.Duration) *corkConn {
	c := &corkConn{Conn: nc, timeout: timeout}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	c.fd = socketFD(c.raw)
	return c
}

// Read serves, in this order, what arrived with the upgrade request, what
// was read ahead, what a wait found, and the socket: straight into p when p
// is large, else through a read-ahead buffer, so that one system call
// brings several small frames.
func (c *corkConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	between := c.between
	c.between = false
	switch {
	case c.failed != nil && len(c.pre) == 0 && len(c.unread) == 0:
		return 0, c.failed
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
	case between && c.mayLeave():
		// coder/websocket would wait here for the next frame, inside its
		// Reader, where the reader cannot park: it returns errNoFrame
		// instead, having consumed nothing, and the reader looks again.
		return 0, errNoFrame
	case len(p) >= readAheadSize || c.raw == nil:
		return c.Conn.Read(p)
	}
	return c.readAhead(p)
}

// stayAwaken keeps the reader from parking, and from looking at br, from
// now on: coder/websocket reads br itself as it closes with a handshake.
func (c *corkConn) stayAwaken() {
	c.waitMu.Lock()
	c.stayAwake = true
	c.waitMu.Unlock()
}

// mayLeave reports whether the reader may still leave coder/websocket's
// Reader, and park: not once coder/websocket reads br itself, closing.
func (c *corkConn) mayLeave() bool {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	return !c.stayAwake
}

// Close closes the socket; a reader parked on it is started again, and
// finds it closed.
func (c *corkConn) Close() error {
	resume := idle.forget(c)
	err := c.Conn.Close()
	if resume != nil {
		resume()
	}
	return err
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		return c.writeLocked(p)
	}
	// Gathered bytes leave once they would pass maxGathered, or the copied
	// ones maxPooledCork, so that the buffer never grows beyond what the
	// pool keeps (growing it would copy everything gathered so far, again
	// and again); and what is that large alone gains nothing from
	// gathering.
	keep := c.keepAbove > 0 && len(p) > c.keepAbove
	if c.gathered+len(p) > maxGathered || !keep && c.buf != nil && len(*c.buf)+len(p) > maxPooledCork {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	switch {
	case keep:
		if c.buf != nil && len(*c.buf) > c.mark {
			c.vec = append(c.vec, (*c.buf)[c.mark:])
			c.mark = len(*c.buf)
		}
		c.vec = append(c.vec, p)
		c.gathered += len(p)
		return len(p), nil
	case len(p) >= maxPooledCork:
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		return c.writeLocked(p)
	}
	if c.buf == nil {
		c.buf = corkPool.Get().(*[]byte)
	}
	if buf := *c.buf; cap(buf)-len(buf) < len(p) {
		// Once, to the most it holds. The pieces of the old buffer already
		// in vec stay where they are: it is not given back to the pool.
		*c.buf = append(make([]byte, 0, maxPooledCork), buf...)
	}
	*c.buf = append(*c.buf, p...)
	c.gathered += len(p)
	return len(p), nil
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

// flushLocked writes what was gathered and gives the buffer back.
func (c *corkConn) flushLocked() error {
	if c.buf == nil && len(c.vec) == 0 {
		return nil
	}
	buf := c.buf
	c.buf, c.gathered = nil, 0
	var err error
	if len(c.vec) == 0 {
		_, err = c.writeLocked(*buf)
	} else {
		if buf != nil && len(*buf) > c.mark {
			c.vec = append(c.vec, (*buf)[c.mark:])
		}
		err = c.writevLocked()
	}
	c.mark = 0
	if buf != nil && cap(*buf) <= maxPooledCork {
		*buf = (*buf)[:0]
		corkPool.Put(buf)
	}
	return err
}

// writevLocked writes vec in one vectored write, and forgets it.
func (c *corkConn) writevLocked() error {
	c.moveDeadline()
	v := c.vec
	_, err := v.WriteTo(c.Conn)
	clear(c.vec)
	c.vec = c.vec[:0]
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errWriteTimeout
	}
	return err
}

func (c *corkConn) writeLocked(p []byte) (int, error) {
	c.moveDeadline()
	n, err := c.Conn.Write(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errWriteTimeout
	}
	return n, err
}

// moveDeadline bounds the next write with the write timeout. Moving the
// deadline costs a timer update on every write; moving it only once half
// of it is used up keeps every write bounded by between one half and one
// whole timeout.
func (c *corkConn) moveDeadline() {
	if c.timeout <= 0 {
		return
	}
	t := time.Now()
	if now := t.Sub(epoch); c.deadline-now < c.timeout/2 {
		c.deadline = now + c.timeout
		_ = c.Conn.SetWriteDeadline(t.Add(c.timeout))
	}
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
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn: // written with one writev
		w.conn.keepAbove = connWriteBuffer // coder/websocket's buffer, below
	}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		w.conn.pre = bytes.Clone(b)
	}
	// Buffers of our own, much smaller than net/http's 4 KiB each: they stay
	// with the connection for its whole life, idle or not, while the
	// corkConn below them borrows what it needs only while it needs it.
	w.conn.br = bufio.NewReaderSize(w.conn, connReadBuffer)
	return w.conn, bufio.NewReadWriter(w.conn.br, bufio.NewWriterSize(w.conn, connWriteBuffer)), nil
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
