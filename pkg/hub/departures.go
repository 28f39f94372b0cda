package hub

import (
	"errors"
	"sort"
	"sync"
	"time"

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
	h.cluster.mu.Lock()
	for _, r := range h.cluster.remotes {
		if r.snap != nil {
			add(r.snap.Departed)
		}
	}
	h.cluster.mu.Unlock()
	out := make([]departure, 0, len(latest))
	for _, d := range latest {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out
}
