package hub

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The hub's own resources.
const (
	uriServers   = "switchboard://servers"
	uriInstances = "switchboard://instances"
	uriStats     = "switchboard://stats"             // stats_doc.go
	uriClients   = "switchboard://clients"           // stats_clients.go; operators only
	uriCalls     = "switchboard://calls"             // stats_calls.go; operators only
	uriCallsArgs = "switchboard://calls?arguments=1" // the same with arguments; admins only
	uriCatalog   = "switchboard://catalog"           // catalog.go; operators only
)

func isBuiltin(uri string) bool { return strings.HasPrefix(uri, "switchboard://") }

// builtinItems are the hub's own resources as list items.
var builtinItems = func() []*aggItem {
	var out []*aggItem
	for _, r := range []mcp.Resource{
		{URI: uriInstances, Name: "instances", Title: "Hub instances",
			Description: "The hub instances of this cluster and what is connected to each.", MIMEType: "application/json"},
		{URI: uriServers, Name: "servers", Title: "Connected servers",
			Description: "Every MCP server connected to the hub, its replicas and what they offer.", MIMEType: "application/json"},
		{URI: uriStats, Name: "stats", Title: "Traffic",
			Description: "Calls/s, errors/s by code and p50/p99 latency per server and tool, and each instance's connections, over the cluster; updated every second while subscribed.",
			MIMEType:    "application/json"},
		{URI: uriClients, Name: "clients", Title: "Connected clients",
			Description: "Every client connected to the cluster: name, version, transport, token, instance, connected since, calls in flight. Operators only.",
			MIMEType:    "application/json"},
		{URI: uriCatalog, Name: "catalog", Title: "Catalog",
			Description: "The catalog in force: each virtual server's members, effective names and warnings, the aggregate's naming policy, and why the last catalog offered was refused, if it was. Operators only; admins also get its source.",
			MIMEType:    "application/json"},
		{URI: uriCalls, Name: "calls", Title: "Call log",
			Description: "The cluster's last calls: time, client, tool, duration, outcome. Operators only; switchboard://calls?arguments=1 adds the arguments, for admins.",
			MIMEType:    "application/json"},
	} {
		r.Meta = mcp.Meta{mcp.MetaServer: reservedName}
		raw, _ := json.Marshal(r)
		out = append(out, &aggItem{key: r.URI, server: reservedName, orig: r.URI, raw: raw})
	}
	return out
}()

// serversDoc is the content of switchboard://servers.
type serversDoc struct {
	Instance  string         `json:"instance"`
	Servers   []serverDoc    `json:"servers"`
	Instances []instanceDoc  `json:"instances"`
	Counts    map[string]int `json:"counts"`
	// Conflicts are the resources and templates that servers listed and
	// the hub does not serve: an earlier server serves them.
	Conflicts []conflict `json:"conflicts,omitempty"`
	// Departed are servers that left lately and have not come back, with
	// why (a connector's child that exits, say).
	Departed []departure `json:"departed,omitempty"`
	// VirtualServers are the catalog's, served at /servers/<name>/mcp
	// like a real server.
	VirtualServers []virtualServerDoc `json:"virtualServers,omitempty"`
}

// virtualServerDoc is a virtual server in switchboard://servers.
type virtualServerDoc struct {
	Name      string            `json:"name"`
	Title     string            `json:"title,omitempty"`
	Discovery catalog.Discovery `json:"discovery"`
	Members   []string          `json:"members"`
	Tools     int               `json:"tools"`
	Resources int               `json:"resources"`
	Templates int               `json:"resourceTemplates"`
	Prompts   int               `json:"prompts"`
	Warnings  int               `json:"warnings,omitempty"`
}

type serverDoc struct {
	Name      string       `json:"name"`
	Replicas  []replicaDoc `json:"replicas"`
	Tools     int          `json:"tools"`
	Resources int          `json:"resources"`
	Templates int          `json:"resourceTemplates"`
	Prompts   int          `json:"prompts"`
}

type replicaDoc struct {
	*replicaInfo
	InFlight *int64 `json:"inFlight,omitempty"` // for operators only
}

type instanceDoc struct {
	ID        string    `json:"id"`
	Addr      string    `json:"addr,omitempty"`
	Self      bool      `json:"self"`
	StartedAt time.Time `json:"startedAt"`
	Clients   int       `json:"clients"`
	Replicas  int       `json:"replicas"`
}

// instancesDoc is the content of switchboard://instances.
type instancesDoc struct {
	Instance  string        `json:"instance"`
	Instances []instanceDoc `json:"instances"`
}

func (h *Hub) instanceDocs(v *view) []instanceDoc {
	counts := map[string]int{}
	for _, name := range v.names {
		for _, ri := range v.servers[name] {
			counts[ri.Instance]++
		}
	}
	self := instanceDoc{ID: h.id, Addr: h.cfg.Addr, Self: true, StartedAt: h.start.UTC(), Clients: len(h.sessionList()), Replicas: counts[h.id]}
	docs := []instanceDoc{self}
	for _, in := range h.remoteInstances() {
		in.Replicas = counts[in.ID]
		docs = append(docs, in)
	}
	sort.Slice(docs[1:], func(i, j int) bool { return docs[1+i].ID < docs[1+j].ID })
	return docs
}

// readBuiltin reads one of the hub's own resources, as the session may
// see it: a client restricted to some servers sees only those, and only
// admins and dashboards see which token each replica uses, where instances
// listen, how loaded replicas are, and which items were refused.
func (h *Hub) readBuiltin(s *session, uri string) (any, error) {
	if watchBit(uri) != 0 {
		return h.readTraffic(s, uri)
	}
	v := h.reg.view()
	operator := s.who.has(RoleDashboard) // admins too
	instances := h.instanceDocs(v)
	if !operator {
		for i := range instances {
			instances[i].Addr = ""
		}
	}
	var doc any
	switch uri {
	case uriServers:
		d := serversDoc{Instance: h.id, Servers: []serverDoc{}, Instances: instances, Counts: map[string]int{}}
		replicas := 0
		counts := map[string]int{}
		for _, name := range v.names {
			if !operator && !s.who.mayUseServer(name, h.cfg.Separator) {
				continue
			}
			sd := serverDoc{Name: name}
			for _, ri := range v.servers[name] {
				n := ri.inflight.Load()
				rd := replicaDoc{replicaInfo: ri, InFlight: &n}
				if !operator {
					c := *ri
					c.Owner = ""
					rd = replicaDoc{replicaInfo: &c}
				}
				sd.Replicas = append(sd.Replicas, rd)
				replicas++
			}
			if sl := v.own[name]; sl != nil {
				n := func(k listKind) int { return len(s.itemsOf(sl.lists[k], k)) }
				sd.Tools, sd.Resources, sd.Templates, sd.Prompts = n(kindTools), n(kindResources), n(kindTemplates), n(kindPrompts)
			}
			counts["tools"] += sd.Tools
			counts["resources"] += sd.Resources
			counts["resourceTemplates"] += sd.Templates
			counts["prompts"] += sd.Prompts
			d.Servers = append(d.Servers, sd)
		}
		if operator {
			d.Conflicts = v.conflicts
		}
		for _, dep := range h.recentDepartures(v) {
			if operator || s.who.mayUseServer(dep.Name, h.cfg.Separator) {
				d.Departed = append(d.Departed, dep)
			}
		}
		d.VirtualServers = h.virtualServerDocs(s, v)
		clients := 0
		for _, in := range d.Instances {
			clients += in.Clients
		}
		counts["servers"], counts["replicas"], counts["instances"], counts["clients"] = len(d.Servers), replicas, len(d.Instances), clients
		d.Counts = counts
		doc = d
	case uriInstances:
		doc = instancesDoc{Instance: h.id, Instances: instances}
	case uriCatalog:
		if err := h.builtinAccess(s, uri); err != nil {
			return nil, err
		}
		text, err := h.readCatalog(s)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(text)}}}, nil
	default:
		return nil, errResourceNotFound(uri)
	}
	text, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(text)}}}, nil
}

// builtinsChanged tells the subscribers of the hub's own resources that they
// changed.
func (h *Hub) builtinsChanged() {
	for _, uri := range []string{uriServers, uriInstances, uriCatalog} {
		h.subs.deliverLocal(uri, encodeNotification(mcp.NotificationResourceUpdated, &mcp.ResourceUpdatedParams{URI: uri}))
	}
}

// builtinAccess refuses a session one of the hub's resources its token may
// not read: the clients and the call log are for operators, the arguments
// of calls for admins.
func (h *Hub) builtinAccess(s *session, uri string) error {
	switch uri {
	case uriClients, uriCalls, uriCatalog:
		if !s.who.has(RoleDashboard) {
			return forbidden(s.who, "read "+uri+" (operators only: dashboard and admin tokens)")
		}
	case uriCallsArgs:
		if !s.who.isAdmin() {
			return forbidden(s.who, "read "+uri+" (admins only: arguments may hold what only the caller should see)")
		}
	}
	return nil
}

// readTraffic reads switchboard://stats, clients or calls, which keeps the
// statistics' loop running for a while.
func (h *Hub) readTraffic(s *session, uri string) (any, error) {
	if err := h.builtinAccess(s, uri); err != nil {
		return nil, err
	}
	h.stats.watched(uri, !h.subs.subscribedTo(s, uri)) // a poller's read keeps the loop running a while; a subscriber does anyway
	var text []byte
	var err error
	switch uri {
	case uriStats:
		text, err = h.stats.statsJSON(s)
	case uriClients:
		text, err = h.stats.clientsJSON()
	default:
		text, err = h.stats.callsJSON(uri == uriCallsArgs)
	}
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(text)}}}, nil
}

// virtualServerDocs describes the catalog's virtual servers the session's
// token may use, for switchboard://servers: what each offers to it.
func (h *Hub) virtualServerDocs(s *session, v *view) []virtualServerDoc {
	if v.cat == nil {
		return nil
	}
	var out []virtualServerDoc
	for _, name := range slices.Sorted(maps.Keys(v.cat.virtual)) {
		vl := v.virtualOf(name)
		if vl == nil || !s.who.has(RoleDashboard) && !s.who.mayUseServer(name, h.cfg.Separator) {
			continue
		}
		n := func(k listKind) int { return len(s.itemsOf(vl.lists[k], k)) } // the tools it has, in search mode too
		out = append(out, virtualServerDoc{Name: name, Title: vl.vs.Title, Discovery: vl.vs.Discovery, Members: vl.vs.Members(),
			Tools: n(kindTools), Resources: n(kindResources), Templates: n(kindTemplates), Prompts: n(kindPrompts),
			Warnings: len(vl.view.Warnings)})
	}
	return out
}
