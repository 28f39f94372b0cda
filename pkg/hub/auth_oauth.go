package hub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// The hub as an OAuth 2.1 resource server (the MCP authorization
// specification), beside its static tokens: every endpoint is a resource
// whose identifier derives from the public URL, with its own Protected
// Resource Metadata (http_oauth.go); an access token is verified by
// pkg/oauth for the resource it is sent to, and its scopes and claims
// become a principal's roles through the policy (auth_policy.go).

// OAuthConfig makes the hub an OAuth 2.1 resource server.
type OAuthConfig struct {
	// PublicURL is the hub's canonical external base URL: scheme, host,
	// port, no path. Resource identifiers derive from it
	// (<PublicURL>/mcp, <PublicURL>/servers/<name>/mcp,
	// <PublicURL>/mcp/server), never from a request's Host, which a client
	// chooses.
	PublicURL string
	// Issuers are the trusted authorization servers, as their tokens' "iss"
	// spells them. At least one.
	Issuers []string
	// Audiences are extra accepted "aud" values, for authorization servers
	// that cannot put a resource indicator in their tokens.
	Audiences []string
	// Introspection, by issuer (a member of Issuers), lets opaque access
	// tokens of that issuer be checked at its introspection endpoint (RFC
	// 7662) with the hub's own client credentials there.
	Introspection map[string]*oauth.Introspection
	// Verification tunes the verifier (timeouts, cache, leeway; a clock for
	// tests). Its Issuers, Audiences and Logger are set from the above and
	// the hub's.
	Verification oauth.Config
	// Dashboard, when set, lets the dashboard log in through the first
	// issuer (http_oauth.go).
	Dashboard *DashboardLogin
}

// DashboardLogin is the OAuth client the dashboard logs in as:
// authorization code with PKCE, redirected to <PublicURL>/login/oauth/callback.
type DashboardLogin struct {
	// ClientID is the client registered at the issuer for the dashboard.
	ClientID string
	// Secret is its secret, for a confidential client; empty for a public
	// one (PKCE alone).
	Secret oauth.Secret
	// Scopes are asked for; empty means mcp:dashboard and mcp:client.
	Scopes []string
}

// resourceServer is the hub's OAuth side.
type resourceServer struct {
	base      string // the public URL, without a trailing slash
	mcp       string // base + "/mcp", the resource of most requests
	issuers   []string
	v         *oauth.Verifier
	dashboard *DashboardLogin
	cache     principalCache
	known     knownTokens
}

// newResourceServer checks cfg and builds the verifier.
func newResourceServer(cfg *OAuthConfig, h *Hub) (*resourceServer, error) {
	u, err := url.Parse(cfg.PublicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") != "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("hub: the public URL %q must be an http(s) URL with a host and no path", cfg.PublicURL)
	}
	vc := cfg.Verification
	vc.Issuers = nil
	for _, iss := range cfg.Issuers {
		vc.Issuers = append(vc.Issuers, oauth.IssuerConfig{Issuer: iss, Introspection: cfg.Introspection[iss]})
	}
	for iss := range cfg.Introspection {
		if !slices.Contains(cfg.Issuers, iss) {
			return nil, fmt.Errorf("hub: introspection is configured for %s, which is not a trusted issuer", iss)
		}
	}
	vc.Audiences, vc.Logger = cfg.Audiences, h.log
	v, err := oauth.New(vc)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	base := strings.TrimSuffix(cfg.PublicURL, "/")
	return &resourceServer{base: base, mcp: base + "/mcp", issuers: cfg.Issuers, v: v, dashboard: cfg.Dashboard}, nil
}

// resource returns the resource identifier of an endpoint ("/mcp",
// "/servers/<name>/mcp", "/mcp/server"). /metrics takes the tokens of the
// hub's own resource, /mcp.
func (rs *resourceServer) resource(endpoint string) string {
	if endpoint == "/mcp" || endpoint == "/metrics" {
		return rs.mcp
	}
	return rs.base + endpoint
}

// metadataURL returns where the metadata of an endpoint's resource is.
func (rs *resourceServer) metadataURL(endpoint string) string {
	u, _ := oauth.ResourceMetadataURL(rs.resource(endpoint)) // the base was checked
	return u
}

// policy returns the policy in force: the tokens file's, else the default.
func (h *Hub) policy() *policy {
	if h.cfg.Tokens != nil {
		if p := h.cfg.Tokens.policy.Load(); p != nil {
			return p
		}
	}
	return defaultPolicy
}

// oauthPrefix starts an OAuth principal's name and identity.
const oauthPrefix = "oauth:"

// principalCache keeps the principal of each verified token (the verifier
// returns the same *oauth.Principal for every use of a cached token), so
// that a busy session pays for the policy once too. It is emptied when the
// policy changes (a reload) and when it is full.
type principalCache struct {
	mu  sync.RWMutex
	pol *policy
	m   map[*oauth.Principal]*principal
}

// principalCacheMax bounds the cache: as the verifier's own.
const principalCacheMax = oauth.DefaultCacheEntries

func (c *principalCache) get(tok *oauth.Principal, pol *policy) *principal {
	c.mu.RLock()
	p := c.m[tok]
	same := c.pol == pol
	c.mu.RUnlock()
	if p != nil && same {
		return p
	}
	p = newPrincipal(oauthPrefix+tok.Issuer+" "+tok.Subject, pol.grantOf(tok))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pol != pol || len(c.m) >= principalCacheMax {
		c.pol, c.m = pol, make(map[*oauth.Principal]*principal)
	}
	c.m[tok] = p
	return p
}

// knownTokens remembers the access tokens that verified and are no static
// token, so that their next requests skip the static tokens' lookup (a
// SHA-256 of the token, which for a JWT of a few KiB is most of what a
// verified token costs) and go to the verifier's cache at once. It is
// emptied when the static tokens change (a reload: a token could become
// a static one), and when full. Nothing is learnt from it that the
// verifier's own cache, keyed the same way, would not tell.
type knownTokens struct {
	mu     sync.RWMutex
	static *[]*principal // the static tokens it was made for
	m      map[string]struct{}
}

// knownAccessToken reports whether tok verified as an access token, and is
// no static token of t. A hub without OAuth knows none.
func (rs *resourceServer) knownAccessToken(t *Tokens, tok string) bool {
	if rs == nil {
		return false
	}
	k := &rs.known
	k.mu.RLock()
	defer k.mu.RUnlock()
	_, ok := k.m[tok]
	return ok && k.static == t.set.Load()
}

func (k *knownTokens) add(t *Tokens, tok string) {
	static := t.set.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.static != static || len(k.m) >= principalCacheMax {
		k.static, k.m = static, make(map[string]struct{})
	}
	k.m[strings.Clone(tok)] = struct{}{}
}

// authenticateOAuth admits a request whose token is no static one: a valid
// access token for the endpoint's resource whose policy gives it one of
// the roles allowed. It answers the refusal itself (401 with a challenge
// that points at the resource's metadata; 403 insufficient_scope) and
// returns nil then.
func (h *Hub) authenticateOAuth(w http.ResponseWriter, r *http.Request, endpoint, tok string, from tokenSource, allowed []Role) *principal {
	rs := h.oauth
	pol := h.policy()
	// The challenge is made for a refusal only: an admitted request, the
	// usual one, pays for none of it.
	challenge := func(code, desc string) oauth.Bearer { return rs.challenge(endpoint, pol, allowed, code, desc) }
	var err error
	switch {
	case tok == "":
		h.refuseOAuth(w, r, endpoint, nil, http.StatusUnauthorized, challenge("", ""), "no token")
		return nil
	case from == fromQuery:
		err = errTokenInQuery
	}
	var p *principal
	if err == nil {
		p, err = rs.principal(r.Context(), tok, rs.resource(endpoint), pol)
	}
	if err == nil && h.cfg.Tokens != nil && !rs.knownAccessToken(h.cfg.Tokens, tok) {
		rs.known.add(h.cfg.Tokens, tok)
	}
	if err != nil {
		h.logRefusedToken(endpoint, err)
		desc := describeToken(err)
		h.refuseOAuth(w, r, endpoint, nil, http.StatusUnauthorized, challenge(oauth.ErrorInvalidToken, desc), "invalid_token: "+desc)
		return nil
	}
	for _, role := range allowed {
		if p.has(role) {
			h.auditDecision(r, endpoint, p, http.StatusOK, "")
			return p
		}
	}
	h.refuseOAuth(w, r, endpoint, p, http.StatusForbidden, challenge(oauth.ErrorInsufficientScope, errNoScope.Error()),
		"insufficient_scope: no role for this endpoint")
	return nil
}

// challenge returns the challenge of a refusal at endpoint, which needs
// one of roles.
func (rs *resourceServer) challenge(endpoint string, pol *policy, roles []Role, code, desc string) oauth.Bearer {
	return oauth.Bearer{ResourceMetadata: rs.metadataURL(endpoint), Scope: scopesFor(pol, roles), Error: code, Description: desc}
}

// errTokenInQuery refuses an access token sent in a URL's query, where
// logs and histories keep it.
var errTokenInQuery = errors.New("access tokens are not accepted in a URL's query: send an Authorization header")

// describeToken says why a token was refused, for the client.
func describeToken(err error) string {
	if errors.Is(err, errTokenInQuery) {
		return err.Error()
	}
	return oauth.Describe(err)
}

// principal verifies tok for resource and returns its principal.
func (rs *resourceServer) principal(ctx context.Context, tok, resource string, pol *policy) (*principal, error) {
	op, err := rs.v.Verify(ctx, tok, resource)
	if err != nil {
		return nil, err
	}
	return rs.cache.get(op, pol), nil
}

// logRefusedToken logs why a token was refused: at warning level when the
// hub could not verify it for want of its issuer (an outage an operator
// must see), at debug level otherwise (a client's problem, which anyone
// can cause at will). The error holds no token.
func (h *Hub) logRefusedToken(endpoint string, err error) {
	if errors.Is(err, oauth.ErrIntrospectionRefused) {
		h.log.Warn("oauth: an opaque token could not be verified: the issuer refuses the hub's introspection credentials",
			"endpoint", endpoint, "err", err)
		return
	}
	if errors.Is(err, oauth.ErrUnavailable) {
		h.log.Warn("oauth: a token could not be verified: its issuer is unavailable", "endpoint", endpoint, "err", err)
		return
	}
	h.log.Debug("oauth: token refused", "endpoint", endpoint, "err", err)
}

// refuseOAuth answers a refused request with its challenge.
func (h *Hub) refuseOAuth(w http.ResponseWriter, r *http.Request, endpoint string, p *principal, status int, c oauth.Bearer, why string) {
	reason := "unauthorized"
	if status == http.StatusForbidden {
		reason = "forbidden"
	}
	h.metrics.authFailures.WithLabelValues(reason).Inc()
	h.auditDecision(r, endpoint, p, status, why)
	w.Header().Set("WWW-Authenticate", c.String())
	msg := fmt.Sprintf("%d %s: %s", status, strings.ToLower(http.StatusText(status)), c.Description)
	if c.Description == "" {
		msg = fmt.Sprintf("401 unauthorized: an access token is required; its authorization servers are listed at %s", c.ResourceMetadata)
	}
	http.Error(w, msg, status)
}

// scopesFor returns the scopes a challenge asks for when one of roles is
// needed: the first role's.
func scopesFor(pol *policy, roles []Role) []string {
	for _, r := range roles {
		if s := pol.scopeFor(r); s != "" {
			return []string{s}
		}
	}
	return nil
}

// stepUp returns the scopes that would let p do what allowed checks, when
// p is an OAuth principal and some scope would (step-up authorization);
// nil otherwise.
func (h *Hub) stepUp(p *principal, allowed func(*grant) bool) []string {
	tok := p.g().token
	if tok == nil || h.oauth == nil {
		return nil
	}
	return h.policy().stepUp(tok, allowed)
}

// ownPrincipal returns the principal an HTTP session keeps: for an OAuth
// principal a copy of its own, whose grant follows the tokens of the
// session's later requests (followPrincipal); a static one as it is.
func ownPrincipal(p *principal) *principal {
	if p.g().token == nil {
		return p
	}
	return newPrincipal(p.name, p.g())
}

// followPrincipal gives a session's OAuth principal the grant of the token
// of a later request of the same principal: a step-up's new scopes apply
// to the session from that request on (and fewer scopes, too).
func followPrincipal(own, req *principal) {
	if g := req.g(); g.token != nil && own != req && own.g() != g {
		own.grant.Store(g)
	}
}

// closeAtExpiry closes a WebSocket session when its access token expires.
func (h *Hub) closeAtExpiry(s *session) {
	atExpiry(s, func() {
		h.auditEvent(s, "expired", "the access token expired")
		s.peer.CloseWith(peer.ClosePolicyViolation, "access token expired: connect again with a new one")
	})
}

// endListensAtExpiry answers the subscriptions/listen stream of a request
// of the 2026-07-28 revision (an HTTP session of that one request) when
// its access token expires, with the graceful end the revision gives a
// stream: the client listens again, with a fresh token. It is that
// revision's GET stream (streamUntilExpiry); its other requests end with
// their answers.
func endListensAtExpiry(s *session) {
	if s.who.g().token == nil {
		return // a static token does not expire (and the method value would cost an allocation per request)
	}
	atExpiry(s, s.endListeners)
}

// atExpiry runs end when the access token of s expires; the session's end
// stops the timer.
func atExpiry(s *session, end func()) {
	if tok := s.who.g().token; tok != nil {
		s.expiry = time.AfterFunc(time.Until(tok.Expiry), end)
	}
}

// pastExpiry reports whether the access token of s has expired (a static
// token never does).
func (s *session) pastExpiry() bool {
	tok := s.who.g().token
	return tok != nil && !time.Now().Before(tok.Expiry)
}

// streamUntilExpiry bounds a GET of an HTTP session, an SSE stream that
// may stay open for hours, by its access token's lifetime, as
// closeAtExpiry bounds a WebSocket session: every other request is
// verified on its own, but a stream would outlive the token that opened it.
// At the expiry the request's context ends, and with it the stream, here
// and, for a stream relayed to or from another instance, there too; the
// client opens it again with a fresh token (and Last-Event-ID). A token
// past its expiry already (still admitted, within the clock skew) is
// refused with 401 instead of a stream that would end at once, so that the
// client renews it. It returns r, bounded, and the function that releases
// the bound; nil after answering a refusal.
func (h *Hub) streamUntilExpiry(w http.ResponseWriter, r *http.Request, endpoint string, who *principal) (*http.Request, context.CancelFunc) {
	tok := who.g().token
	if tok == nil {
		return r, func() {}
	}
	if !time.Now().Before(tok.Expiry) {
		e := h.refuseExpiredStream(r, endpoint, who)
		maps.Copy(w.Header(), e.Header)
		http.Error(w, e.Message, e.Status)
		return nil, nil
	}
	ctx, cancel := context.WithDeadline(r.Context(), tok.Expiry)
	return r.WithContext(ctx), cancel
}

// refuseExpiredStream returns the refusal of a stream asked for with an
// access token past its expiry (a GET, a subscriptions/listen), counted
// and audited: 401 with a challenge, so that the client renews its token.
func (h *Hub) refuseExpiredStream(r *http.Request, endpoint string, who *principal) *mcp.HTTPError {
	desc := oauth.Describe(oauth.ErrExpired)
	c := h.oauth.challenge(endpoint, h.policy(), httpRoles, oauth.ErrorInvalidToken, desc)
	h.metrics.authFailures.WithLabelValues("unauthorized").Inc()
	h.auditDecision(r, endpoint, who, http.StatusUnauthorized, "invalid_token: "+desc+" (a stream)")
	return &mcp.HTTPError{Status: http.StatusUnauthorized, Message: "401 unauthorized: " + desc + ": renew it",
		Header: http.Header{"WWW-Authenticate": {c.String()}}}
}

// stopExpiry stops the timer of closeAtExpiry, if any.
func (s *session) stopExpiry() {
	if s.expiry != nil {
		s.expiry.Stop()
	}
}

// oauthReady reports why the hub cannot verify tokens yet: an issuer whose
// metadata or keys it never got.
func (h *Hub) oauthReady() error {
	if h.oauth == nil {
		return nil
	}
	return h.oauth.v.Ready()
}

// mayCall returns the check of calling a tool (or getting a prompt) of
// this aggregated name, for stepUp.
func mayCall(aggName string) func(*grant) bool {
	return func(g *grant) bool { return g.mayCall(aggName) }
}

// mayRead returns the check of reading a resource of server, for stepUp.
func (h *Hub) mayRead(server, uri string) func(*grant) bool {
	return func(g *grant) bool { return g.mayRead(server, uri, h.cfg.Separator) }
}
