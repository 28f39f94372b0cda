package pubsub

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The subscriber connections speak RESP2 themselves instead of going
// through go-redis's PubSub, which cannot hold sharded channels of several
// slots on one connection: when it reconnects it sends them all in one
// SSUBSCRIBE, which Redis refuses (CROSSSLOT). Commands, pipelines and the
// cluster's routing of PUBLISH and lease scripts stay with go-redis.

// connConfig says how to open a subscriber connection; it takes the
// go-redis options' address family, credentials, database and TLS.
type connConfig struct {
	network            string // "tcp" or "unix"
	username, password string
	db                 int
	tls                *tls.Config
	dialTimeout        time.Duration
	readTimeout        time.Duration
	writeTimeout       time.Duration
}

// subConn is one subscriber connection. Only its owner (a shard's loop, or
// whoever dialled it for a one-off command) reads; send may be called
// concurrently.
type subConn struct {
	nc           net.Conn
	in           *idleReader
	rd           *bufio.Reader
	readTimeout  time.Duration
	writeTimeout time.Duration

	wmu  sync.Mutex
	wbuf []byte

	scratch []byte // the channel of the last message read by message

	// unsubs counts the UNSUBSCRIBEs written and not yet answered, by
	// channel, to tell Redis's answers from the unsubscriptions it decides
	// itself when a slot leaves its node. Guarded by Redis.subMu.
	unsubs map[string]int
}

// dialConn connects to addr and authenticates; it gives up when ctx ends.
func dialConn(ctx context.Context, cfg connConfig, addr string) (*subConn, error) {
	d := net.Dialer{Timeout: cfg.dialTimeout, KeepAlive: 30 * time.Second}
	network := cfg.network
	if network == "" {
		network = "tcp"
	}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	// A cancelled ctx ends the handshake at once, whatever it waits on.
	stop := context.AfterFunc(ctx, func() { _ = nc.Close() })
	defer stop()
	if cfg.tls != nil {
		tc := cfg.tls.Clone()
		if tc.ServerName == "" && network == "tcp" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tlsConn := tls.Client(nc, tc)
		_ = nc.SetDeadline(time.Now().Add(cfg.dialTimeout))
		if err := tlsConn.Handshake(); err != nil {
			_ = nc.Close()
			return nil, err
		}
		_ = nc.SetDeadline(time.Time{})
		nc = tlsConn
	}
	c := newSubConn(nc, cfg.readTimeout, cfg.writeTimeout)
	var hello [][]string
	switch {
	case cfg.password != "" && cfg.username != "":
		hello = append(hello, []string{"AUTH", cfg.username, cfg.password})
	case cfg.password != "":
		hello = append(hello, []string{"AUTH", cfg.password})
	}
	if cfg.db != 0 {
		hello = append(hello, []string{"SELECT", strconv.Itoa(cfg.db)})
	}
	for _, cmd := range hello {
		if _, err := c.do(cmd...); err != nil {
			_ = nc.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%s: %w", cmd[0], err)
		}
	}
	return c, nil
}

func newSubConn(nc net.Conn, readTimeout, writeTimeout time.Duration) *subConn {
	in := &idleReader{nc: nc, idle: readTimeout}
	return &subConn{
		nc:           nc,
		in:           in,
		rd:           bufio.NewReaderSize(in, 16<<10),
		readTimeout:  readTimeout,
		writeTimeout: writeTimeout,
		unsubs:       make(map[string]int),
	}
}

// do sends one command and reads its reply, for connections that are not
// subscribed to anything yet. A Redis error reply is returned as an error.
func (c *subConn) do(args ...string) (reply, error) {
	if err := c.send(args); err != nil {
		return reply{}, err
	}
	rep, err := c.next(time.Now().Add(c.readTimeout))
	if errors.Is(err, errSilent) {
		err = errors.New("no reply within the read timeout")
	}
	if err == nil && rep.kind == '-' {
		err = redisError(rep.str)
	}
	return rep, err
}

// send writes commands, as one write, within the write timeout. A failed
// write closes the connection, so that its reader notices too.
func (c *subConn) send(cmds ...[]string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.wbuf[:0]
	for _, args := range cmds {
		b = appendCommand(b, args)
	}
	c.wbuf = b
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	if _, err := c.nc.Write(b); err != nil {
		_ = c.nc.Close()
		return err
	}
	return nil
}

// errSilent is returned by next when no reply began before its deadline:
// the connection is silent, and still usable.
var errSilent = errors.New("pubsub: connection silent")

// next reads the next reply. It waits for its first byte until wait and
// returns errSilent if none came; the rest of the reply must then arrive
// without a pause longer than the read timeout.
func (c *subConn) next(wait time.Time) (reply, error) {
	if err := c.await(wait); err != nil {
		return reply{}, err
	}
	return readReply(c.rd, 0)
}

// await waits until wait for the first byte of the next reply, as next
// does; the rest of it may then take a read timeout between bytes.
func (c *subConn) await(wait time.Time) error {
	if c.rd.Buffered() == 0 {
		c.in.extend = false
		_ = c.nc.SetReadDeadline(wait)
		if _, err := c.rd.Peek(1); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return errSilent
			}
			return err
		}
	}
	c.in.extend = true
	return nil
}

// message reads the next reply if it is a message whose head, head (as
// messageHead makes it), is already buffered: the channel into the
// connection's scratch buffer, valid until the next read, and the payload
// into memory of its own. It reports false, reading nothing, for any other
// reply, which readReply then reads; a message is most of what a
// subscriber connection carries, and this reads one with one allocation.
func (c *subConn) message(head []byte) (channel, payload []byte, ok bool, err error) {
	if b, _ := c.rd.Peek(min(c.rd.Buffered(), len(head))); !bytes.Equal(b, head) {
		return nil, nil, false, nil
	}
	_, _ = c.rd.Discard(len(head))
	if c.scratch, err = readBulk(c.rd, c.scratch[:0]); err != nil {
		return nil, nil, true, err
	}
	if payload, err = readBulk(c.rd, nil); err != nil {
		return nil, nil, true, err
	}
	return c.scratch, payload, true, nil
}

// messageHead is how a message reply of kind ("message", "smessage")
// begins, up to its channel.
func messageHead(kind string) []byte {
	return []byte("*3\r\n$" + strconv.Itoa(len(kind)) + "\r\n" + kind + "\r\n")
}

// readBulk reads a bulk string, appending its bytes to buf (a new buffer
// of the right size when buf is nil).
func readBulk(rd *bufio.Reader, buf []byte) ([]byte, error) {
	line, err := readLine(rd)
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[0] != '$' {
		return nil, errProtocol
	}
	n, err := strconv.Atoi(string(line[1:]))
	if err != nil || n < 0 || n > maxBulk {
		return nil, errProtocol
	}
	if buf == nil {
		buf = make([]byte, 0, min(n, max(rd.Buffered(), 64<<10)))
	}
	start := len(buf)
	for len(buf)-start < n {
		// Read in steps no larger than what is buffered or 64 KiB, so
		// that a garbage length costs no more memory than the bytes
		// that actually came.
		step := min(n-(len(buf)-start), max(rd.Buffered(), 64<<10))
		buf = slices.Grow(buf, step)
		if _, err := io.ReadFull(rd, buf[len(buf):len(buf)+step]); err != nil {
			return nil, err
		}
		buf = buf[:len(buf)+step]
	}
	if crlf, err := rd.Peek(2); err != nil || crlf[0] != '\r' || crlf[1] != '\n' {
		if err != nil {
			return nil, err
		}
		return nil, errProtocol
	}
	_, _ = rd.Discard(2)
	return buf, nil
}

func (c *subConn) close() error {
	return c.nc.Close()
}

// idleReader moves the read deadline before each read while extend is set,
// so that a reply may take as long as it needs provided its bytes keep
// coming.
type idleReader struct {
	nc     net.Conn
	idle   time.Duration
	extend bool
}

func (r *idleReader) Read(p []byte) (int, error) {
	if r.extend {
		_ = r.nc.SetReadDeadline(time.Now().Add(r.idle))
	}
	return r.nc.Read(p)
}

// appendCommand appends args as a RESP array of bulk strings.
func appendCommand(b []byte, args []string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// reply is one RESP2 reply.
type reply struct {
	kind  byte    // '+' status, '-' error, ':' integer, '$' bulk string, '*' array
	str   []byte  // status, error or bulk string; nil for a null bulk string
	num   int64   // integer
	elems []reply // array; nil for a null array
}

// redisError is an error reply.
type redisError string

func (e redisError) Error() string { return string(e) }

// Limits of what readReply accepts, beyond which the stream is taken for
// garbage rather than allocated for: Redis's own limit on a string, and
// nesting deeper than any reply the broker reads (CLUSTER SLOTS nests 3).
const (
	maxBulk  = 512 << 20
	maxArray = 1 << 20
	maxDepth = 8
)

var errProtocol = errors.New("pubsub: malformed reply from Redis")

// readReply reads one RESP2 reply.
func readReply(rd *bufio.Reader, depth int) (reply, error) {
	line, err := readLine(rd)
	if err != nil {
		return reply{}, err
	}
	if len(line) == 0 {
		return reply{}, errProtocol
	}
	r := reply{kind: line[0]}
	switch r.kind {
	case '+', '-':
		r.str = append([]byte(nil), line[1:]...)
		return r, nil
	case ':':
		r.num, err = strconv.ParseInt(string(line[1:]), 10, 64)
		if err != nil {
			return reply{}, errProtocol
		}
		return r, nil
	case '$':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil || n < -1 || n > maxBulk {
			return reply{}, errProtocol
		}
		if n == -1 {
			return r, nil
		}
		if n > rd.Buffered() && n > 64<<10 {
			// A large string: read it in steps, so that a garbage length
			// costs no more memory than the bytes that actually came.
			var buf bytes.Buffer
			if _, err := io.CopyN(&buf, rd, int64(n)); err != nil {
				return reply{}, err
			}
			r.str = buf.Bytes()
		} else {
			r.str = make([]byte, n)
			if _, err := io.ReadFull(rd, r.str); err != nil {
				return reply{}, err
			}
		}
		if crlf, err := rd.Peek(2); err != nil || crlf[0] != '\r' || crlf[1] != '\n' {
			if err != nil {
				return reply{}, err
			}
			return reply{}, errProtocol
		}
		_, _ = rd.Discard(2)
		return r, nil
	case '*':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil || n < -1 || n > maxArray || depth >= maxDepth {
			return reply{}, errProtocol
		}
		if n == -1 {
			return r, nil
		}
		// Grown as elements arrive: a garbage count allocates nothing.
		r.elems = make([]reply, 0, min(n, 16))
		for range n {
			e, err := readReply(rd, depth+1)
			if err != nil {
				return reply{}, err
			}
			r.elems = append(r.elems, e)
		}
		return r, nil
	default:
		return reply{}, errProtocol
	}
}

// readLine reads up to CRLF, which it strips. The line is valid until the
// next read.
func readLine(rd *bufio.Reader) ([]byte, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errProtocol
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errProtocol
	}
	return line[:len(line)-2], nil
}

// is reports whether the reply is the bulk or status string s.
func (r reply) is(s string) bool {
	return (r.kind == '$' || r.kind == '+') && string(r.str) == s
}
