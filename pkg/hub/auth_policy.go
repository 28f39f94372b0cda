package hub

import (
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// The policy: what an OAuth access token may do, from its scopes and
// claims, in the roles and allow-lists a static token has. It is the
// tokens file's "policy" list; without one (or without a tokens file) the
// default scopes alone apply.

// PolicyRule maps what an OAuth access token says, a scope it grants or a
// claim's value, to roles and allow-lists exactly as a static token's entry
// has them. A token gets every role of every rule it matches (see grantOf
// for how their allow-lists combine).
//
//	policy:
//	  - scope: mcp:client        # replaces the default rule of mcp:client
//	    roles: [client]
//	    tools: ["public__*"]
//	  - claim: groups             # "groups" is, or contains, "support"
//	    value: support
//	    roles: [client]
//	    tools: ["crm__*"]
//	  - claim: roles              # Entra ID's app roles
//	    value: Hub.Admin
//	    issuer: https://login.microsoftonline.com/<tenant>/v2.0
//	    roles: [admin]
//	  - claim: azp                # this machine client registers "weather"
//	    value: weather-connector
//	    roles: [server]
//	    servers: [weather]
type PolicyRule struct {
	// Scope matches a token that grants this scope ("scope", or "scp" as
	// a string or an array). The default scopes mcp:client, mcp:dashboard,
	// mcp:server and mcp:admin give the role of the same name, without
	// allow-lists; a rule for one of them (with no Claim) replaces that
	// default, and with no roles turns it off.
	Scope string `yaml:"scope" json:"scope"`
	// Claim and Value match a token whose claim Claim is the string Value
	// or, for an array (groups, Entra ID's roles), contains it.
	Claim string `yaml:"claim" json:"claim"`
	Value string `yaml:"value" json:"value"`
	// Issuer, when set, limits the rule to the tokens of that issuer.
	Issuer string `yaml:"issuer" json:"issuer"`
	// Roles, Servers, Tools and Resources are as in TokenEntry. A server
	// role without Servers registers the name of the token's client id
	// (else its subject), normalised as server names are.
	Roles     []Role   `yaml:"roles" json:"roles"`
	Servers   []string `yaml:"servers" json:"servers"`
	Tools     []string `yaml:"tools" json:"tools"`
	Resources []string `yaml:"resources" json:"resources"`
}

// defaultScopes are the scopes that give the role of the same name.
var defaultScopes = map[string]Role{
	"mcp:client": RoleClient, "mcp:dashboard": RoleDashboard, "mcp:server": RoleServer, "mcp:admin": RoleAdmin,
}

// defaultScopeOrder is the order of the default rules.
var defaultScopeOrder = []string{"mcp:client", "mcp:dashboard", "mcp:server", "mcp:admin"}

// policy is a parsed policy: its rules in order (the file's, then the
// defaults it did not replace) and every scope they name.
type policy struct {
	rules  []*policyRule
	scopes []string // for scopes_supported
}

// policyRule is a rule and the grant it makes.
type policyRule struct {
	PolicyRule
	g *grant
}

// defaultPolicy is the policy of a hub without a tokens file, or of a file
// without one.
var defaultPolicy, _ = parsePolicy(nil)

// parsePolicy checks a policy's rules and adds the defaults they leave.
func parsePolicy(rules []PolicyRule) (*policy, error) {
	pol := &policy{}
	replaced := map[string]bool{}
	for i, r := range rules {
		where := fmt.Sprintf("policy rule %d", i+1)
		switch {
		case r.Scope == "" && r.Claim == "":
			return nil, fmt.Errorf("%s matches nothing: give it a scope, or a claim and a value", where)
		case (r.Claim == "") != (r.Value == ""):
			return nil, fmt.Errorf("%s needs both a claim and a value", where)
		}
		g, err := newGrant(r.Roles, r.Servers, r.Tools, r.Resources)
		if err != nil && !(len(r.Roles) == 0 && isDefaultScope(r.Scope) && r.Claim == "") {
			return nil, fmt.Errorf("%s %w", where, err)
		}
		if g == nil {
			g = &grant{roles: map[Role]bool{}} // a default scope turned off
		}
		if isDefaultScope(r.Scope) && r.Claim == "" && r.Issuer == "" {
			replaced[r.Scope] = true
		}
		pol.add(&policyRule{PolicyRule: r, g: g})
	}
	for _, scope := range defaultScopeOrder {
		if role := defaultScopes[scope]; !replaced[scope] {
			pol.add(&policyRule{PolicyRule: PolicyRule{Scope: scope, Roles: []Role{role}},
				g: &grant{roles: map[Role]bool{role: true}}})
		}
	}
	return pol, nil
}

func (pol *policy) add(r *policyRule) {
	pol.rules = append(pol.rules, r)
	if r.Scope != "" && len(r.g.roles) > 0 && !slices.Contains(pol.scopes, r.Scope) {
		pol.scopes = append(pol.scopes, r.Scope)
	}
}

func isDefaultScope(scope string) bool {
	_, ok := defaultScopes[scope]
	return ok
}

// matches reports whether the rule applies to a token.
func (r *policyRule) matches(tok *oauth.Principal) bool {
	switch {
	case r.Issuer != "" && r.Issuer != tok.Issuer:
		return false
	case r.Scope != "" && !tok.HasScope(r.Scope):
		return false
	case r.Claim != "" && !slices.Contains(tok.ClaimStrings(r.Claim), r.Value):
		return false
	}
	return true
}

// grantOf returns what a token may do under the policy. Roles add up. An
// admin has no allow-lists but servers. Otherwise the tools and resources
// patterns come from the rules of the token's main role (client, else
// dashboard, else server): all of them if one of those rules has none,
// else every pattern of those rules; so a rule of a lesser role (a
// dashboard's, which sees everything) never widens what a client may call.
// Servers are those of the rules that give the server or admin role; a
// server role without any registers the name of the token's client id,
// else its subject, normalised.
func (pol *policy) grantOf(tok *oauth.Principal) *grant {
	g := &grant{roles: map[Role]bool{}, token: tok}
	var matched []*policyRule
	for _, r := range pol.rules {
		if r.matches(tok) {
			matched = append(matched, r)
			for role := range r.g.roles {
				g.roles[role] = true
			}
		}
	}
	for _, r := range matched {
		if r.g.roles[RoleServer] || r.g.roles[RoleAdmin] {
			g.servers = union(g.servers, r.g.servers)
		}
	}
	if g.roles[RoleServer] && !g.roles[RoleAdmin] && len(g.servers) == 0 {
		name := tok.ClientID
		if name == "" {
			name = tok.Subject
		}
		if n := normalizeName(name); n != "" {
			g.servers = []string{n}
		}
	}
	if g.roles[RoleAdmin] {
		return g
	}
	for _, main := range []Role{RoleClient, RoleDashboard, RoleServer} {
		if !g.roles[main] {
			continue
		}
		var tools, resources [][]string
		for _, r := range matched {
			if r.g.roles[main] {
				tools, resources = append(tools, r.g.tools), append(resources, r.g.resources)
			}
		}
		g.tools, g.resources = combine(tools), combine(resources)
		break
	}
	return g
}

// combine returns the patterns of several rules: none (everything) if one
// rule has none, else all of them.
func combine(lists [][]string) []string {
	var out []string
	for _, l := range lists {
		if len(l) == 0 {
			return nil
		}
		out = union(out, l)
	}
	return out
}

// union returns a with the members of b it lacks.
func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

// scopeFor returns the scope to ask for a role: that of the first rule
// that gives it by a scope alone, an admin's last; "" if none does.
func (pol *policy) scopeFor(role Role) string {
	admin := ""
	for _, r := range pol.rules {
		if r.Scope == "" || r.Claim != "" || r.Issuer != "" || !r.g.has(role) {
			continue
		}
		if !r.g.roles[RoleAdmin] {
			return r.Scope
		}
		if admin == "" {
			admin = r.Scope
		}
	}
	return admin
}

// errNoScope is why a token's principal is refused when it has no role.
var errNoScope = errors.New("the token grants no scope the hub's policy maps to a role")

// stepUp returns the scopes a token should have for allowed to hold: the
// first scope of a rule (not an admin's) that the token lacks and that
// would make allowed hold, after the scopes of the policy the token has
// already (clients that replace their scopes with a challenge's keep
// them). It returns nil when no scope would do: the refusal is then final.
func (pol *policy) stepUp(tok *oauth.Principal, allowed func(*grant) bool) []string {
	for _, r := range pol.rules {
		if r.Scope == "" || r.Claim != "" || r.g.roles[RoleAdmin] || tok.HasScope(r.Scope) ||
			r.Issuer != "" && r.Issuer != tok.Issuer {
			continue
		}
		more := *tok
		more.Scopes = append(slices.Clip(tok.Scopes), r.Scope)
		if allowed(pol.grantOf(&more)) {
			var out []string
			for _, s := range tok.Scopes {
				if slices.Contains(pol.scopes, s) {
					out = append(out, s)
				}
			}
			return append(out, r.Scope)
		}
	}
	return nil
}

// scopesGranting returns the scopes of the rules that give one of roles
// by a scope alone, for a resource's scopes_supported.
func (pol *policy) scopesGranting(roles []Role) []string {
	var out []string
	for _, r := range pol.rules {
		if r.Scope == "" || r.Claim != "" || slices.Contains(out, r.Scope) {
			continue
		}
		if slices.ContainsFunc(roles, func(role Role) bool { return r.g.roles[role] }) {
			out = append(out, r.Scope)
		}
	}
	return out
}
