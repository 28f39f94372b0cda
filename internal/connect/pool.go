package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pool bounds the runs of one server the connector keeps at once
// (Server.Pool): each run, a child process (or a session with an HTTP
// server), has a connection of its own to the hub, where it is a replica of
// the server. The zero value is one run.
type Pool struct {
	Min, Max int
}

// MaxPool bounds Pool.Max.
const MaxPool = 256

// growDelay is how long every run must stay busy before the pool starts
// another: the hub's own requests to a run that just started (its lists)
// make it busy for a moment.
const growDelay = 50 * time.Millisecond

// ParsePool reads a pool's bounds: "MIN..MAX", or "N" for N..N.
func ParsePool(s string) (Pool, error) {
	lo, hi, ranged := strings.Cut(strings.TrimSpace(s), "..")
	if !ranged {
		hi = lo
	}
	min, err1 := strconv.Atoi(strings.TrimSpace(lo))
	max, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil {
		return Pool{}, fmt.Errorf("%q is neither MIN..MAX (2..8) nor N, in whole numbers", s)
	}
	p := Pool{Min: min, Max: max}
	return p, p.checkBounds()
}

// check refuses bounds that could not work; the zero value is one run.
func (p Pool) check() error {
	if p == (Pool{}) {
		return nil
	}
	return p.checkBounds()
}

func (p Pool) checkBounds() error {
	switch {
	case p.Min < 1:
		return fmt.Errorf("%d..%d: at least one run (MIN >= 1): a server with none is not on the hub, and no call could ask for more", p.Min, p.Max)
	case p.Max < p.Min:
		return fmt.Errorf("%d..%d: MAX must be at least MIN", p.Min, p.Max)
	case p.Max > MaxPool:
		return fmt.Errorf("%d..%d: at most %d runs", p.Min, p.Max, MaxPool)
	}
	return nil
}

// bounds returns Min and Max, with the zero value's one run.
func (p Pool) bounds() (min, max int) {
	if p == (Pool{}) {
		return 1, 1
	}
	return p.Min, p.Max
}

// String is MIN..MAX.
func (p Pool) String() string {
	min, max := p.bounds()
	return fmt.Sprintf("%d..%d", min, max)
}

// pool keeps one server on the hub: its first Min runs for good (restarted
// with backoff whatever happens to them), and up to Max-Min more while
// every run has calls in flight, each stopped once it has had none for
// PoolIdle. The hub hands a leased server's calls to its oldest free
// replica, so the newest runs are the ones that idle.
type pool struct {
	srv      Server
	opts     *Options
	min, max int
	grow     chan struct{} // a run became busy while every other was
	// upstreamClient sends the requests of every run to an HTTP server
	// (nil: http.DefaultClient): with Server.OAuth, one client keeps the
	// runs' access tokens.
	upstreamClient *http.Client

	// mu is taken under a relay's mu (relay.count tells loaded), never
	// the other way.
	mu    sync.Mutex
	name  string // the hub's name for the server, once known
	runs  []*connector
	count int // runs started, to number them in logs
}

func newPool(srv Server, opts *Options) *pool {
	p := &pool{srv: srv, opts: opts, grow: make(chan struct{}, 1), name: srv.Name}
	p.min, p.max = srv.Pool.bounds()
	return p
}

// elastic reports whether the pool grows and shrinks: only then do its
// relays count the calls in flight.
func (p *pool) elastic() bool { return p.max > p.min }

// run keeps the pool until ctx ends or the hub refuses the credentials.
func (p *pool) run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	start := func(permanent bool) {
		c := p.add(permanent)
		wg.Go(func() {
			err := c.run(ctx)
			p.remove(c)
			if err != nil {
				cancel(err)
			}
		})
	}
	for range p.min {
		start(true)
	}
	if p.elastic() {
		p.watch(ctx, func() { start(false) })
	}
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); errors.Is(err, ErrRefused) {
		return err
	}
	return nil
}

// watch starts a run when every run has been busy for growDelay, and
// retires the runs beyond Min that have been idle for PoolIdle, until ctx
// ends.
func (p *pool) watch(ctx context.Context, start func()) {
	tick := time.NewTicker(max(p.opts.PoolIdle/4, 10*time.Millisecond))
	defer tick.Stop()
	growing := time.NewTimer(growDelay)
	growing.Stop()
	defer growing.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.grow:
			growing.Reset(growDelay)
		case <-growing.C:
			if p.wantMore() {
				start()
			}
		case <-tick.C:
			p.retireIdle()
		}
	}
}

// add registers a new run.
func (p *pool) add(permanent bool) *connector {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count++
	c := &connector{srv: p.srv, opts: p.opts, pool: p, permanent: permanent, n: p.count, retire: make(chan struct{}),
		back: p.opts.Backoff()}
	p.runs = append(p.runs, c)
	return c
}

// remove forgets a run that ended for good.
func (p *pool) remove(c *connector) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.runs {
		if x == c {
			p.runs = append(p.runs[:i], p.runs[i+1:]...)
			return
		}
	}
}

// serverName returns the hub's name for the server, once known.
func (p *pool) serverName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.name
}

// learnName keeps the name the server gave itself, for the runs to come.
func (p *pool) learnName(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.name == "" {
		p.name = name
	}
}

// started notes that c's server answered the hub's handshake.
func (p *pool) started(c *connector) {
	p.mu.Lock()
	c.ready, c.idleSince = true, time.Now()
	p.mu.Unlock()
}

// ended notes that c's session ended.
func (p *pool) ended(c *connector) {
	p.mu.Lock()
	c.ready, c.busy = false, false
	p.mu.Unlock()
}

// loaded notes whether c's server has calls in flight; when every run has,
// the pool may grow.
func (p *pool) loaded(c *connector, busy bool) {
	p.mu.Lock()
	c.busy = busy
	if !busy {
		c.idleSince = time.Now()
	}
	full := busy && p.allBusyLocked()
	p.mu.Unlock()
	if full {
		select {
		case p.grow <- struct{}{}:
		default:
		}
	}
}

// wantMore reports whether another run should start: every run is up and
// busy, and there is room.
func (p *pool) wantMore() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.runs) < p.max && p.allBusyLocked()
}

func (p *pool) allBusyLocked() bool {
	for _, c := range p.runs {
		if !c.ready || !c.busy {
			return false
		}
	}
	return true
}

// retireIdle stops the runs beyond Min that have had no call for PoolIdle.
func (p *pool) retireIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.runs {
		if !c.permanent && c.ready && !c.busy && !c.retired && time.Since(c.idleSince) >= p.opts.PoolIdle {
			c.retired = true
			close(c.retire)
		}
	}
}
