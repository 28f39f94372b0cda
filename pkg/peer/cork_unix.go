//go:build unix

package peer

import (
	"io"
	"os"
	"syscall"
)

// readAhead reads the socket into a borrowed buffer and serves p from it,
// keeping the rest for the next reads. It waits for the socket to become
// readable before it borrows the buffer: an idle connection's reader,
// parked here, holds none.
func (c *corkConn) readAhead(p []byte) (int, error) {
	if c.readFn == nil {
		c.readFn = c.readSocket // bound once: a method value allocates
	}
	err := c.raw.Read(c.readFn)
	buf, n, rerr := c.ahead, c.rn, c.rerr
	c.ahead, c.rerr = nil, nil
	switch {
	case err != nil: // closed, or past the read deadline
		if buf != nil {
			aheadPool.Put(buf)
		}
		return 0, err
	case rerr != nil:
		aheadPool.Put(buf)
		return 0, &os.SyscallError{Syscall: "read", Err: rerr}
	case n <= 0:
		aheadPool.Put(buf)
		return 0, io.EOF
	}
	k := copy(p, (*buf)[:n])
	if k < n {
		c.ahead, c.unread = buf, (*buf)[k:n]
	} else {
		aheadPool.Put(buf)
	}
	return k, nil
}

// readSocket is readAhead's read, called by the RawConn with the socket:
// false means the socket has nothing yet, and asks to be called again once
// it is readable.
func (c *corkConn) readSocket(fd uintptr) bool {
	buf := aheadPool.Get().(*[]byte)
	var n int
	var err error
	for {
		n, err = syscall.Read(int(fd), *buf)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.EAGAIN {
		aheadPool.Put(buf)
		return false
	}
	c.ahead, c.rn, c.rerr = buf, n, err
	return true
}
