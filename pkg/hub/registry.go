package hub

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
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

// renamed reports whether items of the kind are renamed <server><sep><name>.
func (k listKind) renamed() bool { return k == kindTools || k == kindPrompts }

// listItem is one item a server listed.
type listItem struct {
	key    string          // its name, URI or URI template, as the server knows it
	aggKey string          // what clients know it by: <server><sep><name> for tools and prompts
	raw    json.RawMessage // the item as the server sent it
	agg    json.RawMessage // the item as clients see it: renamed and tagged with its server
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
	return listItem{key: key, aggKey: aggKey, raw: raw, agg: o.Raw()}, true
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
	Owner           string             `json:"owner"` // the token it authenticated with

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
	orig     string // what the server names it by
	raw      json.RawMessage
	replicas []*replicaInfo // the server's replicas that offer it
}

type templateEntry struct {
	match  *mcp.URITemplate
	server string
}

// view is one immutable state of the registry: every server on every
// instance, and the aggregated lists. Readers take the current view without
// locking.
type view struct {
	servers map[string][]*replicaInfo // by server name, replicas sorted by ID
	names   []string                  // server names, sorted
	lists   [numKinds][]*aggItem      // each sorted by key
	index   [numKinds]map[string]*aggItem
	tmpl    []templateEntry
	hash    [numKinds]uint64
}

// lookup finds an item of a list by the key clients use.
func (v *view) lookup(k listKind, key string) *aggItem { return v.index[k][key] }

// serverOfURI finds the server of a resource: a listed resource first, then
// the first template (in key order) that matches.
func (v *view) serverOfURI(uri string) (string, bool) {
	if it := v.lookup(kindResources, uri); it != nil {
		return it.server, true
	}
	for _, t := range v.tmpl {
		if t.match.Match(uri) {
			return t.server, true
		}
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

// changed reports which lists differ between two views. Resources and
// templates are one list to clients: both change resources/list_changed.
func (v *view) changed(old *view) (tools, resources, prompts bool) {
	return v.hash[kindTools] != old.hash[kindTools],
		v.hash[kindResources] != old.hash[kindResources] || v.hash[kindTemplates] != old.hash[kindTemplates],
		v.hash[kindPrompts] != old.hash[kindPrompts]
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

func buildView(replicas []*replicaInfo) *view {
	sort.Slice(replicas, func(i, j int) bool {
		if replicas[i].Name != replicas[j].Name {
			return replicas[i].Name < replicas[j].Name
		}
		return replicas[i].ID < replicas[j].ID
	})
	v := &view{servers: map[string][]*replicaInfo{}}
	for k := range numKinds {
		v.index[k] = map[string]*aggItem{}
	}
	for _, ri := range replicas {
		if _, ok := v.servers[ri.Name]; !ok {
			v.names = append(v.names, ri.Name)
		}
		v.servers[ri.Name] = append(v.servers[ri.Name], ri)
	}
	for _, name := range v.names {
		for _, ri := range v.servers[name] {
			for k := range numKinds {
				for _, it := range ri.lists[k] {
					key := it.aggKey
					if a := v.index[k][key]; a != nil {
						if a.server == ri.Name {
							a.replicas = append(a.replicas, ri)
						}
						continue // another server already offers a resource of this URI
					}
					a := &aggItem{key: key, server: ri.Name, orig: it.key, raw: it.agg, replicas: []*replicaInfo{ri}}
					v.index[k][key] = a
					v.lists[k] = append(v.lists[k], a)
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
		h := fnv.New64a()
		for _, a := range v.lists[k] {
			h.Write(a.raw)
			h.Write([]byte{0})
		}
		v.hash[k] = h.Sum64()
	}
	for _, a := range v.lists[kindTemplates] {
		v.tmpl = append(v.tmpl, templateEntry{match: mcp.ParseURITemplate(a.key), server: a.server})
	}
	return v
}
