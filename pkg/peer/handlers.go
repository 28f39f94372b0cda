package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"slices"
	"sync"
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

type incoming struct {
	cancel    context.CancelFunc // nil for a call an AsyncHandler took
	reply     *Reply             // set for a call an AsyncHandler took
	cancelled bool               // Cancel was called: no response is sent
}

type job struct {
	ctx   context.Context
	req   *jsonrpc.Request
	batch *batchReply
	// frame is the pooled buffer req was read into, lent to the handler
	// (Options.LendRequests): the worker gives it back once the call
	// ended.
	frame []byte
}

// batchReply collects the answers to one incoming batch, sent as one array
// when the last call in it is answered.
type batchReply struct {
	out       []jsonrpc.Message
	remaining int
	sealed    bool // every call of the batch has been registered
}

// accept registers an incoming call and queues it for a worker. For a call
// that came alone in its frame it returns true instead of starting a worker,
// when one may start: the reader becomes that worker (see readLoop). pooled
// is the buffer of the pools the call was read into, alone (nil
// otherwise): the call's Reply holds it when an AsyncHandler takes the
// call (handed), and its job when the peer lends requests (frameLent).
func (p *Peer) accept(req *jsonrpc.Request, b *batchReply, pooled []byte) (becomeWorker bool, fate frameFate, handed *Reply) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return false, frameKept, nil
	}
	if _, dup := p.incoming[req.ID]; dup {
		p.respondLocked(b, jsonrpc.NewErrorResponse(req.ID,
			jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "id %s is already in flight", req.ID)))
		p.mu.Unlock()
		return false, frameKept, nil
	}
	if len(p.incoming) >= p.opts.MaxPending {
		p.respondLocked(b, &jsonrpc.Response{ID: req.ID, Error: p.opts.Overloaded})
		p.mu.Unlock()
		return false, frameKept, nil
	}
	if p.incoming == nil {
		p.incoming = make(map[jsonrpc.ID]incoming, 1)
	}
	if async, ok := p.opts.Handler.(AsyncHandler); ok {
		reply := &Reply{p: p, id: req.ID, batch: b}
		if pooled != nil {
			reply.frame, reply.holds = pooled, 2 // the reader's and the caller's (Release)
		}
		p.incoming[req.ID] = incoming{reply: reply}
		if b != nil {
			b.remaining++ // until its answer, or its cancellation, joins the batch's
		}
		p.mu.Unlock()
		if async.HandleAsync(req, reply) {
			if b != nil {
				return false, frameKept, nil // a batch's frame is kept (pooled is nil)
			}
			return false, frameKept, reply
		}
		p.mu.Lock()
		if in, ok := p.incoming[req.ID]; !ok || in.reply != reply {
			p.mu.Unlock() // cancelled or closed meanwhile
			return false, frameKept, nil
		}
		if b != nil {
			b.remaining-- // counted again as a worker's job below
		}
	}
	defer p.mu.Unlock()
	p.contextsLocked()
	ctx, cancel := context.WithCancel(p.callCtx) // cancelled by the peer itself: when the call ends, and in shutdown
	p.incoming[req.ID] = incoming{cancel: cancel}
	j := job{ctx: ctx, req: req, batch: b}
	if p.opts.LendRequests && b == nil {
		j.frame, fate = pooled, frameLent
	}
	p.queue = append(p.queue, j)
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
	case int(p.workers) < p.opts.MaxConcurrent:
		p.workers++
		if b == nil {
			return true, fate, nil
		}
		p.addGoroutine()
		go func() {
			defer p.goroutineDone()
			p.work()
		}()
	}
	return false, fate, nil
}

// workerLinger is how long a worker with nothing to do waits for more work
// before it exits: long enough that a busy peer keeps its workers (starting
// a goroutine and growing its stack for every call cost more than the call
// itself), short enough that an idle peer soon holds none. No longer than
// a quiet WebSocket's reader waits before it parks (idleSweep): in a burst
// of connections (a reconnect storm), the worker that answered each one's
// initialize holds the stack that answering grew until it leaves, and the
// heap keeps the pages of the most stacks held at once.
const workerLinger = 100 * time.Millisecond

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
				continue // reserved for a job, or woken as the peer closes
			case <-linger.C:
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
	var frame []byte
	if j.ctx.Err() == nil {
		resp, frame = p.call(j)
	}
	if resp != nil && frame == nil && j.batch == nil {
		frame = p.encodeResponse(resp) // encoded before locking
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
	inline, queued := false, false
	switch {
	case j.batch != nil:
		j.batch.remaining--
		if resp != nil {
			j.batch.out = append(j.batch.out, resp)
		}
		p.flushBatchLocked(j.batch)
	case resp != nil && !p.closing:
		var err error
		inline, err = p.sendLocked(frame, true)
		queued = err == nil
	}
	p.mu.Unlock()
	switch {
	case inline:
		p.writeInline(frame)
	case !queued && frame != nil:
		p.recycle(frame) // not sent: cancelled, or the peer closed
	}
	// The answer is encoded and sent (or dropped): nothing refers to the
	// lent request any longer.
	recycleFrame(j.frame)
}

// call runs the handler for one call and turns its outcome into a
// response. A result that encodes itself (a jsonrpc.Appender), outside a
// batch, is encoded straight into the response's frame, which call then
// returns too (resp then carries the id alone): a large tool result is
// written once, not into a buffer of its own and then into the frame.
func (p *Peer) call(j job) (resp *jsonrpc.Response, frame []byte) {
	defer func() {
		if r := recover(); r != nil {
			p.opts.Logger.Error("handler panicked", "method", j.req.Method, "panic", r, "stack", string(debug.Stack()))
			resp, frame = jsonrpc.NewErrorResponse(j.req.ID, jsonrpc.ErrInternal), nil
		}
	}()
	result, err := p.opts.Handler.Handle(j.ctx, j.req)
	if err != nil {
		if jsonrpc.CodeOf(err) == jsonrpc.CodeInternalError && j.ctx.Err() == nil {
			p.opts.Logger.Warn("handler failed", "method", j.req.Method, "err", err) // a cancelled call failing is expected
		}
		return jsonrpc.NewErrorResponse(j.req.ID, err), nil
	}
	if a, ok := result.(jsonrpc.Appender); ok && j.batch == nil {
		frame, err = p.encodeResult(j.req.ID, a)
		resp = &jsonrpc.Response{ID: j.req.ID}
	} else {
		resp, err = jsonrpc.NewResult(j.req.ID, result)
	}
	if err != nil {
		p.opts.Logger.Warn("encoding a result failed", "method", j.req.Method, "err", err)
		return jsonrpc.NewErrorResponse(j.req.ID, jsonrpc.ErrInternal), nil
	}
	return resp, frame
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
		if b := in.reply.batch; b != nil {
			b.remaining--
			p.flushBatchLocked(b)
		}
	}
	p.mu.Unlock()
	if hook != nil {
		hook()
	}
	return true
}

// AsyncHandler is an optional interface of a Handler, for a router: calls
// it takes are answered later, from any goroutine, without holding a worker
// goroutine while they wait.
//
// HandleAsync runs on the read loop, in arrival order, for every call, a
// batch's too. It must not block. It returns false to leave the call to
// Handle on a worker, as usual; or true, having taken the call: it then
// answers exactly once with reply.Send (an answer after a cancellation or a
// close is dropped), and may tell the peer with reply.Release once it
// refers to req no longer, which lets the peer read into its frame's
// buffer again. A batch is answered once every call in it is answered or
// cancelled, whoever took them.
type AsyncHandler interface {
	HandleAsync(req *jsonrpc.Request, reply *Reply) bool
}

// Reply answers one call an AsyncHandler took.
type Reply struct {
	p     *Peer
	id    jsonrpc.ID
	batch *batchReply // the batch the call came in, nil for a call alone

	mu       sync.Mutex
	onCancel func()
	ended    bool // cancelled, closed or answered: onCancel runs at most once
	answered bool
	// frame is the pooled buffer the call was read into, while it is not
	// given back; holds counts who may still refer to it: the reader until
	// it has handled the frame, the caller until Release.
	frame    []byte
	holds    int8
	released bool
}

// ID returns the call's id.
func (r *Reply) ID() jsonrpc.ID { return r.id }

// OnCancel registers fn to run, once, if the call is cancelled (Cancel) or
// the peer closes before it is answered; at once if that already happened.
func (r *Reply) OnCancel(fn func()) {
	r.mu.Lock()
	if !r.ended {
		r.onCancel = fn
		r.mu.Unlock()
		return
	}
	answered := r.answered
	r.mu.Unlock()
	if !answered {
		fn()
	}
}

// cancelled ends the reply without an answer and returns its hook.
func (r *Reply) cancelled() func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return nil
	}
	r.ended = true
	fn := r.onCancel
	r.onCancel = nil
	return fn
}

// Release tells the peer that the one who took the call refers no longer
// to its request: its params, a slice of the frame the call was read from,
// which the peer may then read another frame into. Call it once the call
// is answered, at most once; the request must not be used afterwards.
func (r *Reply) Release() {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return
	}
	r.released = true
	b := r.dropLocked()
	r.mu.Unlock()
	r.p.framesBack.Store(true) // pooled or not: the next call's frame may be
	recycleFrame(b)
}

// dropFrame is the end of one hold on the call's frame: the last gives the
// buffer back.
func (r *Reply) dropFrame() {
	r.mu.Lock()
	b := r.dropLocked()
	r.mu.Unlock()
	recycleFrame(b)
}

// dropLocked ends one hold on the call's frame and returns its buffer when
// that was the last (nil otherwise), to be given back once r.mu is
// released. r.mu is held.
func (r *Reply) dropLocked() []byte {
	r.holds--
	if r.holds != 0 {
		return nil
	}
	b := r.frame
	r.frame = nil
	return b
}

// Send answers the call: with err when it is not nil, else with result
// (raw JSON; nil is null).
func (r *Reply) Send(result json.RawMessage, err error) {
	r.mu.Lock()
	r.ended, r.answered = true, true
	r.onCancel = nil
	pooled := r.frame != nil && !r.released
	r.mu.Unlock()
	if pooled {
		r.p.framesBack.Store(false) // until Release says otherwise
	}
	resp := &jsonrpc.Response{ID: r.id, Result: result}
	if err != nil {
		resp = jsonrpc.NewErrorResponse(r.id, err)
	}
	p := r.p
	if r.batch != nil {
		r.sendInBatch(resp)
		return
	}
	frame := p.encodeResponse(resp)
	p.mu.Lock()
	in, ok := p.incoming[r.id]
	if !ok || in.reply != r {
		p.mu.Unlock()
		p.recycle(frame)
		return // answered already, or the peer closed
	}
	delete(p.incoming, r.id)
	inline, queued := false, false
	if !in.cancelled && !p.closing {
		var err error
		inline, err = p.sendLocked(frame, true)
		queued = err == nil
	}
	p.mu.Unlock()
	switch {
	case inline:
		p.writeInline(frame)
	case !queued:
		p.recycle(frame) // not sent: cancelled, or the peer closed
	}
}

// sendInBatch adds the answer of a call that came in a batch to the batch's
// answers, which go out with the last of them. Its result is copied: the
// batch is encoded later, and the caller may lend result only until Send
// returns.
func (r *Reply) sendInBatch(resp *jsonrpc.Response) {
	if resp.Error == nil {
		resp.Result = bytes.Clone(resp.Result)
	}
	p := r.p
	p.mu.Lock()
	defer p.mu.Unlock()
	in, ok := p.incoming[r.id]
	if !ok || in.reply != r {
		return // answered already, cancelled (counted then), or the peer closed
	}
	delete(p.incoming, r.id)
	r.batch.remaining--
	if !in.cancelled {
		r.batch.out = append(r.batch.out, resp)
	}
	p.flushBatchLocked(r.batch)
}
