package hub

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// Role is what a token may do.
type Role string

// The roles.
const (
	// RoleClient may connect to /mcp and use every MCP method, calling only
	// the tools its Tools patterns allow (all when it has none).
	RoleClient Role = "client"
	// RoleDashboard may connect to /mcp to list, read and subscribe, but not
	// call tools or get prompts.
	RoleDashboard Role = "dashboard"
	// RoleServer may connect to /mcp/server and register the names its
	// Servers patterns allow.
	RoleServer Role = "server"
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
)

// TokenEntry is one credential of a tokens file.
type TokenEntry struct {
	// Token is the secret itself, or SHA256 its SHA-256 in hex: a file that
	// holds only digests gives nothing away if it leaks.
	Token  string `yaml:"token" json:"token"`
	SHA256 string `yaml:"sha256" json:"sha256"`
	// Name identifies the holder in logs and metrics; it must be unique.
	Name  string `yaml:"name" json:"name"`
	Roles []Role `yaml:"roles" json:"roles"`
	// Servers lists the server names (path.Match patterns) a server token
	// may register. A single plain name is also the name the server gets.
	Servers []string `yaml:"servers" json:"servers"`
	// Tools lists the aggregated tool and prompt names (path.Match
	// patterns, such as "demo__*") a client token may call, get and see;
	// empty allows all. A client restricted so also sees only the
	// resources, templates and completions of the servers its patterns
	// name (the part before the separator: "demo" for "demo__*").
	Tools []string `yaml:"tools" json:"tools"`
	// Resources restricts URIs: for a client token, the resources it may
	// list, read and subscribe to; for a server token, the resources and
	// templates its server may offer (others are not served). Each is a
	// URI, or a prefix ending in "*" ("weather://*"); empty allows all.
	Resources []string `yaml:"resources" json:"resources"`
	// MaxConnections overrides the hub's per-token connection limit.
	MaxConnections int `yaml:"maxConnections" json:"maxConnections"`
}

// tokensFile is the layout of a tokens file (YAML, or JSON, which YAML
// reads too): static tokens, and the policy that makes OAuth access tokens'
// scopes and claims roles (auth_policy.go).
type tokensFile struct {
	Tokens []TokenEntry `yaml:"tokens" json:"tokens"`
	Policy []PolicyRule `yaml:"policy" json:"policy"`
}

// principal is who a connection authenticated as: a static token, an OAuth
// access token's issuer and subject (auth_oauth.go), or anonymous.
type principal struct {
	name    string // unique among principals: a static token's name, an OAuth principal's identity
	maxConn int
	digest  [sha256.Size]byte
	// grant is what it may do. It is fixed for a static token; an OAuth
	// principal's follows the token of each request of its HTTP session
	// (a step-up brings more scopes to the same session), hence atomic.
	grant atomic.Pointer[grant]
}

// grant is what a principal may do: its roles and allow-lists, and for an
// OAuth principal the verified token they come from.
type grant struct {
	roles     map[Role]bool
	servers   []string
	tools     []string
	resources []string
	token     *oauth.Principal // nil for a static token
}

// newPrincipal returns a principal named name with grant g.
func newPrincipal(name string, g *grant) *principal {
	p := &principal{name: name}
	p.grant.Store(g)
	return p
}

// g returns what the principal may do now.
func (p *principal) g() *grant { return p.grant.Load() }

// anonymous is everyone when the hub runs without tokens: loopback only,
// or --insecure.
var anonymous = newPrincipal("anonymous", &grant{roles: map[Role]bool{RoleAdmin: true}})

// identity names a principal wherever it acts, on every instance and
// across reloads of the tokens file: a call, a session and an input
// request belong to one identity, and nothing another identity sends may
// continue, read or cancel them. A static token's is "token:" and its name
// in the tokens file (unique there); without tokens everyone is one
// principal, "anonymous". An OAuth principal's is its issuer and subject
// ("oauth:", the issuer, a space, the subject; an issuer is a URL, with no
// space): each kind has its own prefix, so no two kinds ever compare equal.
type identity string

// identity returns who p is.
func (p *principal) identity() identity {
	switch {
	case p == anonymous:
		return "anonymous"
	case p.g().token != nil:
		return identity(p.name) // already "oauth:<iss> <sub>"
	}
	return identity("token:" + p.name)
}

func (p *principal) has(r Role) bool { return p.g().has(r) }

func (g *grant) has(r Role) bool { return g.roles[r] || g.roles[RoleAdmin] }

// isAdmin reports whether the principal has the admin role.
func (p *principal) isAdmin() bool { return p.g().roles[RoleAdmin] }

// unrestricted reports whether the principal sees every item: an admin, or
// a token without tools or resources patterns.
func (p *principal) unrestricted() bool {
	g := p.g()
	return g.roles[RoleAdmin] || len(g.tools) == 0 && len(g.resources) == 0
}

// toolPatterns returns the principal's tools patterns (none: all).
func (p *principal) toolPatterns() []string { return p.g().tools }

// sameRights reports whether q may do exactly what p may: the same entry,
// or one a reload of the tokens file left as it was.
func (p *principal) sameRights(q *principal) bool {
	a, b := p.g(), q.g()
	return p == q || p.name == q.name && maps.Equal(a.roles, b.roles) && slices.Equal(a.servers, b.servers) &&
		slices.Equal(a.tools, b.tools) && slices.Equal(a.resources, b.resources)
}

// mayCall reports whether the principal may call a tool (or get a prompt)
// of this aggregated name.
func (p *principal) mayCall(name string) bool { return p.g().mayCall(name) }

func (g *grant) mayCall(name string) bool {
	return g.has(RoleClient) && g.admits(name)
}

// mayGetPrompt reports whether the principal may get a prompt of this
// aggregated name.
func (p *principal) mayGetPrompt(name string) bool { return p.g().mayCall(name) }

// mayRead reports whether the principal may read (or subscribe to) a
// resource of server.
func (p *principal) mayRead(server, uri, sep string) bool { return p.g().mayRead(server, uri, sep) }

func (g *grant) mayRead(server, uri, sep string) bool {
	return g.roles[RoleAdmin] || g.mayUseServer(server, sep) && g.mayUseURI(uri)
}

// sees reports whether the principal may see (and use) an item of a list:
// tools and prompts by their aggregated name, resources and templates by
// their server and URI. Admins and unrestricted tokens see everything.
func (p *principal) sees(k listKind, it *aggItem, sep string) bool {
	g := p.g()
	if g.roles[RoleAdmin] || it.server == reservedName {
		return true
	}
	switch k {
	case kindTools, kindPrompts:
		return g.admits(cmp.Or(it.canon, it.key))
	}
	return g.mayUseServer(cmp.Or(it.via, it.server), sep) && g.mayUseURI(uriOf(k, it))
}

// admits reports whether the token's tools patterns admit a tool or prompt
// of this aggregated name.
func (p *principal) admits(name string) bool { return p.g().admits(name) }

func (g *grant) admits(name string) bool {
	return g.roles[RoleAdmin] || len(g.tools) == 0 || matchAny(g.tools, name)
}

// uriOf returns what a URI restriction applies to: a resource's URI, a
// template's literal prefix.
func uriOf(k listKind, it *aggItem) string {
	if k == kindTemplates && it.tmpl != nil {
		return it.tmpl.Literal()
	}
	return it.key
}

// mayUseServer reports whether a client restricted to some tools may use
// the server's other items: a pattern must name it before the separator.
func (p *principal) mayUseServer(server, sep string) bool { return p.g().mayUseServer(server, sep) }

func (g *grant) mayUseServer(server, sep string) bool {
	if len(g.tools) == 0 || g.roles[RoleAdmin] {
		return true
	}
	for _, pat := range g.tools {
		if i := strings.Index(pat, sep); i >= 0 {
			pat = pat[:i]
		}
		if ok, _ := path.Match(pat, server); ok {
			return true
		}
	}
	return false
}

// mayUseURI reports whether a URI (or a template's literal prefix) is
// within the principal's Resources patterns.
func (p *principal) mayUseURI(uri string) bool { return p.g().mayUseURI(uri) }

func (g *grant) mayUseURI(uri string) bool {
	if len(g.resources) == 0 {
		return true
	}
	for _, pat := range g.resources {
		if prefix, ok := strings.CutSuffix(pat, "*"); ok {
			if strings.HasPrefix(uri, prefix) {
				return true
			}
		} else if uri == pat {
			return true
		}
	}
	return false
}

func matchAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// mayRegister reports whether a server with this principal may register
// name.
func (p *principal) mayRegister(name string) bool {
	g := p.g()
	if g.roles[RoleAdmin] && len(g.servers) == 0 {
		return true
	}
	for _, pat := range g.servers {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// fixedServerName returns the name a server token gives its server: its one
// allowed name when that is not a pattern.
func (p *principal) fixedServerName() string {
	if g := p.g(); len(g.servers) == 1 && !strings.ContainsAny(g.servers[0], `*?[\`) {
		return g.servers[0]
	}
	return ""
}

// Tokens is a set of credentials, loaded from a tokens file and replaced
// whole on reload, with the policy for OAuth access tokens the file holds.
type Tokens struct {
	path   string
	set    atomic.Pointer[[]*principal]
	policy atomic.Pointer[policy]
	mu     sync.Mutex
	extra  []*principal // made in process (AddEphemeral); kept across reloads
}

// NewTokens returns an empty set of static tokens, of no file (Reload does
// nothing): for credentials made in process alone (AddEphemeral), beside
// OAuth.
func NewTokens() *Tokens {
	t := &Tokens{}
	t.set.Store(&[]*principal{})
	t.policy.Store(defaultPolicy)
	return t
}

// LoadTokens reads a tokens file.
//
//	tokens:
//	  - name: ops-dashboard
//	    sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
//	    roles: [dashboard]
//	  - name: weather
//	    token: s3cret-for-the-weather-server
//	    roles: [server]
//	    servers: [weather]
//	policy: # for OAuth access tokens: see PolicyRule
//	  - claim: groups
//	    value: support
//	    roles: [client]
//	    tools: ["crm__*"]
//
// Keys are read strictly: an unknown one (a misspelt "tools" would
// otherwise allow every tool) refuses the file.
func LoadTokens(file string) (*Tokens, error) {
	t := &Tokens{path: file}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the file again. Connections made with a token that is gone
// stay up; new ones are refused.
func (t *Tokens) Reload() error {
	if t.path == "" {
		return nil // NewTokens: no file
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	set, pol, err := parseTokens(b)
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", path.Base(t.path), err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	set = append(set, t.extra...)
	t.set.Store(&set)
	t.policy.Store(pol)
	return nil
}

// AddEphemeral adds a credential that lives only in this process, such as
// the one the command gives its own demo server, and returns its random
// token. Reloads keep it.
func (t *Tokens) AddEphemeral(name string, roles []Role, servers []string) string {
	secret := make([]byte, 32)
	rand.Read(secret)
	token := hex.EncodeToString(secret)
	g := &grant{roles: map[Role]bool{}, servers: servers}
	for _, r := range roles {
		g.roles[r] = true
	}
	p := newPrincipal(name, g)
	p.digest = sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.extra = append(t.extra, p)
	set := append(append([]*principal{}, *t.set.Load()...), p)
	t.set.Store(&set)
	return token
}

// parseTokens reads a tokens file: its static tokens and its policy.
func parseTokens(b []byte) ([]*principal, *policy, error) {
	var f tokensFile
	if err := decodeStrict(b, &f); err != nil {
		return nil, nil, err
	}
	names := map[string]bool{}
	var set []*principal
	for i, e := range f.Tokens {
		switch {
		case e.Name == "":
			return nil, nil, fmt.Errorf("entry %d has no name", i+1)
		case names[e.Name]:
			return nil, nil, fmt.Errorf("entry %q appears twice", e.Name)
		case strings.HasPrefix(e.Name, oauthPrefix):
			return nil, nil, fmt.Errorf("entry %q: names starting with %q are OAuth principals'", e.Name, oauthPrefix)
		case (e.Token == "") == (e.SHA256 == ""):
			return nil, nil, fmt.Errorf("entry %q needs exactly one of token and sha256", e.Name)
		}
		names[e.Name] = true
		g, err := newGrant(e.Roles, e.Servers, e.Tools, e.Resources)
		if err != nil {
			return nil, nil, fmt.Errorf("entry %q %w", e.Name, err)
		}
		if g.roles[RoleServer] && !g.roles[RoleAdmin] && len(e.Servers) == 0 {
			return nil, nil, fmt.Errorf("entry %q has the server role but no servers it may register", e.Name)
		}
		p := newPrincipal(e.Name, g)
		p.maxConn = e.MaxConnections
		if e.Token != "" {
			p.digest = sha256.Sum256([]byte(e.Token))
		} else {
			d, err := hex.DecodeString(e.SHA256)
			if err != nil || len(d) != sha256.Size {
				return nil, nil, fmt.Errorf("entry %q: sha256 must be 64 hex digits", e.Name)
			}
			copy(p.digest[:], d)
		}
		set = append(set, p)
	}
	pol, err := parsePolicy(f.Policy)
	if err != nil {
		return nil, nil, err
	}
	return set, pol, nil
}

// decodeStrict decodes a tokens file, refusing unknown keys. Its errors
// say where, never what the file holds (a token, say).
func decodeStrict(b []byte, f *tokensFile) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(f)
	if errors.Is(err, io.EOF) {
		return nil // an empty file: no tokens
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		why := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			// "line 3: field tool not found in type hub.TokenEntry" is
			// kept; a wrong value's message quotes the value, maybe a token.
			line, rest, _ := strings.Cut(e, ": ")
			if field, ok := strings.CutPrefix(rest, "field "); ok && strings.Contains(field, " not found") {
				field, _, _ = strings.Cut(field, " not found")
				why[i] = line + ": unknown key " + strconv.Quote(field)
			} else {
				why[i] = line + ": a value of the wrong type"
			}
		}
		return fmt.Errorf("not a valid tokens file: %s", strings.Join(why, "; "))
	}
	if err != nil {
		return errors.New("not valid YAML or JSON")
	}
	return nil
}

// newGrant checks roles and patterns, as an entry or a policy rule gives
// them ("has no roles", "has a malformed pattern"...), and returns them as
// a grant.
func newGrant(roles []Role, servers, tools, resources []string) (*grant, error) {
	g := &grant{roles: map[Role]bool{}, servers: servers, tools: tools, resources: resources}
	if len(roles) == 0 {
		return nil, errors.New("has no roles")
	}
	for _, r := range roles {
		switch r {
		case RoleClient, RoleDashboard, RoleServer, RoleAdmin:
			g.roles[r] = true
		default:
			return nil, fmt.Errorf("has an unknown role %q", r)
		}
	}
	for _, pat := range append(append([]string{}, servers...), tools...) {
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("has a malformed pattern %q", pat)
		}
	}
	return g, nil
}

// lookup finds the principal of a presented token. Every entry is compared
// in constant time, so the time taken says nothing about which came close.
func (t *Tokens) lookup(token string) *principal {
	d := sha256.Sum256([]byte(token))
	var found *principal
	for _, p := range *t.set.Load() {
		if subtle.ConstantTimeCompare(d[:], p.digest[:]) == 1 {
			found = p
		}
	}
	return found
}

// CookieName is the cookie the dashboard's login sets: a static token, or
// the access token of a login through the issuer (http_oauth.go).
const CookieName = "switchboard_token"

// tokenSource says where a request's token came from.
type tokenSource int

const (
	fromNowhere  tokenSource = iota
	fromHeader               // Authorization: Bearer
	fromProtocol             // a Sec-WebSocket-Protocol of "bearer." and the token in base64url
	fromQuery                // ?token=, for static tokens only
	fromCookie               // the dashboard's login
)

// presentedToken finds a request's token: the Authorization header, then
// a WebSocket subprotocol "bearer.<base64url of the token>" (browsers
// cannot set headers on a WebSocket, and unlike a URL's query a
// subprotocol ends up in no access log nor history), then ?token= (static
// tokens only), then the dashboard's cookie.
func presentedToken(r *http.Request) (string, tokenSource) {
	if a := r.Header.Get("Authorization"); a != "" {
		if t, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(t), fromHeader
		}
	}
	if t, ok := protocolToken(r.Header); ok {
		return t, fromProtocol
	}
	if t := r.URL.Query().Get("token"); t != "" {
		return t, fromQuery
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return c.Value, fromCookie
	}
	return "", fromNowhere
}

// ProtocolTokenPrefix starts the WebSocket subprotocol that carries a
// token, in base64url without padding (RFC 4648 section 5): a browser
// opens new WebSocket(url, ["mcp", "bearer." + base64url(token)]). The hub
// answers with the subprotocol "mcp", never this one.
const ProtocolTokenPrefix = "bearer."

// protocolToken finds a token among the subprotocols a WebSocket upgrade
// offers.
func protocolToken(h http.Header) (string, bool) {
	for _, v := range h.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if enc, ok := strings.CutPrefix(strings.TrimSpace(p), ProtocolTokenPrefix); ok {
				b, err := base64.RawURLEncoding.DecodeString(enc)
				return string(b), err == nil && len(b) > 0
			}
		}
	}
	return "", false
}

// authOn reports whether requests need credentials: static tokens, OAuth
// access tokens, or both.
func (h *Hub) authOn() bool { return h.cfg.Tokens != nil || h.oauth != nil }

// authenticate answers 401 for a missing or unknown token and 403 for a
// token without the role the endpoint needs; it returns nil then. A token
// that is a static one is that; any other goes to the OAuth verifier when
// the hub has one (auth_oauth.go).
func (h *Hub) authenticate(w http.ResponseWriter, r *http.Request, endpoint string, allowed ...Role) *principal {
	if !h.authOn() {
		return anonymous
	}
	tok, from := presentedToken(r)
	p := (*principal)(nil)
	if tok != "" && h.cfg.Tokens != nil && !h.oauth.knownAccessToken(h.cfg.Tokens, tok) {
		p = h.cfg.Tokens.lookup(tok)
	}
	if p == nil && h.oauth != nil {
		return h.authenticateOAuth(w, r, endpoint, tok, from, allowed)
	}
	if p == nil {
		h.metrics.authFailures.WithLabelValues("unauthorized").Inc()
		h.auditDecision(r, endpoint, nil, http.StatusUnauthorized, "no valid static token")
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
		http.Error(w, "401 unauthorized: a valid token is required (Authorization: Bearer, ?token= or the dashboard's login)", http.StatusUnauthorized)
		return nil
	}
	for _, role := range allowed {
		if p.has(role) {
			h.auditDecision(r, endpoint, p, http.StatusOK, "")
			return p
		}
	}
	h.metrics.authFailures.WithLabelValues("forbidden").Inc()
	h.auditDecision(r, endpoint, p, http.StatusForbidden, "no role for this endpoint")
	http.Error(w, fmt.Sprintf("403 forbidden: token %q may not use %s", p.name, endpoint), http.StatusForbidden)
	return nil
}
