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
// of the pools of frames (frames.go), which its reader gives back once
// nothing refers to the frame: the answers to calls whose done borrows
// them (GoBorrowing). The peer asks for one (pooled) while its frames are
// such answers (the conn to a server), and a buffer of the frame's own
// size otherwise, which costs less than a pooled buffer that is never
// given back (the calls of a client, which their callee keeps).
type pooledReader interface {
	// readPooled is Read; buf is the frame's buffer when it is a pooled one
	// (nil otherwise).
	readPooled(ctx context.Context, pooled bool) (frame, buf []byte, err error)
}

// doneWith gives back the buffer of a frame read once it has been handled,
// when nothing refers to it any longer (reusable), or lets the Reply that
// holds it (handed) give it back once its caller is done with it too; and
// notes whether the next frame should be read into a pooled buffer: when
// this one could have been given back.
func (p *Peer) doneWith(pooled []byte, reusable bool, handed *Reply) {
	switch {
	case handed != nil:
		handed.dropFrame()
		p.pooledReads = p.framesBack.Load()
	case reusable && pooled != nil:
		p.dec.Release() // the decoder's messages refer to the frame
		recycleFrame(pooled)
		fallthrough
	default:
		p.pooledReads = reusable
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
		becomeWorker, reusable, handed := p.handleFrame(f, pooled)
		p.doneWith(pooled, reusable, handed)
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
// been given a worker slot for the call the frame held; reusable when
// nothing refers to the frame once it returns: it held answers only, each a
// success borrowed by its call's done (GoBorrowing); and handed, the Reply
// of the one call it held when an AsyncHandler took it, which holds a
// pooled buffer until its caller gives it back (Reply.Release).
func (p *Peer) handleFrame(f jsonrpc.Frame, pooled []byte) (becomeWorker, reusable bool, handed *Reply) {
	if p.isClosing() {
		return false, false, nil // closing: nothing more is handled or answered
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
			return false, false, nil
		}
	}
	if p.opts.CloseOnInvalid && len(f.Replies) > 0 {
		reason := "invalid JSON-RPC: " + f.Replies[0].Error.Message
		p.opts.Logger.Warn("closing: the other side sent invalid JSON-RPC", "reason", f.Replies[0].Error.Message)
		p.mu.Lock()
		p.shutdownLocked(&CloseError{Code: ClosePolicyViolation, Reason: reason}, ClosePolicyViolation, reason, false)
		p.mu.Unlock()
		return false, false, nil
	}
	if f.Batch || len(f.Messages) != 1 {
		pooled = nil // a Reply holds the frame of its call alone
	}
	reusable = !f.Batch && len(f.Messages) > 0
	for _, m := range f.Messages {
		switch m := m.(type) {
		case *jsonrpc.Response:
			if !p.deliver(m) {
				reusable = false
			}
		case *jsonrpc.Request:
			reusable = false
			if m.IsNotification() {
				p.notification(m)
			} else {
				becomeWorker, handed = p.accept(m, b, pooled)
			}
		}
	}
	if b != nil {
		p.mu.Lock()
		b.sealed = true
		p.flushBatchLocked(b)
		p.mu.Unlock()
	}
	return becomeWorker, reusable, handed
}

// deliver hands an answer to its call. It reports whether the call's done
// borrowed it (GoBorrowing): nothing refers to it once deliver returns.
func (p *Peer) deliver(resp *jsonrpc.Response) (borrowed bool) {
	p.mu.Lock()
	pc, ok := p.pending[resp.ID]
	delete(p.pending, resp.ID)
	p.mu.Unlock()
	switch {
	case ok && pc.done != nil:
		pc.done(resp, nil)
		return pc.borrows && resp.Error == nil
	case ok:
		pc.ch <- resp
	case resp.ID.IsNull() && resp.Error != nil:
		p.opts.Logger.Debug("the other side could not read a message", "code", resp.Error.Code, "reason", resp.Error.Message)
	default:
		p.opts.Logger.Debug("ignoring unsolicited response", "id", resp.ID.String())
	}
	return false
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
