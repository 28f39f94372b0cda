package oauthtest

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// ResourceServer guards handlers as an OAuth 2.1 resource server made of
// pkg/oauth, as its Example does, for the tests of OAuth clients: its
// Protected Resource Metadata at the well-known address, a 401 that points
// there, every request's token verified for the resource with the scope,
// 403 without the scope. It keeps what it let in, and can refuse the next
// valid tokens as if they were revoked.
type ResourceServer struct {
	// Resource is the resource identifier: the tokens' audience.
	Resource    string
	metadataURL string
	scope       string
	issuer      string
	v           *oauth.Verifier

	mu       sync.Mutex
	admitted []admitted
	refuse   int
	refused  int
}

// admitted is a request let in: its token and what it said.
type admitted struct {
	token string
	p     *oauth.Principal
}

// ResourceServer returns a resource server that takes the tokens of s for
// resource (an absolute URL, which Handle serves) with scope.
func (s *Server) ResourceServer(resource, scope string) *ResourceServer {
	s.tb.Helper()
	v, err := oauth.New(oauth.Config{Issuers: []oauth.IssuerConfig{{Issuer: s.Issuer()}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		s.tb.Fatalf("oauthtest: %v", err)
	}
	md, err := oauth.ResourceMetadataURL(resource)
	if err != nil {
		s.tb.Fatalf("oauthtest: %v", err)
	}
	return &ResourceServer{Resource: resource, metadataURL: md, scope: scope, issuer: s.Issuer(), v: v}
}

// Handle serves the metadata on mux, and next at path for the requests
// with a token the resource server takes.
func (rs *ResourceServer) Handle(mux *http.ServeMux, path string, next http.Handler) {
	u, _ := url.Parse(rs.metadataURL)
	body, _ := json.Marshal(oauth.ResourceMetadata{Resource: rs.Resource, AuthorizationServers: []string{rs.issuer},
		ScopesSupported: []string{rs.scope}, BearerMethodsSupported: []string{"header"}})
	mux.HandleFunc("GET "+u.Path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		challenge := oauth.Bearer{ResourceMetadata: rs.metadataURL, Scope: []string{rs.scope}}
		tok, ok, _ := oauth.BearerToken(r.Header)
		var p *oauth.Principal
		var err error
		if ok {
			if p, err = rs.v.Verify(r.Context(), tok, rs.Resource); err == nil && !p.HasScope(rs.scope) {
				challenge.Error, challenge.Description = oauth.ErrorInsufficientScope, "the token lacks scope "+rs.scope
				answer(w, http.StatusForbidden, challenge)
				return
			}
		}
		rs.mu.Lock()
		if ok && err == nil && rs.refuse > 0 {
			rs.refuse--
			err = oauth.ErrInactive
		}
		if ok && err == nil {
			rs.admitted = append(rs.admitted, admitted{tok, p})
		} else {
			rs.refused++
		}
		rs.mu.Unlock()
		switch {
		case !ok:
			answer(w, http.StatusUnauthorized, challenge)
		case err != nil:
			challenge.Error, challenge.Description = oauth.ErrorInvalidToken, oauth.Describe(err)
			answer(w, http.StatusUnauthorized, challenge)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func answer(w http.ResponseWriter, status int, c oauth.Bearer) {
	w.Header().Set("WWW-Authenticate", c.String())
	http.Error(w, http.StatusText(status), status)
}

// Tokens returns the tokens let in so far, in order, each once.
func (rs *ResourceServer) Tokens() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []string
	for _, a := range rs.admitted {
		if len(out) == 0 || out[len(out)-1] != a.token {
			out = append(out, a.token)
		}
	}
	return out
}

// Principals returns the principal of every request let in so far.
func (rs *ResourceServer) Principals() []*oauth.Principal {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make([]*oauth.Principal, 0, len(rs.admitted))
	for _, a := range rs.admitted {
		out = append(out, a.p)
	}
	return out
}

// Refused returns how many requests were answered 401.
func (rs *ResourceServer) Refused() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.refused
}

// RefuseNext refuses the next n valid tokens with 401 invalid_token ("the
// access token is not active"), as if they had been revoked.
func (rs *ResourceServer) RefuseNext(n int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.refuse = n
}
