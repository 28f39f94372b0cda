//go:build unix

package pubsub

import (
	"crypto/tls"
	"net"
	"syscall"
)

// peeker finds, without waiting, whether the server closed a connection
// (or sent something unasked, which a publisher's connection never gets):
// a peek at its socket finds an end of file or bytes instead of nothing.
// It is made once per connection, since the socket and the function its
// peek runs would otherwise be allocated for every batch.
type peeker struct {
	raw    syscall.RawConn // nil when the connection offers no socket
	fn     func(fd uintptr) bool
	closed bool
	buf    [1]byte
}

func newPeeker(nc net.Conn) *peeker {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	p := &peeker{}
	if sc, ok := nc.(syscall.Conn); ok {
		p.raw, _ = sc.SyscallConn()
	}
	p.fn = p.peek
	return p
}

// closedByPeer reports whether the connection is closed, or otherwise not fit
// to publish on.
func (p *peeker) closedByPeer() bool {
	if p.raw == nil {
		return false
	}
	p.closed = false
	err := p.raw.Read(p.fn)
	return p.closed || err != nil
}

func (p *peeker) peek(fd uintptr) bool {
	_, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	// Nothing to read: open. An end of file, bytes, or an error: not fit
	// to publish on.
	p.closed = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
	return true
}
