package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// The Streamable HTTP face of /mcp and /servers/<name>/mcp. A session there
// is a session like one on a WebSocket: pkg/mcp's StreamableHandler gives
// it a peer.Conn, and everything else (routing, subscriptions, limits,
// metrics) is the same code. Its id names the instance that owns it; a
// request that reaches another instance is served by the owner through the
// broker (cluster_http.go), so that a load balancer needs no affinity.

// requestKey keys what serveHTTP found out about a request, for the
// StreamableHandler's hooks.
type requestKey struct{}

type requestInfo struct {
	who   *principal
	scope string
}

// requestContext is a request's context carrying its requestInfo: one
// allocation where context.WithValue and the info would be two.
type requestContext struct {
	context.Context
	info requestInfo
}

// Value returns the request's info for requestKey, and the parent's values
// otherwise.
func (c *requestContext) Value(key any) any {
	if key == (requestKey{}) {
		return &c.info
	}
	return c.Context.Value(key)
}

// serveMCP serves /mcp and /servers/<name>/mcp: a WebSocket upgrade opens a
// WebSocket session, anything else is Streamable HTTP.
func (h *Hub) serveMCP(w http.ResponseWriter, r *http.Request) {
	scope := r.PathValue("name")
	if isUpgrade(r) {
		h.serveClient(w, r, scope)
		return
	}
	h.serveHTTP(w, r, scope)
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// endpoint names the path a request came to, for messages.
func endpoint(scope string) string {
	if scope == "" {
		return "/mcp"
	}
	return "/servers/" + scope + "/mcp"
}

// scopeAllowed reports whether a session of who may be scoped to server:
// the server must be connected (or be a virtual server of the catalog)
// and visible to the token. Otherwise it
// answers 404: the endpoint does not exist for this client.
func (h *Hub) scopeAllowed(w http.ResponseWriter, who *principal, scope string) bool {
	if scope == "" {
		return true
	}
	v := h.reg.view()
	if len(v.servers[scope]) == 0 && !v.isVirtual(scope) || !who.mayUseServer(scope, h.cfg.Separator) {
		http.Error(w, "404 not found: no server "+scope+" here", http.StatusNotFound)
		return false
	}
	return true
}

// httpRoles may use the Streamable HTTP face.
var httpRoles = []Role{RoleClient, RoleDashboard}

// serveHTTP serves a Streamable HTTP request. Admission (Host, Origin,
// token) comes first, wherever the session lives: a request this instance
// would refuse never reaches the broker, nor the instance that owns the
// session, which checks it again as its own.
func (h *Hub) serveHTTP(w http.ResponseWriter, r *http.Request, scope string) {
	who := h.check(w, r, endpoint(scope), httpRoles...)
	if who == nil {
		return
	}
	if r.Method == http.MethodGet {
		var release context.CancelFunc
		if r, release = h.streamUntilExpiry(w, r, endpoint(scope), who); r == nil {
			return
		}
		defer release()
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		if owner := h.sessionOwner(id); owner != h.id {
			h.relayToOwner(w, r, owner)
			return
		}
	}
	if r.Header.Get("Mcp-Session-Id") == "" && !h.scopeAllowed(w, who, scope) {
		return
	}
	rc := newRequestCopy(r)
	rc.ctx = requestContext{Context: r.Context(), info: requestInfo{who: who, scope: scope}}
	rc.req = *r.WithContext(&rc.ctx) // inlined: its copy is made on the stack, then into rc
	h.streamable.ServeHTTP(w, &rc.req)
}

// requestCopy is a request copied for its context, which carries its
// requestInfo for the StreamableHandler's hooks, and that context: one
// allocation where Request.WithContext and the context would be two.
type requestCopy struct {
	req http.Request
	ctx requestContext
}

// newRequestCopy returns room for r's copy: in r's bounded body when it
// has one (boundBodies made it for this request, which a POST's copy then
// shares), a new one otherwise.
func newRequestCopy(r *http.Request) *requestCopy {
	if b, ok := r.Body.(*boundedBody); ok && !b.copied {
		b.copied = true
		return &b.copy
	}
	return new(requestCopy)
}

// newStreamable returns the handler of every Streamable HTTP session of
// this instance.
func (h *Hub) newStreamable() *mcp.StreamableHandler {
	return mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Open:         h.openHTTPSession,
		Check:        h.checkHTTPSession,
		Stateless:    h.openStateless,
		Screen:       h.httpScreen(),
		NewSessionID: h.newSessionID,
		MaxBodyBytes: int64(h.cfg.MaxMessageBytes),
		Limits:       h.cfg.limits(),
		IdleTimeout:  h.cfg.SessionIdleTimeout,
		ReplayEvents: h.cfg.ReplayEvents,
		ReplayBytes:  h.cfg.ReplayBytes,
		ResponseMode: h.cfg.HTTPResponses,
		WriteTimeout: h.cfg.StreamWriteTimeout,
		TraceHeaders: h.tracing.Enabled(),
		Logger:       h.log,
	})
}

// newSessionID names a new HTTP session: this instance's id, a colon, and
// 128 random bits.
func (h *Hub) newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return h.id + ":" + hex.EncodeToString(b[:])
}

// sessionOwner returns the instance that an HTTP session's id names as its
// owner: this one for an id that names none.
func (h *Hub) sessionOwner(id string) string {
	owner, _, ok := strings.Cut(id, ":")
	if !ok {
		return h.id // not one of ours: the handler says it is unknown
	}
	return owner
}

// relayToOwner serves a request for a session that another instance owns
// through it, once this instance hears from it (awaitOwner: one dropped
// for a silence, or not heard yet by an instance that just joined, is
// waited for a few heartbeats). The session of an instance it does not
// hear is gone (404), unless the broker is down: then the instance is out
// of reach, maybe for a moment, and the client is told to come back (503)
// rather than to give its session up.
func (h *Hub) relayToOwner(w http.ResponseWriter, r *http.Request, owner string) {
	switch {
	case h.cluster.awaitOwner(r.Context(), owner):
		h.relayHTTP(w, r, owner)
	case r.Context().Err() != nil: // the client left
	case !h.cluster.isBrokerUp():
		w.Header().Set("Retry-After", "1")
		http.Error(w, "503 the hub instance that holds this session is out of reach: the broker is unavailable", http.StatusServiceUnavailable)
	default:
		http.Error(w, "404 not found: unknown or expired session", http.StatusNotFound)
	}
}

// openHTTPSession starts the session of an initialize POST.
func (h *Hub) openHTTPSession(r *http.Request, ss *mcp.StreamSession) error {
	return h.openHTTP(r, ss, false)
}

// openStateless starts the session of one POST of the 2026-07-28 revision,
// which has no session: it ends with its request (session_modern.go).
func (h *Hub) openStateless(r *http.Request, ss *mcp.StreamSession) error {
	return h.openHTTP(r, ss, true)
}

func (h *Hub) openHTTP(r *http.Request, ss *mcp.StreamSession, stateless bool) error {
	info, _ := r.Context().Value(requestKey{}).(*requestInfo)
	if info == nil {
		return &mcp.HTTPError{Status: http.StatusInternalServerError, Message: "internal error"}
	}
	if h.draining.Load() {
		h.metrics.authFailures.WithLabelValues("draining").Inc()
		return &mcp.HTTPError{Status: http.StatusServiceUnavailable, Message: "draining: this hub instance is shutting down; connect to another",
			Header: http.Header{"Retry-After": {"1"}}}
	}
	take := h.takeSessionSlot
	if stateless {
		take = h.takeSlot // it ends with its request
	}
	release, err := take(info.who)
	if err != nil {
		return &mcp.HTTPError{Status: http.StatusTooManyRequests, Message: err.Error(), Header: http.Header{"Retry-After": {"5"}}}
	}
	s := h.newSession(ss.Conn(), ownPrincipal(info.who), release, "http", info.scope)
	s.stateless, s.httpID = stateless, ss.ID()
	if stateless {
		endListensAtExpiry(s)
		s.header = ss.Header()
	}
	ss.SetData(s)
	if !stateless {
		h.log.Info("client connected", "client", s.id, "transport", s.transport(), "endpoint", endpoint(info.scope),
			"token", info.who.name, "remote", r.RemoteAddr)
	}
	if !s.start(ss.Conn()) {
		return &mcp.HTTPError{Status: http.StatusServiceUnavailable, Message: "hub shutting down"}
	}
	return nil
}

// checkHTTPSession lets a later request of a session through only from the
// session's own principal, on the session's own endpoint, and only while
// the principal's rights are the session's. A reload of the tokens file
// (SIGHUP) that changed them ends the session at its next request (404, as
// for any session that ended): the client initializes again, under the
// rights in force, so that no HTTP request runs with rights its token has
// lost. (A WebSocket keeps the rights it connected with until it closes.)
// An access token's rights are those of each request's token instead: a
// step-up (a token with more scopes) goes on in the same session.
func (h *Hub) checkHTTPSession(r *http.Request, ss *mcp.StreamSession) error {
	info, _ := r.Context().Value(requestKey{}).(*requestInfo)
	s, _ := ss.Data().(*session)
	if info == nil || s == nil || info.who.identity() != s.owner || info.scope != s.scope {
		return &mcp.HTTPError{Status: http.StatusNotFound, Message: "unknown or expired session"}
	}
	switch {
	case info.who.g().token != nil:
		followPrincipal(s.who, info.who) // each request's access token is its rights: a step-up goes on in the session
	case !info.who.sameRights(s.who):
		h.log.Info("ending an HTTP session: its token's rights changed", "client", s.id, "token", s.who.name)
		ss.Conn().Close(peer.ClosePolicyViolation, "the token's rights changed")
		return &mcp.HTTPError{Status: http.StatusNotFound, Message: "session ended: its token's rights changed; initialize a new session"}
	}
	return nil
}
