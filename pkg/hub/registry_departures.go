package hub

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// departure is a server that left: the last of its replicas disconnected,
// or a connection under its name never got through its handshake. With
// its close code and reason, it is how an operator sees a server fail
// (hub connect closes its connection with what happened to its child).
type departure struct {
	Name     string    `json:"name"`
	At       time.Time `json:"at"`
	Code     int       `json:"code,omitempty"` // the WebSocket close code
	Reason   string    `json:"reason,omitempty"`
	Instance string    `json:"instance"`
}

// How long, and how many, departures are remembered.
const (
	departedTTL = 10 * time.Minute
	maxDeparted = 100
)

// departures are this instance's recent departures, by server name.
type departures struct {
	mu  sync.Mutex
	all map[string]departure
}

// departed records that the server called name left, for the reason err
// gives.
func (h *Hub) departed(name string, err error) {
	d := departure{Name: name, At: time.Now().UTC(), Instance: h.id}
	var ce *peer.CloseError
	switch {
	case errors.As(err, &ce):
		d.Code, d.Reason = int(ce.Code), ce.Reason
	case err != nil:
		d.Reason = "the connection was lost"
	}
	h.gone.mu.Lock()
	if h.gone.all == nil {
		h.gone.all = map[string]departure{}
	}
	h.gone.all[name] = d
	h.gone.pruneLocked(time.Now())
	h.gone.mu.Unlock()
	h.cluster.localChanged()
	h.builtinsChanged()
}

func (g *departures) pruneLocked(now time.Time) {
	for name, d := range g.all {
		if now.Sub(d.At) > departedTTL {
			delete(g.all, name)
		}
	}
	for len(g.all) > maxDeparted {
		oldest := ""
		for name, d := range g.all {
			if oldest == "" || d.At.Before(g.all[oldest].At) {
				oldest = name
			}
		}
		delete(g.all, oldest)
	}
}

// list returns this instance's departures.
func (g *departures) list() []departure {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneLocked(time.Now())
	out := make([]departure, 0, len(g.all))
	for _, d := range g.all {
		out = append(out, d)
	}
	return out
}

// recentDepartures returns the servers of the whole cluster that left and
// have not come back: the latest departure of each name, newest first.
func (h *Hub) recentDepartures(v *view) []departure {
	latest := map[string]departure{}
	add := func(ds []departure) {
		for _, d := range ds {
			if len(v.servers[d.Name]) > 0 || time.Since(d.At) > departedTTL {
				continue
			}
			if prev, ok := latest[d.Name]; !ok || d.At.After(prev.At) {
				latest[d.Name] = d
			}
		}
	}
	add(h.gone.list())
	add(h.cluster.departures())
	out := make([]departure, 0, len(latest))
	for _, d := range latest {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out
}

// A server that leaves keeps its place for Config.ReservationPeriod: its
// rank among servers and the URIs and templates it served stay reserved to
// its token. Meanwhile no other server is served them (a later server's
// copies stay refused, as while it was there; a read gets -32000, the
// server is away), and no other token may take its name. When a server of
// the same name and token comes back within the period, it takes its place
// back, rank and all; after the period, the place is given up and the next
// server in line gets what it lists.
//
// Every instance records the reservation itself when a server leaves its
// view (the last replica disconnects, here or on another instance, or that
// instance goes), so that all compute the same owners; and each publishes
// the reservations it holds in its snapshot, for instances that join
// later. The period is measured on each instance's clock and checked at
// each heartbeat: instances may disagree for about a heartbeat when it
// ends.

// reservation is the place a server that left keeps.
type reservation struct {
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`               // its token
	Since     time.Time `json:"since"`               // when it registered: its rank
	Until     time.Time `json:"until"`               // when the place is given up
	Resources []string  `json:"resources,omitempty"` // the URIs it served
	Templates []string  `json:"templates,omitempty"` // the templates it served

	tmpls []*mcp.URITemplate // Templates, compiled once
}

// maxReservations bounds the reservations an instance keeps (the oldest
// go first): a token allowed many names cannot make every instance hold
// the lists of all of them.
const maxReservations = 100

// reserve records the place of a server that left view old.
func reserve(old *view, name string, until time.Time) *reservation {
	replicas := old.servers[name]
	if len(replicas) == 0 {
		return nil
	}
	first := replicas[0]
	for _, ri := range replicas {
		if ri.rankedBefore(first) {
			first = ri
		}
	}
	res := &reservation{Name: name, Owner: first.Owner, Since: first.since(), Until: until}
	if sl := old.own[name]; sl != nil {
		for _, it := range sl.lists[kindResources] {
			res.Resources = append(res.Resources, it.orig)
		}
		for _, it := range sl.lists[kindTemplates] {
			res.Templates = append(res.Templates, it.orig)
			res.tmpls = append(res.tmpls, it.tmpl)
		}
	}
	return res
}

// compile readies a reservation another instance published.
func (res *reservation) compile() {
	res.tmpls = make([]*mcp.URITemplate, len(res.Templates))
	for i, t := range res.Templates {
		res.tmpls[i] = mcp.ParseURITemplate(t)
	}
}

// activeReservations merges the reservations of every instance: one per
// name (the longest of those of the same token; of different tokens, the
// earliest registered), still running at now, for names no live server
// holds.
func activeReservations(sets [][]*reservation, live map[string][]*replicaInfo, now time.Time) []*reservation {
	byName := map[string]*reservation{}
	for _, set := range sets {
		for _, res := range set {
			if !res.Until.After(now) || len(live[res.Name]) > 0 {
				continue
			}
			cur := byName[res.Name]
			switch {
			case cur == nil,
				cur.Owner == res.Owner && res.Until.After(cur.Until),
				cur.Owner != res.Owner && res.Since.Before(cur.Since):
				byName[res.Name] = res
			}
		}
	}
	out := make([]*reservation, 0, len(byName))
	for _, res := range byName {
		out = append(out, res)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
