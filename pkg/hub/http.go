package hub

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/web"
)

// Handler returns the hub's HTTP handler: /mcp and /servers/<name>/mcp
// (WebSocket and Streamable HTTP), /mcp/server, /healthz, /readyz,
// /metrics, the dashboard's /login and /logout, and the dashboard at /.
func (h *Hub) Handler() http.Handler { return h.mux }

func (h *Hub) newMux() http.Handler {
	mux := http.NewServeMux()
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		mux.HandleFunc(method+" /mcp", h.serveMCP)
		mux.HandleFunc(method+" /servers/{name}/mcp", h.serveMCP)
	}
	mux.HandleFunc("GET /mcp/server", h.serveServer)
	// The health endpoints answer any Host: load balancers and probes
	// address instances by IP or by names of their own, and they reveal
	// nothing.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", h.serveReady)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		// With tokens, metrics are for admins (a scraper's bearer token).
		if h.check(w, r, "/metrics", RoleAdmin) != nil {
			h.metrics.handler().ServeHTTP(w, r)
		}
	})
	h.oauthRoutes(mux)
	mux.Handle("POST /login", h.hostChecked(http.HandlerFunc(h.serveLogin)))
	mux.Handle("POST /logout", h.hostChecked(http.HandlerFunc(h.serveLogout)))
	mux.Handle("GET /", h.hostChecked(securityHeaders(web.Handler())))
	return h.boundBodies(mux)
}

// boundBodies guards every endpoint against bodies that never end: a
// request's body must arrive within BodyTimeout of its headers (408 and
// the connection closed otherwise), and a request answered before its body
// was read, refused above all, closes its connection instead of reading
// the body first, as net/http would (up to 256 KiB, with no deadline). The
// deadline is lifted once the body is in: an SSE answer that follows it,
// and the requests after it on the connection, are not cut by it.
// Requests without a body (GET streams, WebSocket upgrades) are left
// alone, and so are relayed ones, whose body is already here. A WebSocket
// upgrade with a body is refused: the handshake has none, and a connection
// once upgraded is no longer net/http's to close.
func (h *Hub) boundBodies(next http.Handler) http.Handler {
	return bodyBounder{h: h, next: next}
}

// bodyBounder is boundBodies' handler: a type of its own, not a closure,
// whose ServeHTTP is compiled apart from newMux (where the compiler would
// not inline NewResponseController, and the controller would cost an
// allocation of its own).
type bodyBounder struct {
	h    *Hub
	next http.Handler
}

func (bb bodyBounder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	next := bb.next
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		next.ServeHTTP(w, r)
		return
	}
	// The body and its controller in one allocation.
	b := &boundedBody{ReadCloser: r.Body, rc: *http.NewResponseController(w), req: r}
	if b.rc.SetReadDeadline(time.Now().Add(bb.h.cfg.BodyTimeout)) != nil {
		next.ServeHTTP(w, r) // relayed: the body is a buffer
		return
	}
	w.Header()["Connection"] = connectionClose // until the body is in
	b.header = w.Header()
	if isUpgrade(r) {
		http.Error(w, "400 bad request: a WebSocket handshake carries no body", http.StatusBadRequest)
	} else {
		r.Body = b
		next.ServeHTTP(w, r)
	}
	if !b.in {
		// net/http would read the rest of the body once the handler
		// returns, to find the end of the request: the connection
		// closes instead, at once.
		_ = b.rc.SetReadDeadline(time.Unix(1, 0))
	}
}

// connectionClose is the Connection header of a request whose body is not
// in yet, set without allocating (net/http copies what it sends).
var connectionClose = []string{"close"}

// boundedBody is a request body read under a deadline: once it is read to
// its end, the deadline is lifted and the connection may be kept alive.
type boundedBody struct {
	io.ReadCloser
	rc     http.ResponseController
	header http.Header
	req    *http.Request // net/http's, whose Body it replaced
	in     bool
	copied bool        // copy is taken
	copy   requestCopy // room for the request's copy in serveHTTP: one allocation for both
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.in {
		return 0, io.EOF // and net/http's body is closed
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.in {
		b.in = true
		_ = b.rc.SetReadDeadline(time.Time{})
		b.header.Del("Connection")
		// net/http's own body, read to its end and closed, back in its
		// request: net/http then knows there is nothing left to discard
		// before the next request (a body of another type it tries to
		// read to its end again, which costs a copy's allocations).
		b.req.Body = b.ReadCloser
		_ = b.ReadCloser.Close()
	}
	return n, err
}

// refuseBody answers a request whose body could not be read (mcp.ReadBody),
// in plain text as the hub's other HTTP refusals.
func refuseBody(w http.ResponseWriter, e *mcp.HTTPError) {
	http.Error(w, strconv.Itoa(e.Status)+" "+e.Message, e.Status)
}

// NewHTTPServer returns an http.Server for the hub's handler with timeouts
// against slow clients: headers must arrive within HandshakeTimeout, and
// bodies within BodyTimeout (the handler's own deadline, which does not
// cut the streams that follow). (Upgraded connections are the hub's, with
// their own keepalive and limits.)
func (h *Hub) NewHTTPServer() *http.Server {
	return &http.Server{
		Handler:           h.Handler(),
		ReadHeaderTimeout: h.cfg.HandshakeTimeout,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

// securityHeaders guards the dashboard: no inline script, no framing, no
// content sniffing, no referrer.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; "+
			"img-src 'self' data: blob:; media-src 'self' data: blob:; connect-src 'self' ws: wss:; "+
			"frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

func (h *Hub) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if h.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: draining")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.broker.Ready(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: broker unavailable")
		return
	}
	if err := h.oauthReady(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: access tokens cannot be verified yet:", strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	fmt.Fprintln(w, "ready")
}

// serveLogin checks a token posted by the dashboard and keeps it in an
// HttpOnly, SameSite=Strict cookie, which the browser then sends with the
// dashboard's WebSocket upgrade: the token never needs to be in a URL.
func (h *Hub) serveLogin(w http.ResponseWriter, r *http.Request) {
	if crossSite(w, r, "login") {
		return
	}
	body, herr := mcp.ReadBody(w, r, 4096)
	if herr != nil {
		refuseBody(w, herr)
		return
	}
	form, _ := url.ParseQuery(string(body))
	token := strings.TrimSpace(form.Get("token"))
	if !h.authOn() {
		w.WriteHeader(http.StatusNoContent) // nothing to log in to
		return
	}
	if token == "" || h.cfg.Tokens == nil || h.cfg.Tokens.lookup(token) == nil {
		h.metrics.authFailures.WithLabelValues("unauthorized").Inc()
		http.Error(w, "401 unauthorized: unknown token", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
	w.WriteHeader(http.StatusNoContent)
}

// crossSite refuses (403) a form posted by a page of another origin,
// which a browser sends with the dashboard's cookie: a login would plant
// another token in it, a logout would sign the user out. It reports
// whether it refused.
func crossSite(w http.ResponseWriter, r *http.Request, what string) bool {
	if originAllowed(r, nil) {
		return false
	}
	http.Error(w, "403 forbidden: cross-site "+what, http.StatusForbidden)
	return true
}

// serveLogout forgets the dashboard's cookie.
func (h *Hub) serveLogout(w http.ResponseWriter, r *http.Request) {
	if crossSite(w, r, "logout") {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}
