package mcp

import (
	"context"
	"sync"
)

// inbox is what a client conn received and Read has not taken yet, and why
// the conn ended: messages that came before its failure are still read.
// Both HTTP client conns (SSEClientConn, StreamableClientConn) read
// through one.
type inbox struct {
	frames chan []byte
	failed chan struct{} // closed by the first fail

	mu  sync.Mutex
	err error // the first failure
}

func newInbox() inbox {
	return inbox{frames: make(chan []byte, 64), failed: make(chan struct{})}
}

// put hands a frame to Read, or gives up when ctx ends (the conn closed).
func (b *inbox) put(ctx context.Context, frame []byte) {
	select {
	case b.frames <- frame:
	case <-ctx.Done():
	}
}

// read returns the next frame; once the conn failed and nothing is left,
// the failure.
func (b *inbox) read(ctx context.Context) ([]byte, error) {
	select {
	case f := <-b.frames:
		return f, nil
	case <-b.failed:
		select {
		case f := <-b.frames:
			return f, nil
		default:
		}
		return nil, b.failure()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fail ends the conn with err; the first failure wins.
func (b *inbox) fail(err error) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return
	}
	b.err = err
	b.mu.Unlock()
	close(b.failed)
}

// failure is why the conn ended, or nil.
func (b *inbox) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}
