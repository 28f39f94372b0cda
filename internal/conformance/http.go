package conformance

import (
	"net"
	"net/http"
	"net/url"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Handler serves s over Streamable HTTP for the suite, sessions and
// stateless 2026-07-28 requests alike, with the DNS rebinding protection a
// local server owes its users: a request whose Host, or Origin when it has
// one, is not a loopback name is refused with 403 before it reaches the
// transport (the dns-rebinding-protection scenario checks this). opts may
// be nil; its Open and Stateless are replaced.
func Handler(s *mcp.Server, opts *mcp.StreamableOptions) (http.Handler, *mcp.StreamableHandler) {
	var o mcp.StreamableOptions
	if opts != nil {
		o = *opts
	}
	o.Open = func(r *http.Request, sess *mcp.StreamSession) error {
		// The session's context carries it, so that test_reconnection can
		// close its own stream (mcp.StreamSessionFromContext).
		s.Serve(sess.Context(), sess.Conn())
		return nil
	}
	o.Stateless = o.Open
	h := mcp.NewStreamableHandler(&o)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "Forbidden: this server only answers requests for localhost", http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			u, err := url.Parse(origin)
			if err != nil || !loopbackHost(u.Host) {
				http.Error(w, "Forbidden: cross-origin request", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	}), h
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
