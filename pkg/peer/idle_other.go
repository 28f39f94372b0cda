//go:build !linux

package peer

import "syscall"

// Readers never park here: an idle connection keeps its reader waiting.

// idleSet has nothing to do.
type idleSet struct{}

var idle idleSet

// forget has nothing to take out.
func (idleSet) forget(*corkConn) (resume func()) { return nil }

// controlRead has nothing to do: the reader waits for the next frame
// wherever it likes.
func (c *corkConn) controlRead() {}

// parkIdle never parks.
func (c *corkConn) parkIdle(func()) bool { return false }

func socketFD(syscall.RawConn) int32 { return -1 }
