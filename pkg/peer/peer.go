package peer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Peer is one end of a symmetric JSON-RPC 2.0 connection: it sends calls and
// notifications and answers the other side's, matching responses by id.
//
// Concurrency: every method may be called from any goroutine. Calls handlers
// run concurrently, up to Options.MaxConcurrent. Notifications are handled
// one at a time, in arrival order, on the read loop, so that their order is
// kept (a progress report is never overtaken by the response it precedes); a
// notification handler must therefore return quickly and must not wait for
// an answer from this peer.
type Peer struct {
	conn    Conn
	opts    Options // its Logger is the peer's logger; OnDone is taken (under mu) as it runs
	nextID  atomic.Int64
	dropped atomic.Uint64   // notices dropped for lack of room (SendNotice)
	dec     jsonrpc.Decoder // used by the one goroutine reading (or feeding: feedMu) at a time
	// stop releases Start's watch of its context: the read loop calls it
	// as it ends, or, on a DirectConn, its End (guarded by mu then).
	stop   func() bool
	feedMu sync.Mutex // held while a DirectConn's goroutine handles a frame (Feed.Frame), one at a time

	// ctx is the handlers' parent, cancelled when the peer ends; callCtx is
	// ctx without its cancellation: the parent of each call's context,
	// which the peer cancels itself (when the call ends, and when the peer
	// does), so that a call costs ctx no registration, and an idle peer no
	// map of its calls. They are made (under mu) for the first request a
	// worker serves or the first notification (contextsLocked): a peer whose
	// requests an AsyncHandler takes, a stateless HTTP request's, makes none.
	// Until then (cancel nil), ctx is Start's context without its
	// cancellation, whose values the handlers' contexts carry: one field
	// for both.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	callCtx *withPeer
	// done is closed as the peer starts closing; made when first asked
	// for (doneChan, under mu): a hub's client sessions never wait on
	// theirs, and every idle one would keep it.
	done chan struct{}
	wg   sync.WaitGroup // read loop, writer, workers, closer
	live atomic.Int32   // the same goroutines, counted for OnDone
	// framesBack says whether the last call an AsyncHandler took, read
	// into a pooled buffer, was given back (Reply.Release): the reader
	// then reads the next into a pooled buffer too.
	framesBack atomic.Bool

	// mu guards everything below. Every change to in-flight state happens
	// under it, in one short critical section, so that closing can never
	// miss a call that is being registered at the same moment. The maps
	// are made on first use, and dropped while the reader is parked and
	// they are empty (compactIdle).
	//
	// (The Peer fits the allocator's 512-byte class, the largest without
	// a header: every connection holds one, idle ones too. Hence the
	// narrow counters, the flags together, and conn's other interfaces
	// asserted where used rather than kept.)
	workers int32 // worker goroutines, busy or idle
	mu      sync.Mutex
	closing bool
	writing bool // a goroutine is writing: the writer, or a caller writing inline
	ended   bool // OnDone ran
	// direct and recycles are set by New, then only read: direct when conn
	// is a DirectConn, fed by its own goroutines and written under mu
	// (directConn); recycles when conn keeps nothing of a frame it wrote:
	// the buffers of the peer's own frames are then taken back (frames.go).
	direct   bool
	recycles bool
	// pooledReads is set while the frames read are answers whose buffers
	// are given back (doneWith); only the reader uses it.
	pooledReads bool
	sendBytes   int32 // of the frames in sendq (at most maxSendQueueBytes)
	err         error // why the peer ended
	pending     map[jsonrpc.ID]pendingCall
	incoming    map[jsonrpc.ID]incoming
	queue       []job
	idlers      []chan struct{} // the wake channels of workers waiting for work
	sendq       [][]byte
	sendOwn     []bool         // of each frame in sendq: the peer encoded it into a pooled buffer (frames.go)
	notices     map[string]int // key -> index in sendq of a queued notice (SendNotice)
	spare       [][]byte
	spareOwn    []bool
	writeStart  time.Duration // when the write under way began (since, below); zero between writes
	flushed     chan struct{} // closed when writing stops; made only by a flushing close
}

type peerKey struct{}

// withPeer is a context carrying its peer (FromContext): what
// context.WithValue(parent, peerKey{}, p) makes, in 24 bytes where that
// takes 48 (its key and value are interfaces), and kept in a field of 8.
// Every session that served a request keeps one.
type withPeer struct {
	context.Context
	p *Peer
}

// Value returns the peer for peerKey, and the parent's values otherwise.
func (c *withPeer) Value(key any) any {
	if key == (peerKey{}) {
		return c.p
	}
	return c.Context.Value(key)
}

// FromContext returns the peer whose handler received ctx, or nil.
func FromContext(ctx context.Context) *Peer {
	p, _ := ctx.Value(peerKey{}).(*Peer)
	return p
}

// New returns a peer on conn. Start it to read from conn.
func New(conn Conn, opts *Options) *Peer {
	o := opts.withDefaults()
	p := &Peer{
		conn: conn,
		opts: o,
		dec:  jsonrpc.Decoder{Limits: o.Limits},
	}
	_, p.direct = conn.(DirectConn)
	_, p.recycles = conn.(frameForgetter)
	// The handlers' contexts are made when first needed, from Start's
	// context (contextsLocked).
	return p
}

// Start starts reading. Handlers' contexts carry ctx's values; when ctx ends,
// the peer closes with 1001 "going away".
func (p *Peer) Start(ctx context.Context) {
	// Handlers' contexts end when the peer closes, not directly with ctx:
	// the peer closes first (closing stops answers), then cancels them, so a
	// handler that stops because ctx ended never gets its answer out.
	parent := ctx
	if ctx.Done() != nil {
		parent = context.WithoutCancel(ctx) // one that is never cancelled needs no wrapping
	}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock() // closed before it started: nothing to read
		return
	}
	if p.cancel == nil { // else a handler's context was made before Start, from Background
		p.ctx = parent
	}
	stop := func() bool { return false }
	if ctx.Done() != nil { // an owner that closes its peers itself need not pay for this
		stop = context.AfterFunc(ctx, func() { p.CloseWith(CloseGoingAway, "going away") })
	}
	p.stop = stop
	if p.direct {
		// Its goroutines feed it, and it says when it ends (Feed.End):
		// nothing to read, and no goroutine waiting to.
		p.mu.Unlock()
		p.directConn().Bind(Feed{p: p})
		return
	}
	p.addGoroutine()
	p.mu.Unlock()
	go p.readLoop(stop)
}

// directConn returns conn as the DirectConn it is when p.direct is set.
// (Asserted where used rather than kept: an idle connection pays for each
// field of its Peer.)
func (p *Peer) directConn() DirectConn { return p.conn.(DirectConn) }

// resumeRead starts a reader again for a conn whose quiet reader parked.
// (p.stop was set by Start before the first reader began.)
func (p *Peer) resumeRead() { go p.readLoop(p.stop) }

// doneChan returns done, made on first use (closed already if the peer is
// closing).
func (p *Peer) doneChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		p.done = make(chan struct{})
		if p.closing {
			close(p.done)
		}
	}
	return p.done
}

// isClosing reports whether the peer has started closing.
func (p *Peer) isClosing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closing
}

// contextsLocked makes the handlers' contexts if they are not yet: those of
// a peer that has ended are cancelled, with its cause, as they would have
// been had they been made before. p.mu is held.
func (p *Peer) contextsLocked() {
	if p.cancel != nil {
		return
	}
	parent := p.ctx // Start's, without its cancellation
	if parent == nil {
		parent = context.Background() // not started: nothing is served, but nothing panics either
	}
	// A call's parent carries the peer and is never cancelled: the values
	// of ctx without its cancellation, as context.WithoutCancel(ctx) would
	// make them, without another context for every session.
	p.callCtx = &withPeer{Context: parent, p: p}
	p.ctx, p.cancel = context.WithCancelCause(p.callCtx)
	if p.closing {
		p.cancel(p.err)
	}
}

// handlerCtx returns the handlers' parent context.
func (p *Peer) handlerCtx() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.contextsLocked()
	return p.ctx
}

// addGoroutine counts a goroutine the peer is about to start.
func (p *Peer) addGoroutine() {
	p.wg.Add(1)
	p.live.Add(1)
}

// goroutineDone marks the end of a counted goroutine; the last one of a
// closed peer runs OnDone.
func (p *Peer) goroutineDone() {
	last := p.live.Add(-1) == 0
	p.wg.Done()
	if last && p.hasOnDone() {
		p.mu.Lock()
		run := p.closing && !p.ended
		if run {
			p.ended = true
		}
		p.mu.Unlock()
		if run {
			p.onDone()
		}
	}
}
