package peer

import (
	"context"
	"errors"
	"runtime/debug"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// FrameReader is implemented by conns whose frames arrive decoded: a
// transport that decodes a frame to carry it (Streamable HTTP checks a
// POST's body before it answers the POST) hands the peer its messages
// instead of having it decode the same bytes again. ReadFrame returns the
// next frame as Read would, decoded under dec's Limits (the peer's); a conn
// that decoded it under other limits decodes it again with dec. The Frame
// is valid until the next ReadFrame.
type FrameReader interface {
	ReadFrame(ctx context.Context, dec *jsonrpc.Decoder) (jsonrpc.Frame, error)
}

// readFrame reads and decodes the next frame. pooled is the buffer it was
// read into when that came from the pools of frames (pooledReader): the
// reader may give it back once nothing refers to it.
func (p *Peer) readFrame() (f jsonrpc.Frame, pooled []byte, err error) {
	if fr, ok := p.conn.(FrameReader); ok {
		f, err = fr.ReadFrame(context.Background(), &p.dec)
		return f, nil, err
	}
	var data []byte
	if pr, ok := p.conn.(pooledReader); ok {
		data, pooled, err = pr.readPooled(context.Background(), p.pooledReads)
	} else {
		data, err = p.conn.Read(context.Background())
	}
	if err != nil {
		return jsonrpc.Frame{}, nil, err
	}
	return p.dec.Decode(data), pooled, nil
}

// pooledReader is implemented by conns that can read a frame into a buffer
// of the pools of frames (frames.go), which goes back to the pools once
// nothing refers to the frame: the reader gives back the answers to calls
// whose done borrows them (GoBorrowing); the caller of CallBorrowing, the
// one who took a call (Reply.Release) and a worker that answered a call a
// peer lends (Options.LendRequests) give back theirs. The peer asks for
// one (pooled) while its frames are such messages (the conn to a server),
// and a buffer of the frame's own size otherwise, which costs less than a
// pooled buffer that is never given back (the calls of a client, whose
// callee keeps them, unless the peer lends them).
type pooledReader interface {
	// readPooled is Read; buf is the frame's buffer when it is a pooled one
	// (nil otherwise).
	readPooled(ctx context.Context, pooled bool) (frame, buf []byte, err error)
}

// frameFate is what becomes of a frame read once the reader has handled
// it, as far as the buffer it was read into goes.
type frameFate uint8

const (
	// frameKept: something may still refer to it (a call its handler
	// keeps, an answer Call or Go's done kept): left to the collector.
	frameKept frameFate = iota
	// frameReusable: nothing refers to it (answers borrowed by their
	// done, which has returned): the reader gives it back.
	frameReusable
	// frameLent: its one message went to someone who gives the buffer
	// back (the caller of CallBorrowing, the worker answering a call a
	// peer lends): the reader leaves it to them.
	frameLent
)

// doneWith gives back the buffer of a frame read once it has been handled,
// when nothing refers to it any longer, or lets the Reply that holds it
// (handed) give it back once its caller is done with it too; and notes
// whether the next frame should be read into a pooled buffer: when this
// one could have been given back, by the reader or by another.
func (p *Peer) doneWith(pooled []byte, fate frameFate, handed *Reply) {
	switch {
	case handed != nil:
		handed.dropFrame()
		p.pooledReads = p.framesBack.Load()
	case fate == frameReusable && pooled != nil:
		p.dec.Release() // the decoder's messages refer to the frame
		recycleFrame(pooled)
		fallthrough
	default:
		p.pooledReads = fate != frameKept
	}
}

// idleParker is implemented by conns whose reader may leave while the
// connection is quiet (an accepted WebSocket, on Linux).
type idleParker interface {
	// parkIdle waits until the conn has something to read and reports
	// false; or, when it stays quiet, arranges for resume to run once it
	// has (or closes) and reports true: the reader then ends.
	parkIdle(resume func()) bool
}

// errNoFrame is returned by the Read of an idleParker that read control
// frames only: its reader looks again whether the connection is quiet.
var errNoFrame = errors.New("peer: no frame yet")

// readLoop reads frames until the connection ends. When a frame holds a
// single call and a worker slot is free, the reading goroutine runs the call
// itself and a new goroutine takes over reading: the call starts at once,
// without waiting to be scheduled, and only the next read (which would wait
// for the network anyway) pays for the new goroutine. This is the largest
// saving on the round-trip latency of one call at a time.
//
// A reader whose connection stays quiet may leave (idleParker): it stays
// counted among the peer's goroutines, and a new one takes over once there
// is something to read.
func (p *Peer) readLoop(stop func() bool) {
	parked := false
	defer func() {
		if !parked {
			p.goroutineDone()
		}
	}()
	parker, _ := p.conn.(idleParker) // when conn's reader may leave while it is quiet
	for {
		if parker != nil {
			// The last frame's messages are handled: the decoder need not
			// keep them (nor, through their params, the frame) while the
			// reader waits, maybe parked, for the next.
			p.dec.Release()
			if parker.parkIdle(p.resumeRead) {
				parked = true
				p.compactIdle()
				return
			}
		}
		f, pooled, err := p.readFrame()
		if err == errNoFrame {
			continue // control frames only: the conn may be quiet again
		}
		if err != nil {
			p.mu.Lock()
			p.shutdownLocked(err, CloseNormal, "", false)
			p.mu.Unlock()
			stop()
			return
		}
		becomeWorker, fate, handed := p.handleFrame(f, pooled)
		p.doneWith(pooled, fate, handed)
		if becomeWorker {
			p.addGoroutine() // this goroutine is still counted: Add cannot race Wait
			go p.readLoop(stop)
			p.work()
			return
		}
	}
}

// compactIdle drops what an idle peer need not keep: the maps of calls
// when none is in flight, the spare queues. They are made again on use.
func (p *Peer) compactIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) == 0 {
		p.pending = nil
	}
	if len(p.incoming) == 0 {
		p.incoming = nil
	}
	if len(p.notices) == 0 {
		p.notices = nil
	}
	if len(p.queue) == 0 {
		p.queue = nil
	}
	p.spare, p.spareOwn = nil, nil
}

// handleFrame handles one frame, read into pooled when that is a buffer of
// the pools (nil otherwise). It returns true when the calling reader has
// been given a worker slot for the call the frame held; the frame's fate
// (frameReusable when it held answers only, each a success borrowed by its
// call's done; frameLent when its one message went to someone who gives
// the buffer back); and handed, the Reply of the one call it held when an
// AsyncHandler took it, which holds a pooled buffer until its caller gives
// it back (Reply.Release).
func (p *Peer) handleFrame(f jsonrpc.Frame, pooled []byte) (becomeWorker bool, fate frameFate, handed *Reply) {
	if p.isClosing() {
		return false, frameKept, nil // closing: nothing more is handled or answered
	}
	var b *batchReply
	if f.Batch {
		b = &batchReply{}
		for _, r := range f.Replies {
			b.out = append(b.out, r)
		}
	} else if len(f.Replies) > 0 {
		p.opts.Logger.Debug("invalid message", "code", f.Replies[0].Error.Code, "reason", f.Replies[0].Error.Message)
		if !p.opts.CloseOnInvalid {
			p.respond(nil, f.Replies[0])
			return false, frameKept, nil
		}
	}
	if p.opts.CloseOnInvalid && len(f.Replies) > 0 {
		reason := "invalid JSON-RPC: " + f.Replies[0].Error.Message
		p.opts.Logger.Warn("closing: the other side sent invalid JSON-RPC", "reason", f.Replies[0].Error.Message)
		p.mu.Lock()
		p.shutdownLocked(&CloseError{Code: ClosePolicyViolation, Reason: reason}, ClosePolicyViolation, reason, false)
		p.mu.Unlock()
		return false, frameKept, nil
	}
	if f.Batch || len(f.Messages) != 1 {
		pooled = nil // a Reply, an Answer or a worker holds the frame of its message alone
	}
	for _, m := range f.Messages {
		switch m := m.(type) {
		case *jsonrpc.Response:
			fate = p.deliver(m, pooled)
		case *jsonrpc.Request:
			fate = frameKept
			if m.IsNotification() {
				p.notification(m)
			} else {
				becomeWorker, fate, handed = p.accept(m, b, pooled)
			}
		}
	}
	if b != nil {
		fate = frameKept
		p.mu.Lock()
		b.sealed = true
		p.flushBatchLocked(b)
		p.mu.Unlock()
	}
	return becomeWorker, fate, handed
}

// deliver hands an answer to its call, with pooled, the buffer of the
// pools it was read into (nil when it was not, or shares its frame). It
// returns frameReusable when the call's done borrowed it (GoBorrowing):
// nothing refers to it once deliver returns; frameLent when the caller
// took it (CallBorrowing).
func (p *Peer) deliver(resp *jsonrpc.Response, pooled []byte) frameFate {
	p.mu.Lock()
	pc, ok := p.pending[resp.ID]
	delete(p.pending, resp.ID)
	p.mu.Unlock()
	switch {
	case ok && pc.done != nil:
		pc.done(resp, nil)
		if pc.borrows && resp.Error == nil {
			return frameReusable
		}
	case ok && pc.lend != nil && resp.Error == nil:
		pc.lend.frame = pooled // before the send: the caller reads it after receiving
		pc.ch <- resp
		return frameLent
	case ok:
		pc.ch <- resp
	case resp.ID.IsNull() && resp.Error != nil:
		p.opts.Logger.Debug("the other side could not read a message", "code", resp.Error.Code, "reason", resp.Error.Message)
	default:
		p.opts.Logger.Debug("ignoring unsolicited response", "id", resp.ID.String())
	}
	return frameKept
}

func (p *Peer) notification(req *jsonrpc.Request) {
	defer func() {
		if r := recover(); r != nil {
			p.opts.Logger.Error("notification handler panicked", "method", req.Method, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if _, err := p.opts.Handler.Handle(p.handlerCtx(), req); err != nil {
		p.opts.Logger.Debug("notification handler failed", "method", req.Method, "err", err)
	}
}
