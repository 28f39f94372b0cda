package hub

import (
	"encoding/json"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/switchboard-mcp/switchboard/internal/search"
	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// What the catalog makes of a view of the registry: each virtual server's
// effective lists, the aggregate's names under the catalog's policy, and
// the search indexes. It is computed with the view (deriveCatalog runs
// under registry.mu, before the view is swapped in) and is part of it
// (view.cat), so that a view and what the catalog makes of it are always
// read together: a session's lists, its list_changed and its calls agree.
// A change of the catalog itself makes a new view of the same servers
// (registry.reannounce).

// catalogView is what the catalog makes of one view. A nil *catalogView
// is no catalog and the list mode: the view's own lists, as before any
// catalog.
type catalogView struct {
	source  *loadedCatalog           // the catalog in force; nil when there is none
	virtual map[string]*virtualLists // each virtual server's lists, by name
	names   *namedLists              // the aggregate's names under the catalog's policy; nil for the default (prefix)
	search  *toolIndex               // the aggregate's search index, in search mode; nil in list mode
}

// virtualLists are one virtual server's lists in one view.
type virtualLists struct {
	vs    *catalog.VirtualServer
	view  *catalog.View
	lists [numKinds][]*aggItem // as its endpoint lists them: sorted by effective name (orig)
	hash  [numKinds]uint64
	// search is its index in search mode (then tools/list lists the
	// meta-tools); nil in list mode.
	search *toolIndex
	// clash: a real server has its name (it registered while the catalog
	// came, on another instance): the real one is served, this one is not.
	clash bool
	sums  map[string][numKinds]uint64 // the members' own lists it was built from
}

// namedLists are the aggregate's tools and prompts under a naming policy.
type namedLists struct {
	lists [numKinds][]*aggItem          // tools and prompts, sorted by listed name
	index [numKinds]map[string]*aggItem // by listed name
	hash  [numKinds]uint64
	names [numKinds]*catalog.Names // for switchboard://catalog: the names and their conflicts
}

// virtualOf returns the lists of the virtual server scope, or nil when
// scope is no virtual server (the aggregate, a real server, or a virtual
// server that a real one's name hides).
func (v *view) virtualOf(scope string) *virtualLists {
	if scope == "" || v.cat == nil {
		return nil
	}
	vl := v.cat.virtual[scope]
	if vl == nil || vl.clash {
		return nil
	}
	return vl
}

// isVirtual reports whether name is a virtual server's in the catalog in
// force, connected members or not.
func (v *view) isVirtual(name string) bool { return v.virtualOf(name) != nil }

// searching reports whether the endpoint of scope is in search mode: its
// tools/list offers the meta-tools.
func (v *view) searching(scope string) bool {
	if scope == "" {
		return v.cat != nil && v.cat.search != nil
	}
	vl := v.virtualOf(scope)
	return vl != nil && vl.search != nil
}

// listOf returns the list of kind k of the endpoint of scope, before the
// principal's filter: the aggregate's (under its naming policy, or the
// meta-tools in search mode), a virtual server's, or a real server's own.
func (v *view) listOf(scope string, k listKind) []*aggItem {
	if scope == "" {
		switch {
		case k == kindTools && v.searching(""):
			return aggregateMeta
		case v.cat != nil && v.cat.names != nil && k.renamed():
			return v.cat.names.lists[k]
		}
		return v.lists[k]
	}
	if vl := v.virtualOf(scope); vl != nil {
		if k == kindTools && vl.search != nil {
			return virtualMeta
		}
		return vl.lists[k]
	}
	if sl := v.own[scope]; sl != nil {
		return sl.lists[k]
	}
	return nil
}

// hashes returns the hashes of the endpoint's lists, which say when a
// list_changed is owed: the aggregate's, a virtual server's or a real
// server's own (all zero for an endpoint that has nothing).
func (v *view) hashes(scope string) [numKinds]uint64 {
	var hs [numKinds]uint64
	switch vl := v.virtualOf(scope); {
	case scope == "":
		hs = v.hash
		if v.cat != nil && v.cat.names != nil {
			hs[kindTools], hs[kindPrompts] = v.cat.names.hash[kindTools], v.cat.names.hash[kindPrompts]
		}
		if v.searching("") {
			hs[kindTools] = metaHash
		}
	case vl != nil:
		hs = vl.hash
	default:
		if sl := v.own[scope]; sl != nil {
			hs = sl.hash
		}
	}
	return hs
}

// canonical returns the aggregated name <server><sep><name> of a tool or
// prompt the aggregate lists as name: under a naming policy a listed name
// may be bare or an alias. Any other name is returned as it is.
func (v *view) canonical(k listKind, name string) string {
	if v.cat == nil || v.cat.names == nil {
		return name
	}
	if it := v.cat.names.index[k][name]; it != nil {
		return it.canon
	}
	return name
}

// The meta-tools of search mode as list items: on the aggregate tagged as
// the hub's own, on a virtual server as it lists its tools, untagged. Their
// server is the hub's, so that every principal sees them (who may call
// them is checked at the call).
var (
	aggregateMeta, virtualMeta = metaItems()
	metaHash                   = hashItems(aggregateMeta, func(a *aggItem) []byte { return a.raw })
)

func metaItems() (agg, virtual []*aggItem) {
	for _, t := range catalog.MetaTools() {
		own, _ := json.Marshal(t)
		t.Meta = mcp.Meta{mcp.MetaServer: reservedName}
		raw, _ := json.Marshal(t)
		agg = append(agg, &aggItem{key: t.Name, server: reservedName, orig: t.Name, raw: raw, own: own})
		virtual = append(virtual, &aggItem{key: t.Name, server: reservedName, orig: t.Name, raw: own, own: own})
	}
	return agg, virtual
}

// deriveCatalog computes what the catalog makes of cur (the view about to
// be swapped in; old is the one before it). It runs under registry.mu, so
// that views and their indexes change in order. What did not change is
// kept: a virtual server whose members' lists are as they were keeps its
// lists, and the search indexes are updated one server at a time.
func (h *Hub) deriveCatalog(old, cur *view) {
	src := h.catalog.current()
	searchAll := h.cfg.Discovery == catalog.DiscoverySearch
	if src == nil && !searchAll {
		return
	}
	prev := old.cat
	if prev == nil {
		prev = &catalogView{}
	}
	sep := h.cfg.Separator
	cv := &catalogView{source: src}
	if src != nil {
		cv.names = namesUnder(src.cat.Aggregate, cur, sep)
		cv.virtual = make(map[string]*virtualLists, len(src.cat.VirtualServers))
		for _, vs := range src.cat.VirtualServers {
			cv.virtual[vs.Name] = virtualListsOf(vs, cur, prev.virtual[vs.Name], sep)
		}
	}
	if searchAll {
		cv.search = prev.search
		if cv.search == nil {
			cv.search = newToolIndex()
		}
		tools := cur.lists[kindTools]
		if cv.names != nil {
			tools = cv.names.lists[kindTools]
		}
		cv.search.update(tools, func(it *aggItem) string { return it.key })
	}
	cur.cat = cv
}

// virtualListsOf computes a virtual server's lists in view v; was is what
// they were in the view before, kept when neither the virtual server nor
// its members' lists changed.
func virtualListsOf(vs *catalog.VirtualServer, v *view, was *virtualLists, sep string) *virtualLists {
	sums := map[string][numKinds]uint64{}
	for _, m := range vs.Members() {
		if sl := v.own[m]; sl != nil {
			sums[m] = sl.hash
		}
	}
	clash := len(v.servers[vs.Name]) > 0
	if was != nil && was.vs == vs && was.clash == clash && maps.Equal(was.sums, sums) {
		return was
	}
	members := map[string]*catalog.Lists{}
	for m := range sums {
		sl, l := v.own[m], &catalog.Lists{}
		for k, dst := range map[listKind]*[]json.RawMessage{kindTools: &l.Tools, kindPrompts: &l.Prompts, kindResources: &l.Resources, kindTemplates: &l.Templates} {
			for _, it := range sl.lists[k] {
				*dst = append(*dst, it.own)
			}
		}
		members[m] = l
	}
	vl := &virtualLists{vs: vs, view: catalog.Build(vs, members), clash: clash, sums: sums}
	if clash {
		vl.view.Warnings = append(vl.view.Warnings, catalog.Problem{Line: vs.Line,
			Message: "virtual server \"" + vs.Name + "\": a real server has the name; the real server is served"})
	}
	for k, items := range map[listKind][]*catalog.Item{kindTools: vl.view.Tools, kindPrompts: vl.view.Prompts,
		kindResources: vl.view.Resources, kindTemplates: vl.view.Templates} {
		out := make([]*aggItem, len(items))
		for i, it := range items {
			a := &aggItem{key: it.Name, server: it.Server, orig: it.Name, raw: it.Raw, own: it.Raw, via: vs.Name}
			if k.renamed() {
				a.key = vs.Name + sep + it.Name // what tokens name it by
			}
			if k == kindTemplates {
				a.tmpl = mcp.ParseURITemplate(it.Name)
			}
			out[i] = a
		}
		vl.lists[k] = out
		vl.hash[k] = hashItems(out, func(a *aggItem) []byte { return a.own })
	}
	if vs.Discovery == catalog.DiscoverySearch {
		vl.hash[kindTools] = metaHash
		if was != nil && was.search != nil {
			vl.search = was.search
		} else {
			vl.search = newToolIndex()
		}
		vl.search.update(vl.lists[kindTools], func(it *aggItem) string { return it.orig })
	}
	return vl
}

// namesUnder names the aggregate's tools and prompts under policy p; nil
// for the default policy, under which the view's own lists (every name
// prefixed) are the aggregate's.
func namesUnder(p *catalog.Policy, v *view, sep string) *namedLists {
	if p == nil {
		return nil
	}
	nl := &namedLists{}
	for _, k := range []listKind{kindTools, kindPrompts} {
		refs := make([]catalog.Ref, 0, len(v.lists[k]))
		byRef := make(map[catalog.Ref]*aggItem, len(v.lists[k]))
		for _, it := range v.lists[k] {
			r := catalog.Ref{Server: it.server, Name: it.orig}
			refs = append(refs, r)
			byRef[r] = it
		}
		names := p.Tools(sep, refs)
		if k == kindPrompts {
			names = p.Prompts(sep, refs)
		}
		nl.names[k] = names
		nl.index[k] = map[string]*aggItem{}
		for _, a := range names.List() {
			it := byRef[a.Ref]
			c := *it
			c.key, c.canon = a.Listed, it.key
			if a.Listed != it.key {
				if o, err := mcp.ParseObject(it.raw); err == nil {
					o.Set("name", a.Listed)
					c.raw = o.Raw()
				}
			}
			nl.lists[k] = append(nl.lists[k], &c)
			nl.index[k][a.Listed] = &c
		}
		nl.hash[k] = hashItems(nl.lists[k], func(a *aggItem) []byte { return a.raw })
	}
	return nl
}

// toolIndex is a search index over the tools of one endpoint, one segment
// per server, and what each server's segment was built from: a change
// re-indexes the servers whose tools changed, and no other. Its update
// runs under registry.mu only; searches read the index without a lock.
type toolIndex struct {
	idx  *search.Index
	sums map[string]uint64 // each server's tools as indexed: their names and definitions
}

func newToolIndex() *toolIndex { return &toolIndex{idx: search.New(), sums: map[string]uint64{}} }

// update indexes items (tools, by name(it) as the endpoint calls them):
// the servers whose tools changed are indexed anew, those gone removed.
func (ti *toolIndex) update(items []*aggItem, name func(*aggItem) string) {
	byServer := map[string][]*aggItem{}
	for _, it := range items {
		byServer[it.server] = append(byServer[it.server], it)
	}
	for server := range ti.sums {
		if byServer[server] == nil {
			ti.idx.RemoveServer(server)
			delete(ti.sums, server)
		}
	}
	for _, server := range slices.Sorted(maps.Keys(byServer)) {
		its := byServer[server]
		h := fnv.New64a()
		for _, it := range its {
			h.Write([]byte(name(it)))
			h.Write([]byte{0})
			h.Write(it.own)
			h.Write([]byte{0})
		}
		sum := h.Sum64()
		if was, ok := ti.sums[server]; ok && was == sum {
			continue
		}
		ti.sums[server] = sum
		tools := make([]search.Tool, len(its))
		for i, it := range its {
			tools[i] = searchTool(name(it), server, it.own)
		}
		ti.idx.SetServer(server, tools)
	}
}

// searchTool is a tool's definition as the index reads it.
func searchTool(name, server string, raw json.RawMessage) search.Tool {
	t := search.Tool{Name: name, Server: server}
	t.Title, _ = jsonrpc.StringMember(raw, "title")
	t.Description, _ = jsonrpc.StringMember(raw, "description")
	t.InputSchema, _ = jsonrpc.Member(raw, "inputSchema")
	return t
}
