package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// subscriptions/listen (protocol version 2026-07-28) replaces the
// notifications a session got by itself, and resources/subscribe: a client
// sends one long request naming what it wants to hear of; the server
// acknowledges it with notifications/subscriptions/acknowledged (what it
// will send: the part of the filter its capabilities support), then sends
// those notifications, each tagged with
// _meta["io.modelcontextprotocol/subscriptionId"] (the listen request's
// id), until the client cancels the request or leaves.

// AcknowledgedParams acknowledge a subscriptions/listen stream: the
// notifications the server will send on it, and in _meta its subscription
// id.
type AcknowledgedParams struct {
	Notifications SubscriptionFilter `json:"notifications"`
	Meta          Meta               `json:"_meta,omitempty"`
}

// empty reports whether the filter asks for nothing.
func (f *SubscriptionFilter) empty() bool {
	return !f.ToolsListChanged && !f.PromptsListChanged && !f.ResourcesListChanged && len(f.ResourceSubscriptions) == 0
}

// listener is one subscriptions/listen stream of a Server's.
type listener struct {
	ss     *ServerSession
	id     jsonrpc.ID
	filter SubscriptionFilter // what the server honours

	// mu orders the acknowledgement before every other notification of
	// the stream: one sent by another goroutine right after the listener
	// is registered waits for it.
	mu sync.Mutex
}

// wants reports whether the stream asked for a list_changed notification.
func (l *listener) wants(method string) bool {
	switch method {
	case NotificationToolsListChanged:
		return l.filter.ToolsListChanged
	case NotificationPromptsListChanged:
		return l.filter.PromptsListChanged
	case NotificationResourcesListChanged:
		return l.filter.ResourcesListChanged
	}
	return false
}

// notify sends a notification on the stream.
func (l *listener) notify(method string, params any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notifyLocked(method, params)
}

// notifyLocked sends a notification with the subscription id in _meta, and
// the listen request's id as the request it relates to: the Streamable HTTP
// handler and the hub route it by that.
func (l *listener) notifyLocked(method string, params any) {
	raw, err := jsonrpc.Marshal(params)
	if err != nil {
		return
	}
	obj, err := ParseObject(raw)
	if err != nil {
		return
	}
	obj.SetMeta(MetaSubscriptionID, l.id)
	obj.SetMeta(MetaRelatedRequest, l.id)
	_ = l.ss.peer.Notify(context.Background(), method, obj.Raw())
}

func (s *Server) liveListeners() []*listener {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*listener, 0, len(s.listeners))
	for l := range s.listeners {
		out = append(out, l)
	}
	return out
}

// honour returns the part of a filter the server's capabilities support.
func (s *Server) honour(f SubscriptionFilter) SubscriptionFilter {
	c := s.capabilities()
	out := SubscriptionFilter{
		ToolsListChanged:     f.ToolsListChanged && c.Tools != nil && c.Tools.ListChanged,
		PromptsListChanged:   f.PromptsListChanged && c.Prompts != nil && c.Prompts.ListChanged,
		ResourcesListChanged: f.ResourcesListChanged && c.Resources != nil && c.Resources.ListChanged,
	}
	if c.Resources != nil && c.Resources.Subscribe {
		out.ResourceSubscriptions = slices.Compact(slices.Sorted(slices.Values(f.ResourceSubscriptions)))
	}
	return out
}

// listen serves subscriptions/listen: it acknowledges the stream and
// registers it until the client cancels it or the session ends; a stream
// that asks for nothing the server supports ends at once, with the
// revision's graceful answer.
func (ss *ServerSession) listen(req *jsonrpc.Request, reply *peer.Reply) {
	in := &inbound{ss: ss, req: req}
	if err := in.classify(); err != nil {
		reply.Send(nil, err)
		return
	}
	p, err := decodeParams[ListenParams](req)
	switch {
	case err != nil:
	case p.Notifications == nil:
		err = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s: notifications is required", req.Method)
	case len(p.Notifications.TaskIDs) > 0 && !in.clientCapabilities().HasExtension(ExtensionTasks):
		err = ErrMissingExtension(ExtensionTasks) // as the tasks extension says, though none would be sent
	}
	if err != nil {
		reply.Send(nil, err)
		return
	}
	ss.served.Store(true)
	s := ss.server
	l := &listener{ss: ss, id: req.ID, filter: s.honour(*p.Notifications)}
	live := !l.filter.empty()
	l.mu.Lock()
	if live {
		s.mu.Lock()
		s.listeners[l] = struct{}{}
		s.mu.Unlock()
	}
	l.notifyLocked(NotificationSubscriptionsAcknowledged, &AcknowledgedParams{Notifications: l.filter})
	l.mu.Unlock()
	if !live {
		reply.Send(s.listenEnded(req.ID), nil)
		return
	}
	for _, uri := range l.filter.ResourceSubscriptions {
		s.subscribed(ss, uri, true)
	}
	reply.OnCancel(func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		for _, uri := range l.filter.ResourceSubscriptions {
			s.subscribed(ss, uri, false)
		}
	})
}

// listenEnded is the answer that ends a listen stream gracefully.
func (s *Server) listenEnded(id jsonrpc.ID) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{
		"resultType": ResultComplete,
		"_meta":      map[string]any{MetaSubscriptionID: id},
	})
	return s.stamp(raw)
}
