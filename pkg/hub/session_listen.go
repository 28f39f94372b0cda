package hub

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// subscriptions/listen, the 2026-07-28 revision's way to hear of changes:
// one long request per stream (an SSE response on Streamable HTTP; on a
// WebSocket the request stays open until the client cancels it), answered
// first by notifications/subscriptions/acknowledged with the filter the hub
// honours, then only by the notifications the filter asked for, each
// carrying the stream's id in _meta["io.modelcontextprotocol/subscriptionId"].
// Its resource subscriptions are the session's (subscriptions.go counts
// them across the cluster like resources/subscribe's): a session holds a
// URI once however many of its streams (and its own resources/subscribe)
// ask for it. The stream ends when the client cancels it or leaves; while
// the instance drains it is answered, as the revision says of a graceful end.

// listener is one subscriptions/listen stream of a session.
type listener struct {
	id     jsonrpc.ID
	key    string // the stream's key among the session's notices
	filter mcp.SubscriptionFilter
	uris   map[string]bool // guarded by the session's mu once the stream is registered
	reply  *peer.Reply
	ended  bool // guarded by the session's mu
	held   bool // its resource subscriptions are taken (guarded by the session's mu)
	// sinceGen is the view it opened in, owed the list_changed it is to
	// hear of (session.owe); guarded by the session's mu.
	sinceGen uint64
	owed     uint8
}

// hold is one resource subscription of a session, held by its
// resources/subscribe and its listen streams.
type hold struct {
	n     int
	ready chan struct{} // closed once the subscription is made, or failed
	err   error
}

// listen opens a subscriptions/listen stream. It answers at once only when
// the request is invalid; the stream is set up off the read loop, since
// subscribing may wait for a server.
func (s *session) listen(req *jsonrpc.Request, m *mcp.RequestMeta, reply *peer.Reply) error {
	var p mcp.ListenParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Notifications == nil {
		return errNoFilter
	}
	h := s.hub
	if len(p.Notifications.TaskIDs) > 0 && !m.Capabilities.HasExtension(mcp.ExtensionTasks) {
		return mcp.ErrMissingExtension(mcp.ExtensionTasks)
	}
	if len(p.Notifications.ResourceSubscriptions) > h.cfg.MaxSubscriptions || len(p.Notifications.TaskIDs) > h.cfg.MaxSubscriptions {
		return errTooManySubscriptions("this stream", h.cfg.MaxSubscriptions)
	}
	l := &listener{id: req.ID, key: "#" + req.ID.String(), reply: reply, uris: map[string]bool{}}
	reply.OnCancel(func() { s.dropListener(l) })
	if !h.goOwned(func() { s.openListener(l, p.Notifications) }) {
		reply.Send(nil, errDraining)
	}
	return nil
}

// openListener subscribes a stream's resources, acknowledges the stream
// with what of its filter the session may have, and starts sending it
// notifications. The subscriptions come first, and the stream is
// registered as its acknowledgement is queued: once a client has the
// acknowledgement, every change reaches it (what changed before, it
// reads). The acknowledgement goes before anything else on the stream.
func (s *session) openListener(l *listener, want *mcp.SubscriptionFilter) {
	h := s.hub
	offered := s.initializeResult(mcp.LatestVersion).Capabilities
	honoured := mcp.SubscriptionFilter{
		ToolsListChanged:     want.ToolsListChanged && offered.Tools != nil,
		PromptsListChanged:   want.PromptsListChanged && offered.Prompts != nil,
		ResourcesListChanged: want.ResourcesListChanged && offered.Resources != nil,
	}
	v := h.reg.view()
	for _, uri := range want.ResourceSubscriptions {
		if l.uris[uri] {
			continue
		}
		if !isBuiltin(uri) || s.scope != "" {
			if _, err := h.resourceServer(s, v, uri); err != nil {
				continue // not a resource this client has: not honoured, the ack says so
			}
		}
		// Until l.held, only this goroutine reads or writes l.uris.
		if err := s.holdURI(h.ctx, uri); err != nil {
			h.log.Debug("a listen stream's subscription failed", "client", s.id, "uri", uri, "err", err)
			continue
		}
		l.uris[uri] = true
		honoured.ResourceSubscriptions = append(honoured.ResourceSubscriptions, uri)
	}
	honoured.TaskIDs = s.followedTasks(h.ctx, want.TaskIDs) // session_tasks.go
	l.filter = honoured
	ack := encodeNotification(mcp.NotificationSubscriptionsAcknowledged, &struct {
		Notifications mcp.SubscriptionFilter `json:"notifications"`
		Meta          mcp.Meta               `json:"_meta"`
	}{honoured, mcp.Meta{mcp.MetaSubscriptionID: l.id}})
	// The acknowledgement is queued and the stream registered under one
	// hold of the session's lock, which deliverUpdate and listChanged take
	// to find the streams: a change told after the client has the
	// acknowledgement always finds the stream (registered after the ack
	// was queued, a change in between was lost), and anything sent to the
	// stream goes behind the ack in the peer's one queue. Queueing never
	// blocks, and the ack is never dropped.
	s.mu.Lock()
	if l.ended || s.closed.Load() {
		s.mu.Unlock()
		s.releaseListener(l)
		return
	}
	l.held = true // from now on, ending the stream releases its holds
	if s.listeners == nil {
		s.listeners = map[*listener]struct{}{}
	}
	l.sinceGen = h.reg.view().gen
	s.listeners[l] = struct{}{}
	h.listening.add(s.owner, l.filter, 1) // before the ack leaves: the client's next list is cacheable
	if err := s.peer.SendEncoded(ack); err != nil {
		s.mu.Unlock()
		s.dropListener(l)
		return
	}
	s.mu.Unlock()
	h.tasks.follow(s, l) // after the acknowledgement, as every notification of the stream
	if s.stateless && s.pastExpiry() {
		s.endListener(l) // its token expired while it opened: endListensAtExpiry found no stream to end
	}
}

// dropListener ends a stream whose client cancelled it or left; its holds
// are released here, or by openListener if it is still taking them.
func (s *session) dropListener(l *listener) {
	s.mu.Lock()
	if l.ended {
		s.mu.Unlock()
		return
	}
	l.ended = true
	if _, ok := s.listeners[l]; ok {
		delete(s.listeners, l)
		s.hub.listening.add(s.owner, l.filter, -1)
	}
	held := l.held
	s.mu.Unlock()
	if held {
		s.releaseListener(l)
	}
}

// releaseListener lets go of a stream's resource subscriptions, and of
// the tasks it follows.
func (s *session) releaseListener(l *listener) {
	for uri := range l.uris {
		s.releaseURI(uri)
	}
	s.hub.tasks.unfollow(l)
}

// endListeners answers every stream of the session: the hub is draining,
// or the token of a request that is a stream expired (auth_oauth.go).
func (s *session) endListeners() {
	s.mu.Lock()
	ls := make([]*listener, 0, len(s.listeners))
	for l := range s.listeners {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		s.endListener(l)
	}
}

// endListener answers a stream: its graceful end.
func (s *session) endListener(l *listener) {
	s.dropListener(l)
	l.reply.Send(mcp.Decorate(encodeJSON(map[string]any{"_meta": mcp.Meta{mcp.MetaSubscriptionID: l.id}}), -1, ""), nil)
}

// subscribeURI is resources/subscribe: the session holds uri (once).
func (s *session) subscribeURI(ctx context.Context, uri string) error {
	s.mu.Lock()
	if s.subscribed[uri] {
		s.mu.Unlock()
		return nil
	}
	if s.subscribed == nil {
		s.subscribed = map[string]bool{}
	}
	s.subscribed[uri] = true
	s.mu.Unlock()
	if err := s.holdURI(ctx, uri); err != nil {
		s.mu.Lock()
		delete(s.subscribed, uri)
		s.mu.Unlock()
		return err
	}
	return nil
}

// unsubscribeURI is resources/unsubscribe.
func (s *session) unsubscribeURI(uri string) {
	s.mu.Lock()
	held := s.subscribed[uri]
	delete(s.subscribed, uri)
	s.mu.Unlock()
	if held {
		s.releaseURI(uri)
	}
}

// holdURI takes one hold on a resource subscription of the session; the
// first subscribes (through subscriptions.go), the others wait for it.
func (s *session) holdURI(ctx context.Context, uri string) error {
	s.mu.Lock()
	if s.holds == nil {
		s.holds = map[string]*hold{}
	}
	if hd := s.holds[uri]; hd != nil {
		hd.n++
		s.mu.Unlock()
		select {
		case <-hd.ready:
		case <-ctx.Done():
			s.releaseURI(uri)
			return ctx.Err()
		}
		if hd.err != nil {
			s.releaseURI(uri)
		}
		return hd.err
	}
	hd := &hold{n: 1, ready: make(chan struct{})}
	s.holds[uri] = hd
	s.mu.Unlock()
	hd.err = s.hub.subs.subscribe(ctx, s, uri)
	close(hd.ready)
	if hd.err != nil {
		s.releaseURI(uri)
	}
	return hd.err
}

// releaseURI lets go of one hold; the last unsubscribes.
func (s *session) releaseURI(uri string) {
	s.mu.Lock()
	hd := s.holds[uri]
	if hd == nil {
		s.mu.Unlock()
		return
	}
	if hd.n--; hd.n > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.holds, uri)
	s.mu.Unlock()
	if hd.err == nil {
		s.hub.subs.unsubscribe(s, uri)
	}
}

// deliverUpdate sends a resource update to the session: as it is if the
// session subscribed with resources/subscribe, and tagged for each of its
// streams that asked for the URI.
func (s *session) deliverUpdate(uri, key string, frame []byte) {
	s.mu.Lock()
	plain := s.subscribed[uri]
	var streams []*listener
	for l := range s.listeners {
		if l.uris[uri] {
			streams = append(streams, l)
		}
	}
	s.mu.Unlock()
	if plain {
		s.notice(mcp.NotificationResourceUpdated, frame, key)
	}
	for _, l := range streams {
		if params, ok := notificationParams(frame); ok {
			s.notice(mcp.NotificationResourceUpdated, l.tag(mcp.NotificationResourceUpdated, params), key+l.key)
		}
	}
}

// listChanged sends the client the list_changed it is owed (session.owe;
// the coalescer's call): to its session, and to each stream that asked for
// that kind.
func (s *session) listChanged(method string) {
	bit := listBit(method)
	s.mu.Lock()
	plain := s.owed&bit != 0
	s.owed &^= bit
	var streams []*listener
	for l := range s.listeners {
		if l.owed&bit != 0 {
			l.owed &^= bit
			streams = append(streams, l)
		}
	}
	s.mu.Unlock()
	if plain {
		s.notice(method, encodeNotification(method, nil), method)
	}
	for _, l := range streams {
		s.notice(method, l.tag(method, nil), method+l.key)
	}
}

// wants reports whether the stream asked for a list_changed notification.
func (l *listener) wants(method string) bool {
	switch method {
	case mcp.NotificationToolsListChanged:
		return l.filter.ToolsListChanged
	case mcp.NotificationPromptsListChanged:
		return l.filter.PromptsListChanged
	case mcp.NotificationResourcesListChanged:
		return l.filter.ResourcesListChanged
	}
	return false
}

// tag encodes a notification for the stream: params with the stream's id
// in _meta.
func (l *listener) tag(method string, params json.RawMessage) []byte {
	if len(params) == 0 || !strings.HasPrefix(string(params), "{") {
		params = json.RawMessage(`{}`)
	}
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		meta = []byte(`{}`)
	}
	if m, err := jsonrpc.SetMember(meta, mcp.MetaSubscriptionID, l.id.AppendJSON(nil)); err == nil {
		if p, err := jsonrpc.SetMember(params, "_meta", m); err == nil {
			params = p
		}
	}
	return (&jsonrpc.Request{Method: method, Params: params}).Encode()
}

// encodeJSON encodes a value the hub builds.
func encodeJSON(v any) json.RawMessage {
	raw, err := jsonrpc.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return raw
}
