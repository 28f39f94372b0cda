package peer

import (
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// DirectConn is implemented by conns whose frames arrive on goroutines of
// their own, each already waiting for an answer (an HTTP handler holding
// its client's POST), and whose writes cost no more than a lock: a
// Streamable HTTP session. A peer on one saves the two goroutine hand-offs
// a socket needs:
//
//   - the conn hands each frame to the peer with the Feed it is bound to,
//     and the conn's goroutine runs what the read loop would have: answers
//     are delivered, notifications handled, and a call is handed to its
//     AsyncHandler on that goroutine, without waking a reader (a call left
//     to Handle goes to a worker, as from the read loop);
//   - the peer writes a call or an answer with WriteDirect on the sender's
//     goroutine, under the peer's lock, when nothing is queued before it:
//     no writer goroutine. Notifications still queue (a flood of them
//     coalesces there, as on any conn), and what is sent while something
//     is queued goes behind it, in order.
//
// WriteDirect must not block, nor call back into the peer; it may keep the
// frame (a frame the peer sends is never modified afterwards). The peer
// has no read loop on such a conn, so no goroutine while it is idle: the
// conn tells it when it ends (Feed.End), and when it has been quiet for a
// while (Feed.Quiet), and its Read is never called.
type DirectConn interface {
	Conn
	// Bind gives the conn the peer's Feed. The peer calls it once, in
	// Start. A conn that has ended already calls End at once.
	Bind(f Feed)
	// WriteDirect sends one frame, as Write does, keeping it.
	WriteDirect(frame []byte) error
}

// Feed hands frames to the peer of a DirectConn.
type Feed struct{ p *Peer }

// Frame handles one frame on the caller's goroutine, as the read loop
// handles a frame it read: frames are handled one at a time, in the order
// their callers get to them, and a call an AsyncHandler takes is routed
// here. A call left to Handle runs on a worker goroutine, as from the read
// loop: the caller goes on to serve the stream its answer, and whatever the
// handler sends before it, at once. msgs are the frame's messages, decoded
// under limits; a peer with other limits decodes raw again under its own.
// It returns false when the peer has ended (nothing was handled).
func (f Feed) Frame(raw []byte, decoded jsonrpc.Frame, limits jsonrpc.Limits) bool {
	p := f.p
	p.feedMu.Lock()
	if decoded.Messages == nil && decoded.Replies == nil || limits != p.dec.Limits {
		decoded = p.dec.Decode(raw)
	}
	if p.isClosing() {
		p.feedMu.Unlock()
		return false
	}
	worker, _, _ := p.handleFrame(decoded, nil)
	p.feedMu.Unlock()
	if worker {
		p.startWorker()
	}
	return true
}

// End tells the peer that its conn ended, with the error a Read would have
// returned: the peer ends as its read loop would on that error.
func (f Feed) End(err error) {
	p := f.p
	p.mu.Lock()
	p.shutdownLocked(err, CloseNormal, "", false)
	stop := p.stop
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Quiet tells the peer that its conn has been quiet for a while, with no
// frame being fed: it drops what an idle peer need not keep (the maps of
// calls while none is in flight, the last frame it decoded), as a parked
// reader's peer does. They are made again on use.
func (f Feed) Quiet() {
	p := f.p
	p.feedMu.Lock()
	p.dec.Release()
	p.feedMu.Unlock()
	p.compactIdle()
}

// startWorker starts the worker a call fed to the peer was given a slot
// for (see accept).
func (p *Peer) startWorker() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		p.workers--
		return
	}
	p.addGoroutine() // not closing: done is open, so Wait is not waiting on the group yet
	go func() {
		defer p.goroutineDone()
		p.work()
	}()
}
