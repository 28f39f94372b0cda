package hub

import (
	"encoding/json"
	"hash/fnv"
	"maps"
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
	// Since is when its server registered, which ranks it among servers
	// (who keeps a URI): its first replica's connection time, handed down
	// to every replica that joins while one is connected, or that comes
	// back within the ReservationPeriod (registry_departures.go).
	Since time.Time `json:"since"`
	Owner string    `json:"owner,omitempty"` // the token it authenticated with
	// Capabilities and Instructions are what the server answered to
	// initialize, for its own endpoint (/servers/<name>/mcp).
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	Instructions string          `json:"instructions,omitempty"`
	// Leased: the replica serves one client's calls at a time, since its
	// requests to clients do not name their call (routing_lease.go).
	Leased bool `json:"leased,omitempty"`

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

// since returns when the replica's server registered (its connection time
// for a replica of an instance that does not say).
func (ri *replicaInfo) since() time.Time {
	if ri.Since.IsZero() {
		return ri.ConnectedAt
	}
	return ri.Since
}

// rankedBefore orders replicas by when their server registered, then ID:
// the order in which servers are taken, alike on every instance.
func (ri *replicaInfo) rankedBefore(o *replicaInfo) bool {
	if a, b := ri.since(), o.since(); !a.Equal(b) {
		return a.Before(b)
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
	owner    string // its server's token
	// canon is the name tokens check, where it is not key: the aggregated
	// <server><sep><name> of a tool or prompt the catalog's policy lists
	// bare or under an alias (registry_catalog.go).
	canon string
	// via is the virtual server that offers it, whose name tokens check
	// for its resources ("" on a real server's list).
	via string
	// reserved marks the URI or template of a server that left and keeps
	// its place (registry_departures.go): indexed, so that no one else serves it,
	// but in no list, and with no replica to serve it.
	reserved bool
}

// conflict is an item a server listed that the hub does not serve, because
// an earlier server offers it, or one of another token overlaps it (first
// registered keeps it), or a server that left keeps it reserved.
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
	reserved  []*reservation // the places kept for servers that left
	gen       uint64         // counts views: a later view has a larger one
	cat       *catalogView   // what the catalog makes of it (registry_catalog.go); nil without one
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
// the endpoint of scope (the whole hub's for "", a real or a virtual
// server's) how its lists differ between two views. Resources and
// templates are one list to clients: both change resources/list_changed.
func (v *view) changed(old *view, scope string) []string {
	cur, prev := v.hashes(scope), old.hashes(scope)
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

// registry holds the replicas of every server, local and remote, and the
// places kept for servers that left, and rebuilds the view whenever they
// change.
type registry struct {
	mu             sync.Mutex
	local          map[string]*replicaInfo            // by replica ID
	remote         map[string]map[string]*replicaInfo // by instance, then replica ID
	inflight       map[string]*atomic.Int64           // per remote replica ID, kept across snapshots
	period         time.Duration                      // how long a server that left keeps its place; 0: not at all
	reserved       map[string]*reservation            // the places this instance saw left, by server name
	remoteReserved map[string][]*reservation          // those other instances published, by instance
	cur            atomic.Pointer[view]
	// derive completes a view before it is swapped in: what the catalog
	// makes of it (registry_catalog.go). Called under mu, in order.
	derive   func(old, cur *view)
	onChange func(old, cur *view) // called under mu, in order; must not block
}

func newRegistry(period time.Duration, onChange func(old, cur *view)) *registry {
	r := &registry{
		local:          map[string]*replicaInfo{},
		remote:         map[string]map[string]*replicaInfo{},
		inflight:       map[string]*atomic.Int64{},
		period:         max(period, 0),
		reserved:       map[string]*reservation{},
		remoteReserved: map[string][]*reservation{},
		onChange:       onChange,
	}
	r.cur.Store(buildView(nil, nil))
	return r
}

func (r *registry) view() *view { return r.cur.Load() }

// setLocal adds or replaces a local replica. A new replica may not take a
// name that replicas of another owner (token) hold, anywhere in the cluster
// as far as this instance knows (the name's lease, registry_names.go, settles races
// between instances), nor one kept for a server of another owner that
// left. It takes its server's rank: that of the replicas already there, or
// of the place kept for it.
func (r *registry) setLocal(ri *replicaInfo) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := *ri // the registry's own: the caller's may be read meanwhile
	if known := r.local[ri.ID]; known != nil {
		c.Since = known.Since
	} else {
		v := r.cur.Load()
		for _, other := range v.servers[ri.Name] {
			if other.Owner != ri.Owner {
				return errNameHeld(ri.Name)
			}
			if other.since().Before(c.since()) {
				c.Since = other.since()
			}
		}
		if res := v.reservation(ri.Name); res != nil {
			if res.Owner != ri.Owner {
				return errNameReserved(ri.Name)
			}
			if res.Since.Before(c.since()) {
				c.Since = res.Since
			}
		}
	}
	r.local[ri.ID] = &c
	r.rebuildLocked()
	return nil
}

// checkName reports whether a server of owner may take name now, as far
// as this instance knows: before the hub claims the name's lease for it.
func (r *registry) checkName(name, owner string) error {
	v := r.view()
	for _, other := range v.servers[name] {
		if other.Owner != owner {
			return errNameHeld(name)
		}
	}
	if res := v.reservation(name); res != nil && res.Owner != owner {
		return errNameReserved(name)
	}
	return nil
}

// reservation returns the place kept for a server called name, if any.
func (v *view) reservation(name string) *reservation {
	for _, res := range v.reserved {
		if res.Name == name {
			return res
		}
	}
	return nil
}

// localReservations returns the places this instance keeps, for its
// snapshot.
func (r *registry) localReservations() []*reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*reservation, 0, len(r.reserved))
	for _, res := range r.reserved {
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// expire gives up the places whose time is over at now.
func (r *registry) expire(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, res := range r.reserved {
		if !res.Until.After(now) {
			delete(r.reserved, name)
		}
	}
	for instance, set := range r.remoteReserved {
		r.remoteReserved[instance] = slices.DeleteFunc(set, func(res *reservation) bool { return !res.Until.After(now) })
	}
	for _, res := range r.cur.Load().reserved {
		if !res.Until.After(now) {
			r.rebuildLocked()
			return
		}
	}
}

// localReplica finds a connected local replica by ID.
func (r *registry) localReplica(id string) *replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ri := r.local[id]; ri != nil {
		return ri.local
	}
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

// setRemote replaces what an instance reported: its replicas (nil removes
// the instance) and the places it keeps for servers that left.
func (r *registry) setRemote(instance string, replicas []*replicaInfo, reserved []*reservation) {
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
		delete(r.remoteReserved, instance)
	} else {
		r.remoteReserved[instance] = reserved
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
	live := map[string][]*replicaInfo{}
	for _, ri := range r.local {
		all = append(all, ri)
		live[ri.Name] = append(live[ri.Name], ri)
	}
	for _, m := range r.remote {
		for _, ri := range m {
			all = append(all, ri)
			live[ri.Name] = append(live[ri.Name], ri)
		}
	}
	old := r.cur.Load()
	now := time.Now()
	if r.period > 0 {
		// A server that leaves the view keeps its place, in the same
		// change; one that is back has taken it.
		for name := range old.servers {
			if len(live[name]) == 0 {
				if res := reserve(old, name, now.Add(r.period)); res != nil {
					r.reserved[name] = res
				}
			}
		}
		for name := range r.reserved {
			if len(live[name]) > 0 {
				delete(r.reserved, name)
			}
		}
		for len(r.reserved) > maxReservations {
			var oldest *reservation
			for _, res := range r.reserved {
				if oldest == nil || res.Until.Before(oldest.Until) {
					oldest = res
				}
			}
			delete(r.reserved, oldest.Name)
		}
	}
	sets := [][]*reservation{slices.Collect(maps.Values(r.reserved))}
	for _, set := range r.remoteReserved {
		sets = append(sets, set)
	}
	v := buildView(all, activeReservations(sets, live, now))
	r.swapLocked(old, v)
}

// swapLocked makes v, the view after old, the current one: completed
// (derive), swapped in, and announced (onChange).
func (r *registry) swapLocked(old, v *view) {
	v.gen = old.gen + 1
	if r.derive != nil {
		r.derive(old, v)
	}
	r.cur.Store(v)
	if r.onChange != nil {
		r.onChange(old, v)
	}
}

// reannounce makes a new view of the same servers, for a change that is
// not theirs (the catalog's): derived again, and announced, so that
// clients hear of the lists that changed.
func (r *registry) reannounce() {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.cur.Load()
	v := *old
	v.cat = nil
	r.swapLocked(old, &v)
}

// buildView aggregates every replica's lists. Servers are taken in the
// order they registered (Since), and so are the places kept for servers
// that left: a URI or template two servers list is served by the first; a
// resource that an earlier server's template covers stays with that
// server; a template that overlaps a template of an earlier server of
// another token is not served either. A later server never takes over
// another's resources; what it loses is recorded in conflicts.
func buildView(replicas []*replicaInfo, reserved []*reservation) *view {
	sort.Slice(replicas, func(i, j int) bool {
		if replicas[i].Name != replicas[j].Name {
			return replicas[i].Name < replicas[j].Name
		}
		return replicas[i].ID < replicas[j].ID
	})
	v := &view{servers: map[string][]*replicaInfo{}, own: map[string]*serverLists{}, reserved: reserved}
	for k := range numKinds {
		v.index[k] = map[string]*aggItem{}
	}
	first := map[string]*replicaInfo{}
	for _, ri := range replicas {
		if _, ok := v.servers[ri.Name]; !ok {
			v.names = append(v.names, ri.Name)
		}
		v.servers[ri.Name] = append(v.servers[ri.Name], ri)
		if f := first[ri.Name]; f == nil || ri.rankedBefore(f) {
			first[ri.Name] = ri
		}
	}
	// The order of servers, and of the places kept for those that left.
	type place struct {
		name  string
		since time.Time
		res   *reservation
	}
	places := make([]place, 0, len(v.names)+len(reserved))
	for _, name := range v.names {
		places = append(places, place{name: name, since: first[name].since()})
	}
	for _, res := range reserved {
		places = append(places, place{name: res.Name, since: res.Since, res: res})
	}
	sort.SliceStable(places, func(i, j int) bool {
		a, b := places[i], places[j]
		if !a.since.Equal(b.since) {
			return a.since.Before(b.since)
		}
		if a.res == nil && b.res == nil {
			return first[a.name].ID < first[b.name].ID
		}
		return a.name < b.name
	})
	var claims templateClaims
	for rank, p := range places {
		if p.res != nil {
			v.keep(p.res, rank, &claims)
			continue
		}
		name, owner := p.name, first[p.name].Owner
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
					switch k {
					case kindResources:
						if t := v.templates.match(it.key); t != nil && t.server != name {
							v.refuse(k, it.key, t.server, name)
							continue
						}
					case kindTemplates:
						if kept, ok := claims.overlap(it.tmpl.Literal(), owner); ok {
							v.refuse(k, it.key, kept, name)
							continue
						}
						claims.add(it.tmpl.Literal(), owner, name)
					}
					a := &aggItem{key: it.aggKey, server: name, orig: it.key, raw: it.agg, own: it.raw, rank: rank,
						replicas: []*replicaInfo{ri}, tmpl: it.tmpl, owner: owner}
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

// keep holds the place of a server that left: what it served, and no one
// else has taken meanwhile, is indexed as its, with no replica to serve it
// and in no list.
func (v *view) keep(res *reservation, rank int, claims *templateClaims) {
	for _, uri := range res.Resources {
		if v.index[kindResources][uri] != nil || v.templates.match(uri) != nil {
			continue
		}
		v.index[kindResources][uri] = &aggItem{key: uri, server: res.Name, orig: uri, rank: rank, owner: res.Owner, reserved: true}
	}
	for i, t := range res.Templates {
		tmpl := res.tmpls[i]
		if v.index[kindTemplates][t] != nil || tmpl == nil {
			continue
		}
		if _, ok := claims.overlap(tmpl.Literal(), res.Owner); ok {
			continue
		}
		claims.add(tmpl.Literal(), res.Owner, res.Name)
		a := &aggItem{key: t, server: res.Name, orig: t, rank: rank, tmpl: tmpl, owner: res.Owner, reserved: true}
		v.index[kindTemplates][t] = a
		v.templates.add(a)
	}
}

// templateClaims are the literal prefixes (before the first expression) of
// the templates taken so far, with their servers and tokens. Two templates
// overlap when the literal prefix of one starts the other's: some URI
// might match both. (Checking the whole templates would refuse fewer, but
// whether two RFC 6570 templates share a URI is not a question to answer
// at every registry change.)
type templateClaims struct {
	exact  map[string][]claim // by literal prefix
	prefix map[string][]claim // by every prefix of a literal prefix
}

// claim is a server, and its token, that took a template.
type claim struct{ owner, server string }

// overlap returns a server of a token other than owner whose template
// overlaps one with literal prefix lit.
func (tc *templateClaims) overlap(lit, owner string) (server string, ok bool) {
	for i := range len(lit) + 1 {
		for _, c := range tc.exact[lit[:i]] {
			if c.owner != owner {
				return c.server, true
			}
		}
	}
	for _, c := range tc.prefix[lit] {
		if c.owner != owner {
			return c.server, true
		}
	}
	return "", false
}

// add records a template taken by server of owner.
func (tc *templateClaims) add(lit, owner, server string) {
	if tc.exact == nil {
		tc.exact, tc.prefix = map[string][]claim{}, map[string][]claim{}
	}
	c := claim{owner: owner, server: server}
	put := func(m map[string][]claim, key string) {
		for _, have := range m[key] {
			if have.owner == owner {
				return
			}
		}
		m[key] = append(m[key], c)
	}
	put(tc.exact, lit)
	for i := range len(lit) + 1 {
		put(tc.prefix, lit[:i])
	}
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
