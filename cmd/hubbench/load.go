package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// drainTimeout bounds how long a load may take to finish its calls in
// flight once told to stop: a call still unanswered then is cancelled and
// counts as an error rather than stalling the run.
const drainTimeout = 30 * time.Second

// warmCap bounds the wait for a load to be warm: a path so slow that some
// slot has not completed a call by then is measured anyway.
const warmCap = 20 * time.Second

// A dialer opens connections to one thing being measured.
type dialer interface {
	dial(ctx context.Context) (loadConn, error)
}

// A loadConn is one connection of a closed-loop load.
type loadConn interface {
	// drive keeps inflight round trips outstanding (each next one starts
	// when one ends) until lr says stop, and adds what it saw to rec.
	drive(ctx context.Context, inflight int, lr *loadRun, rec *recorder)
	close()
}

// loadRun is one continuous load over a set of connections. It is measured
// in a window once it is warm, and only what ends inside the window counts:
// nothing of the ramp up or of the drain.
type loadRun struct {
	base time.Time
	stop atomic.Bool
	warm atomic.Int64 // connections each of whose slots has completed a call
}

// A slot is one of a connection's calls in flight, made one after the
// other (callSlots).
type slot struct {
	call    func() error // makes one round trip
	goOn    func() bool  // after a failed one: whether the slot can go on
	release func()       // when the slot ends
}

// callSlots runs inflight slots made by newSlot until lr says stop (or ctx
// ends), and adds what each saw to rec. The connection counts as warm in
// lr once each of its slots has completed a round trip.
func callSlots(ctx context.Context, inflight int, lr *loadRun, rec *recorder, newSlot func() slot) {
	var wg sync.WaitGroup
	var warmSlots atomic.Int64
	for range inflight {
		wg.Go(func() {
			t := tally{run: lr}
			defer rec.add(&t)
			sl := newSlot()
			defer sl.release()
			first := true
			for !lr.stop.Load() && ctx.Err() == nil {
				start := time.Now()
				if err := sl.call(); err != nil {
					t.fail(err)
					if !sl.goOn() {
						return
					}
					continue
				}
				t.record(start, time.Now())
				if first {
					first = false
					if warmSlots.Add(1) == int64(inflight) {
						lr.warm.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
}

// readInOrder is the reading side of a pipelined load whose answers come in
// the order of their requests: for each send time from sent it reads one
// answer, records the round trip in t and frees a slot. After a failed read
// it cancels the load and drains sent. The connection counts as warm in lr
// after inflight answers.
func readInOrder(sent <-chan time.Time, slots <-chan struct{}, inflight int, lr *loadRun, t *tally, cancel func(), read func() error) {
	n := 0
	for start := range sent {
		if err := read(); err != nil {
			t.fail(err)
			cancel()
			for range sent {
			}
			return
		}
		t.record(start, time.Now())
		if n++; n == inflight {
			lr.warm.Add(1)
		}
		<-slots
	}
}

// completion is one round trip: when it ended (since the run's base) and
// how long it took.
type completion struct{ end, lat time.Duration }

// recorder collects the round trips of one run.
type recorder struct {
	mu       sync.Mutex
	done     []completion
	errs     int64
	firstErr error
}

// tally is what one goroutine saw, added to the recorder once at its end.
type tally struct {
	run  *loadRun
	done []completion
	errs int64
	err  error
}

func (t *tally) record(start, end time.Time) {
	t.done = append(t.done, completion{end: end.Sub(t.run.base), lat: end.Sub(start)})
}

func (t *tally) fail(err error) {
	t.errs++
	if t.err == nil {
		t.err = err
	}
}

func (r *recorder) add(t *tally) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, t.done...)
	r.errs += t.errs
	if r.firstErr == nil {
		r.firstErr = t.err
	}
}

// window is what a load did while it was measured.
type window struct {
	d        time.Duration
	lat      []time.Duration // of the round trips that ended in the window
	errs     int64           // over the whole run
	firstErr error
}

func (w *window) calls() int64 { return int64(len(w.lat)) }
func (w *window) rate() float64 {
	return float64(len(w.lat)) / w.d.Seconds()
}

// measure runs a closed-loop load on conns: it waits until the load is
// warm (every connection's slots have each completed a call, and at least
// warmup has passed), then measures for d, calling mark(true) as the
// window opens and mark(false) as it closes (for the processes' counters),
// then stops the load and waits for its calls in flight.
func measure(ctx context.Context, conns []loadConn, inflight int, warmup, d time.Duration, mark func(open bool)) (*window, error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lr := &loadRun{base: time.Now()}
	rec := &recorder{}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.drive(dctx, inflight, lr, rec) })
	}
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		close(drained)
	}()
	finish := func() {
		lr.stop.Store(true)
		t := time.NewTimer(drainTimeout)
		defer t.Stop()
		select {
		case <-drained:
		case <-t.C:
			cancel()
			<-drained
		}
	}

	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Since(lr.base) < warmup || (lr.warm.Load() < int64(len(conns)) && time.Since(lr.base) < warmCap) {
		select {
		case <-ctx.Done():
			finish()
			return nil, ctx.Err()
		case <-drained: // every connection failed
			return nil, fmt.Errorf("the load stopped before it was warm: %w", rec.firstErr)
		case <-tick.C:
		}
	}
	mark(true)
	open := time.Since(lr.base)
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	closed := time.Since(lr.base)
	mark(false)
	finish()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &window{d: closed - open, errs: rec.errs, firstErr: rec.firstErr}
	for _, c := range rec.done {
		if c.end >= open && c.end < closed {
			w.lat = append(w.lat, c.lat)
		}
	}
	return w, nil
}

// dialAll opens n connections, a few at a time.
func dialAll(ctx context.Context, d dialer, n int) ([]loadConn, error) {
	conns := make([]loadConn, n)
	err := forEach(ctx, n, 16, func(i int) error {
		c, err := d.dial(ctx)
		conns[i] = c
		return err
	})
	if err != nil {
		closeAll(conns)
		return nil, err
	}
	return conns, nil
}

func closeAll(conns []loadConn) {
	var wg sync.WaitGroup
	for _, c := range conns {
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
}

// forEach runs fn(0..n-1) on up to workers goroutines and returns the first
// error; after one, the remaining indexes are skipped.
func forEach(ctx context.Context, n, workers int, fn func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || ctx.Err() != nil
				mu.Unlock()
				if i >= n || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
