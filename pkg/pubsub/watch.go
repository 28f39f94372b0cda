package pubsub

import "sync"

// watchers hands a broker's connection-state changes to the functions
// given to Watch. notify never blocks the broker: each watcher has a short
// queue of changes and a goroutine that calls its function, so that calls
// are serialised and in order for each watcher, and a slow function delays
// only its own.
type watchers struct {
	mu     sync.Mutex
	set    map[*watcher]struct{}
	closed bool
}

// watcher is one Watch registration.
type watcher struct {
	fn   func(up bool)
	wake chan struct{} // capacity 1: pending changed

	mu      sync.Mutex
	last    bool   // the state after the last queued change, or at registration
	pending []bool // changes not yet given to fn, alternating; at most 2

	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// add registers fn, which is then told of every change from the state up
// onwards, and returns the function that stops it. The caller serialises
// add with notify, so that no change falls between the state it reads and
// the registration.
func (ws *watchers) add(fn func(up bool), up bool) (stop func()) {
	w := &watcher{
		fn:   fn,
		wake: make(chan struct{}, 1),
		last: up,
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return func() {}
	}
	if ws.set == nil {
		ws.set = make(map[*watcher]struct{})
	}
	ws.set[w] = struct{}{}
	ws.mu.Unlock()
	go w.run()
	return func() {
		ws.mu.Lock()
		delete(ws.set, w)
		ws.mu.Unlock()
		w.close()
	}
}

// notify tells every watcher that the state is now up. It never blocks on
// a watcher's function.
func (ws *watchers) notify(up bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.set {
		w.queue(up)
	}
}

// close stops every watcher, waiting for their functions to return; later
// registrations are never called.
func (ws *watchers) close() {
	ws.mu.Lock()
	ws.closed = true
	all := ws.set
	ws.set = nil
	ws.mu.Unlock()
	for w := range all {
		w.close()
	}
}

// queue records a change. Changes alternate, so the queue is shortened
// without losing what matters: "down, up, down" becomes "down" (the
// watcher learns of the loss, then of the recovery that follows), which
// bounds it at two however long the function takes.
func (w *watcher) queue(up bool) {
	w.mu.Lock()
	if up == w.last {
		w.mu.Unlock()
		return
	}
	w.last = up
	w.pending = append(w.pending, up)
	if len(w.pending) == 3 {
		w.pending = w.pending[:1]
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case <-w.wake:
		}
		for {
			w.mu.Lock()
			if len(w.pending) == 0 {
				w.mu.Unlock()
				break
			}
			up := w.pending[0]
			w.pending = w.pending[1:]
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			default:
			}
			w.fn(up)
		}
	}
}

// close stops the watcher and waits for a running call of its function.
func (w *watcher) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
