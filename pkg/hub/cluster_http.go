package hub

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// A Streamable HTTP request for a session that another instance owns is
// relayed to it through the broker, once this instance admitted it (Host,
// Origin, token: serveHTTP): this instance sends the request (its
// method, path, headers and body) to the owner's inbox, the owner serves it
// with its own handler as if it had come to it directly (admission
// included), and streams the response back (status and headers, then each
// flushed part, then its end), which this instance writes to its client as
// it comes. When the client leaves, or stops reading (a write takes longer
// than StreamWriteTimeout, as it may on the owner), the owner is told, and
// its handler's request context ends: it detaches the stream. So several
// instances behind a load balancer behave as one, without affinity.
//
// Parts of one response travel in order (one publisher, one topic); if the
// broker loses one, or this instance cannot keep up with a stream, the
// response ends early and the client resumes it with Last-Event-ID, from
// the owner's replay window.

// httpPart is the HTTP part of an envelope: a request (envHTTP), or a part
// of its response (envHTTPRes).
type httpPart struct {
	Method string      `json:"m,omitempty"`
	URL    string      `json:"u,omitempty"` // the request URI
	Host   string      `json:"host,omitempty"`
	Remote string      `json:"ra,omitempty"`
	Header http.Header `json:"hd,omitempty"`
	Status int         `json:"st,omitempty"` // the response's, on its first part
	Body   []byte      `json:"b,omitempty"`
	End    bool        `json:"end,omitempty"` // the response's last part
}

// relayQueue bounds the parts of one relayed response waiting for its
// client; a client that cannot keep up loses its stream (and resumes it).
const relayQueue = 256

// relay is a relayed request waiting for its response.
type relay struct {
	instance string
	parts    chan *httpPart
	lost     chan struct{} // closed when parts overflowed or the owner left
}

// relayHTTP serves w and r, for a session that instance owns, through it.
func (h *Hub) relayHTTP(w http.ResponseWriter, r *http.Request, instance string) {
	c := h.cluster
	body, herr := mcp.ReadBody(w, r, int64(h.cfg.MaxMessageBytes))
	if herr != nil {
		refuseBody(w, herr)
		return
	}
	h.metrics.relayed.WithLabelValues("sent").Inc()
	n := c.nextCall.Add(1)
	rl := &relay{instance: instance, parts: make(chan *httpPart, relayQueue), lost: make(chan struct{})}
	c.mu.Lock()
	c.relays[n] = rl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.relays, n)
		c.mu.Unlock()
	}()
	req := &httpPart{Method: r.Method, URL: r.URL.RequestURI(), Host: r.Host, Remote: r.RemoteAddr, Header: r.Header, Body: body}
	if err := c.send(instance, &envelope{Kind: envHTTP, Call: n, HTTP: req}); err != nil {
		http.Error(w, "503 the hub instance that holds this session is out of reach: "+errBrokerDown(err).Error(), http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	// Each write is bounded as the owner bounds its own (StreamWriteTimeout):
	// a client that stops reading loses its stream here, and the owner,
	// told, detaches it. The deadline is the connection's: cleared for the
	// next request on it.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	first := time.NewTimer(h.cfg.CallTimeout)
	defer first.Stop()
	started := false
	for {
		select {
		case p := <-rl.parts:
			_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.StreamWriteTimeout))
			if !started {
				started = true
				first.Stop()
				for k, vs := range p.Header {
					w.Header()[k] = vs
				}
				w.WriteHeader(p.Status)
			}
			if len(p.Body) > 0 {
				if _, err := w.Write(p.Body); err != nil {
					c.cancelRelay(instance, n)
					return
				}
			}
			if err := rc.Flush(); err != nil {
				c.cancelRelay(instance, n)
				return
			}
			if p.End {
				return
			}
		case <-rl.lost:
			if !started {
				http.Error(w, "502 the hub instance that holds this session did not answer", http.StatusBadGateway)
			}
			c.cancelRelay(instance, n)
			return
		case <-first.C:
			http.Error(w, "504 the hub instance that holds this session did not answer in time", http.StatusGatewayTimeout)
			c.cancelRelay(instance, n)
			return
		case <-r.Context().Done():
			c.cancelRelay(instance, n) // the client left: the owner stops serving it
			return
		}
	}
}

// cancelRelay tells the owner of a relayed request that no one wants the
// rest of its response.
func (c *cluster) cancelRelay(instance string, n uint64) {
	c.hub.goOwned(func() { c.send(instance, &envelope{Kind: envCancel, Call: n}) })
}

// onRelayPart hands a part of a relayed response to its waiting request.
// A part that no request waits for (its client left, or could not keep
// up) tells the owner again to stop: so it stops even if the first word
// was lost, or never sent because the request was stuck writing.
func (c *cluster) onRelayPart(env *envelope) {
	if env.HTTP == nil {
		return
	}
	c.mu.Lock()
	rl := c.relays[env.Call]
	c.mu.Unlock()
	if rl == nil {
		if !env.HTTP.End {
			c.cancelRelay(env.From, env.Call)
		}
		return
	}
	select {
	case rl.parts <- env.HTTP:
	default:
		c.loseRelay(env.Call) // its client does not keep up: it resumes later
	}
}

// loseRelay ends a relayed request whose response can no longer be whole.
func (c *cluster) loseRelay(n uint64) {
	c.mu.Lock()
	rl := c.relays[n]
	delete(c.relays, n)
	c.mu.Unlock()
	if rl != nil {
		close(rl.lost)
	}
}

// serveRelayed serves a request another instance relayed, with this
// instance's own handler, and streams its response back.
func (c *cluster) serveRelayed(env *envelope) {
	h := c.hub
	h.metrics.relayed.WithLabelValues("served").Inc()
	key := servedKey(env.From, env.Call)
	ctx, cancel := context.WithCancel(h.ctx)
	c.mu.Lock()
	c.served[key] = cancelFunc(func(error) { cancel() })
	c.mu.Unlock()
	if !h.goOwned(func() {
		defer func() {
			c.unserve(key)
			cancel()
		}()
		p := env.HTTP
		req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(p.Body))
		if err != nil {
			c.send(env.From, &envelope{Kind: envHTTPRes, Call: env.Call,
				HTTP: &httpPart{Status: http.StatusBadRequest, Body: []byte("400 bad request\n"), End: true}})
			return
		}
		req.Header, req.Host, req.RemoteAddr = p.Header, p.Host, p.Remote
		rw := &relayWriter{c: c, to: env.From, call: env.Call, header: http.Header{}}
		h.mux.ServeHTTP(rw, req)
		rw.finish()
	}) {
		c.unserve(key)
		cancel()
	}
}

// relayWriter is the ResponseWriter of a relayed request: each flush sends
// what was written since, the first with the status and headers.
type relayWriter struct {
	c      *cluster
	to     string
	call   uint64
	header http.Header
	status int
	sent   bool // the status and headers went out
	buf    bytes.Buffer
	failed bool
}

func (w *relayWriter) Header() http.Header { return w.header }

func (w *relayWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *relayWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed {
		return 0, errRelayLost
	}
	return w.buf.Write(p)
}

// Flush sends what was written so far.
func (w *relayWriter) Flush() { w.send(false) }

func (w *relayWriter) finish() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	w.send(true)
}

var errRelayLost = errors.New("hub: the relayed response could not reach its client")

func (w *relayWriter) send(end bool) {
	if w.failed || (!end && w.buf.Len() == 0 && w.sent) {
		return
	}
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	p := &httpPart{Body: bytes.Clone(w.buf.Bytes()), End: end}
	if !w.sent {
		p.Status, p.Header = w.status, w.header.Clone()
		w.sent = true
	}
	w.buf.Reset()
	if err := w.c.send(w.to, &envelope{Kind: envHTTPRes, Call: w.call, HTTP: p}); err != nil {
		w.failed = true
	}
}
