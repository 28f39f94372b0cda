package peer

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// AsyncHandler is an optional interface of a Handler, for a router: calls
// it takes are answered later, from any goroutine, without holding a worker
// goroutine while they wait.
//
// HandleAsync runs on the read loop, in arrival order, for every call that
// is not part of a batch. It must not block. It returns false to leave the
// call to Handle on a worker, as usual; or true, having taken the call: it
// then answers exactly once with reply.Send (an answer after a cancellation
// or a close is dropped).
type AsyncHandler interface {
	HandleAsync(req *jsonrpc.Request, reply *Reply) bool
}

// Reply answers one call an AsyncHandler took.
type Reply struct {
	p  *Peer
	id jsonrpc.ID

	mu       sync.Mutex
	onCancel func()
	ended    bool // cancelled, closed or answered: onCancel runs at most once
	answered bool
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

// Send answers the call: with err when it is not nil, else with result
// (raw JSON; nil is null).
func (r *Reply) Send(result json.RawMessage, err error) {
	r.mu.Lock()
	r.ended, r.answered = true, true
	r.onCancel = nil
	r.mu.Unlock()
	resp := &jsonrpc.Response{ID: r.id, Result: result}
	if err != nil {
		resp = jsonrpc.NewErrorResponse(r.id, err)
	}
	frame := resp.Encode()
	p := r.p
	p.mu.Lock()
	in, ok := p.incoming[r.id]
	if !ok || in.reply != r {
		p.mu.Unlock()
		return // answered already, or the peer closed
	}
	delete(p.incoming, r.id)
	var inline bool
	if !in.cancelled && !p.closing {
		inline, _ = p.sendLocked(frame, true)
	}
	p.mu.Unlock()
	if inline {
		p.writeInline(frame)
	}
}

// Go sends a call and returns at once; done runs later with the answer (an
// error response, or a result), or with a non-nil error when the peer
// closes or Abort ends the call first. done runs on the read loop or the
// goroutine that closes: it must not block. id must come from NextID.
func (p *Peer) Go(id jsonrpc.ID, method string, params json.RawMessage, done func(*jsonrpc.Response, error)) error {
	if len(params) > 0 && params[0] != '{' && params[0] != '[' {
		return fmt.Errorf("peer: params of %s must be a JSON object or an array", method)
	}
	frame := (&jsonrpc.Request{ID: id, Method: method, Params: params}).Encode()
	return p.sendCall(id, frame, pendingCall{done: done})
}

// Abort ends a call sent with Go before its answer: done gets err, and
// Options.OnCancel fires (so the other side hears of it). It reports
// whether the call was still pending.
func (p *Peer) Abort(id jsonrpc.ID, err error) bool {
	p.mu.Lock()
	pc, ok := p.pending[id]
	if ok && pc.done != nil {
		delete(p.pending, id)
	}
	p.mu.Unlock()
	if !ok || pc.done == nil {
		return false
	}
	if p.opts.OnCancel != nil {
		p.opts.OnCancel(id, err)
	}
	pc.done(nil, err)
	return true
}
