package connect

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// oauthTransport sends an upstream server's requests with an access token
// of the upstream's own (Server.OAuth), never the hub's: the first ones
// without, until the server answers 401 and its challenge leads to its
// authorization server; from then on every request to the upstream's
// origin carries the token, which is renewed before it expires. A request
// refused with 401 is sent again once with a new token; a second refusal
// is the server's answer. Requests to other origins (a redirect) carry no
// token.
type oauthTransport struct {
	base   http.RoundTripper
	creds  *credentials
	origin string // scheme://host of the upstream URL
}

func newOAuthTransport(creds *credentials, upstream string) *oauthTransport {
	return &oauthTransport{base: http.DefaultTransport, creds: creds, origin: origin(upstream)}
}

// origin is scheme://host of a URL, lower-cased.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// RoundTrip sends req, with a token for the upstream when it goes there.
func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if origin(req.URL.String()) != t.origin {
		return t.base.RoundTrip(req)
	}
	tok := t.creds.current(req.Context())
	first := req.Clone(req.Context())
	var kept *keptBody
	if req.Body != nil && req.Body != http.NoBody {
		// The body is read as the transport sends it, not before: the
		// streamable client's Write returns once its POST's body is sent,
		// which keeps the POSTs in order.
		kept = &keptBody{r: req.Body, done: make(chan struct{})}
		first.Body = kept
	}
	resp, err := t.base.RoundTrip(withToken(first, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	if tok != "" {
		t.creds.refused(tok)
	}
	next, err := t.creds.token(req.Context(), resp.Header.Values("WWW-Authenticate"))
	if err != nil || next == tok {
		return resp, nil // the refusal stands; credentials logged why
	}
	again := req.Clone(req.Context())
	if kept != nil {
		body, err := kept.all(req.Context())
		if err != nil {
			return resp, nil
		}
		again.Body = io.NopCloser(bytes.NewReader(body))
		again.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		again.ContentLength = int64(len(body))
	}
	drain(resp)
	resp, err = t.base.RoundTrip(withToken(again, next))
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.creds.refused(next)
		t.creds.log.Warn("the upstream server refused a new access token", "why", challengeError(resp.Header))
	}
	return resp, err
}

// withToken sets the token on r, a request of RoundTrip's own, unless tok
// is empty.
func withToken(r *http.Request, tok string) *http.Request {
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return r
}

// keptBody is a request's body that keeps what the transport read of it,
// to send it again.
type keptBody struct {
	r    io.ReadCloser
	buf  bytes.Buffer  // what was read, until done
	done chan struct{} // closed when the transport is done with the body
	once sync.Once
}

func (b *keptBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.buf.Write(p[:n])
	return n, err
}

// Close is the transport saying it is done with the body: the request's
// own is closed.
func (b *keptBody) Close() error {
	err := b.r.Close()
	b.once.Do(func() { close(b.done) })
	return err
}

// all returns the whole body, once the transport is done with it (which
// may come after its answer): what it read, and the rest, when the body
// can still be read once closed (pkg/mcp's, in memory, can; another
// fails, and the request is not sent again).
func (b *keptBody) all(ctx context.Context) ([]byte, error) {
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	rest, err := io.ReadAll(b.r)
	return append(b.buf.Bytes(), rest...), err
}

// drain reads a little of a body that is not used, so that its connection
// can serve another request, and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
