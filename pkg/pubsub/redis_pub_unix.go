//go:build unix

package pubsub

import (
	"crypto/tls"
	"net"
	"syscall"
)

// closedByPeer reports, without waiting, whether the server closed nc (or
// sent something unasked, which a publisher's connection never gets): a
// peek at its socket finds an end of file or bytes instead of nothing.
func closedByPeer(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read: open. An end of file, bytes, or an error: not
		// fit to publish on.
		closed = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK
		return true
	})
	return closed || err != nil
}
