package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// ErrSSEStreamEnded is why an HTTP+SSE client conn ends when the server
// closes its event stream: the 2024-11-05 transport cannot resume one.
var ErrSSEStreamEnded = errors.New("mcp: the server ended the SSE stream")

// SSEClientConn is the client end of the HTTP+SSE transport of protocol
// version 2024-11-05, which Streamable HTTP replaced and older servers
// still speak: a GET opens an event stream whose first event, "endpoint",
// names the URL to POST messages to; every message from the server,
// answers included, comes on that stream.
type SSEClientConn struct {
	client *http.Client
	opts   StreamableClientOptions
	log    *slog.Logger

	ctx      context.Context
	cancel   context.CancelFunc
	endpoint string
	in       inbox
	wg       sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

var _ peer.Conn = (*SSEClientConn)(nil)

// DialSSE opens the event stream at url and waits, as long as ctx lets it,
// for the server to name its message endpoint. opts is as for
// DialStreamable (Retry and MaxRetries do not apply: this transport does
// not resume).
func DialSSE(ctx context.Context, url string, opts *StreamableClientOptions) (*SSEClientConn, error) {
	c := &SSEClientConn{in: newInbox()}
	if opts != nil {
		c.opts = *opts
	}
	c.client = c.opts.HTTPClient
	if c.client == nil {
		c.client = http.DefaultClient
	}
	if c.opts.MaxMessageBytes <= 0 {
		c.opts.MaxMessageBytes = jsonrpc.DefaultMaxBytes
	}
	c.log = c.opts.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, url, nil)
	if err != nil {
		c.cancel()
		return nil, fmt.Errorf("mcp: SSE URL: %w", err)
	}
	c.setHeaders(req)
	req.Header.Set("Accept", "text/event-stream")
	stop := context.AfterFunc(ctx, c.cancel) // the dial's deadline bounds the handshake
	resp, err := c.client.Do(req)
	if err != nil {
		stop()
		c.cancel()
		return nil, fmt.Errorf("mcp: SSE: %w", err)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.StatusCode != http.StatusOK || mt != "text/event-stream" {
		stop()
		c.cancel()
		e := httpErrorOf(resp, c.opts.MaxMessageBytes)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil, fmt.Errorf("mcp: SSE: the server answered with Content-Type %q", resp.Header.Get("Content-Type"))
		}
		return nil, fmt.Errorf("mcp: SSE: %w", e)
	}
	rd := newSSEReader(resp.Body, c.opts.MaxMessageBytes)
	for {
		ev, err := rd.Next()
		if err != nil {
			stop()
			c.cancel()
			resp.Body.Close()
			return nil, fmt.Errorf("mcp: SSE: no endpoint event: %w", err)
		}
		if ev.Name != "endpoint" {
			continue
		}
		u, err := resp.Request.URL.Parse(string(bytes.TrimSpace(ev.Data)))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host != resp.Request.URL.Host {
			// An endpoint on another origin would receive the client's
			// headers (its credentials): refused.
			stop()
			c.cancel()
			resp.Body.Close()
			return nil, fmt.Errorf("mcp: SSE: the server named an unusable endpoint %q", ev.Data)
		}
		c.endpoint = u.String()
		break
	}
	if !stop() {
		c.cancel()
		resp.Body.Close()
		return nil, ctx.Err()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer resp.Body.Close()
		for {
			ev, err := rd.Next()
			if err != nil {
				if c.ctx.Err() == nil {
					c.fail(fmt.Errorf("%w: %v", ErrSSEStreamEnded, err))
				}
				return
			}
			if (ev.Name != "" && ev.Name != "message") || len(bytes.TrimSpace(ev.Data)) == 0 {
				continue
			}
			select {
			case c.in.frames <- ev.Data:
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return c, nil
}

// Endpoint returns the URL messages are POSTed to.
func (c *SSEClientConn) Endpoint() string { return c.endpoint }

func (c *SSEClientConn) setHeaders(req *http.Request) {
	for k, vs := range c.opts.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
}

func (c *SSEClientConn) fail(err error) { c.in.fail(err) }

// Read returns the next message from the event stream.
func (c *SSEClientConn) Read(ctx context.Context) ([]byte, error) {
	return c.in.read(ctx)
}

// Write POSTs one frame to the endpoint. The answers come on the stream; a
// refused POST of requests is answered locally with an error, so that no
// call waits for an answer that cannot come.
func (c *SSEClientConn) Write(ctx context.Context, frame []byte) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	err := c.in.failure()
	if closed {
		return net.ErrClosed
	}
	if err != nil {
		return fmt.Errorf("%w: %w", net.ErrClosed, err)
	}
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.endpoint, bytes.NewReader(frame))
	if err != nil {
		return err
	}
	c.setHeaders(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		if c.ctx.Err() != nil {
			return net.ErrClosed
		}
		return fmt.Errorf("mcp: SSE: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil
	}
	e := httpErrorOf(resp, c.opts.MaxMessageBytes)
	if resp.StatusCode == http.StatusNotFound {
		c.fail(fmt.Errorf("%w: %v", ErrSessionGone, e))
		return fmt.Errorf("%w: %w", net.ErrClosed, ErrSessionGone)
	}
	c.log.Warn("HTTP+SSE: the server refused a message", "status", resp.StatusCode, "err", e.Message)
	for _, m := range jsonrpc.Decode(frame).Messages {
		if r, ok := m.(*jsonrpc.Request); ok && r.IsCall() {
			answer := (&jsonrpc.Response{ID: r.ID, Error: e}).Encode()
			select {
			case c.in.frames <- answer:
			case <-c.ctx.Done():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// Close ends the event stream, which ends the session.
func (c *SSEClientConn) Close(peer.CloseCode, string) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.fail(net.ErrClosed)
	return nil
}

// legacyFallback reports whether err, the failure of initialize over
// Streamable HTTP, says the server may speak the older HTTP+SSE transport
// instead: a 4xx status other than 401 and 403, as the specification's
// backwards-compatibility note says.
func legacyFallback(err error) bool {
	var e *jsonrpc.Error
	if !errors.As(err, &e) || len(e.Data) == 0 {
		return false
	}
	status, ok := jsonrpc.Member(e.Data, "httpStatus")
	if !ok {
		return false
	}
	switch string(status) {
	case "400", "404", "405", "406", "415":
		return true
	}
	return false
}
