package catalog

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// ReservedName is the hub's own name, which no server, real or virtual,
// may take.
const ReservedName = "switchboard"

// check finds the mistakes that need nothing but the file: names, globs,
// fields that go together, and names that clash within a virtual server.
func (c *Catalog) check() []Problem {
	var probs []Problem
	add := func(line int, format string, args ...any) {
		probs = append(probs, Problem{Line: line, Message: fmt.Sprintf(format, args...)})
	}
	seen := map[string]*VirtualServer{}
	for _, vs := range c.VirtualServers {
		switch {
		case !ValidName(vs.Name):
			add(vs.Line, "virtual server %q: a name is lower-case letters, digits and single '-' inside", vs.Name)
		case vs.Name == ReservedName:
			add(vs.Line, "virtual server %q: the name is the hub's own", vs.Name)
		case seen[vs.Name] != nil:
			add(vs.Line, "virtual server %q: the name is taken by the virtual server at line %d", vs.Name, seen[vs.Name].Line)
		default:
			seen[vs.Name] = vs
		}
		switch vs.Discovery {
		case "":
			vs.Discovery = DiscoveryList
		case DiscoveryList, DiscoverySearch:
		default:
			add(vs.Line, "virtual server %q: discovery is %q or %q, not %q", vs.Name, DiscoveryList, DiscoverySearch, vs.Discovery)
		}
	}
	for _, vs := range c.VirtualServers {
		where := func(kind string, line int, format string, args ...any) {
			add(line, "virtual server %q: %s: %s", vs.Name, kind, fmt.Sprintf(format, args...))
		}
		member := func(kind string, line int, server string) {
			switch {
			case server == "":
				where(kind, line, "no server")
			case seen[server] != nil:
				where(kind, line, "%q is a virtual server; members are real servers", server)
			case !ValidName(server):
				where(kind, line, "%q is not a server name", server)
			}
		}
		checkPicks := func(kind string, picks []pick) {
			explicit := map[string]int{} // effective name -> line
			for _, p := range picks {
				member(kind, p.line, p.server)
				for _, msg := range pickProblems(p, kind) {
					where(kind, p.line, "%s", msg)
				}
				if p.name == "" {
					continue
				}
				name := cmpOr(p.as, p.name)
				if l, ok := explicit[name]; ok {
					where(kind, p.line, "the name %q is taken by the %s at line %d", name, kind, l)
				}
				explicit[name] = p.line
				if kind == "tool" && vs.Discovery == DiscoverySearch && (name == SearchToolsName || name == CallToolName) {
					where(kind, p.line, "the name %q is a meta-tool's in search mode", name)
				}
			}
		}
		checkPicks("tool", vs.toolPicks())
		checkPicks("prompt", vs.promptPicks())
		for _, p := range vs.Resources {
			member("resource", p.Line, p.Server)
			switch {
			case p.URIPrefix != "" && p.URITemplate != "":
				where("resource", p.Line, "uriPrefix or uriTemplate, not both")
			case p.URITemplate != "" && !validTemplate(p.URITemplate):
				where("resource", p.Line, "%q is not a URI template", p.URITemplate)
			}
		}
	}
	if c.Aggregate != nil {
		probs = append(probs, c.Aggregate.check(seen)...)
	}
	return probs
}

// pick is what a tool pick and a prompt pick share.
type pick struct {
	server, name, as, title, description string
	include, exclude                     []string
	annotations, fixed                   []byte
	line                                 int
}

func (p ToolPick) asPick() pick {
	return pick{server: p.Server, name: p.Tool, as: p.As, title: p.Title, description: p.Description,
		include: p.Include, exclude: p.Exclude, annotations: p.Annotations, fixed: p.Fixed, line: p.Line}
}

func (p PromptPick) asPick() pick {
	return pick{server: p.Server, name: p.Prompt, as: p.As, title: p.Title, description: p.Description,
		include: p.Include, exclude: p.Exclude, line: p.Line}
}

// toolPicks returns the tool picks in the shape they share with prompts.
func (vs *VirtualServer) toolPicks() []pick {
	out := make([]pick, len(vs.Tools))
	for i, p := range vs.Tools {
		out[i] = p.asPick()
	}
	return out
}

// promptPicks returns the prompt picks in the shape they share with tools.
func (vs *VirtualServer) promptPicks() []pick {
	out := make([]pick, len(vs.Prompts))
	for i, p := range vs.Prompts {
		out[i] = p.asPick()
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// pickProblems checks the fields of one pick that go together; kind is
// "tool" or "prompt", as the file names the one-by-one field.
func pickProblems(p pick, kind string) []string {
	var msgs []string
	if p.name != "" && (len(p.include) > 0 || len(p.exclude) > 0) {
		msgs = append(msgs, fmt.Sprintf("%s or include/exclude, not both", kind))
	}
	if p.name == "" {
		for _, f := range []struct{ name, v string }{{"as", p.as}, {"title", p.title}, {"description", p.description}} {
			if f.v != "" {
				msgs = append(msgs, fmt.Sprintf("%s needs %s (one %s by name)", f.name, kind, kind))
			}
		}
	}
	if p.as != "" && !ValidItemName(p.as) {
		msgs = append(msgs, fmt.Sprintf("as %q: a name is 1 to 128 of A-Z a-z 0-9 _ - .", p.as))
	}
	for _, g := range slices.Concat(p.include, p.exclude) {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			msgs = append(msgs, fmt.Sprintf("%q is not a glob", g))
		}
	}
	return msgs
}

// ValidName reports whether s is a server name in the hub's alphabet:
// lower-case letters and digits, runs of them joined by single '-'.
func ValidName(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidItemName reports whether s is a tool or prompt name as MCP advises
// them (1 to 128 characters of A-Z, a-z, 0-9, '_', '-' and '.'): the names
// a catalog gives must work with every client.
func ValidItemName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validTemplate reports whether t is a URI template that compiles: a
// malformed one matches only itself, so its literal part is all of it,
// braces included.
func validTemplate(t string) bool {
	return !strings.ContainsAny(mcp.ParseURITemplate(t).Literal(), "{}")
}

// CheckNames checks the catalog against the names of the real servers the
// hub knows: a virtual server named like one is an error (its endpoint
// would hide the real one). The hub calls it on load, and refuses a
// server that registers later under a virtual server's name.
func (c *Catalog) CheckNames(real []string) error {
	var probs []Problem
	for _, vs := range c.VirtualServers {
		if slices.Contains(real, vs.Name) {
			probs = append(probs, Problem{Line: vs.Line, Message: fmt.Sprintf("virtual server %q: a real server has the name", vs.Name)})
		}
	}
	if len(probs) > 0 {
		return &Error{Problems: probs}
	}
	return nil
}

// Server returns the virtual server of a name, or nil.
func (c *Catalog) Server(name string) *VirtualServer {
	for _, vs := range c.VirtualServers {
		if vs.Name == name {
			return vs
		}
	}
	return nil
}

// Members returns the names of the real servers a virtual server draws
// on, sorted: the servers whose coming and going changes its lists.
func (vs *VirtualServer) Members() []string {
	var names []string
	for _, p := range vs.Tools {
		names = append(names, p.Server)
	}
	for _, p := range vs.Prompts {
		names = append(names, p.Server)
	}
	for _, p := range vs.Resources {
		names = append(names, p.Server)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
