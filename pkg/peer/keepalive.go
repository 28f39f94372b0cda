package peer

import (
	"container/heap"
	"sync"
	"time"
)

// Keepalive. Every WebSocket conn pings its peer every PingInterval, and a
// hub holds thousands of them: one sweeper of the process sends the pings
// that are due, where each conn had a timer of its own, and it runs only
// while some conn waits for its next ping, so that none outlives the
// connections it serves.
//
// A conn's first ping comes after a part of the interval that its place in
// the sequence of conns decides (firstPing): clients that connected in a
// burst, whose timers fired together, woke all their parked readers at once
// with each round of pings, a reader's stack each until they parked again,
// and the heap grew toward its goal with them. Spread over the interval,
// the pongs of a burst come a few at a time. Each next ping is due an
// interval after the pong of the last, as before.

// pingSet is the package's keepalive sweeper.
type pingSet struct {
	// mu guards everything below, and each conn's pingAt and pingIdx.
	// Taken under a WebSocket's mu, never before it.
	mu     sync.Mutex
	due    pingHeap      // conns waiting for their next ping, earliest first
	wake   chan struct{} // tells the sweeper that due changed; nil while none runs
	starts uint64        // conns scheduled so far, for firstPing
}

var pings pingSet

// goldenFrac is 2^64 divided by the golden ratio: the n-th conn's first
// ping comes at the fraction n*goldenFrac/2^64 of its window, which spreads
// any run of consecutive conns evenly over it (a Weyl sequence).
const goldenFrac = 0x9e3779b97f4a7c15

// firstPing is how long after its start the n-th conn is first pinged:
// between half its interval and the whole of it, spread by n. Never later
// than a timer of a whole interval pinged it, so a dead peer is found as
// soon; never sooner than half of it, when a ping would tell nothing new.
func firstPing(interval time.Duration, n uint64) time.Duration {
	half := interval / 2
	frac := float64(n*goldenFrac) / (1 << 64)
	return half + time.Duration(frac*float64(interval-half))
}

// start schedules c's first ping.
func (s *pingSet) start(c *WebSocket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduleLocked(c, time.Now().Add(firstPing(c.opts.PingInterval, s.starts)))
	s.starts++
}

// schedule makes c due for a ping at at, starting the sweeper if need be.
func (s *pingSet) schedule(c *WebSocket, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scheduleLocked(c, at)
}

// scheduleLocked is schedule with s.mu held.
func (s *pingSet) scheduleLocked(c *WebSocket, at time.Time) {
	c.pingAt = at
	if c.pingIdx >= 0 {
		heap.Fix(&s.due, c.pingIdx)
	} else {
		heap.Push(&s.due, c)
	}
	switch {
	case s.wake == nil:
		s.wake = make(chan struct{}, 1)
		go s.sweep(s.wake)
	case c.pingIdx == 0: // sooner than the sweeper waits for
		s.nudgeLocked()
	}
}

// remove takes c off the set as it closes; the sweeper ends once the set
// is empty.
func (s *pingSet) remove(c *WebSocket) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.pingIdx < 0 {
		return
	}
	heap.Remove(&s.due, c.pingIdx)
	if len(s.due) == 0 {
		s.nudgeLocked()
	}
}

func (s *pingSet) nudgeLocked() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// sweep starts the keepalive of each conn as it comes due, until none is
// left to ping. wake is the sweeper's own: it ends if another replaced it.
func (s *pingSet) sweep(wake chan struct{}) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		s.mu.Lock()
		if s.wake != wake {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		for len(s.due) > 0 && !s.due[0].pingAt.After(now) {
			c := heap.Pop(&s.due).(*WebSocket)
			go c.keepalive() // it waits for the pong, then schedules the next
		}
		if len(s.due) == 0 {
			s.wake = nil
			s.mu.Unlock()
			return
		}
		next := s.due[0].pingAt
		s.mu.Unlock()
		t.Reset(time.Until(next))
		select {
		case <-t.C:
		case <-wake:
		}
	}
}

// pingHeap orders conns by when their next ping is due (container/heap);
// each conn knows its index, so that it leaves the heap as it closes.
type pingHeap []*WebSocket

func (h pingHeap) Len() int           { return len(h) }
func (h pingHeap) Less(i, j int) bool { return h[i].pingAt.Before(h[j].pingAt) }
func (h pingHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pingIdx, h[j].pingIdx = i, j
}

func (h *pingHeap) Push(x any) {
	c := x.(*WebSocket)
	c.pingIdx = len(*h)
	*h = append(*h, c)
}

func (h *pingHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	c.pingIdx = -1
	*h = old[:len(old)-1]
	return c
}
