package peer

import (
	"context"
	"net"
	"sync"
)

// Pipe returns the two ends of an in-memory connection, for tests. Each
// direction buffers up to buffer frames; a Write beyond that blocks until the
// other end reads, as a full socket would. Closing either end closes both;
// the other end's Read returns a *CloseError with the code and reason.
func Pipe(buffer int) (Conn, Conn) {
	ab := make(chan []byte, buffer)
	ba := make(chan []byte, buffer)
	st := &pipeState{done: make(chan struct{})}
	return &pipeEnd{in: ba, out: ab, st: st, side: 1}, &pipeEnd{in: ab, out: ba, st: st, side: 2}
}

type pipeState struct {
	once   sync.Once
	done   chan struct{}
	closer int // which side closed first
	err    CloseError
}

type pipeEnd struct {
	in   <-chan []byte
	out  chan<- []byte
	st   *pipeState
	side int
}

func (p *pipeEnd) Read(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.in:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.st.done:
	}
	// Frames sent before the close are still delivered, as on a socket.
	select {
	case b := <-p.in:
		return b, nil
	default:
	}
	if p.st.closer == p.side {
		return nil, net.ErrClosed
	}
	err := p.st.err
	return nil, &err
}

func (p *pipeEnd) Write(ctx context.Context, frame []byte) error {
	select {
	case <-p.st.done:
		return net.ErrClosed
	default:
	}
	b := append([]byte(nil), frame...)
	select {
	case p.out <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.st.done:
		return net.ErrClosed
	}
}

func (p *pipeEnd) Close(code CloseCode, reason string) error {
	p.st.once.Do(func() {
		p.st.closer = p.side
		p.st.err = CloseError{Code: code, Reason: reason}
		close(p.st.done)
	})
	return nil
}
