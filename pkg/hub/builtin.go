package hub

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The hub's own resources.
const (
	uriServers   = "switchboard://servers"
	uriInstances = "switchboard://instances"
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
	InFlight int64 `json:"inFlight"`
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

func (h *Hub) readBuiltin(uri string) (any, error) {
	v := h.reg.view()
	var doc any
	switch uri {
	case uriServers:
		d := serversDoc{Instance: h.id, Servers: []serverDoc{}, Instances: h.instanceDocs(v), Counts: map[string]int{}}
		replicas := 0
		for _, name := range v.names {
			sd := serverDoc{Name: name}
			for _, ri := range v.servers[name] {
				sd.Replicas = append(sd.Replicas, replicaDoc{replicaInfo: ri, InFlight: ri.inflight.Load()})
				replicas++
			}
			for _, k := range []listKind{kindTools, kindResources, kindTemplates, kindPrompts} {
				n := 0
				for _, it := range v.lists[k] {
					if it.server == name {
						n++
					}
				}
				switch k {
				case kindTools:
					sd.Tools = n
				case kindResources:
					sd.Resources = n
				case kindTemplates:
					sd.Templates = n
				case kindPrompts:
					sd.Prompts = n
				}
			}
			d.Servers = append(d.Servers, sd)
		}
		clients := 0
		for _, in := range d.Instances {
			clients += in.Clients
		}
		d.Counts = map[string]int{
			"servers": len(v.names), "replicas": replicas, "instances": len(d.Instances), "clients": clients,
			"tools": len(v.lists[kindTools]), "resources": len(v.lists[kindResources]) - len(builtinItems),
			"resourceTemplates": len(v.lists[kindTemplates]), "prompts": len(v.lists[kindPrompts]),
		}
		doc = d
	case uriInstances:
		doc = instancesDoc{Instance: h.id, Instances: h.instanceDocs(v)}
	default:
		return nil, mcp.ErrResourceNotFound.WithData(map[string]string{"uri": uri})
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
	for _, uri := range []string{uriServers, uriInstances} {
		h.subs.deliverLocal(uri, encodeNotification(mcp.NotificationResourceUpdated, &mcp.ResourceUpdatedParams{URI: uri}))
	}
}
