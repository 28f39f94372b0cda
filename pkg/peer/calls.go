package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// pendingCall is an outgoing call waiting for its answer: on ch (Call) or
// through done (Go).
type pendingCall struct {
	ch   chan *jsonrpc.Response
	done func(*jsonrpc.Response, error)
	// borrows is set when done keeps nothing of a successful answer once
	// it returns (GoBorrowing): the frame it was read from is then reused.
	borrows bool
	// lend is the Answer of a call whose caller takes the frame of a
	// successful answer (CallBorrowing): deliver leaves the frame there
	// before it sends the answer on ch.
	lend *Answer
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
	resp, err := p.roundTrip(ctx, id, method, params, nil)
	if err != nil {
		return err
	}
	return decodeResult(method, resp, result)
}

// Answer is the result of a call made with CallBorrowing, lent by the
// peer: Result lies in the buffer the answer was read into, which Release
// gives back to the peer's pools, to be read into again. Until then the
// bytes are the caller's alone; from then on, neither Result nor anything
// sliced from it may be used. An Answer is not to be copied while it
// holds a result (two copies would give one buffer back twice).
type Answer struct {
	// Result is the call's result, undecoded.
	Result json.RawMessage
	// frame is the buffer of the pools Result lies in; nil when the answer
	// was read into one of its own (a small one, one read on a conn
	// without the pools), which the collector takes as usual.
	frame []byte
}

// Release gives back the buffer of the answer's result and empties the
// Answer. Releasing an empty Answer (twice, or one whose call failed) does
// nothing; not releasing one is safe too, and leaves its buffer to the
// garbage collector.
func (a *Answer) Release() {
	frame := a.frame
	a.Result, a.frame = nil, nil
	recycleFrame(frame) // nothing for nil
}

// CallBorrowing is Call for a caller that borrows the answer rather than
// decoding it: on success, ans holds the result undecoded, in the buffer
// the answer was read into, until ans.Release. The frames of the answers
// that follow are then read into buffers of the peer's pools, so that a
// caller that releases each answer once done with it reads a stream of
// large results without allocating a buffer for each (on a WebSocket; on
// other conns ans.Release has nothing to give back). ans is overwritten:
// release what it held first. On error, ans is left empty and the error
// is as Call's.
func (p *Peer) CallBorrowing(ctx context.Context, method string, params any, ans *Answer) error {
	*ans = Answer{}
	resp, err := p.roundTrip(ctx, p.NextID(), method, params, ans)
	if err != nil {
		return err // an error answer is never lent: ans is still empty
	}
	ans.Result = resp.Result
	return nil
}

// roundTrip sends a call and waits for its answer: a result, or the
// remote's error, ctx's, or the close's. lend, when set, is where deliver
// leaves the frame of a successful answer (CallBorrowing).
func (p *Peer) roundTrip(ctx context.Context, id jsonrpc.ID, method string, params any, lend *Answer) (*jsonrpc.Response, error) {
	raw, err := encodeParams(method, params)
	if err != nil {
		return nil, err
	}
	frame := p.encodeRequest(&jsonrpc.Request{ID: id, Method: method, Params: raw})
	ch := replyChans.Get().(chan *jsonrpc.Response)
	defer replyChans.Put(ch) // empty again: exactly one reply is sent and received
	if err := p.sendCall(id, frame, pendingCall{ch: ch, lend: lend}); err != nil {
		return nil, err
	}

	select {
	case resp := <-ch:
		return resp, p.answerErr(resp)
	case <-ctx.Done():
		p.mu.Lock()
		_, stillPending := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if !stillPending {
			// The answer, or the news that the peer closed, raced the
			// cancellation and won: whoever took the call from the pending
			// map is sending it on ch, which never blocks.
			resp := <-ch
			return resp, p.answerErr(resp)
		}
		p.onCancel(id, context.Cause(ctx))
		return nil, ctx.Err()
	}
}

// Go sends a call and returns at once; done runs later with the answer (an
// error response, or a result), or with a non-nil error when the peer
// closes or Abort ends the call first. done runs on the read loop or the
// goroutine that closes: it must not block. id must come from NextID.
func (p *Peer) Go(id jsonrpc.ID, method string, params json.RawMessage, done func(*jsonrpc.Response, error)) error {
	return p.goCall(id, method, params, pendingCall{done: done})
}

func (p *Peer) goCall(id jsonrpc.ID, method string, params json.RawMessage, pc pendingCall) error {
	if len(params) > 0 && params[0] != '{' && params[0] != '[' {
		return fmt.Errorf("peer: params of %s must be a JSON object or an array", method)
	}
	return p.sendCall(id, p.encodeRequest(&jsonrpc.Request{ID: id, Method: method, Params: params}), pc)
}

// GoBorrowing is GoRenamed (Go when old is nil) for a done that borrows a
// successful answer: resp, and the result it holds, are valid only until
// done returns, and the buffer the answer was read into is then read into
// again (pooledReader), where a fresh buffer per answer would be another
// 16 KiB for the collector with each 16 KiB result. An error answer is
// done's to keep, as with Go.
func (p *Peer) GoBorrowing(id jsonrpc.ID, method string, params json.RawMessage, old []byte, name string, done func(*jsonrpc.Response, error)) error {
	pc := pendingCall{done: done, borrows: true}
	if old == nil {
		return p.goCall(id, method, params, pc)
	}
	return p.goRenamed(id, method, params, old, name, pc)
}

// GoRenamed is Go with old, a slice of params (a member's value, such as a
// tool's name), replaced by the JSON string name as the frame is encoded:
// params are copied once, into the frame, where renaming them first would
// copy them twice. params itself is left as it is.
func (p *Peer) GoRenamed(id jsonrpc.ID, method string, params json.RawMessage, old []byte, name string, done func(*jsonrpc.Response, error)) error {
	return p.goRenamed(id, method, params, old, name, pendingCall{done: done})
}

func (p *Peer) goRenamed(id jsonrpc.ID, method string, params json.RawMessage, old []byte, name string, pc pendingCall) error {
	if len(params) == 0 || params[0] != '{' {
		return fmt.Errorf("peer: params of %s must be a JSON object to rename a member of", method)
	}
	frame, ok := p.encodeRenamed(&jsonrpc.Request{ID: id, Method: method, Params: params}, old, name)
	if !ok {
		return fmt.Errorf("peer: the member renamed in %s is not within its params", method)
	}
	return p.sendCall(id, frame, pc)
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
	p.onCancel(id, err)
	pc.done(nil, err)
	return true
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
// pc, and sends its frame, one of the peer's own (frames.go).
func (p *Peer) sendCall(id jsonrpc.ID, frame []byte, pc pendingCall) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		p.recycle(frame)
		return p.closedErr()
	}
	if _, dup := p.pending[id]; dup {
		p.mu.Unlock()
		p.recycle(frame)
		return fmt.Errorf("peer: call id %s is already in flight", id)
	}
	if p.pending == nil {
		p.pending = make(map[jsonrpc.ID]pendingCall, 1)
	}
	p.pending[id] = pc
	inline, err := p.sendLocked(frame, true)
	if err != nil {
		delete(p.pending, id)
	}
	p.mu.Unlock()
	if err != nil {
		p.recycle(frame)
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

// answerErr returns the error an answer carries: the remote's, or the
// close's for closedResponse; nil for a result.
func (p *Peer) answerErr(resp *jsonrpc.Response) error {
	switch {
	case resp == closedResponse:
		return p.closedErr()
	case resp.Error != nil:
		return resp.Error
	}
	return nil
}

// decodeResult decodes a successful answer's result into result (Call).
func decodeResult(method string, resp *jsonrpc.Response, result any) error {
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
