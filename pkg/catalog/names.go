package catalog

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
)

// How the aggregate endpoint (/mcp) names the tools and prompts of every
// server, when several servers offer the same name.
//
// Prefixing every name with its server (the default) never collides, but
// costs every name a prefix the model must read and the server name must
// fit. "priority" lists the bare name when it can: a name one server
// offers stays bare; of several servers offering it, the first in the
// priority list (then by name) keeps it bare and the others are prefixed.
// Aliases from the catalog give chosen tools a name of their own, in
// either mode. Whatever is listed, the prefixed name is always callable
// too, so a client that kept it keeps working when a name turns bare, and
// the only names that may change meaning when a server comes or goes are
// bare ones: the reason "prefix" stays the default.
//
// A bare name that contains the separator is never listed bare: every
// name with the separator then reads as <server><sep><name>, and bare
// names cannot collide with prefixed ones.

// NameMode is how the aggregate endpoint names tools and prompts.
type NameMode string

// The naming modes of the aggregate endpoint.
const (
	// NamesPrefix names every tool and prompt <server><sep><name>.
	NamesPrefix NameMode = "prefix"
	// NamesPriority keeps a name bare unless another server offers it
	// too; the first server of the priority list keeps it bare.
	NamesPriority NameMode = "priority"
)

// Policy is the naming policy of the aggregate endpoint. A nil *Policy is
// the default: NamesPrefix without aliases.
type Policy struct {
	Names NameMode `json:"names"`
	// Priority orders the servers (path.Match globs, first wins) that
	// offer the same bare name; servers it does not match come after, in
	// order of name.
	Priority []string `json:"priority,omitempty"`
	Aliases  []Alias  `json:"aliases,omitempty"`
	Line     int      `json:"line,omitempty"`
}

// Alias names one tool or prompt of a server on the aggregate endpoint.
type Alias struct {
	Server string `yaml:"server" json:"server"`
	Tool   string `yaml:"tool" json:"tool,omitempty"`
	Prompt string `yaml:"prompt" json:"prompt,omitempty"`
	As     string `yaml:"as" json:"as"`
	Line   int    `yaml:"-" json:"line,omitempty"`
}

// check finds the policy's mistakes; virtual names the virtual servers.
func (p *Policy) check(virtual map[string]*VirtualServer) []Problem {
	var probs []Problem
	add := func(line int, format string, args ...any) {
		probs = append(probs, Problem{Line: line, Message: "aggregate: " + fmt.Sprintf(format, args...)})
	}
	switch p.Names {
	case "":
		p.Names = NamesPrefix
	case NamesPrefix, NamesPriority:
	default:
		add(p.Line, "names is %q or %q, not %q", NamesPrefix, NamesPriority, p.Names)
	}
	for _, g := range p.Priority {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			add(p.Line, "priority: %q is not a glob", g)
		}
	}
	taken := [2]map[string]int{{}, {}} // tools, prompts: alias -> line
	for _, a := range p.Aliases {
		kind := 0
		switch {
		case (a.Tool == "") == (a.Prompt == ""):
			add(a.Line, "an alias names a tool or a prompt")
			continue
		case a.Prompt != "":
			kind = 1
		}
		switch {
		case !ValidName(a.Server) || virtual[a.Server] != nil:
			add(a.Line, "alias %q: %q is not a real server's name", a.As, a.Server)
		case !ValidItemName(a.As):
			add(a.Line, "alias %q: a name is 1 to 128 of A-Z a-z 0-9 _ - .", a.As)
		}
		if l, ok := taken[kind][a.As]; ok {
			add(a.Line, "alias %q: taken by the alias at line %d", a.As, l)
		}
		taken[kind][a.As] = a.Line
	}
	return probs
}

// Ref is one tool or prompt of one server, by the server's own name.
type Ref struct {
	Server string `json:"server"`
	Name   string `json:"name"`
}

// Assignment is the name a tool or prompt has on the aggregate endpoint.
type Assignment struct {
	Ref
	// Listed is the name the list shows; Canonical is <server><sep><name>,
	// callable too whatever is listed.
	Listed    string `json:"listed"`
	Canonical string `json:"canonical"`
}

// Conflict is a tool or prompt the aggregate cannot name: its name is
// taken (by an alias, or because the separator makes two prefixed names
// alike), or an alias of it contains the separator.
type Conflict struct {
	Ref
	Name   string `json:"name"`   // the name it would have had
	Holder Ref    `json:"holder"` // who has that name; empty for a bad alias
}

// Names are the aggregate's names of one kind, assigned by a Policy.
type Names struct {
	list      []Assignment   // sorted by Listed
	byName    map[string]int // listed and canonical names -> index in list
	conflicts []Conflict
}

// List returns every assignment, sorted by listed name: the order of the
// aggregate's list, alike on every instance and across restarts.
func (n *Names) List() []Assignment { return n.list }

// Conflicts returns what could not be named, sorted by server and name.
func (n *Names) Conflicts() []Conflict { return n.conflicts }

// Lookup finds the tool or prompt a client names, by its listed or its
// canonical name.
func (n *Names) Lookup(name string) (Assignment, bool) {
	i, ok := n.byName[name]
	if !ok {
		return Assignment{}, false
	}
	return n.list[i], true
}

// Tools names the tools refs (each server's own names, in any order) on
// the aggregate endpoint, with sep between server and name. The result
// depends on the set of refs only, never on their order.
func (p *Policy) Tools(sep string, refs []Ref) *Names { return p.assign(sep, refs, false) }

// Prompts names prompts as Tools names tools, with the prompt aliases.
func (p *Policy) Prompts(sep string, refs []Ref) *Names { return p.assign(sep, refs, true) }

func (p *Policy) assign(sep string, refs []Ref, prompts bool) *Names {
	mode := NamesPrefix
	var aliases map[Ref]string
	if p != nil {
		mode = cmp.Or(p.Names, NamesPrefix)
		aliases = p.aliases(prompts)
	}
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b Ref) int {
		return cmp.Or(cmp.Compare(p.rank(a.Server), p.rank(b.Server)), cmp.Compare(a.Server, b.Server), cmp.Compare(a.Name, b.Name))
	})
	refs = slices.Compact(refs)

	n := &Names{byName: map[string]int{}}
	owner := map[string]Ref{} // listed name -> who lists it
	claim := func(r Ref, name string) bool {
		if o, ok := owner[name]; ok {
			n.conflicts = append(n.conflicts, Conflict{Ref: r, Name: name, Holder: o})
			return false
		}
		owner[name] = r
		n.list = append(n.list, Assignment{Ref: r, Listed: name, Canonical: r.Server + sep + r.Name})
		return true
	}
	// Aliases first, then bare names by rank, then prefixed ones: an alias
	// beats a bare name, and a server first in rank beats the others.
	var rest []Ref
	for _, r := range refs {
		a, ok := aliases[r]
		switch {
		case !ok:
			rest = append(rest, r)
		case sep != "" && strings.Contains(a, sep):
			n.conflicts = append(n.conflicts, Conflict{Ref: r, Name: a})
			rest = append(rest, r)
		case !claim(r, a):
			rest = append(rest, r)
		}
	}
	var prefixed []Ref
	for _, r := range rest {
		if mode != NamesPriority || sep != "" && strings.Contains(r.Name, sep) || owner[r.Name] != (Ref{}) {
			prefixed = append(prefixed, r)
			continue
		}
		owner[r.Name] = r
		n.list = append(n.list, Assignment{Ref: r, Listed: r.Name, Canonical: r.Server + sep + r.Name})
	}
	for _, r := range prefixed {
		claim(r, r.Server+sep+r.Name)
	}
	slices.SortFunc(n.list, func(a, b Assignment) int { return cmp.Compare(a.Listed, b.Listed) })
	slices.SortFunc(n.conflicts, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Ref.Name, b.Ref.Name))
	})
	for i, a := range n.list {
		n.byName[a.Listed] = i
	}
	for i, a := range n.list {
		if _, ok := n.byName[a.Canonical]; !ok {
			n.byName[a.Canonical] = i
		}
	}
	return n
}

// rank is a server's place in the priority list: the index of the first
// glob it matches, or after all of them.
func (p *Policy) rank(server string) int {
	if p == nil {
		return 0
	}
	for i, g := range p.Priority {
		if ok, _ := path.Match(g, server); ok {
			return i
		}
	}
	return len(p.Priority)
}

// aliases returns the policy's aliases of one kind by what they name.
func (p *Policy) aliases(prompts bool) map[Ref]string {
	m := map[Ref]string{}
	for _, a := range p.Aliases {
		switch {
		case prompts && a.Prompt != "":
			m[Ref{a.Server, a.Prompt}] = a.As
		case !prompts && a.Tool != "":
			m[Ref{a.Server, a.Tool}] = a.As
		}
	}
	return m
}
