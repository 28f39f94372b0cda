package hub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

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
	mux.Handle("POST /login", h.hostChecked(http.HandlerFunc(h.serveLogin)))
	mux.Handle("POST /logout", h.hostChecked(http.HandlerFunc(h.serveLogout)))
	mux.Handle("GET /", h.hostChecked(securityHeaders(web.Handler())))
	return mux
}

// NewHTTPServer returns an http.Server for the hub's handler with timeouts
// against slow clients: headers must arrive within HandshakeTimeout.
// (Upgraded connections are the hub's, with their own keepalive and
// limits.)
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
	fmt.Fprintln(w, "ready")
}

// serveLogin checks a token posted by the dashboard and keeps it in an
// HttpOnly, SameSite=Strict cookie, which the browser then sends with the
// dashboard's WebSocket upgrade: the token never needs to be in a URL.
func (h *Hub) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !originAllowed(r, nil) {
		http.Error(w, "403 forbidden: cross-site login", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	token := strings.TrimSpace(r.PostFormValue("token"))
	if h.cfg.Tokens == nil {
		w.WriteHeader(http.StatusNoContent) // nothing to log in to
		return
	}
	if token == "" || h.cfg.Tokens.lookup(token) == nil {
		h.metrics.authFailures.WithLabelValues("unauthorized").Inc()
		http.Error(w, "401 unauthorized: unknown token", http.StatusUnauthorized)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
	w.WriteHeader(http.StatusNoContent)
}

func (h *Hub) serveLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}
