package hub

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// The HTTP side of OAuth: the Protected Resource Metadata of every
// endpoint (RFC 9728), the 403 of a call that needs a scope its token
// lacks (step-up), and the dashboard's login through the issuer.

// wellKnownResource is where Protected Resource Metadata is served.
const wellKnownResource = "/.well-known/oauth-protected-resource"

// oauthRoutes adds the metadata and login endpoints, when OAuth is on, and
// the dashboard's question whether to offer a login through the issuer.
func (h *Hub) oauthRoutes(mux *http.ServeMux) {
	// HEAD /login/oauth: 204 either way (a browser logs every 404 of a
	// page as an error), with "Switchboard-Login: oauth" where there is one.
	mux.HandleFunc("HEAD /login/oauth", func(w http.ResponseWriter, r *http.Request) {
		if h.oauth != nil && h.oauth.dashboard != nil {
			w.Header().Set("Switchboard-Login", "oauth")
		}
		w.WriteHeader(http.StatusNoContent)
	})
	if h.oauth == nil {
		return
	}
	for path, ep := range map[string]string{
		"":                    "/mcp", // the root form, for clients that look there first
		"/mcp":                "/mcp",
		"/mcp/server":         "/mcp/server",
		"/servers/{name}/mcp": "",
	} {
		mux.HandleFunc("GET "+wellKnownResource+path, func(w http.ResponseWriter, r *http.Request) {
			h.serveResourceMetadata(w, r, ep)
		})
		mux.HandleFunc("OPTIONS "+wellKnownResource+path, servePreflight)
	}
	if h.oauth.dashboard != nil {
		mux.HandleFunc("GET /login/oauth", h.serveOAuthLogin)
		mux.HandleFunc("GET /login/oauth/callback", h.serveOAuthCallback)
	}
}

// serveResourceMetadata serves the metadata of an endpoint's resource (ep
// empty: the per-server endpoint of the path's name), readable from every
// origin: browser clients fetch it. It is the same for every caller, and
// served for any well-formed server name, connected or not, so that it
// tells no one which servers are there.
func (h *Hub) serveResourceMetadata(w http.ResponseWriter, r *http.Request, ep string) {
	if ep == "" {
		name := r.PathValue("name")
		if name == "" || normalizeName(name) != name {
			http.Error(w, "404 not found: not a server name", http.StatusNotFound)
			return
		}
		ep = endpoint(name)
	}
	roles := []Role{RoleClient, RoleDashboard, RoleAdmin}
	resourceName := "Switchboard MCP hub"
	switch {
	case ep == "/mcp/server":
		roles, resourceName = []Role{RoleServer, RoleAdmin}, "Switchboard MCP hub: servers dialing out"
	case ep != "/mcp":
		resourceName = "Switchboard MCP hub: server " + strings.TrimSuffix(strings.TrimPrefix(ep, "/servers/"), "/mcp")
	}
	b, _ := json.Marshal(oauth.ResourceMetadata{
		Resource:               h.oauth.resource(ep),
		AuthorizationServers:   h.oauth.issuers,
		ScopesSupported:        h.policy().scopesGranting(roles),
		BearerMethodsSupported: []string{"header"},
		ResourceName:           resourceName,
	})
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Access-Control-Allow-Origin", "*")
	hd.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
}

// servePreflight answers a browser's CORS preflight for the metadata (a
// client that sends MCP-Protocol-Version with its GET needs one).
func servePreflight(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Access-Control-Allow-Origin", "*")
	hd.Set("Access-Control-Allow-Methods", "GET")
	hd.Set("Access-Control-Allow-Headers", "*")
	hd.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
}

// httpScreen returns the Streamable HTTP handler's Screen: nil without
// OAuth, so that a hub without it pays nothing.
func (h *Hub) httpScreen() func(*http.Request, []jsonrpc.Message) error {
	if h.oauth == nil {
		return nil
	}
	return h.screenHTTP
}

// screenHTTP refuses, with HTTP 403 and a challenge naming the scopes to
// ask for, a POST whose call an OAuth token may not make but would with
// another scope: a client then gets a token with it and sends the POST
// again (step-up authorization). A refusal no scope would lift is left to
// the session, which answers it -32003 as for any token.
func (h *Hub) screenHTTP(r *http.Request, msgs []jsonrpc.Message) error {
	info, _ := r.Context().Value(requestKey{}).(*requestInfo)
	if info == nil {
		return nil
	}
	if streamPastExpiry(info.who, msgs) {
		return h.refuseExpiredStream(r, endpoint(info.scope), info.who)
	}
	if g := info.who.g(); g.token == nil || g.has(RoleClient) && len(g.tools) == 0 && len(g.resources) == 0 {
		return nil // a static token, or one that may call and read everything
	}
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			continue
		}
		allowed, what := h.callCheck(info.scope, req)
		if allowed == nil || allowed(info.who.g()) {
			continue
		}
		scopes := h.stepUp(info.who, allowed)
		if len(scopes) == 0 {
			continue
		}
		ep := endpoint(info.scope)
		c := oauth.Bearer{ResourceMetadata: h.oauth.metadataURL(ep), Scope: scopes,
			Error: oauth.ErrorInsufficientScope, Description: "the token lacks a scope to " + what}
		h.metrics.authFailures.WithLabelValues("forbidden").Inc()
		h.auditDecision(r, ep, info.who, http.StatusForbidden, "insufficient_scope: "+what)
		return &mcp.HTTPError{Status: http.StatusForbidden, Code: mcp.CodeForbidden, Message: "insufficient scope: " + c.Description,
			Header: http.Header{"WWW-Authenticate": {c.String()}}}
	}
	return nil
}

// streamPastExpiry reports whether msgs open a subscriptions/listen
// stream with an access token past its expiry (admitted within the clock
// skew): it would end at once (endListensAtExpiry), and the client would
// listen again with the same token.
func streamPastExpiry(who *principal, msgs []jsonrpc.Message) bool {
	tok := who.g().token
	if tok == nil || time.Now().Before(tok.Expiry) {
		return false
	}
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.Method == mcp.MethodSubscriptionsListen {
			return true
		}
	}
	return false
}

// callCheck returns what a request needs of a grant, for the calls a
// scope may allow (tools, prompts, resources), and what it does; nil for
// the others, and for a resource no server serves.
func (h *Hub) callCheck(scope string, req *jsonrpc.Request) (func(*grant) bool, string) {
	switch req.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		name, _ := jsonrpc.StringMember(req.Params, "name")
		agg := name
		if scope != "" {
			agg = scope + h.cfg.Separator + name
		}
		what := "call tool "
		if req.Method == mcp.MethodPromptsGet {
			what = "get prompt "
		}
		return mayCall(agg), what + strconv.Quote(name)
	case mcp.MethodResourcesRead, mcp.MethodResourcesSubscribe:
		uri, _ := jsonrpc.StringMember(req.Params, "uri")
		server, ok := h.reg.view().serverOfURI(uri)
		if !ok || scope != "" && server != scope {
			return nil, ""
		}
		return h.mayRead(server, uri), "use resource " + strconv.Quote(uri)
	}
	return nil, ""
}

// The dashboard's login through the issuer: GET /login/oauth sends the
// browser to the issuer's authorization endpoint (authorization code with
// PKCE, for the resource <public-url>/mcp); the issuer sends it back to
// /login/oauth/callback, where the hub exchanges the code for an access
// token, verifies it as any other, and keeps it in the same HttpOnly,
// SameSite=Strict cookie as a static token's login. The state and the
// PKCE verifier wait in a cookie of their own (SameSite=Lax: the way back
// from the issuer is a cross-site navigation), so any instance can finish
// a login another began.

// oauthLoginCookie holds a login's state and PKCE verifier.
const oauthLoginCookie = "switchboard_oauth_login"

// loginTimeout bounds a login's round trip through the issuer, and each
// request the hub makes to the issuer for it.
const loginTimeout = 10 * time.Minute

// loginClient makes the hub's requests to the issuer for a login.
var loginClient = &http.Client{Timeout: 10 * time.Second}

// dashboardConfig returns the dashboard's OAuth client, at the issuer's
// endpoints.
func (h *Hub) dashboardConfig(ctx context.Context) (*oauth2.Config, error) {
	rs := h.oauth
	meta, err := oauth.DiscoverServer(ctx, loginClient, rs.issuers[0])
	if err != nil {
		return nil, err
	}
	d := rs.dashboard
	scopes := d.Scopes
	if len(scopes) == 0 {
		scopes = []string{"mcp:dashboard", "mcp:client"}
	}
	style := oauth2.AuthStyleInParams
	if d.Secret.Reveal() != "" {
		style = oauth2.AuthStyleInHeader
	}
	return &oauth2.Config{
		ClientID: d.ClientID, ClientSecret: d.Secret.Reveal(), Scopes: scopes,
		RedirectURL: rs.base + "/login/oauth/callback",
		Endpoint:    oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: style},
	}, nil
}

// serveOAuthLogin starts a login: to the issuer.
func (h *Hub) serveOAuthLogin(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), loginClient.Timeout)
	defer cancel()
	conf, err := h.dashboardConfig(ctx)
	if err != nil {
		h.log.Warn("oauth: dashboard login: the issuer's metadata could not be had", "err", err)
		http.Error(w, "502 bad gateway: the authorization server is unavailable", http.StatusBadGateway)
		return
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	state, verifier := hex.EncodeToString(b[:]), oauth2.GenerateVerifier()
	http.SetCookie(w, &http.Cookie{Name: oauthLoginCookie, Value: state + "." + verifier, Path: "/login/oauth",
		MaxAge: int(loginTimeout / time.Second), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: h.oauth.secure()})
	http.Redirect(w, r, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("resource", h.oauth.resource("/mcp"))), http.StatusFound)
}

// secure reports whether cookies must be Secure: the public URL is https.
func (rs *resourceServer) secure() bool { return strings.HasPrefix(rs.base, "https:") }

// serveOAuthCallback finishes a login: the code for a token, the token in
// the cookie.
func (h *Hub) serveOAuthCallback(w http.ResponseWriter, r *http.Request) {
	rs := h.oauth
	http.SetCookie(w, &http.Cookie{Name: oauthLoginCookie, Value: "", Path: "/login/oauth", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: rs.secure()})
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		http.Error(w, "401 unauthorized: the authorization server refused the login ("+oauthErrorCode(e)+")", http.StatusUnauthorized)
		return
	}
	c, err := r.Cookie(oauthLoginCookie)
	state, verifier, _ := strings.Cut(valueOr(c, err), ".")
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(q.Get("state"))) != 1 {
		http.Error(w, "400 bad request: this login was not started here, or took too long: start again", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*loginClient.Timeout)
	defer cancel()
	conf, err := h.dashboardConfig(ctx)
	var tok *oauth2.Token
	if err == nil {
		tok, err = conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, loginClient), q.Get("code"),
			oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", rs.resource("/mcp")))
	}
	if err != nil {
		h.log.Warn("oauth: dashboard login: the code could not be exchanged", "err", err)
		http.Error(w, "502 bad gateway: the authorization server did not give a token for the code", http.StatusBadGateway)
		return
	}
	p, err := rs.principal(ctx, tok.AccessToken, rs.resource("/mcp"), h.policy())
	switch {
	case err != nil:
		h.logRefusedToken("/login/oauth", err)
		h.auditDecision(r, "/login/oauth", nil, http.StatusUnauthorized, "invalid_token: "+oauth.Describe(err))
		http.Error(w, "401 unauthorized: "+oauth.Describe(err), http.StatusUnauthorized)
		return
	case !p.has(RoleDashboard) && !p.has(RoleClient):
		h.auditDecision(r, "/login/oauth", p, http.StatusForbidden, "insufficient_scope: no role for the dashboard")
		http.Error(w, "403 forbidden: "+errNoScope.Error(), http.StatusForbidden)
		return
	case len(tok.AccessToken) > maxCookieToken:
		http.Error(w, "502 bad gateway: the access token is too large for a cookie", http.StatusBadGateway)
		return
	}
	h.auditDecision(r, "/login/oauth", p, http.StatusOK, "")
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok.AccessToken, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: rs.secure(), Expires: p.g().token.Expiry})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// maxCookieToken bounds the access token a cookie may carry: browsers keep
// cookies of up to 4096 bytes, name and attributes included.
const maxCookieToken = 3800

// valueOr returns a cookie's value, or "" when there is none.
func valueOr(c *http.Cookie, err error) string {
	if err != nil {
		return ""
	}
	return c.Value
}

// oauthErrorCode returns an OAuth error code as it may be shown: its
// letters and underscores (RFC 6749's codes), nothing a page could forge.
func oauthErrorCode(e string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' {
			return r
		}
		return -1
	}, e)
}
