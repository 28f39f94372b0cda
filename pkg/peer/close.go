package peer

import (
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// ErrClosed is the error of every call that cannot complete because the
// connection closed. Its code, -32000, is MCP's "connection closed".
var ErrClosed = &jsonrpc.Error{Code: -32000, Message: "connection closed"}

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
	for _, wake := range p.idlers {
		wake <- struct{}{} // room for it: only an idle worker's is here (work)
	}
	p.idlers = nil
	if !flush {
		p.sendq, p.sendOwn, p.sendBytes = nil, nil, 0
		clear(p.notices)
	}
	var flushed chan struct{}
	if flush && p.writing {
		p.flushed = make(chan struct{})
		flushed = p.flushed
	}
	// Counted before done closes: Wait waits on the group only after done,
	// and a peer on a DirectConn may have no other goroutine counted.
	p.addGoroutine()
	if p.done != nil { // else one made later is closed as it is made (doneChan)
		close(p.done)
	}
	if p.cancel != nil { // nil until a handler needed it (contextsLocked cancels it then)
		p.cancel(cause)
	}

	go func() {
		defer p.goroutineDone()
		p.onClose(cause)
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
func (p *Peer) Done() <-chan struct{} { return p.doneChan() }

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
	<-p.doneChan()
	p.wg.Wait()
	err := p.Err()
	if c := CloseStatus(err); c == CloseNormal || c == CloseGoingAway {
		return nil
	}
	return err
}
