// Package link is what `hub connect` and `hub stdio` share about their
// connection to a hub: dialing it, saying clearly why that failed, and
// spacing out the next attempts.
//
// Dial opens a WebSocket to the hub and, when that fails, returns an error
// whose text a person can act on ("connection refused", "HTTP 401
// Unauthorized") without the URL's query, where a token may hide; Refused
// tells a refusal of the credentials, which retrying cannot mend, from the
// rest. Backoff doubles each wait from Min up to Max, with jitter, and starts
// over after Reset.
package link

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// DialTimeout bounds one attempt to connect to the hub.
const DialTimeout = 15 * time.Second

// Dial opens a WebSocket to the hub at rawURL with header, within
// DialTimeout. Its error names the URL without query or credentials and
// says why in a few words, and wraps the cause.
func Dial(ctx context.Context, rawURL string, header http.Header, ws peer.WebSocketOptions) (*peer.WebSocket, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	c, err := peer.Dial(ctx, rawURL, &peer.DialOptions{Header: header, WebSocketOptions: ws})
	if err != nil {
		return nil, &DialError{URL: Redact(rawURL), Err: err}
	}
	return c, nil
}

// DialError is why Dial failed.
type DialError struct {
	URL string // without query, fragment or user info
	Err error
}

// Error says what failed in a few words: "cannot reach the hub at
// ws://127.0.0.1:8080/mcp/server: connection refused".
func (e *DialError) Error() string {
	return "cannot reach the hub at " + e.URL + ": " + why(e.Err)
}

// Unwrap returns the cause.
func (e *DialError) Unwrap() error { return e.Err }

// why is the shortest true account of a dial error.
func why(err error) string {
	var he *peer.HandshakeError
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &he):
		return fmt.Sprintf("HTTP %d %s", he.StatusCode, http.StatusText(he.StatusCode)) + hint(he.StatusCode)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (is the hub running?)"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %v", DialTimeout)
	case errors.As(err, &dns):
		return "unknown host " + dns.Name
	case errors.As(err, &op) && op.Err != nil:
		return op.Err.Error()
	}
	return err.Error()
}

func hint(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return " (a token is needed: --token or SWITCHBOARD_TOKEN)"
	case http.StatusForbidden:
		return " (the token may not do this)"
	case http.StatusNotFound:
		return " (not a hub endpoint: check the URL's path, or the server's name)"
	}
	return ""
}

// Refused reports whether err is the hub refusing the credentials (HTTP 401
// or 403): retrying with the same ones cannot help.
func Refused(err error) bool {
	var he *peer.HandshakeError
	return errors.As(err, &he) && (he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden)
}

// Redact drops the query, fragment and user info of a URL: a token may
// hide there.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// Retry is how a connection to the hub is tried again: waits that double
// from MinBackoff up to MaxBackoff, with jitter, and start over from
// MinBackoff after a connection that lasted ResetAfter. `hub connect` and
// `hub stdio` take it in their options, each with defaults of its own.
type Retry struct {
	// MinBackoff and MaxBackoff bound the wait between attempts.
	MinBackoff, MaxBackoff time.Duration
	// ResetAfter: a connection that lasted this long makes the next wait
	// MinBackoff again.
	ResetAfter time.Duration
}

// Or returns r with each field that is not set (not positive) taken from
// def, and MaxBackoff at least MinBackoff.
func (r Retry) Or(def Retry) Retry {
	if r.MinBackoff <= 0 {
		r.MinBackoff = def.MinBackoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = def.MaxBackoff
	}
	if r.ResetAfter <= 0 {
		r.ResetAfter = def.ResetAfter
	}
	r.MaxBackoff = max(r.MaxBackoff, r.MinBackoff)
	return r
}

// Backoff returns a Backoff from MinBackoff to MaxBackoff.
func (r Retry) Backoff() Backoff { return Backoff{Min: r.MinBackoff, Max: r.MaxBackoff} }

// Backoff spaces out attempts: each wait doubles the last, from Min up to
// Max, and is drawn at random from its upper half, so that many that failed
// together do not retry together.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns how long to wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	d := b.cur
	if d <= 0 {
		d = b.Min
	}
	b.cur = min(2*d, max(b.Max, b.Min))
	return d/2 + rand.N(d/2+1)
}

// Reset starts over from Min, after something went well for a while.
func (b *Backoff) Reset() { b.cur = 0 }

// Round rounds a wait for people: "1.2s", "250ms".
func Round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

// Sleep waits for d or until ctx ends, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
