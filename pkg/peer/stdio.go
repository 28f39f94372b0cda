package peer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Stdio is a Conn over a byte stream in the stdio framing of MCP: every
// message is one line of JSON ended by '\n'. It is how a program launched by
// an MCP client talks to it (on its standard input and output), and how a
// program that launches an MCP server talks to the server (on the server's).
//
// Read returns each line without its '\n' (and without a '\r' before it);
// blank lines are skipped; a line longer than the read limit ends the conn
// with a *CloseError of code 1009. At the end of the stream Read returns
// io.EOF, and after Close it returns net.ErrClosed. Write sends the frame and
// a '\n'; a frame may hold line breaks as JSON whitespace (a WebSocket frame
// may), so Write turns each '\n' of the frame into a space, which leaves a
// valid JSON text meaning the same. Neither honours ctx once blocked in the
// stream: Close unblocks them where the stream allows it (pipes and other
// pollable files do; a terminal may not).
type Stdio struct {
	r      *bufio.Reader
	w      io.Writer
	limit  int
	closer []io.Closer

	wbuf    []byte // Write's line, reused (one Write at a time)
	closed  atomic.Bool
	closeMu sync.Once
	broken  error // set by Read when the stream can no longer be framed
}

var (
	_ Conn           = (*Stdio)(nil)
	_ frameForgetter = (*Stdio)(nil)
)

// forgetsFrames: Write copies the frame into its line before writing it.
func (*Stdio) forgetsFrames() {}

// StdioOptions configure NewStdio. The zero value means the defaults.
type StdioOptions struct {
	// ReadLimit is the longest line Read accepts, in bytes. Default 4 MiB
	// (DefaultReadLimit).
	ReadLimit int
}

// NewStdio returns a Conn reading lines from r and writing lines to w. Close
// closes r and w when they are io.Closers.
func NewStdio(r io.Reader, w io.Writer, opts *StdioOptions) *Stdio {
	limit := DefaultReadLimit
	if opts != nil && opts.ReadLimit > 0 {
		limit = opts.ReadLimit
	}
	c := &Stdio{r: bufio.NewReaderSize(r, 64<<10), w: w, limit: limit}
	for _, x := range []any{r, w} {
		if cl, ok := x.(io.Closer); ok {
			c.closer = append(c.closer, cl)
		}
	}
	return c
}

// Read returns the next non-blank line.
func (c *Stdio) Read(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.broken != nil {
		return nil, c.broken
	}
	for {
		line, err := c.readLine()
		if err != nil {
			if c.closed.Load() {
				return nil, net.ErrClosed
			}
			if errors.Is(err, io.EOF) && len(line) > 0 {
				// A last line without its '\n': deliver it, then EOF.
				c.broken = io.EOF
			} else {
				var ce *CloseError
				if errors.As(err, &ce) {
					c.broken = err
				}
				return nil, err
			}
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			if c.broken != nil {
				return nil, c.broken
			}
			continue
		}
		return line, nil
	}
}

// readLine reads up to and without the next '\n', into a slice of its own.
func (c *Stdio) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		if len(line)+len(chunk) > c.limit+1 { // +1: the '\n' is not counted
			c.discardLine(err)
			return nil, &CloseError{Code: CloseMessageTooBig, Reason: fmt.Sprintf("line longer than %d bytes", c.limit)}
		}
		switch {
		case err == nil:
			if line == nil {
				return append([]byte(nil), chunk[:len(chunk)-1]...), nil
			}
			return append(line, chunk[:len(chunk)-1]...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, chunk...)
		default:
			if len(line)+len(chunk) > c.limit { // no '\n' at the end of the stream
				return nil, &CloseError{Code: CloseMessageTooBig, Reason: fmt.Sprintf("line longer than %d bytes", c.limit)}
			}
			return append(line, chunk...), err
		}
	}
}

// discardLine skips the rest of an over-long line, so that the stream is
// left at a line boundary (the conn is unusable all the same).
func (c *Stdio) discardLine(err error) {
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = c.r.ReadSlice('\n')
	}
}

// Write sends frame as one line.
func (c *Stdio) Write(ctx context.Context, frame []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.closed.Load() {
		return net.ErrClosed
	}
	c.wbuf = append(c.wbuf[:0], frame...)
	if bytes.IndexByte(frame, '\n') >= 0 {
		for i, b := range c.wbuf {
			if b == '\n' {
				c.wbuf[i] = ' '
			}
		}
	}
	c.wbuf = append(c.wbuf, '\n')
	_, err := c.w.Write(c.wbuf)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // do not keep a large frame's buffer for the small ones
	}
	if err != nil && c.closed.Load() {
		return net.ErrClosed
	}
	return err
}

// Close closes the streams that are io.Closers. A stream has no close
// frame: code and reason are not sent.
func (c *Stdio) Close(code CloseCode, reason string) error {
	var err error
	c.closeMu.Do(func() {
		c.closed.Store(true)
		for _, cl := range c.closer {
			if e := cl.Close(); e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}
