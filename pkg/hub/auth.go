package hub

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.yaml.in/yaml/v3"
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
// reads too).
type tokensFile struct {
	Tokens []TokenEntry `yaml:"tokens" json:"tokens"`
}

// principal is who a connection authenticated as.
type principal struct {
	name      string
	roles     map[Role]bool
	servers   []string
	tools     []string
	resources []string
	maxConn   int
	digest    [sha256.Size]byte
}

// anonymous is everyone when the hub runs without tokens: loopback only,
// or --insecure.
var anonymous = &principal{name: "anonymous", roles: map[Role]bool{RoleAdmin: true}}

// identity names a principal wherever it acts, on every instance and
// across reloads of the tokens file: a call, a session and an input
// request belong to one identity, and nothing another identity sends may
// continue, read or cancel them. A static token's is "token:" and its name
// in the tokens file (unique there); without tokens everyone is one
// principal, "anonymous". An OAuth principal's will be its issuer and
// subject ("oauth:", the issuer, a space, the subject): each kind has its
// own prefix, so no two kinds ever compare equal.
type identity string

// identity returns who p is.
func (p *principal) identity() identity {
	if p == anonymous {
		return "anonymous"
	}
	return identity("token:" + p.name)
}

func (p *principal) has(r Role) bool { return p.roles[r] || p.roles[RoleAdmin] }

// sameRights reports whether q may do exactly what p may: the same entry,
// or one a reload of the tokens file left as it was.
func (p *principal) sameRights(q *principal) bool {
	return p == q || p.name == q.name && maps.Equal(p.roles, q.roles) && slices.Equal(p.servers, q.servers) &&
		slices.Equal(p.tools, q.tools) && slices.Equal(p.resources, q.resources)
}

// mayCall reports whether the principal may call a tool (or get a prompt)
// of this aggregated name.
func (p *principal) mayCall(name string) bool {
	if !p.has(RoleClient) {
		return false
	}
	return len(p.tools) == 0 || p.roles[RoleAdmin] || matchAny(p.tools, name)
}

// mayGetPrompt reports whether the principal may get a prompt of this
// aggregated name.
func (p *principal) mayGetPrompt(name string) bool {
	return p.has(RoleClient) && (len(p.tools) == 0 || p.roles[RoleAdmin] || matchAny(p.tools, name))
}

// mayRead reports whether the principal may read (or subscribe to) a
// resource of server.
func (p *principal) mayRead(server, uri, sep string) bool {
	return p.roles[RoleAdmin] || p.mayUseServer(server, sep) && p.mayUseURI(uri)
}

// sees reports whether the principal may see (and use) an item of a list:
// tools and prompts by their aggregated name, resources and templates by
// their server and URI. Admins and unrestricted tokens see everything.
func (p *principal) sees(k listKind, it *aggItem, sep string) bool {
	if p.roles[RoleAdmin] || it.server == reservedName {
		return true
	}
	switch k {
	case kindTools, kindPrompts:
		return p.admits(it.key)
	}
	return p.mayUseServer(it.server, sep) && p.mayUseURI(uriOf(k, it))
}

// admits reports whether the token's tools patterns admit a tool or prompt
// of this aggregated name.
func (p *principal) admits(name string) bool {
	return p.roles[RoleAdmin] || len(p.tools) == 0 || matchAny(p.tools, name)
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
func (p *principal) mayUseServer(server, sep string) bool {
	if len(p.tools) == 0 || p.roles[RoleAdmin] {
		return true
	}
	for _, pat := range p.tools {
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
func (p *principal) mayUseURI(uri string) bool {
	if len(p.resources) == 0 {
		return true
	}
	for _, pat := range p.resources {
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
	if p.roles[RoleAdmin] && len(p.servers) == 0 {
		return true
	}
	for _, pat := range p.servers {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// fixedServerName returns the name a server token gives its server: its one
// allowed name when that is not a pattern.
func (p *principal) fixedServerName() string {
	if len(p.servers) == 1 && !strings.ContainsAny(p.servers[0], `*?[\`) {
		return p.servers[0]
	}
	return ""
}

// Tokens is a set of credentials, loaded from a tokens file and replaced
// whole on reload.
type Tokens struct {
	path  string
	set   atomic.Pointer[[]*principal]
	mu    sync.Mutex
	extra []*principal // made in process (AddEphemeral); kept across reloads
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
	b, err := os.ReadFile(t.path)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	set, err := parseTokens(b)
	if err != nil {
		return fmt.Errorf("tokens file %s: %w", path.Base(t.path), err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	set = append(set, t.extra...)
	t.set.Store(&set)
	return nil
}

// AddEphemeral adds a credential that lives only in this process, such as
// the one the command gives its own demo server, and returns its random
// token. Reloads keep it.
func (t *Tokens) AddEphemeral(name string, roles []Role, servers []string) string {
	secret := make([]byte, 32)
	rand.Read(secret)
	token := hex.EncodeToString(secret)
	p := &principal{name: name, roles: map[Role]bool{}, servers: servers, digest: sha256.Sum256([]byte(token))}
	for _, r := range roles {
		p.roles[r] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.extra = append(t.extra, p)
	set := append(append([]*principal{}, *t.set.Load()...), p)
	t.set.Store(&set)
	return token
}

func parseTokens(b []byte) ([]*principal, error) {
	var f tokensFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, errors.New("not valid YAML or JSON")
	}
	names := map[string]bool{}
	var set []*principal
	for i, e := range f.Tokens {
		p := &principal{name: e.Name, roles: map[Role]bool{}, servers: e.Servers, tools: e.Tools, resources: e.Resources,
			maxConn: e.MaxConnections}
		switch {
		case e.Name == "":
			return nil, fmt.Errorf("entry %d has no name", i+1)
		case names[e.Name]:
			return nil, fmt.Errorf("entry %q appears twice", e.Name)
		case (e.Token == "") == (e.SHA256 == ""):
			return nil, fmt.Errorf("entry %q needs exactly one of token and sha256", e.Name)
		case len(e.Roles) == 0:
			return nil, fmt.Errorf("entry %q has no roles", e.Name)
		}
		names[e.Name] = true
		for _, r := range e.Roles {
			switch r {
			case RoleClient, RoleDashboard, RoleServer, RoleAdmin:
				p.roles[r] = true
			default:
				return nil, fmt.Errorf("entry %q has an unknown role %q", e.Name, r)
			}
		}
		for _, pat := range append(append([]string{}, e.Servers...), e.Tools...) {
			if _, err := path.Match(pat, ""); err != nil {
				return nil, fmt.Errorf("entry %q has a malformed pattern %q", e.Name, pat)
			}
		}
		if p.roles[RoleServer] && !p.roles[RoleAdmin] && len(e.Servers) == 0 {
			return nil, fmt.Errorf("entry %q has the server role but no servers it may register", e.Name)
		}
		if e.Token != "" {
			p.digest = sha256.Sum256([]byte(e.Token))
		} else {
			d, err := hex.DecodeString(e.SHA256)
			if err != nil || len(d) != sha256.Size {
				return nil, fmt.Errorf("entry %q: sha256 must be 64 hex digits", e.Name)
			}
			copy(p.digest[:], d)
		}
		set = append(set, p)
	}
	return set, nil
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

// CookieName is the cookie the dashboard's login sets.
const CookieName = "switchboard_token"

// presentedToken finds a request's token: the Authorization header, then
// ?token= (for WebSocket clients that cannot set headers), then the
// dashboard's cookie.
func presentedToken(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if t, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	if t := r.URL.Query().Get("token"); t != "" {
		return t
	}
	if c, err := r.Cookie(CookieName); err == nil {
		return c.Value
	}
	return ""
}

// authenticate answers 401 for a missing or unknown token and 403 for a
// token without the role the endpoint needs; it returns nil then.
func (h *Hub) authenticate(w http.ResponseWriter, r *http.Request, endpoint string, allowed ...Role) *principal {
	if h.cfg.Tokens == nil {
		return anonymous
	}
	tok := presentedToken(r)
	p := (*principal)(nil)
	if tok != "" {
		p = h.cfg.Tokens.lookup(tok)
	}
	if p == nil {
		h.metrics.authFailures.WithLabelValues("unauthorized").Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
		http.Error(w, "401 unauthorized: a valid token is required (Authorization: Bearer, ?token= or the dashboard's login)", http.StatusUnauthorized)
		return nil
	}
	for _, role := range allowed {
		if p.has(role) {
			return p
		}
	}
	h.metrics.authFailures.WithLabelValues("forbidden").Inc()
	http.Error(w, fmt.Sprintf("403 forbidden: token %q may not use %s", p.name, endpoint), http.StatusForbidden)
	return nil
}
