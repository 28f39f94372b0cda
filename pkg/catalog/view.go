package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Lists are what one member server offers now, each item as the server
// listed it (raw JSON: members the catalog does not know pass through).
type Lists struct {
	Tools     []json.RawMessage
	Prompts   []json.RawMessage
	Resources []json.RawMessage
	Templates []json.RawMessage
}

// View is a virtual server's effective lists at one moment: what its
// endpoint shows, and where each name leads. Build makes one; it is
// immutable, so the hub can keep it in an immutable state of its own and
// read it without a lock.
type View struct {
	Server *VirtualServer
	// Tools and Prompts are sorted by Name, Resources by URI and
	// Templates by template: the order of the lists, alike on every
	// instance.
	Tools     []*Item
	Prompts   []*Item
	Resources []*Item
	Templates []*Item
	// Warnings say what does not match (yet): a member that is not
	// connected, a pick that matches nothing, a name two servers offer.
	Warnings []Problem

	tools, prompts, resources map[string]*Item
	pickTemplates             []*mcp.URITemplate // each resource pick's uriTemplate, compiled; nil where it has none
}

// Item is one tool, prompt, resource or template of a virtual server.
type Item struct {
	// Name is what clients know it by: the effective name of a tool or
	// prompt, a resource's URI, a template's URI template.
	Name string
	// Server is the member server that offers it, and Orig its name
	// there (the same as Name for resources and templates).
	Server string
	Orig   string
	// Raw is the item as clients see it: renamed, described, its fixed
	// arguments out of its input schema. Members the server sent that the
	// catalog does not change pass through.
	Raw json.RawMessage

	fixed     []byte   // a tool's fixed arguments: the members of the object, without its braces
	fixedKeys []string // their names, sorted
	tmpl      *mcp.URITemplate
}

// Tool finds a tool by the name clients call it: the reverse map from an
// effective name to its server and the server's own name.
func (v *View) Tool(name string) (*Item, bool) {
	it, ok := v.tools[name]
	return it, ok
}

// Prompt finds a prompt by the name clients get it.
func (v *View) Prompt(name string) (*Item, bool) {
	it, ok := v.prompts[name]
	return it, ok
}

// ServerOfURI finds the member server of a resource the client reads or
// subscribes to: a listed resource first, then the resource picks in the
// file's order (a URI under a pick's uriPrefix, one its uriTemplate
// matches, or, for a pick of all, one a picked template of its server
// matches). It reports false for a URI the virtual server does not offer.
func (v *View) ServerOfURI(uri string) (string, bool) {
	if it, ok := v.resources[uri]; ok {
		return it.Server, true
	}
	for i, p := range v.Server.Resources {
		switch {
		case p.URIPrefix != "":
			if strings.HasPrefix(uri, p.URIPrefix) {
				return p.Server, true
			}
		case p.URITemplate != "":
			if v.pickTemplates[i].Match(uri) {
				return p.Server, true
			}
		default:
			for _, t := range v.Templates {
				if t.Server == p.Server && t.tmpl.Match(uri) {
					return p.Server, true
				}
			}
		}
	}
	return "", false
}

// Build computes a virtual server's view from its members' current lists
// (by server name; a server absent from members is not connected).
//
// Tools and prompts: the one-by-one picks first, then the glob picks in
// the file's order, each glob pick skipping the tools of its server that a
// one-by-one pick names (the explicit pick replaces it). Two items under
// one name: the first so taken keeps it, and a warning says which was
// left out. In search mode a tool named like a meta-tool is left out of
// direct calls (it stays in the view; call_tool reaches it).
func Build(vs *VirtualServer, members map[string]*Lists) *View {
	v := &View{Server: vs, tools: map[string]*Item{}, prompts: map[string]*Item{}, resources: map[string]*Item{}}
	tools, prompts := vs.toolPicks(), vs.promptPicks()
	warned := map[string]bool{}
	for _, p := range slices.Concat(tools, prompts, resourcePicks(vs.Resources)) {
		if _, ok := members[p.server]; !ok && !warned[p.server] {
			warned[p.server] = true
			v.warn(p.line, "server %q is not connected", p.server)
		}
	}
	v.Tools = v.named("tool", tools, v.tools, func(l *Lists) []json.RawMessage { return l.Tools }, members)
	v.Prompts = v.named("prompt", prompts, v.prompts, func(l *Lists) []json.RawMessage { return l.Prompts }, members)
	v.Resources, v.Templates = v.uris(members)
	return v
}

// resourcePicks gives resource picks the shape of the others, for what
// they share: a server and a line.
func resourcePicks(rs []ResourcePick) []pick {
	out := make([]pick, len(rs))
	for i, r := range rs {
		out[i] = pick{server: r.Server, line: r.Line}
	}
	return out
}

func (v *View) warn(line int, format string, args ...any) {
	v.Warnings = append(v.Warnings, Problem{Line: line, Message: fmt.Sprintf("virtual server %q: ", v.Server.Name) + fmt.Sprintf(format, args...)})
}

// named builds the tools or the prompts (kind says which) from their picks.
func (v *View) named(kind string, picks []pick, index map[string]*Item, of func(*Lists) []json.RawMessage, members map[string]*Lists) []*Item {
	explicit := map[Ref]bool{}
	for _, p := range picks {
		if p.name != "" {
			explicit[Ref{p.server, p.name}] = true
		}
	}
	var out []*Item
	add := func(p pick, raw json.RawMessage, orig string) {
		name := cmpOr(p.as, orig)
		if held, ok := index[name]; ok {
			if held.Server != p.server || held.Orig != orig {
				v.warn(p.line, "%s %q of %q is left out: the name is %q's %s", kind, orig, p.server, held.Server, kind)
			}
			return
		}
		it, err := newItem(name, p, raw, orig)
		if err != nil {
			v.warn(p.line, "%s %q of %q is left out: %v", kind, orig, p.server, err)
			return
		}
		for _, k := range it.fixedKeys {
			if !declares(raw, k) {
				v.warn(p.line, "%s %q of %q: the fixed argument %q is not among its parameters", kind, orig, p.server, k)
			}
		}
		if kind == "tool" && v.Server.Discovery == DiscoverySearch && (name == SearchToolsName || name == CallToolName) {
			v.warn(p.line, "tool %q of %q is called through %s only: its name is a meta-tool's", orig, p.server, CallToolName)
		}
		index[name] = it
		out = append(out, it)
	}
	for _, p := range picks { // one by one
		if p.name == "" {
			continue
		}
		l := members[p.server]
		if l == nil {
			continue
		}
		raw, ok := find(of(l), p.name)
		if !ok {
			v.warn(p.line, "server %q has no %s %q", p.server, kind, p.name)
			continue
		}
		add(p, raw, p.name)
	}
	for _, p := range picks { // by glob
		if p.name != "" {
			continue
		}
		l := members[p.server]
		if l == nil {
			continue
		}
		matched := 0
		for _, raw := range sortedByName(of(l)) {
			name, _ := jsonrpc.StringMember(raw, "name")
			if explicit[Ref{p.server, name}] || !globsAdmit(p.include, p.exclude, name) {
				continue
			}
			matched++
			add(p, raw, name)
		}
		if matched == 0 {
			v.warn(p.line, "no %s of %q matches %s", kind, p.server, describeGlobs(p.include, p.exclude))
		}
	}
	slices.SortFunc(out, func(a, b *Item) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// globsAdmit reports whether name matches an include glob (any, when
// there are none) and no exclude glob.
func globsAdmit(include, exclude []string, name string) bool {
	if name == "" {
		return false
	}
	in := len(include) == 0
	for _, g := range include {
		if ok, _ := path.Match(g, name); ok {
			in = true
			break
		}
	}
	for _, g := range exclude {
		if ok, _ := path.Match(g, name); ok {
			return false
		}
	}
	return in
}

func describeGlobs(include, exclude []string) string {
	s := "include " + fmt.Sprint(include)
	if len(include) == 0 {
		s = "include [*]"
	}
	if len(exclude) > 0 {
		s += " exclude " + fmt.Sprint(exclude)
	}
	return s
}

// find returns the item of a list with the name.
func find(items []json.RawMessage, name string) (json.RawMessage, bool) {
	for _, raw := range items {
		if n, _ := jsonrpc.StringMember(raw, "name"); n == name {
			return raw, true
		}
	}
	return nil, false
}

// sortedByName returns items in the order of their names, so that a view
// does not depend on the order a server listed them in.
func sortedByName(items []json.RawMessage) []json.RawMessage {
	return sortedBy(items, "name")
}

func sortedBy(items []json.RawMessage, key string) []json.RawMessage {
	type keyed struct {
		key string
		raw json.RawMessage
	}
	ks := make([]keyed, len(items))
	for i, raw := range items {
		k, _ := jsonrpc.StringMember(raw, key)
		ks[i] = keyed{k, raw}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(a.key, b.key) })
	out := make([]json.RawMessage, len(ks))
	for i, k := range ks {
		out[i] = k.raw
	}
	return out
}

// newItem makes a tool or prompt as a pick shows it.
func newItem(name string, p pick, raw json.RawMessage, orig string) (*Item, error) {
	it := &Item{Name: name, Server: p.server, Orig: orig, Raw: raw}
	if name == orig && p.title == "" && p.description == "" && p.annotations == nil && p.fixed == nil {
		return it, nil // as the server sent it: no copy
	}
	o, err := mcp.ParseObject(raw)
	if err != nil {
		return nil, err
	}
	if name != orig {
		o.Set("name", name)
	}
	if p.title != "" {
		o.Set("title", p.title)
	}
	if p.description != "" {
		o.Set("description", p.description)
	}
	if p.annotations != nil {
		merged, err := mergeObjects(o["annotations"], p.annotations)
		if err != nil {
			return nil, fmt.Errorf("annotations: %w", err)
		}
		o["annotations"] = merged
	}
	if p.fixed != nil {
		if err := it.setFixed(o, p.fixed); err != nil {
			return nil, err
		}
	}
	it.Raw = o.Raw()
	return it, nil
}

// mergeObjects returns base (a JSON object, or nothing) with the members
// of over replacing its own.
func mergeObjects(base, over json.RawMessage) (json.RawMessage, error) {
	o, err := mcp.ParseObject(base)
	if err != nil {
		return nil, err
	}
	for k, v := range jsonrpc.Members(over) {
		o[string(k)] = v
	}
	return o.Raw(), nil
}

// uris builds the resources and templates from the resource picks, in the
// file's order: a URI or template two picks offer stays with the first.
func (v *View) uris(members map[string]*Lists) (resources, templates []*Item) {
	heldTmpl := map[string]*Item{}
	v.pickTemplates = make([]*mcp.URITemplate, len(v.Server.Resources))
	for i, p := range v.Server.Resources {
		var tmpl *mcp.URITemplate
		if p.URITemplate != "" {
			tmpl = mcp.ParseURITemplate(p.URITemplate)
			v.pickTemplates[i] = tmpl
		}
		l := members[p.Server]
		if l == nil {
			continue
		}
		matched := 0
		for _, raw := range sortedBy(l.Resources, "uri") {
			uri, _ := jsonrpc.StringMember(raw, "uri")
			if uri == "" || !strings.HasPrefix(uri, p.URIPrefix) || tmpl != nil && !tmpl.Match(uri) {
				continue
			}
			matched++
			if held, ok := v.resources[uri]; ok {
				if held.Server != p.Server {
					v.warn(p.Line, "resource %q of %q is left out: %q offers it", uri, p.Server, held.Server)
				}
				continue
			}
			it := &Item{Name: uri, Server: p.Server, Orig: uri, Raw: raw}
			v.resources[uri] = it
			resources = append(resources, it)
		}
		for _, raw := range sortedBy(l.Templates, "uriTemplate") {
			t, _ := jsonrpc.StringMember(raw, "uriTemplate")
			if t == "" || !strings.HasPrefix(t, p.URIPrefix) || tmpl != nil && t != p.URITemplate {
				continue
			}
			matched++
			if held, ok := heldTmpl[t]; ok {
				if held.Server != p.Server {
					v.warn(p.Line, "resource template %q of %q is left out: %q offers it", t, p.Server, held.Server)
				}
				continue
			}
			it := &Item{Name: t, Server: p.Server, Orig: t, Raw: raw, tmpl: mcp.ParseURITemplate(t)}
			heldTmpl[t] = it
			templates = append(templates, it)
		}
		if matched == 0 {
			v.warn(p.Line, "no resource or template of %q matches", p.Server)
		}
	}
	slices.SortFunc(resources, func(a, b *Item) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(templates, func(a, b *Item) int { return cmp.Compare(a.Name, b.Name) })
	return resources, templates
}

// Summary is a view as the dashboard and switchboard://catalog show it:
// each item by its name, with the server and name it leads to.
type Summary struct {
	Name      string        `json:"name"`
	Title     string        `json:"title,omitempty"`
	Discovery Discovery     `json:"discovery"`
	Members   []string      `json:"members"`
	Tools     []SummaryItem `json:"tools"`
	Prompts   []SummaryItem `json:"prompts"`
	Resources []SummaryItem `json:"resources"`
	Templates []SummaryItem `json:"resourceTemplates"`
	Warnings  []Problem     `json:"warnings,omitempty"`
}

// SummaryItem is one item of a Summary.
type SummaryItem struct {
	Name   string   `json:"name"`
	Server string   `json:"server"`
	Orig   string   `json:"orig,omitempty"`  // the server's own name, when it differs
	Fixed  []string `json:"fixed,omitempty"` // the arguments the catalog fixes
}

// Summary returns the view's summary.
func (v *View) Summary() Summary {
	items := func(its []*Item) []SummaryItem {
		out := make([]SummaryItem, 0, len(its))
		for _, it := range its {
			si := SummaryItem{Name: it.Name, Server: it.Server, Fixed: it.fixedKeys}
			if it.Orig != it.Name {
				si.Orig = it.Orig
			}
			out = append(out, si)
		}
		return out
	}
	return Summary{Name: v.Server.Name, Title: v.Server.Title, Discovery: v.Server.Discovery, Members: v.Server.Members(),
		Tools: items(v.Tools), Prompts: items(v.Prompts), Resources: items(v.Resources), Templates: items(v.Templates),
		Warnings: v.Warnings}
}
