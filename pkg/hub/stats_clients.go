package hub

import (
	"encoding/json"
	"hash/fnv"
	"sort"
	"time"
)

// clientDoc is one client in switchboard://clients.
type clientDoc struct {
	ID          string    `json:"id"`                // "<instance>/<session>"
	Name        string    `json:"name"`              // clientInfo.name from initialize ("" before it)
	Version     string    `json:"version,omitempty"` // clientInfo.version
	Transport   string    `json:"transport"`         // websocket or http
	Role        string    `json:"role"`              // client or dashboard
	Token       string    `json:"token"`             // the name of its token ("anonymous" without tokens)
	Endpoint    string    `json:"endpoint"`          // /mcp, or /servers/<name>/mcp
	Instance    string    `json:"instance"`
	ConnectedAt time.Time `json:"connectedAt"`
	InFlight    int       `json:"inFlight"` // its requests not answered yet
}

// clientsDoc is the content of switchboard://clients: every instance's
// clients, for operators.
type clientsDoc struct {
	Instance string      `json:"instance"`
	Clients  []clientDoc `json:"clients"` // oldest first
	// Total counts every client of the cluster; it is more than the list
	// holds when another instance has more than it sends (1000).
	Total int `json:"total"`
}

// clientsOf describes sessions, oldest first.
func clientsOf(h *Hub, sessions []*session) []clientDoc {
	out := make([]clientDoc, 0, len(sessions))
	for _, s := range sessions {
		s.mu.Lock()
		name, version := s.name, s.version
		s.mu.Unlock()
		out = append(out, clientDoc{ID: s.key(), Name: name, Version: version, Transport: s.transport(), Role: s.role(),
			Token: s.who.name, Endpoint: endpoint(s.scope), Instance: h.id, ConnectedAt: time.Unix(0, s.since).UTC(), InFlight: s.peer.Pending()})
	}
	sortClients(out)
	return out
}

func sortClients(list []clientDoc) {
	sort.Slice(list, func(i, j int) bool {
		if !list[i].ConnectedAt.Equal(list[j].ConnectedAt) {
			return list[i].ConnectedAt.Before(list[j].ConnectedAt)
		}
		return list[i].ID < list[j].ID
	})
}

// clients returns the cluster's clients: this instance's as they are, the
// others' from their summaries.
func (st *stats) clients() *clientsDoc {
	h := st.hub
	list := clientsOf(h, h.sessionList())
	doc := &clientsDoc{Instance: h.id, Total: len(list)}
	for _, sum := range st.remoteSummaries(time.Now()) {
		if sum.Client != nil {
			for _, c := range sum.Client.List {
				c.Instance = sum.Instance
				list = append(list, c)
			}
			doc.Total += max(sum.Client.Total, len(sum.Client.List))
		}
	}
	sortClients(list)
	doc.Clients = list
	return doc
}

// clientsJSON returns switchboard://clients.
func (st *stats) clientsJSON() ([]byte, error) { return json.Marshal(st.clients()) }

// clientsChanged reports whether the clients changed since it last said so.
func (st *stats) clientsChanged() bool {
	b, err := st.clientsJSON()
	if err != nil {
		return false
	}
	f := fnv.New64a()
	f.Write(b)
	fp := f.Sum64()
	st.mu.Lock()
	defer st.mu.Unlock()
	ch := fp != st.clientFP
	st.clientFP = fp
	return ch
}
