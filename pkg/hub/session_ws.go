package hub

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// serveClient upgrades GET /mcp (or /servers/<name>/mcp, for scope) to a
// WebSocket and runs a client session on it, once the admission lets the
// client in.
func (h *Hub) serveClient(w http.ResponseWriter, r *http.Request, scope string) {
	who, release := h.admit(w, r, endpoint(scope), RoleClient, RoleDashboard)
	if who == nil {
		return
	}
	if !h.scopeAllowed(w, who, scope) {
		release()
		return
	}
	conn, err := peer.Accept(w, r, h.acceptOptions())
	if err != nil {
		release()
		return // Accept has answered with an HTTP error
	}
	s := h.newSession(conn, who, release, "websocket", scope)
	h.closeAtExpiry(s)
	h.log.Info("client connected", "client", s.id, "transport", s.transport(), "endpoint", endpoint(scope),
		"token", who.name, "remote", r.RemoteAddr)
	s.start(conn)
}

func (h *Hub) acceptOptions() *peer.AcceptOptions {
	return &peer.AcceptOptions{WebSocketOptions: h.cfg.WebSocket, OriginPatterns: h.cfg.OriginPatterns}
}
