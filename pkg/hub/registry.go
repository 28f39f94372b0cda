package hub

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// listKind names the four lists a server offers.
type listKind int

const (
	kindTools listKind = iota
	kindResources
	kindTemplates
	kindPrompts
	numKinds
)

// key is the member that identifies an item of the kind.
func (k listKind) key() string {
	switch k {
	case kindResources:
		return "uri"
	case kindTemplates:
		return "uriTemplate"
	}
	return "name"
}

// field is the member of a list result that holds the items.
func (k listKind) field() string {
	return [...]string{"tools", "resources", "resourceTemplates", "prompts"}[k]
}

// method is the list method.
func (k listKind) method() string {
	return [...]string{mcp.MethodToolsList, mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList, mcp.MethodPromptsList}[k]
}

// conflictKind names the kind in a conflict report.
func (k listKind) conflictKind() string {
	return [...]string{"tool", "resource", "resourceTemplate", "prompt"}[k]
}

// renamed reports whether items of the kind are renamed <server><sep><name>.
func (k listKind) renamed() bool { return k == kindTools || k == kindPrompts }

// listItem is one item a server listed.
type listItem struct {
	key    string           // its name, URI or URI template, as the server knows it
	aggKey string           // what clients know it by: <server><sep><name> for tools and prompts
	raw    json.RawMessage  // the item as the server sent it
	agg    json.RawMessage  // the item as clients see it: renamed and tagged with its server
	tmpl   *mcp.URITemplate // a template's, compiled once when it is listed
}

// newListItem prepares an item for aggregation; it returns false for an
// item without its key.
func newListItem(k listKind, server, sep string, raw json.RawMessage) (listItem, bool) {
	o, err := mcp.ParseObject(raw)
	if err != nil {
		return listItem{}, false
	}
	key, ok := o.String(k.key())
	if !ok || key == "" {
		return listItem{}, false
	}
	aggKey := key
	if k.renamed() {
		aggKey = server + sep + key
		o.Set("name", aggKey)
	}
	o.SetMeta(mcp.MetaServer, server)
	it := listItem{key: key, aggKey: aggKey, raw: raw, agg: o.Raw()}
	if k == kindTemplates {
		it.tmpl = mcp.ParseURITemplate(key)
	}
	return it, true
}

// replicaInfo describes one connection of a server, on this instance or on
// another. It is immutable once published in a view.
type replicaInfo struct {
	ID              string             `json:"id"`
	Name            string             `json:"name"`
	Instance        string             `json:"instance"`
	ServerInfo      mcp.Implementation `json:"serverInfo"`
	ProtocolVersion string             `json:"protocolVersion"`
	ConnectedAt     time.Time          `json:"connectedAt"`
	Owner           string             `json:"owner,omitempty"` // the token it authenticated with
	// Capabilities and Instructions are what the server answered to
	// initialize, for its own endpoint (/servers/<name>/mcp).
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	Instructions string          `json:"instructions,omitempty"`

	lists    [numKinds][]listItem
	local    *replica      // nil when the replica is on another instance
	inflight *atomic.Int64 // calls this instance has in flight to it
}

// olderThan orders replicas by connection time, then ID: the order in
// which every instance picks a coordinator alike.
func (ri *replicaInfo) olderThan(o *replicaInfo) bool {
	if !ri.ConnectedAt.Equal(o.ConnectedAt) {
		return ri.ConnectedAt.Before(o.ConnectedAt)
	}
	return ri.ID < o.ID
}

// aggItem is one item of an aggregated list.
type aggItem struct {
	key      string // what clients name it by: aggregated name, URI or template
	server   string
	orig     string          // what the server names it by
	raw      json.RawMessage // as clients of the whole hub see it
	own      json.RawMessage // as the server sent it, for its own endpoint
	rank     int             // its server's place in registration order
	replicas []*replicaInfo  // the server's replicas that offer it
	tmpl     *mcp.URITemplate
}

// conflict is an item a server listed that the hub does not serve, because
// an earlier server offers it (first registered keeps it).
type conflict struct {
	Kind    string `json:"kind"` // "resource" or "resourceTemplate"
	Key     string `json:"key"`  // the URI or template
	Kept    string `json:"kept"` // the server that serves it
	Refused string `json:"refused"`
}

// serverLists are one server's items as it named them, for its own
// endpoint.
type serverLists struct {
	lists [numKinds][]*aggItem // sorted by the server's own keys
	hash  [numKinds]uint64
}

// view is one immutable state of the registry: every server on every
// instance, and the aggregated lists. Readers take the current view without
// locking.
type view struct {
	servers   map[string][]*replicaInfo // by server name, replicas sorted by ID
	names     []string                  // server names, sorted
	lists     [numKinds][]*aggItem      // each sorted by key
	index     [numKinds]map[string]*aggItem
	own       map[string]*serverLists
	templates templateIndex
	hash      [numKinds]uint64
	conflicts []conflict
}

// lookup finds an item of a list by the key clients use.
func (v *view) lookup(k listKind, key string) *aggItem { return v.index[k][key] }

// serverOfURI finds the server of a resource: a listed resource first, then
// the template of the earliest registered server that matches it.
func (v *view) serverOfURI(uri string) (string, bool) {
	if it := v.lookup(kindResources, uri); it != nil {
		return it.server, true
	}
	if it := v.templates.match(uri); it != nil {
		return it.server, true
	}
	return "", false
}

// replicasForURI returns the replicas of server that can serve uri.
func (v *view) replicasForURI(server, uri string) []*replicaInfo {
	if it := v.lookup(kindResources, uri); it != nil && it.server == server {
		return it.replicas
	}
	return v.servers[server]
}

// changed returns the list_changed notifications that tell a client of
// the whole hub (scope "") or of one server how its lists differ between
// two views. Resources and templates are one list to clients: both change
// resources/list_changed.
func (v *view) changed(old *view, scope string) []string {
	cur, prev := v.hash, old.hash
	if scope != "" {
		cur, prev = [numKinds]uint64{}, [numKinds]uint64{}
		if sl := v.own[scope]; sl != nil {
			cur = sl.hash
		}
		if sl := old.own[scope]; sl != nil {
			prev = sl.hash
		}
	}
	var methods []string
	if cur[kindTools] != prev[kindTools] {
		methods = append(methods, mcp.NotificationToolsListChanged)
	}
	if cur[kindResources] != prev[kindResources] || cur[kindTemplates] != prev[kindTemplates] {
		methods = append(methods, mcp.NotificationResourcesListChanged)
	}
	if cur[kindPrompts] != prev[kindPrompts] {
		methods = append(methods, mcp.NotificationPromptsListChanged)
	}
	return methods
}

// templateIndex finds the template that serves a URI without trying every
// template: templates are grouped by the scheme of their literal prefix,
// and each group keeps registration order.
type templateIndex struct {
	byScheme map[string][]*aggItem
}

// uriScheme returns what comes before "://" ("" when there is none).
func uriScheme(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		return s[:i]
	}
	return ""
}

func (ti *templateIndex) add(it *aggItem) {
	if ti.byScheme == nil {
		ti.byScheme = map[string][]*aggItem{}
	}
	scheme := uriScheme(it.tmpl.Literal())
	ti.byScheme[scheme] = append(ti.byScheme[scheme], it)
}

// match returns the template of the earliest registered server that
// matches uri, or nil.
func (ti *templateIndex) match(uri string) *aggItem {
	var best *aggItem
	for _, bucket := range [2][]*aggItem{ti.byScheme[uriScheme(uri)], ti.byScheme[""]} {
		for _, it := range bucket {
			if best != nil && it.rank >= best.rank {
				break // the rest of the bucket came later
			}
			if strings.HasPrefix(uri, it.tmpl.Literal()) && it.tmpl.Match(uri) {
				best = it
				break
			}
		}
	}
	return best
}

// registry holds the replicas of every server, local and remote, and
// rebuilds the view whenever they change.
type registry struct {
	mu       sync.Mutex
	local    map[string]*replicaInfo            // by replica ID
	remote   map[string]map[string]*replicaInfo // by instance, then replica ID
	inflight map[string]*atomic.Int64           // per remote replica ID, kept across snapshots
	cur      atomic.Pointer[view]
	onChange func(old, cur *view) // called under mu, in order; must not block
}

func newRegistry(onChange func(old, cur *view)) *registry {
	r := &registry{
		local:    map[string]*replicaInfo{},
		remote:   map[string]map[string]*replicaInfo{},
		inflight: map[string]*atomic.Int64{},
		onChange: onChange,
	}
	r.cur.Store(buildView(nil))
	return r
}

func (r *registry) view() *view { return r.cur.Load() }

// setLocal adds or replaces a local replica. A new replica may not take a
// name that replicas of another owner (token) hold, anywhere in the cluster
// as far as this instance knows (the name's lease, names.go, settles races
// between instances).
func (r *registry) setLocal(ri *replicaInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, known := r.local[ri.ID]; !known {
		for _, other := range r.cur.Load().servers[ri.Name] {
			if other.Owner != ri.Owner {
				return fmt.Errorf("server name %q is held by another token", ri.Name)
			}
		}
	}
	r.local[ri.ID] = ri
	r.rebuildLocked()
	return nil
}

// removeLocal removes a local replica; it reports whether it was there.
func (r *registry) removeLocal(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.local[id]; !ok {
		return false
	}
	delete(r.local, id)
	r.rebuildLocked()
	return true
}

// localInfo returns a local replica's entry (nil when it is not there).
func (r *registry) localInfo(id string) *replicaInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.local[id]
}

// localReplicas returns the local replicas, sorted by ID.
func (r *registry) localReplicas() []*replicaInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*replicaInfo, 0, len(r.local))
	for _, ri := range r.local {
		out = append(out, ri)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// setRemote replaces what an instance reported (nil removes it).
func (r *registry) setRemote(instance string, replicas []*replicaInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if replicas == nil {
		if _, ok := r.remote[instance]; !ok {
			return
		}
		for id := range r.remote[instance] {
			delete(r.inflight, id)
		}
		delete(r.remote, instance)
	} else {
		m := make(map[string]*replicaInfo, len(replicas))
		for _, ri := range replicas {
			c := r.inflight[ri.ID]
			if c == nil {
				c = new(atomic.Int64)
				r.inflight[ri.ID] = c
			}
			ri.inflight = c
			m[ri.ID] = ri
		}
		for id := range r.remote[instance] {
			if m[id] == nil {
				delete(r.inflight, id)
			}
		}
		r.remote[instance] = m
	}
	r.rebuildLocked()
}

func (r *registry) rebuildLocked() {
	var all []*replicaInfo
	for _, ri := range r.local {
		all = append(all, ri)
	}
	for _, m := range r.remote {
		for _, ri := range m {
			all = append(all, ri)
		}
	}
	old := r.cur.Load()
	v := buildView(all)
	r.cur.Store(v)
	if r.onChange != nil {
		r.onChange(old, v)
	}
}

// buildView aggregates every replica's lists. Servers are taken in the
// order they registered (their oldest replica's connection time): a URI or
// template two servers list is served by the first, and a resource that an
// earlier server's template covers too stays with that server. A later
// server never takes over another's resources; what it loses is recorded
// in conflicts.
func buildView(replicas []*replicaInfo) *view {
	sort.Slice(replicas, func(i, j int) bool {
		if replicas[i].Name != replicas[j].Name {
			return replicas[i].Name < replicas[j].Name
		}
		return replicas[i].ID < replicas[j].ID
	})
	v := &view{servers: map[string][]*replicaInfo{}, own: map[string]*serverLists{}}
	for k := range numKinds {
		v.index[k] = map[string]*aggItem{}
	}
	first := map[string]*replicaInfo{}
	for _, ri := range replicas {
		if _, ok := v.servers[ri.Name]; !ok {
			v.names = append(v.names, ri.Name)
		}
		v.servers[ri.Name] = append(v.servers[ri.Name], ri)
		if f := first[ri.Name]; f == nil || ri.olderThan(f) {
			first[ri.Name] = ri
		}
	}
	order := append([]string(nil), v.names...)
	sort.SliceStable(order, func(i, j int) bool { return first[order[i]].olderThan(first[order[j]]) })
	for rank, name := range order {
		sl := &serverLists{}
		v.own[name] = sl
		for _, ri := range v.servers[name] {
			for k := range numKinds {
				for _, it := range ri.lists[k] {
					if a := v.index[k][it.aggKey]; a != nil {
						if a.server == name {
							a.replicas = append(a.replicas, ri)
						} else {
							v.refuse(k, it.aggKey, a.server, name)
						}
						continue
					}
					if k == kindResources {
						if t := v.templates.match(it.key); t != nil && t.server != name {
							v.refuse(k, it.key, t.server, name)
							continue
						}
					}
					a := &aggItem{key: it.aggKey, server: name, orig: it.key, raw: it.agg, own: it.raw, rank: rank,
						replicas: []*replicaInfo{ri}, tmpl: it.tmpl}
					v.index[k][it.aggKey] = a
					v.lists[k] = append(v.lists[k], a)
					sl.lists[k] = append(sl.lists[k], a)
					if k == kindTemplates {
						v.templates.add(a)
					}
				}
			}
		}
	}
	for _, it := range builtinItems {
		v.index[kindResources][it.key] = it
		v.lists[kindResources] = append(v.lists[kindResources], it)
	}
	for k := range numKinds {
		sort.Slice(v.lists[k], func(i, j int) bool { return v.lists[k][i].key < v.lists[k][j].key })
		v.hash[k] = hashItems(v.lists[k], func(a *aggItem) []byte { return a.raw })
	}
	for _, sl := range v.own {
		for k := range numKinds {
			sort.Slice(sl.lists[k], func(i, j int) bool { return sl.lists[k][i].orig < sl.lists[k][j].orig })
			sl.hash[k] = hashItems(sl.lists[k], func(a *aggItem) []byte { return a.own })
		}
	}
	sort.Slice(v.conflicts, func(i, j int) bool {
		a, b := v.conflicts[i], v.conflicts[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Refused < b.Refused
	})
	return v
}

// refuse records that server does not get key, which kept serves (once,
// however many of its replicas list it).
func (v *view) refuse(k listKind, key, kept, server string) {
	c := conflict{Kind: k.conflictKind(), Key: key, Kept: kept, Refused: server}
	if !slices.Contains(v.conflicts, c) {
		v.conflicts = append(v.conflicts, c)
	}
}

func hashItems(items []*aggItem, raw func(*aggItem) []byte) uint64 {
	h := fnv.New64a()
	for _, a := range items {
		h.Write(raw(a))
		h.Write([]byte{0})
	}
	return h.Sum64()
}
