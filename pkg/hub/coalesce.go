package hub

import (
	"sync"
	"time"
)

// coalescer passes on at most one event per key and interval, and always
// the last: the first of a burst goes at once, those that follow within the
// interval become one, sent when it ends. It holds no goroutine between
// bursts (a timer per key in a burst), and stop cancels what is pending.
//
// The hub uses it where a peer could make it repeat itself without limit:
// list_changed to each client (a server whose lists keep changing), and
// roots/list_changed from a client to each server serving it.
type coalescer struct {
	interval time.Duration
	send     func(key string)

	mu      sync.Mutex
	stopped bool
	windows map[string]*window // made on first use: most sessions never need it
}

type window struct {
	timer *time.Timer
	again bool // another event came during the window
}

func newCoalescer(interval time.Duration, send func(key string)) *coalescer {
	return &coalescer{interval: interval, send: send}
}

// fire reports an event for key; a nil coalescer (a session's that is
// closing) drops it.
func (c *coalescer) fire(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	if w := c.windows[key]; w != nil {
		w.again = true
		c.mu.Unlock()
		return
	}
	c.open(key)
	c.mu.Unlock()
	c.send(key)
}

// open starts a window for key; c.mu is held.
func (c *coalescer) open(key string) {
	w := &window{}
	w.timer = time.AfterFunc(c.interval, func() { c.close(key, w) })
	if c.windows == nil {
		c.windows = map[string]*window{}
	}
	c.windows[key] = w
}

// close ends a window: if events came during it, one goes now, and a new
// window opens behind it.
func (c *coalescer) close(key string, w *window) {
	c.mu.Lock()
	if c.stopped || c.windows[key] != w {
		c.mu.Unlock()
		return
	}
	delete(c.windows, key)
	again := w.again
	if again {
		c.open(key)
	}
	c.mu.Unlock()
	if again {
		c.send(key)
	}
}

// stop drops what is pending; later events are ignored.
func (c *coalescer) stop() {
	if c == nil {
		return // never made
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	for key, w := range c.windows {
		w.timer.Stop()
		delete(c.windows, key)
	}
}
