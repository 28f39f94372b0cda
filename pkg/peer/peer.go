package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Handler answers incoming requests and notifications.
//
// For a call, the result is encoded as the response's result (a
// json.RawMessage is sent as is) and an error as its error object, mapped by
// jsonrpc.ErrorOf. For a notification the result is ignored.
type Handler interface {
	Handle(ctx context.Context, req *jsonrpc.Request) (result any, err error)
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, req *jsonrpc.Request) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	return f(ctx, req)
}

var _ Handler = HandlerFunc(nil)

// ErrClosed is the error of every call that cannot complete because the
// connection closed. Its code, -32000, is MCP's "connection closed".
var ErrClosed = &jsonrpc.Error{Code: -32000, Message: "connection closed"}

// ErrSlowConsumer is why a peer whose send queue overflowed was closed.
var ErrSlowConsumer = errors.New("peer: slow consumer: send queue full")

// Defaults for Options.
const (
	DefaultMaxConcurrent  = 16
	DefaultMaxPending     = 256
	DefaultSendQueue      = 1024
	DefaultSendQueueBytes = 64 << 20
	DefaultFlushTimeout   = 5 * time.Second
)

// Options configure a Peer. The zero value is usable.
type Options struct {
	// Handler answers incoming requests; nil answers every call with
	// "method not found".
	Handler Handler
	// MaxConcurrent bounds the handlers running at once for calls. Calls
	// beyond it wait in a queue, answered in any order as they finish.
	MaxConcurrent int
	// MaxPending bounds the calls accepted and not yet answered, queued or
	// running. Calls beyond it are answered at once with Overloaded.
	MaxPending int
	// Overloaded is the error for calls beyond MaxPending. Default: -32603
	// "too many requests in flight".
	Overloaded *jsonrpc.Error
	// SendQueue and SendQueueBytes bound the frames waiting for the writer.
	// A peer that does not read until they overflow is closed with 1008
	// "slow consumer", so that it never blocks anyone else.
	SendQueue      int
	SendQueueBytes int
	// FlushTimeout bounds how long Close waits for queued frames to be
	// written before closing the connection.
	FlushTimeout time.Duration
	// Limits bound each incoming frame (see jsonrpc.Limits).
	Limits jsonrpc.Limits
	// CloseOnInvalid closes the connection with 1008 on the first frame
	// that is not valid JSON-RPC, instead of answering it with an error:
	// for a peer that is a program and should never send one.
	CloseOnInvalid bool
	// OnCancel is called when the context of an outgoing call ends before
	// its answer came. The call has already left the pending map; MCP sends
	// notifications/cancelled from here.
	OnCancel func(id jsonrpc.ID, cause error)
	// OnClose runs once when the peer starts closing, with the reason, on
	// a goroutine of the peer's: the place to forget it. OnDone runs once
	// when the last goroutine of the closed peer ends, so that an owner can
	// wait for peers without holding a goroutine for each.
	OnClose func(err error)
	OnDone  func()
	// Logger receives debug logs (unsolicited responses, handler errors).
	// Nil discards them.
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Handler == nil {
		v.Handler = HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return nil, jsonrpc.ErrMethodNotFound
		})
	}
	if v.MaxConcurrent <= 0 {
		v.MaxConcurrent = DefaultMaxConcurrent
	}
	if v.MaxPending <= 0 {
		v.MaxPending = DefaultMaxPending
	}
	if v.Overloaded == nil {
		v.Overloaded = jsonrpc.NewError(jsonrpc.CodeInternalError, "too many requests in flight")
	}
	if v.SendQueue <= 0 {
		v.SendQueue = DefaultSendQueue
	}
	if v.SendQueueBytes <= 0 {
		v.SendQueueBytes = DefaultSendQueueBytes
	}
	if v.FlushTimeout <= 0 {
		v.FlushTimeout = DefaultFlushTimeout
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v
}

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
	conn   Conn
	opts   Options
	log    *slog.Logger
	nextID atomic.Int64
	dec    jsonrpc.Decoder // used by the one goroutine reading at a time

	ctx    context.Context // handlers' parent; cancelled when the peer ends
	cancel context.CancelCauseFunc
	done   chan struct{}
	wg     sync.WaitGroup // read loop, writer, workers, closer
	live   atomic.Int64   // the same goroutines, counted for OnDone
	ended  sync.Once      // OnDone

	// mu guards everything below. Every change to in-flight state happens
	// under it, in one short critical section, so that closing can never
	// miss a call that is being registered at the same moment.
	mu         sync.Mutex
	closing    bool
	err        error // why the peer ended
	pending    map[jsonrpc.ID]pendingCall
	incoming   map[jsonrpc.ID]incoming
	queue      []job
	workers    int             // worker goroutines, busy or idle
	idlers     []chan struct{} // the wake channels of workers waiting for work
	sendq      [][]byte
	sendBytes  int
	spare      [][]byte
	writing    bool          // a goroutine is writing: the writer, or a caller writing inline
	writeStart time.Time     // when the write under way began (zero between writes)
	flushed    chan struct{} // closed when writing stops; made only by a flushing close
}

type incoming struct {
	cancel    context.CancelFunc // nil for a call an AsyncHandler took
	reply     *Reply             // set for a call an AsyncHandler took
	cancelled bool               // Cancel was called: no response is sent
}

// pendingCall is an outgoing call waiting for its answer: on ch (Call) or
// through done (Go).
type pendingCall struct {
	ch   chan *jsonrpc.Response
	done func(*jsonrpc.Response, error)
}

type job struct {
	ctx   context.Context
	req   *jsonrpc.Request
	batch *batchReply
}

// batchReply collects the answers to one incoming batch, sent as one array
// when the last call in it is answered.
type batchReply struct {
	out       []jsonrpc.Message
	remaining int
	sealed    bool // every call of the batch has been registered
}

type peerKey struct{}

// FromContext returns the peer whose handler received ctx, or nil.
func FromContext(ctx context.Context) *Peer {
	p, _ := ctx.Value(peerKey{}).(*Peer)
	return p
}

// New returns a peer on conn. Start it to read from conn.
func New(conn Conn, opts *Options) *Peer {
	o := opts.withDefaults()
	p := &Peer{
		conn:     conn,
		opts:     o,
		log:      o.Logger,
		done:     make(chan struct{}),
		pending:  make(map[jsonrpc.ID]pendingCall),
		incoming: make(map[jsonrpc.ID]incoming),
		dec:      jsonrpc.Decoder{Limits: o.Limits},
	}
	p.ctx, p.cancel = context.WithCancelCause(context.WithValue(context.Background(), peerKey{}, p))
	return p
}

// Start starts reading. Handlers' contexts carry ctx's values; when ctx ends,
// the peer closes with 1001 "going away".
func (p *Peer) Start(ctx context.Context) {
	// Handlers' contexts end when the peer closes, not directly with ctx:
	// the peer closes first (closing stops answers), then cancels them, so a
	// handler that stops because ctx ended never gets its answer out.
	base, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), peerKey{}, p))
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock() // closed before it started: nothing to read
		cancel(nil)
		return
	}
	p.ctx, p.cancel = base, cancel
	p.addGoroutine()
	p.mu.Unlock()
	stop := func() bool { return false }
	if ctx.Done() != nil { // an owner that closes its peers itself need not pay for this
		stop = context.AfterFunc(ctx, func() { p.CloseWith(CloseGoingAway, "going away") })
	}
	go p.readLoop(stop)
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
	if last && p.opts.OnDone != nil {
		select {
		case <-p.done:
			p.ended.Do(p.opts.OnDone)
		default:
		}
	}
}

// NextID returns a fresh id for an outgoing call, for callers that must know
// it before the call is sent (see CallID).
func (p *Peer) NextID() jsonrpc.ID { return jsonrpc.Int64ID(p.nextID.Add(1)) }

// Call sends a request and waits for its answer, decoding the result into
// result (nil discards it; a *json.RawMessage receives it undecoded). The
// error is the remote's *jsonrpc.Error, ctx's error if it ends first, or one
// matching ErrClosed if the connection closes.
func (p *Peer) Call(ctx context.Context, method string, params, result any) error {
	return p.CallID(ctx, p.NextID(), method, params, result)
}

// CallID is Call with an id from NextID.
func (p *Peer) CallID(ctx context.Context, id jsonrpc.ID, method string, params, result any) error {
	raw, err := encodeParams(method, params)
	if err != nil {
		return err
	}
	frame := (&jsonrpc.Request{ID: id, Method: method, Params: raw}).Encode()
	ch := replyChans.Get().(chan *jsonrpc.Response)
	defer replyChans.Put(ch) // empty again: exactly one reply is sent and received
	if err := p.sendCall(id, frame, pendingCall{ch: ch}); err != nil {
		return err
	}

	select {
	case resp := <-ch:
		return p.decodeResult(method, resp, result)
	case <-ctx.Done():
		p.mu.Lock()
		_, stillPending := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if !stillPending {
			// The answer, or the news that the peer closed, raced the
			// cancellation and won: whoever took the call from the pending
			// map is sending it on ch, which never blocks.
			return p.decodeResult(method, <-ch, result)
		}
		if p.opts.OnCancel != nil {
			p.opts.OnCancel(id, context.Cause(ctx))
		}
		return ctx.Err()
	}
}

// encodeParams encodes params, which JSON-RPC wants as an object or an
// array; nil leaves them out.
func encodeParams(method string, params any) (json.RawMessage, error) {
	raw, err := jsonrpc.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("peer: encoding params of %s: %w", method, err)
	}
	if len(raw) > 0 && raw[0] != '{' && raw[0] != '[' {
		if string(raw) == "null" {
			return nil, nil
		}
		return nil, fmt.Errorf("peer: params of %s must encode to a JSON object or an array, not %.20s", method, raw)
	}
	return raw, nil
}

// sendCall records a call as pending under id, where its answer will find
// pc, and sends its frame.
func (p *Peer) sendCall(id jsonrpc.ID, frame []byte, pc pendingCall) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return p.closedErr()
	}
	if _, dup := p.pending[id]; dup {
		p.mu.Unlock()
		return fmt.Errorf("peer: call id %s is already in flight", id)
	}
	p.pending[id] = pc
	inline, err := p.sendLocked(frame, true)
	if err != nil {
		delete(p.pending, id)
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if inline {
		p.writeInline(frame)
	}
	return nil
}

// replyChans recycles the channels calls wait on.
var replyChans = sync.Pool{New: func() any { return make(chan *jsonrpc.Response, 1) }}

// closedResponse is what shutdown sends every pending call.
var closedResponse = &jsonrpc.Response{Error: ErrClosed}

func (p *Peer) decodeResult(method string, resp *jsonrpc.Response, result any) error {
	if resp == closedResponse {
		return p.closedErr()
	}
	if resp.Error != nil {
		return resp.Error
	}
	switch r := result.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*r = resp.Result
		return nil
	}
	if err := json.Unmarshal(resp.Result, result); err != nil {
		return fmt.Errorf("peer: decoding result of %s into %T: %w", method, result, err)
	}
	return nil
}

// Notify sends a notification. It does not wait for the frame to be written.
func (p *Peer) Notify(ctx context.Context, method string, params any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := encodeParams(method, params)
	if err != nil {
		return err
	}
	return p.SendEncoded((&jsonrpc.Request{Method: method, Params: raw}).Encode())
}

// SendEncoded queues a frame that is already an encoded message, such as one
// notification encoded once and sent to many peers. The frame is shared, not
// copied: it must not be modified afterwards.
func (p *Peer) SendEncoded(frame []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return p.closedErrLocked()
	}
	_, err := p.sendLocked(frame, false)
	return err
}

// BatchWriter is implemented by conns that can send several frames in fewer
// system calls than one each. The peer's writer uses it when frames queue up.
type BatchWriter interface {
	WriteBatch(ctx context.Context, frames [][]byte) error
}

// sendLocked queues a frame for the writer. A full queue closes the peer as
// a slow consumer instead of blocking the caller.
//
// When inline is set and nothing is being written or waiting, it queues
// nothing and returns true instead: the caller then writes the frame itself
// with writeInline, after unlocking, saving the hand-off to a writer
// goroutine. That is worth it only while this is the peer's one piece of
// work in flight: with more, answers and calls follow each other closely,
// and the writer sends all that queued up in one system call instead. Only calls and their answers are written inline, from
// goroutines that wait on this connection anyway and whose writes the conn
// bounds with a timeout; notifications, which the hub fans out to many peers
// from one goroutine, are always queued.
func (p *Peer) sendLocked(frame []byte, inline bool) (bool, error) {
	if inline && !p.writing && len(p.sendq) == 0 && len(p.pending)+len(p.incoming) <= 1 {
		p.writing = true
		return true, nil
	}
	if p.overflowingLocked(len(frame)) {
		p.shutdownLocked(ErrSlowConsumer, ClosePolicyViolation, "slow consumer", false)
		return false, fmt.Errorf("%w: %w", ErrClosed, ErrSlowConsumer)
	}
	p.sendq = append(p.sendq, frame)
	p.sendBytes += len(frame)
	if !p.writing {
		p.writing = true
		p.addGoroutine()
		go p.writeLoop()
	}
	return false, nil
}

// stuckWrite is how long a write must have been under way, with the queue
// full behind it, for its reader to count as a slow consumer: a burst that
// fills the queue while the writer has not yet had a turn is no sign that
// the other side stopped reading.
const stuckWrite = 250 * time.Millisecond

// overflowingLocked reports whether queueing n more bytes breaks the slow
// consumer rule: the byte bound always; the frame bound when a write has
// been stuck behind it for stuckWrite, or four times over regardless.
func (p *Peer) overflowingLocked(n int) bool {
	switch {
	case p.sendBytes+n > p.opts.SendQueueBytes:
		return true
	case len(p.sendq) < p.opts.SendQueue:
		return false
	case len(p.sendq) >= 4*p.opts.SendQueue:
		return true
	}
	return !p.writeStart.IsZero() && time.Since(p.writeStart) > stuckWrite
}

// writeInline writes one frame on the caller's goroutine, which sendLocked
// made the writer. Frames queued meanwhile are left to a writer goroutine,
// so that one caller never ends up writing for everyone.
func (p *Peer) writeInline(frame []byte) {
	p.mu.Lock()
	p.writeStart = time.Now()
	p.mu.Unlock()
	err := p.conn.Write(context.Background(), frame)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeStart = time.Time{}
	switch {
	case err != nil:
		p.stopWritingLocked()
		p.writeFailedLocked(err)
	case len(p.sendq) > 0:
		p.addGoroutine() // safe while closing too: the closer, counted, waits for the flush
		go p.writeLoop()
	default:
		p.stopWritingLocked()
	}
}

// writeFailedLocked ends the peer after a failed write. A write fails with
// net.ErrClosed when the connection is already closed, usually because the
// other side closed it: then the read loop, which sees why (a close frame
// and its code), is left to end the peer, so that a normal close is not
// reported as a write error.
func (p *Peer) writeFailedLocked(err error) {
	p.sendq, p.sendBytes = nil, 0
	if errors.Is(err, net.ErrClosed) {
		return
	}
	p.shutdownLocked(fmt.Errorf("peer: write: %w", err), CloseAbnormal, "", false)
}

func (p *Peer) stopWritingLocked() {
	p.writing = false
	if p.flushed != nil {
		close(p.flushed)
		p.flushed = nil
	}
}

// writeLoop drains the queue, handing all queued frames to the conn at once,
// and exits when it is empty: an idle peer holds no writer goroutine.
func (p *Peer) writeLoop() {
	defer p.goroutineDone()
	bw, batches := p.conn.(BatchWriter)
	for {
		p.mu.Lock()
		frames := p.sendq
		if len(frames) == 0 {
			p.stopWritingLocked()
			p.mu.Unlock()
			return
		}
		p.sendq, p.spare = p.spare[:0], nil
		p.sendBytes = 0
		p.writeStart = time.Now()
		p.mu.Unlock()

		var err error
		if batches {
			err = bw.WriteBatch(context.Background(), frames)
		} else {
			for _, f := range frames {
				if err = p.conn.Write(context.Background(), f); err != nil {
					break
				}
			}
		}
		clear(frames)
		p.mu.Lock()
		p.writeStart = time.Time{}
		if err != nil {
			p.stopWritingLocked()
			p.writeFailedLocked(err)
			p.mu.Unlock()
			return
		}
		p.spare = frames[:0]
		p.mu.Unlock()
	}
}

// readLoop reads frames until the connection ends. When a frame holds a
// single call and a worker slot is free, the reading goroutine runs the call
// itself and a new goroutine takes over reading: the call starts at once,
// without waiting to be scheduled, and only the next read (which would wait
// for the network anyway) pays for the new goroutine. This is the largest
// saving on the round-trip latency of one call at a time.
func (p *Peer) readLoop(stop func() bool) {
	defer p.goroutineDone()
	for {
		data, err := p.conn.Read(context.Background())
		if err != nil {
			p.mu.Lock()
			p.shutdownLocked(err, CloseNormal, "", false)
			p.mu.Unlock()
			stop()
			return
		}
		if p.handleFrame(data) {
			p.addGoroutine() // this goroutine is still counted: Add cannot race Wait
			go p.readLoop(stop)
			p.work()
			return
		}
	}
}

// handleFrame handles one frame. It returns true when the calling reader
// has been given a worker slot for the call the frame held.
func (p *Peer) handleFrame(data []byte) (becomeWorker bool) {
	select {
	case <-p.done:
		return false // closing: nothing more is handled or answered
	default:
	}
	f := p.dec.Decode(data)
	var b *batchReply
	if f.Batch {
		b = &batchReply{}
		for _, r := range f.Replies {
			b.out = append(b.out, r)
		}
	} else if len(f.Replies) > 0 {
		p.log.Debug("invalid message", "code", f.Replies[0].Error.Code, "reason", f.Replies[0].Error.Message)
		if !p.opts.CloseOnInvalid {
			p.respond(nil, f.Replies[0])
			return false
		}
	}
	if p.opts.CloseOnInvalid && len(f.Replies) > 0 {
		reason := "invalid JSON-RPC: " + f.Replies[0].Error.Message
		p.log.Warn("closing: the other side sent invalid JSON-RPC", "reason", f.Replies[0].Error.Message)
		p.mu.Lock()
		p.shutdownLocked(&CloseError{Code: ClosePolicyViolation, Reason: reason}, ClosePolicyViolation, reason, false)
		p.mu.Unlock()
		return false
	}
	for _, m := range f.Messages {
		switch m := m.(type) {
		case *jsonrpc.Response:
			p.deliver(m)
		case *jsonrpc.Request:
			if m.IsNotification() {
				p.notification(m)
			} else {
				becomeWorker = p.accept(m, b)
			}
		}
	}
	if b != nil {
		p.mu.Lock()
		b.sealed = true
		p.flushBatchLocked(b)
		p.mu.Unlock()
	}
	return becomeWorker
}

func (p *Peer) deliver(resp *jsonrpc.Response) {
	p.mu.Lock()
	pc, ok := p.pending[resp.ID]
	delete(p.pending, resp.ID)
	p.mu.Unlock()
	switch {
	case ok && pc.done != nil:
		pc.done(resp, nil)
	case ok:
		pc.ch <- resp
	case resp.ID.IsNull() && resp.Error != nil:
		p.log.Debug("the other side could not read a message", "code", resp.Error.Code, "reason", resp.Error.Message)
	default:
		p.log.Debug("ignoring unsolicited response", "id", resp.ID.String())
	}
}

func (p *Peer) notification(req *jsonrpc.Request) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("notification handler panicked", "method", req.Method, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if _, err := p.opts.Handler.Handle(p.ctx, req); err != nil {
		p.log.Debug("notification handler failed", "method", req.Method, "err", err)
	}
}

// accept registers an incoming call and queues it for a worker. For a call
// that came alone in its frame it returns true instead of starting a worker,
// when one may start: the reader becomes that worker (see readLoop).
func (p *Peer) accept(req *jsonrpc.Request, b *batchReply) (becomeWorker bool) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return false
	}
	if _, dup := p.incoming[req.ID]; dup {
		p.respondLocked(b, jsonrpc.NewErrorResponse(req.ID,
			jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "id %s is already in flight", req.ID)))
		p.mu.Unlock()
		return false
	}
	if len(p.incoming) >= p.opts.MaxPending {
		p.respondLocked(b, &jsonrpc.Response{ID: req.ID, Error: p.opts.Overloaded})
		p.mu.Unlock()
		return false
	}
	if async, ok := p.opts.Handler.(AsyncHandler); ok && b == nil {
		reply := &Reply{p: p, id: req.ID}
		p.incoming[req.ID] = incoming{reply: reply}
		p.mu.Unlock()
		if async.HandleAsync(req, reply) {
			return false
		}
		p.mu.Lock()
		if in, ok := p.incoming[req.ID]; !ok || in.reply != reply {
			p.mu.Unlock() // cancelled or closed meanwhile
			return false
		}
	}
	defer p.mu.Unlock()
	ctx, cancel := context.WithCancel(p.ctx)
	p.incoming[req.ID] = incoming{cancel: cancel}
	p.queue = append(p.queue, job{ctx: ctx, req: req, batch: b})
	if b != nil {
		b.remaining++
	}
	switch {
	case len(p.idlers) > 0:
		// A worker is waiting for work: wake it rather than start one. It is
		// taken off the list here, so that each job reserves its own worker.
		wake := p.idlers[len(p.idlers)-1]
		p.idlers = p.idlers[:len(p.idlers)-1]
		wake <- struct{}{} // buffered: one token per reservation
	case p.workers < p.opts.MaxConcurrent:
		p.workers++
		if b == nil {
			return true
		}
		p.addGoroutine()
		go func() {
			defer p.goroutineDone()
			p.work()
		}()
	}
	return false
}

// workerLinger is how long a worker with nothing to do waits for more work
// before it exits: long enough that a busy peer keeps its workers (starting
// a goroutine and growing its stack for every call cost more than the call
// itself), short enough that an idle peer soon holds none.
const workerLinger = 500 * time.Millisecond

// work runs queued calls, waiting a little for more when the queue is empty,
// then exits.
func (p *Peer) work() {
	wake := make(chan struct{}, 1)
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		p.mu.Lock()
		if p.closing {
			p.workers--
			p.mu.Unlock()
			return
		}
		if len(p.queue) == 0 {
			p.idlers = append(p.idlers, wake)
			p.mu.Unlock()
			if linger == nil {
				linger = time.NewTimer(workerLinger)
			} else {
				linger.Reset(workerLinger)
			}
			select {
			case <-wake:
				continue // reserved for a job
			case <-linger.C:
			case <-p.done:
			}
			p.mu.Lock()
			if i := slices.Index(p.idlers, wake); i >= 0 {
				p.idlers = slices.Delete(p.idlers, i, i+1)
				p.workers--
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			<-wake // a job reserved this worker as it gave up: take it
			continue
		}
		j := p.queue[0]
		p.queue[0] = job{}
		p.queue = p.queue[1:]
		p.mu.Unlock()
		p.run(j)
	}
}

func (p *Peer) run(j job) {
	var resp *jsonrpc.Response
	if j.ctx.Err() == nil {
		resp = p.call(j)
	}
	var frame []byte
	if resp != nil && j.batch == nil {
		frame = resp.Encode() // encoded before locking
	}
	p.mu.Lock()
	in, ok := p.incoming[j.req.ID]
	delete(p.incoming, j.req.ID)
	if ok {
		if in.cancel != nil {
			in.cancel()
		}
		if in.cancelled {
			resp = nil
		}
	}
	inline := false
	switch {
	case j.batch != nil:
		j.batch.remaining--
		if resp != nil {
			j.batch.out = append(j.batch.out, resp)
		}
		p.flushBatchLocked(j.batch)
	case resp != nil && !p.closing:
		inline, _ = p.sendLocked(frame, true)
	}
	p.mu.Unlock()
	if inline {
		p.writeInline(frame)
	}
}

// call runs the handler for one call and turns its outcome into a response.
func (p *Peer) call(j job) (resp *jsonrpc.Response) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("handler panicked", "method", j.req.Method, "panic", r, "stack", string(debug.Stack()))
			resp = jsonrpc.NewErrorResponse(j.req.ID, jsonrpc.ErrInternal)
		}
	}()
	result, err := p.opts.Handler.Handle(j.ctx, j.req)
	if err != nil {
		if jsonrpc.CodeOf(err) == jsonrpc.CodeInternalError && j.ctx.Err() == nil {
			p.log.Warn("handler failed", "method", j.req.Method, "err", err) // a cancelled call failing is expected
		}
		return jsonrpc.NewErrorResponse(j.req.ID, err)
	}
	resp, err = jsonrpc.NewResult(j.req.ID, result)
	if err != nil {
		p.log.Warn("encoding a result failed", "method", j.req.Method, "err", err)
		return jsonrpc.NewErrorResponse(j.req.ID, jsonrpc.ErrInternal)
	}
	return resp
}

func (p *Peer) respond(b *batchReply, resp *jsonrpc.Response) {
	p.mu.Lock()
	p.respondLocked(b, resp)
	p.mu.Unlock()
}

// respondLocked sends resp, or adds it to its batch's reply.
func (p *Peer) respondLocked(b *batchReply, resp *jsonrpc.Response) {
	if b != nil {
		b.out = append(b.out, resp)
		p.flushBatchLocked(b)
		return
	}
	if !p.closing {
		_, _ = p.sendLocked(resp.Encode(), false)
	}
}

func (p *Peer) flushBatchLocked(b *batchReply) {
	if !b.sealed || b.remaining > 0 || len(b.out) == 0 || p.closing {
		return
	}
	out := b.out
	b.out = nil
	_, _ = p.sendLocked(jsonrpc.EncodeBatch(out), false)
}

// Pending returns the number of incoming calls accepted and not yet
// answered. Once it is 0, every answer has been queued or is being written,
// and Close sends it before closing.
func (p *Peer) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.incoming)
}

// Cancel cancels the context of the incoming call id, if it is in flight.
// Its response, if the handler still returns one, is not sent: MCP says a
// cancelled request gets no answer.
func (p *Peer) Cancel(id jsonrpc.ID) bool {
	p.mu.Lock()
	in, ok := p.incoming[id]
	if !ok {
		p.mu.Unlock()
		return false
	}
	in.cancelled = true
	p.incoming[id] = in
	if in.cancel != nil {
		in.cancel()
	}
	var hook func()
	if in.reply != nil {
		delete(p.incoming, id) // no answer will be sent
		hook = in.reply.cancelled()
	}
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	return true
}

// Close sends what is queued (for up to FlushTimeout), closes the connection
// with 1000 and waits for the peer's goroutines to end.
func (p *Peer) Close() error {
	p.CloseWith(CloseNormal, "")
	return p.Wait()
}

// CloseWith starts closing the peer with a close code and reason, without
// waiting: pending calls fail at once, handlers' contexts are cancelled,
// queued frames are sent for up to FlushTimeout, then the connection closes.
func (p *Peer) CloseWith(code CloseCode, reason string) {
	p.mu.Lock()
	p.shutdownLocked(&CloseError{Code: code, Reason: reason}, code, reason, true)
	p.mu.Unlock()
}

// shutdownLocked ends the peer once. It never blocks: closing the
// connection, which can take a handshake, happens on a goroutine of its own.
func (p *Peer) shutdownLocked(cause error, code CloseCode, reason string, flush bool) {
	if p.closing {
		return
	}
	p.closing = true
	p.err = cause
	// Calls waiting on a channel learn at once; callbacks and cancellation
	// hooks run on the closer goroutine below, outside the lock.
	var hooks []func()
	for _, pc := range p.pending {
		if pc.done != nil {
			done := pc.done
			hooks = append(hooks, func() { done(nil, p.closedErr()) })
		} else {
			pc.ch <- closedResponse // buffered, and nobody else sends once the call left the map
		}
	}
	p.pending = nil
	for id, in := range p.incoming {
		if in.cancel != nil {
			in.cancel()
		}
		if in.reply != nil {
			delete(p.incoming, id)
			if hook := in.reply.cancelled(); hook != nil {
				hooks = append(hooks, hook)
			}
		}
	}
	p.queue = nil
	if !flush {
		p.sendq, p.sendBytes = nil, 0
	}
	var flushed chan struct{}
	if flush && p.writing {
		p.flushed = make(chan struct{})
		flushed = p.flushed
	}
	close(p.done)
	p.cancel(cause)

	p.addGoroutine()
	go func() {
		defer p.goroutineDone()
		if p.opts.OnClose != nil {
			p.opts.OnClose(cause)
		}
		for _, hook := range hooks {
			hook()
		}
		if flushed != nil {
			t := time.NewTimer(p.opts.FlushTimeout)
			select {
			case <-flushed:
			case <-t.C:
			}
			t.Stop()
		}
		_ = p.conn.Close(code, reason)
	}()
}

func (p *Peer) closedErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closedErrLocked()
}

func (p *Peer) closedErrLocked() error {
	if p.err == nil {
		return ErrClosed
	}
	return &closedError{cause: p.err}
}

// closedError matches ErrClosed and keeps the cause for errors.Is/As.
type closedError struct{ cause error }

func (e *closedError) Error() string   { return "connection closed: " + e.cause.Error() }
func (e *closedError) Unwrap() []error { return []error{ErrClosed, e.cause} }

// Done is closed when the peer starts closing.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Err returns why the peer ended (nil while it runs): a *CloseError for a
// closed connection, ErrSlowConsumer, or a transport error.
func (p *Peer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Wait waits until the peer has ended and all its goroutines have returned.
// It returns nil when the connection closed normally (1000 or 1001, from
// either side), else the error that ended it.
func (p *Peer) Wait() error {
	<-p.done
	p.wg.Wait()
	err := p.Err()
	if c := CloseStatus(err); c == CloseNormal || c == CloseGoingAway {
		return nil
	}
	return err
}
