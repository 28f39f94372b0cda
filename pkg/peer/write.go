package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrSlowConsumer is why a peer whose send queue overflowed was closed.
var ErrSlowConsumer = errors.New("peer: slow consumer: send queue full")

// BatchWriter is implemented by conns that can send several frames in fewer
// system calls than one each. The peer's writer uses it when frames queue up.
type BatchWriter interface {
	WriteBatch(ctx context.Context, frames [][]byte) error
}

// epoch is the origin of since: a Peer's write start, and a corkConn's
// write deadline, are Durations since it, 8 bytes where a time.Time takes
// 24.
var epoch = time.Now()

// since returns the monotonic time since epoch; never zero, which stands
// for no write under way.
func since() time.Duration { return max(time.Since(epoch), 1) }

// sendLocked queues a frame for the writer. A full queue closes the peer as
// a slow consumer instead of blocking the caller.
//
// inline is set for the calls and answers the peer encodes itself, whose
// buffers it takes back once they are written (frames.go); a frame it
// does not take (an error) is the caller's to take back.
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
	if p.direct && inline && !p.writing && len(p.sendq) == 0 {
		// Its write costs a lock and never blocks: a call or an answer
		// with nothing queued before it goes at once. (Notices still
		// queue, where a flood of them coalesces, and what follows them
		// queues behind them, in order.)
		if err := p.directConn().WriteDirect(frame); err != nil {
			p.writeFailedLocked(err)
		}
		return false, nil
	}
	if inline && !p.writing && len(p.sendq) == 0 && len(p.pending)+len(p.incoming) <= 1 {
		p.writing = true
		return true, nil
	}
	if p.overflowingLocked(len(frame)) {
		p.shutdownLocked(ErrSlowConsumer, ClosePolicyViolation, "slow consumer", false)
		return false, fmt.Errorf("%w: %w", ErrClosed, ErrSlowConsumer)
	}
	p.sendq = append(p.sendq, frame)
	p.sendOwn = append(p.sendOwn, inline)
	p.sendBytes += int32(len(frame))
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
	case int(p.sendBytes)+n > p.opts.SendQueueBytes:
		return true
	case len(p.sendq) < p.opts.SendQueue:
		return false
	case len(p.sendq) >= 4*p.opts.SendQueue:
		return true
	}
	return p.writeStart != 0 && since()-p.writeStart > stuckWrite
}

// writeInline writes one frame on the caller's goroutine, which sendLocked
// made the writer. Frames queued meanwhile are left to a writer goroutine,
// so that one caller never ends up writing for everyone.
func (p *Peer) writeInline(frame []byte) {
	p.mu.Lock()
	p.writeStart = since()
	p.mu.Unlock()
	err := p.conn.Write(context.Background(), frame)
	p.recycle(frame)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeStart = 0
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
	p.sendq, p.sendOwn, p.sendBytes = nil, nil, 0
	clear(p.notices)
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
		frames, own := p.sendq, p.sendOwn
		clear(p.notices) // taken by the writer: no longer to replace
		if len(frames) == 0 {
			p.stopWritingLocked()
			p.mu.Unlock()
			return
		}
		p.sendq, p.spare = p.spare[:0], nil
		p.sendOwn, p.spareOwn = p.spareOwn[:0], nil
		p.sendBytes = 0
		p.writeStart = since()
		p.mu.Unlock()

		var err error
		if p.direct {
			direct := p.directConn()
			for _, f := range frames {
				if err = direct.WriteDirect(f); err != nil {
					break
				}
			}
		} else if batches {
			err = bw.WriteBatch(context.Background(), frames)
		} else {
			for _, f := range frames {
				if err = p.conn.Write(context.Background(), f); err != nil {
					break
				}
			}
		}
		for i, f := range frames {
			if own[i] {
				p.recycle(f)
			}
		}
		clear(frames)
		p.mu.Lock()
		p.writeStart = 0
		if err != nil {
			p.stopWritingLocked()
			p.writeFailedLocked(err)
			p.mu.Unlock()
			return
		}
		p.spare, p.spareOwn = frames[:0], own[:0]
		p.mu.Unlock()
	}
}

// stuckNotices is how long a write must have been under way, with notices
// piling up behind it, for the other side to count as one that stopped
// reading: longer than stuckWrite, since a client that reads slowly under a
// flood of notices writes large batches.
const stuckNotices = 2 * time.Second

// SendNotice queues a notification that the other side may do without when
// it reads too slowly to get everything: a resource update, a log line, a
// progress report. A notice with a key replaces a queued one with the same
// key that the writer has not taken yet (the latest update of a resource,
// the latest progress of a call). Once the queue is half full, by frames or
// bytes, a notice is dropped instead of queued, and counted (Dropped): so a
// peer that keeps reading is never closed as a slow consumer for
// notifications alone, and answers and calls always find room; one whose
// writer has been stuck for stuckNotices, though, has stopped reading, and
// is closed with 1008 "slow consumer". It reports whether the frame was
// queued. The frame is shared, not copied.
func (p *Peer) SendNotice(frame []byte, key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	if key != "" {
		if i, ok := p.notices[key]; ok {
			p.sendBytes += int32(len(frame) - len(p.sendq[i]))
			p.sendq[i] = frame
			return true
		}
	}
	if len(p.sendq) >= p.opts.SendQueue/2 || int(p.sendBytes)+len(frame) > p.opts.SendQueueBytes/2 {
		if p.writeStart != 0 && since()-p.writeStart > stuckNotices {
			// Not a slow reader but one that stopped reading: close it
			// rather than drop its notices for ever.
			p.shutdownLocked(ErrSlowConsumer, ClosePolicyViolation, "slow consumer", false)
			return false
		}
		p.dropped.Add(1)
		return false
	}
	if key != "" {
		if p.notices == nil {
			p.notices = map[string]int{}
		}
		p.notices[key] = len(p.sendq)
	}
	_, err := p.sendLocked(frame, false)
	return err == nil
}

// Dropped returns how many notices SendNotice dropped for lack of room.
func (p *Peer) Dropped() uint64 { return p.dropped.Load() }
