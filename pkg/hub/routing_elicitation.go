package hub

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// URL-mode elicitations (2025-11-25) and their completion notices. A server
// that sends a client's user to a URL (elicitation/create with mode "url",
// or the error -32042 answering a call, whose data lists such elicitations)
// tells the client later, with notifications/elicitation/complete naming
// the elicitationId, that the interaction there is done. The notice names
// no call, and the call may have ended by then; so the instance of the
// server's replica keeps where each such elicitation went: the client's
// key, which names its instance. It is kept per server (an id is unique
// within its server, and a server completes only its own), bounded, until
// the notice is passed on, the client declines or leaves, or newer ones
// push it out.

// maxElicitationsPerServer bounds the URL-mode elicitations kept for one
// server: beyond, the oldest is forgotten, and its notice, should it come,
// is counted as unrouted.
const maxElicitationsPerServer = 256

// elicitations is where the URL-mode elicitations of this instance's
// replicas went.
type elicitations struct {
	mu      sync.Mutex                     // a leaf
	servers map[string]*serverElicitations // by server name
}

// serverElicitations are one server's elicitations.
type serverElicitations struct {
	to    map[string]string // elicitationId -> the key of the client it went to
	order []string          // the ids as noted, oldest first (some forgotten since)
}

// note records that server's elicitation id went to client.
func (e *elicitations) note(server, id, client string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.servers == nil {
		e.servers = map[string]*serverElicitations{}
	}
	se := e.servers[server]
	if se == nil {
		se = &serverElicitations{to: map[string]string{}}
		e.servers[server] = se
	}
	if _, ok := se.to[id]; !ok {
		se.order = append(se.order, id)
	}
	se.to[id] = client
	for len(se.to) > maxElicitationsPerServer {
		delete(se.to, se.order[0])
		se.order = se.order[1:]
	}
	if len(se.order) > 2*len(se.to)+16 { // forgotten ones pile up: keep the live ones, in order
		live := make([]string, 0, len(se.to))
		for _, id := range se.order {
			if _, ok := se.to[id]; ok {
				live = append(live, id)
			}
		}
		se.order = live
	}
}

// take returns the client server's elicitation id went to, and forgets it.
func (e *elicitations) take(server, id string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	se := e.servers[server]
	if se == nil {
		return "", false
	}
	client, ok := se.to[id]
	e.dropLocked(server, se, id)
	return client, ok
}

// forget forgets server's elicitation id.
func (e *elicitations) forget(server, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if se := e.servers[server]; se != nil {
		e.dropLocked(server, se, id)
	}
}

// forgetClient forgets every elicitation that went to client, which left.
func (e *elicitations) forgetClient(client string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for server, se := range e.servers {
		for id, c := range se.to {
			if c == client {
				e.dropLocked(server, se, id)
			}
		}
	}
}

func (e *elicitations) dropLocked(server string, se *serverElicitations, id string) {
	delete(se.to, id)
	if len(se.to) == 0 {
		delete(e.servers, server)
	}
}

// ask sends a server's request to the client of c; done runs with its
// answer (see caller.request). A URL-mode elicitation is noted first (its
// notice may overtake the answer), and forgotten unless the client
// accepted: no notice follows a decline.
func (rp *replica) ask(ctx context.Context, c caller, method string, params mcp.Object, done func(json.RawMessage, error)) (abort func(error)) {
	server, id := rp.name(), ""
	if method == mcp.MethodElicitationCreate {
		id = urlElicitationID(params)
	}
	if id == "" || server == "" {
		return c.request(ctx, method, params.Raw(), done)
	}
	rp.hub.elicits.note(server, id, c.client())
	return c.request(ctx, method, params.Raw(), func(res json.RawMessage, err error) {
		if action, _ := jsonrpc.StringMember(res, "action"); err != nil || action != "accept" {
			rp.hub.elicits.forget(server, id)
		}
		done(res, err)
	})
}

// noteRequired notes the URL-mode elicitations that a server's -32042
// answer to c's call lists: the client is to complete them before it calls
// again, and hears of each by its notice.
func (rp *replica) noteRequired(c caller, e *jsonrpc.Error) {
	server := rp.name()
	if e.Code != mcp.CodeURLElicitationRequired || server == "" {
		return
	}
	for _, id := range requiredElicitations(e.Data) {
		rp.hub.elicits.note(server, id, c.client())
	}
}

// urlElicitationID returns the elicitationId of elicitation/create params
// of mode "url"; "" for any other.
func urlElicitationID(params mcp.Object) string {
	if mode, _ := params.String("mode"); mode != "url" {
		return ""
	}
	id, _ := params.String("elicitationId")
	return id
}

// requiredElicitations returns the ids of the URL-mode elicitations that
// the data of a -32042 error lists.
func requiredElicitations(data json.RawMessage) []string {
	var d struct {
		Elicitations []struct {
			Mode string `json:"mode"`
			ID   string `json:"elicitationId"`
		} `json:"elicitations"`
	}
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	var ids []string
	for _, el := range d.Elicitations {
		if el.Mode == "url" && el.ID != "" {
			ids = append(ids, el.ID)
		}
	}
	return ids
}

// elicitationComplete passes a server's notifications/elicitation/complete
// to the client its elicitation went to, on whichever instance. It reports
// false when that is not known (never, any more, or here), or when the
// client is here and gone.
func (rp *replica) elicitationComplete(_ context.Context, params json.RawMessage) bool {
	id, _ := jsonrpc.StringMember(params, "elicitationId")
	server := rp.name()
	if id == "" || server == "" {
		return false
	}
	client, ok := rp.hub.elicits.take(server, id)
	if !ok {
		return false
	}
	rest, _, _ := withoutRelated(params) // the hub's routing hint, if the server set one, is not the client's
	return rp.hub.notifyClient(client, mcp.NotificationElicitationComplete, rest)
}

// notifyClient sends the client of key a notification that no call of its
// carries: here, or through the cluster to its instance, which counts it
// as unrouted if the client is gone there. It reports false when the client
// is here and gone.
func (h *Hub) notifyClient(key, method string, params json.RawMessage) bool {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return false
	}
	if instance := key[:i]; instance != h.id {
		h.cluster.post(instance, &envelope{Kind: envClientNotify, Client: key, Method: method, Params: params}, nil)
		return true
	}
	return h.notifyLocalClient(key, method, params)
}

// notifyLocalClient sends a client of this instance a notification, unless
// it is gone or never opened a session: a client of 2026-07-28 has no
// notifications outside its requests' streams.
func (h *Hub) notifyLocalClient(key, method string, params json.RawMessage) bool {
	var to *session
	h.mu.Lock()
	for s := range h.sessions {
		if s.clientKey == key {
			to = s
			break
		}
	}
	h.mu.Unlock()
	if to == nil || to.closed.Load() || !to.isInitialized() {
		return false
	}
	to.notify(method, params)
	return true
}
