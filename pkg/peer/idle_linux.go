//go:build linux

package peer

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Idle readers. An accepted WebSocket (a hub holds thousands of them) has a
// reader goroutine waiting for its next frame, and that goroutine's stack
// is most of what an idle connection costs. Once a connection has been
// quiet for a while, its reader leaves: the socket joins an epoll set of
// this package's, whose own readiness Go's poller watches, and a reader is
// started again once the socket is readable or closes.
//
// Quiet means that a sweep, every idleSweep, finds the reader waiting since
// before the sweep before it: the sweeper then moves the socket's read
// deadline to the past, which ends the wait (corkConn.await), and the reader
// parks instead of waiting again. A busy connection never parks; its cost
// is two uncontended locks before each wait. A ping or a pong between
// messages sends the reader back to wait here (controlRead).
//
// The sweeper looks at the readers that are awake only: a parked one
// leaves its list, and joins it again as it waits once more. So a sweep
// costs in proportion to the connections that were recently busy, and a
// hub whose connections are all parked has no sweeper running at all.

// idleSweep is how often readers waiting are looked at: a reader quiet for
// one to two of these parks. Short, since what an idle connection costs in
// the end follows the peak of its setup: a burst of connections (a
// reconnect storm, a ramp of 7,000 a second) holds a reader's stack for
// each connection that has not parked yet, and the heap keeps the pages
// the stacks took once they are freed. A reader that parks and is resumed
// costs an epoll registration and a goroutine start: nothing beside a gap
// of this length between two frames. (A variable for the tests, which set
// it before any sweep.)
var idleSweep = 100 * time.Millisecond

// idleSet is the package's sweeper and poller. Both goroutines run only
// while there is something to sweep or to poll, so that none outlives the
// connections it serves.
type idleSet struct {
	epoch atomic.Uint64 // sweeps so far

	// mu guards everything below, and the fields of each corkConn that say
	// so. Taken before a corkConn's waitMu, never after.
	mu       sync.Mutex
	watched  map[*corkConn]struct{} // accepted connections whose readers may park, awake
	sweeping chan struct{}          // closed to stop the sweeper; nil while none runs
	file     *os.File               // the epoll set; nil while nothing is parked
	epfd     int
	gen      uint64              // counts the epoll sets made
	parked   map[int32]*corkConn // by socket
}

var idle = idleSet{watched: map[*corkConn]struct{}{}, parked: map[int32]*corkConn{}}

// watch lets the sweeper look at c's reader, starting the sweeper if need
// be. It reports false once c is closed.
func (s *idleSet) watch(c *corkConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed {
		return false
	}
	if !c.watched {
		c.watched = true
		s.watched[c] = struct{}{}
	}
	if s.sweeping == nil {
		s.sweeping = make(chan struct{})
		go s.sweep(s.sweeping)
	}
	return true
}

// unwatchLocked takes c off the sweeper's list, and stops the sweeper
// once the list is empty.
func (s *idleSet) unwatchLocked(c *corkConn) {
	if !c.watched {
		return
	}
	c.watched = false
	delete(s.watched, c)
	if len(s.watched) == 0 && s.sweeping != nil {
		close(s.sweeping)
		s.sweeping = nil
	}
}

// sweep ends the waits of readers quiet since the sweep before the last,
// every idleSweep, until stop is closed: no connection is watched.
func (s *idleSet) sweep(stop chan struct{}) {
	t := time.NewTicker(idleSweep)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.sweeping != stop { // stopped as the tick came: a sweeper of its own may run since
			s.mu.Unlock()
			return
		}
		e := s.epoch.Add(1)
		for c := range s.watched {
			c.kickIfQuiet(e)
		}
		s.mu.Unlock()
	}
}

// park registers c's socket, whose reader is leaving, so that resume runs
// once it is readable or closes. It reports false when it cannot: c
// closed meanwhile, or the epoll set failed; the reader then reads on.
func (s *idleSet) park(c *corkConn, resume func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed || c.fd < 0 {
		return false
	}
	if s.file == nil && !s.openLocked() {
		return false
	}
	// Level-triggered: bytes that came since the reader's last look are
	// reported at once.
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: c.fd}
	if err := syscall.EpollCtl(s.epfd, syscall.EPOLL_CTL_ADD, int(c.fd), &ev); err != nil {
		s.closeIfEmptyLocked()
		return false
	}
	c.resume = resume
	s.parked[c.fd] = c
	s.unwatchLocked(c) // nothing to sweep until it waits again
	return true
}

// forget takes c out of the set as it closes, and returns the resume of
// its parked reader, if it was parked: the caller runs it once the socket
// is closed, so that the reader finds it so and ends.
func (s *idleSet) forget(c *corkConn) (resume func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.closed = true
	s.unwatchLocked(c)
	return s.unparkLocked(c)
}

// unparkLocked takes c's socket out of the epoll set and returns its
// reader's resume; nil when c is not parked.
func (s *idleSet) unparkLocked(c *corkConn) func() {
	resume := c.resume
	if resume == nil {
		return nil
	}
	c.resume = nil
	delete(s.parked, c.fd)
	_ = syscall.EpollCtl(s.epfd, syscall.EPOLL_CTL_DEL, int(c.fd), nil)
	s.closeIfEmptyLocked()
	return resume
}

// openLocked makes the epoll set and starts its poller.
func (s *idleSet) openLocked() bool {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return false
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		_ = syscall.Close(epfd)
		return false
	}
	f := os.NewFile(uintptr(epfd), "peer-idle") // non-blocking: Go's poller watches it
	raw, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return false
	}
	s.gen++
	s.file, s.epfd = f, epfd
	go s.poll(raw, epfd, s.gen)
	return true
}

// closeIfEmptyLocked closes the epoll set once nothing is parked in it: its
// poller then ends.
func (s *idleSet) closeIfEmptyLocked() {
	if len(s.parked) == 0 && s.file != nil {
		_ = s.file.Close()
		s.file = nil
	}
}

// poll resumes the readers of the sockets that the epoll set epfd (of
// generation gen) reports, until the set is closed.
func (s *idleSet) poll(raw syscall.RawConn, epfd int, gen uint64) {
	events := make([]syscall.EpollEvent, 64)
	var n int
	var err error
	ready := func(uintptr) bool {
		for {
			n, err = syscall.EpollWait(epfd, events, 0)
			if err != syscall.EINTR {
				break
			}
		}
		return n != 0 || err != nil
	}
	var resumes []func()
	for {
		if rerr := raw.Read(ready); rerr != nil || err != nil {
			return // closed: nothing is parked
		}
		s.mu.Lock()
		if s.gen != gen || s.file == nil {
			s.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			if c := s.parked[ev.Fd]; c != nil {
				resumes = append(resumes, s.unparkLocked(c))
			}
		}
		s.mu.Unlock()
		for i, r := range resumes {
			r()
			resumes[i] = nil
		}
		resumes = resumes[:0]
	}
}

// parkIdle waits until the connection has bytes to read (they are read
// ahead), and reports false; or, when the connection stays quiet and its
// reader may leave, registers resume to run once it is readable or closes
// and reports true: the caller's goroutine then ends. Only the reader of
// an accepted connection, between frames, parks.
func (c *corkConn) parkIdle(resume func()) bool {
	if c.br == nil {
		return false
	}
	// br is read by this reader only, but for coder/websocket's closing
	// handshake, which stayAwaken announces.
	c.waitMu.Lock()
	stay := c.stayAwake || c.br.Buffered() > 0
	c.waitMu.Unlock()
	if stay || !c.await() {
		return false
	}
	c.mu.Lock()
	if !c.corked && len(c.vec) == 0 {
		c.vec = nil // the gathered writes' list, made again by the next write
	}
	c.mu.Unlock()
	return idle.park(c, resume)
}

// await waits until the socket has bytes, reads them ahead, and reports
// false; it reports true when the wait was ended by a sweep instead, the
// connection quiet. It waits only where it can without a buffer: bytes
// already read or pending return at once.
func (c *corkConn) await() (quiet bool) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.raw == nil || len(c.pre) > 0 || len(c.unread) > 0 || c.failed != nil || !idle.watch(c) {
		return false
	}
	c.waitMu.Lock()
	c.waiting, c.kicked, c.since = true, false, idle.epoch.Load()
	c.waitMu.Unlock()
	if c.readFn == nil {
		c.readFn = c.readSocket // bound once: a method value allocates
	}
	err := c.raw.Read(c.readFn)
	c.waitMu.Lock()
	c.waiting = false
	kicked := c.kicked
	c.waitMu.Unlock()
	if kicked {
		_ = c.Conn.SetReadDeadline(time.Time{}) // before any read that must not time out
	}
	buf, n, rerr := c.ahead, c.rn, c.rerr
	c.ahead, c.rerr = nil, nil
	switch {
	case err != nil: // the sweep's deadline; or closed, which the next Read finds itself
		if buf != nil {
			aheadPool.Put(buf)
		}
		return kicked && errors.Is(err, os.ErrDeadlineExceeded)
	case rerr != nil:
		aheadPool.Put(buf)
		c.failed = &os.SyscallError{Syscall: "read", Err: rerr}
	case n <= 0:
		aheadPool.Put(buf)
		c.failed = io.EOF
	default:
		c.ahead, c.unread = buf, (*buf)[:n]
	}
	return false
}

// controlRead is called by coder/websocket as it has read a ping or a pong,
// on the goroutine reading. Its Reader reads on to the next frame, where a
// reader cannot park: keepalive's first pong would keep the reader of a
// quiet connection from ever parking again. When the control frame came
// between messages, and nothing of the next one with it, the next Read
// returns errNoFrame instead of waiting, and the reader waits in await
// again.
func (c *corkConn) controlRead() {
	if c.br == nil || c.inMessage.Load() || !c.mayLeave() || c.br.Buffered() > 0 {
		return
	}
	c.rmu.Lock()
	c.between = true
	c.rmu.Unlock()
}

// kickIfQuiet ends the wait of c's reader if it began before the sweep
// before epoch e. Called under idle.mu.
func (c *corkConn) kickIfQuiet(e uint64) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	if c.waiting && !c.kicked && c.since+1 < e {
		c.kicked = true
		_ = c.Conn.SetReadDeadline(longAgo)
	}
}

// longAgo is a read deadline that has passed.
var longAgo = time.Unix(1, 0)

// socketFD returns the socket's descriptor, or -1.
func socketFD(raw syscall.RawConn) int32 {
	fd := int32(-1)
	if raw != nil {
		_ = raw.Control(func(s uintptr) { fd = int32(s) })
	}
	return fd
}
