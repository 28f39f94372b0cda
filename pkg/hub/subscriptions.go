package hub

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Broker topics for what every instance fans out to its own clients.
const (
	topicUpdates = "updates" // notifications/resources/updated frames
	topicLogs    = "logs"    // notifications/message frames
)

// subscriptions keeps resource subscriptions reference-counted across the
// whole cluster, so that each resource is subscribed upstream once.
//
// Every instance counts its own clients per URI and, while it has any, asks
// the URI's coordinator to keep the resource subscribed. The coordinator is
// the instance of the replica with the lowest ID among those serving the URI,
// a choice every instance makes alike from the shared registry; it subscribes
// upstream for the first instance that asks and unsubscribes after the last
// one leaves. When the coordinating replica goes, every instance asks the new
// one. Updates from servers go to the broker and every instance delivers them
// to its own subscribers.
type subscriptions struct {
	hub *Hub

	mu       sync.Mutex
	local    map[string]map[*clientSession]struct{} // uri -> this instance's subscribers
	byClient map[*clientSession]map[string]struct{}
	upstream map[string]*upstreamSub // uri -> what this instance asked of the coordinator
	coord    map[string]*coordSub    // uri -> subscriptions this instance coordinates
	broker   []pubsub.Subscription
}

// upstreamSub is this instance's request that a resource stay subscribed.
type upstreamSub struct {
	server   string
	replica  string        // the coordinating replica asked
	instance string        // and its instance
	ready    chan struct{} // closed once the coordinator answered
	err      error
}

// coordSub is a resource this instance keeps subscribed at one of its
// replicas, for the instances that asked.
type coordSub struct {
	replica   *replica
	instances map[string]struct{}
}

func newSubscriptions(h *Hub) *subscriptions {
	return &subscriptions{
		hub:      h,
		local:    map[string]map[*clientSession]struct{}{},
		byClient: map[*clientSession]map[string]struct{}{},
		upstream: map[string]*upstreamSub{},
		coord:    map[string]*coordSub{},
	}
}

func (s *subscriptions) start(ctx context.Context) error {
	for topic, fn := range map[string]pubsub.Handler{topicUpdates: s.onUpdate, topicLogs: s.onLog} {
		sub, err := s.hub.broker.Subscribe(ctx, topic, fn)
		if err != nil {
			return err
		}
		s.broker = append(s.broker, sub)
	}
	return nil
}

// subscribe adds a client's subscription; the first on this instance asks
// the coordinator, and the client gets the coordinator's answer.
func (s *subscriptions) subscribe(ctx context.Context, cs *clientSession, uri string) error {
	h := s.hub
	server := reservedName
	if !isBuiltin(uri) {
		var ok bool
		if server, ok = h.reg.view().serverOfURI(uri); !ok {
			return mcp.ErrResourceNotFound.WithData(map[string]string{"uri": uri})
		}
	}
	s.mu.Lock()
	if _, ok := s.byClient[cs][uri]; ok {
		s.mu.Unlock()
		return nil
	}
	if s.local[uri] == nil {
		s.local[uri] = map[*clientSession]struct{}{}
	}
	s.local[uri][cs] = struct{}{}
	if s.byClient[cs] == nil {
		s.byClient[cs] = map[string]struct{}{}
	}
	s.byClient[cs][uri] = struct{}{}
	if server == reservedName {
		s.mu.Unlock()
		return nil
	}
	up := s.upstream[uri]
	first := up == nil
	if first {
		up = &upstreamSub{server: server, ready: make(chan struct{})}
		s.upstream[uri] = up
	}
	s.mu.Unlock()

	if first {
		up.err = s.ask(ctx, up, uri)
		close(up.ready)
	} else {
		select {
		case <-up.ready:
		case <-ctx.Done():
			up = &upstreamSub{err: ctx.Err()}
		}
	}
	if up.err != nil {
		s.unsubscribe(cs, uri)
		return up.err
	}
	return nil
}

// ask asks the coordinator of uri to keep it subscribed for this instance.
func (s *subscriptions) ask(ctx context.Context, up *upstreamSub, uri string) error {
	h := s.hub
	ri := coordinator(h.reg.view(), up.server, uri)
	if ri == nil {
		return errServerGone(up.server)
	}
	s.mu.Lock()
	up.replica, up.instance = ri.ID, ri.Instance
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	var err error
	if ri.local != nil {
		err = s.coordAdd(ctx, ri.local, uri, h.id)
	} else {
		err = h.askRemote(ctx, ri, uri, true)
	}
	if err != nil {
		return h.upstreamError(ctx, up.server, err)
	}
	return nil
}

// coordinator picks the replica that keeps uri subscribed: the lowest ID
// among those that can serve it.
func coordinator(v *view, server, uri string) *replicaInfo {
	var best *replicaInfo
	for _, ri := range v.replicasForURI(server, uri) {
		if best == nil || ri.ID < best.ID {
			best = ri
		}
	}
	return best
}

// unsubscribe removes a client's subscription; the last on this instance
// tells the coordinator.
func (s *subscriptions) unsubscribe(cs *clientSession, uri string) {
	s.mu.Lock()
	if _, ok := s.byClient[cs][uri]; !ok {
		s.mu.Unlock()
		return
	}
	delete(s.byClient[cs], uri)
	if len(s.byClient[cs]) == 0 {
		delete(s.byClient, cs)
	}
	delete(s.local[uri], cs)
	var up *upstreamSub
	if len(s.local[uri]) == 0 {
		delete(s.local, uri)
		up = s.upstream[uri]
		delete(s.upstream, uri)
	}
	s.mu.Unlock()
	if up != nil {
		s.release(up, uri)
	}
}

// release tells the coordinator this instance no longer needs uri.
func (s *subscriptions) release(up *upstreamSub, uri string) {
	h := s.hub
	<-up.ready
	if up.err != nil || up.replica == "" {
		return
	}
	if up.instance == h.id {
		s.coordRemove(uri, h.id)
		return
	}
	for _, ri := range h.reg.view().servers[up.server] {
		if ri.ID == up.replica {
			h.goOwned(func() {
				ctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout)
				defer cancel()
				if err := h.askRemote(ctx, ri, uri, false); err != nil {
					h.log.Debug("releasing a subscription failed", "uri", uri, "err", err)
				}
			})
			return
		}
	}
}

// dropClient removes every subscription of a client that left.
func (s *subscriptions) dropClient(cs *clientSession) {
	s.mu.Lock()
	uris := make([]string, 0, len(s.byClient[cs]))
	for uri := range s.byClient[cs] {
		uris = append(uris, uri)
	}
	s.mu.Unlock()
	for _, uri := range uris {
		s.unsubscribe(cs, uri)
	}
}

// coordAdd keeps uri subscribed at replica rp for an instance: the first
// instance makes the replica subscribe upstream.
func (s *subscriptions) coordAdd(ctx context.Context, rp *replica, uri, instance string) error {
	s.mu.Lock()
	c := s.coord[uri]
	if c != nil && c.replica == rp {
		c.instances[instance] = struct{}{}
		s.mu.Unlock()
		return nil
	}
	c = &coordSub{replica: rp, instances: map[string]struct{}{instance: {}}}
	s.coord[uri] = c
	s.mu.Unlock()
	err := rp.peer.Call(ctx, mcp.MethodResourcesSubscribe, &mcp.ResourceParams{URI: uri}, nil)
	if err != nil {
		s.mu.Lock()
		if s.coord[uri] == c {
			delete(s.coord, uri)
		}
		s.mu.Unlock()
	}
	return err
}

// coordRemove drops an instance's need for uri; after the last one the
// replica unsubscribes upstream.
func (s *subscriptions) coordRemove(uri, instance string) {
	s.mu.Lock()
	c := s.coord[uri]
	if c == nil {
		s.mu.Unlock()
		return
	}
	delete(c.instances, instance)
	if len(c.instances) > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.coord, uri)
	s.mu.Unlock()
	h := s.hub
	h.goOwned(func() {
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout)
		defer cancel()
		if err := c.replica.peer.Call(ctx, mcp.MethodResourcesUnsubscribe, &mcp.ResourceParams{URI: uri}, nil); err != nil {
			h.log.Debug("unsubscribing upstream failed", "uri", uri, "err", err)
		}
	})
}

// dropInstance forgets what a departed instance asked this one to keep.
func (s *subscriptions) dropInstance(instance string) {
	s.mu.Lock()
	var uris []string
	for uri, c := range s.coord {
		if _, ok := c.instances[instance]; ok {
			uris = append(uris, uri)
		}
	}
	s.mu.Unlock()
	for _, uri := range uris {
		s.coordRemove(uri, instance)
	}
}

// viewChanged follows servers that moved: coordinations at replicas that
// left are forgotten, and every subscription whose coordinator changed is
// asked again, of the new one.
func (s *subscriptions) viewChanged(v *view) {
	h := s.hub
	s.mu.Lock()
	for uri, c := range s.coord {
		select {
		case <-c.replica.peer.Done():
			delete(s.coord, uri)
		default:
		}
	}
	var moved []string
	for uri, up := range s.upstream {
		select {
		case <-up.ready:
		default:
			continue // still being asked
		}
		switch ri := coordinator(v, up.server, uri); {
		case ri == nil:
			// The server is gone (or out of reach): whoever kept the
			// subscription for us forgets it, so ask again when it is back.
			up.replica, up.instance = "", ""
		case ri.ID != up.replica:
			moved = append(moved, uri)
		}
	}
	s.mu.Unlock()
	for _, uri := range moved {
		h.goOwned(func() { s.reask(uri) })
	}
}

// reask asks the current coordinator of uri again, for the subscribers this
// instance still has.
func (s *subscriptions) reask(uri string) {
	s.mu.Lock()
	old := s.upstream[uri]
	if old == nil {
		s.mu.Unlock()
		return
	}
	up := &upstreamSub{server: old.server, ready: make(chan struct{})}
	s.upstream[uri] = up
	s.mu.Unlock()
	up.err = s.ask(s.hub.ctx, up, uri)
	close(up.ready)
	if up.err != nil {
		s.hub.log.Warn("resubscribing after a server moved failed", "uri", uri, "err", up.err)
	}
}

// publishUpdate fans a server's resources/updated out to every instance.
func (s *subscriptions) publishUpdate(ctx context.Context, server string, params json.RawMessage) {
	frame := (&jsonrpc.Request{Method: mcp.NotificationResourceUpdated, Params: params}).Encode()
	if err := s.hub.broker.Publish(ctx, topicUpdates, frame); err != nil {
		s.hub.log.Warn("publishing a resource update failed", "server", server, "err", err)
	}
}

func (s *subscriptions) onUpdate(ctx context.Context, topic string, frame []byte) {
	if params, ok := notificationParams(frame); ok {
		if uri, ok := jsonrpc.StringMember(params, "uri"); ok {
			s.deliverLocal(uri, frame)
		}
	}
}

// notificationParams returns the params of a frame holding one
// notification, as publishUpdate and publishLog encode them.
func notificationParams(frame []byte) (json.RawMessage, bool) {
	m, err := jsonrpc.DecodeMessage(frame)
	if err != nil {
		return nil, false
	}
	req, ok := m.(*jsonrpc.Request)
	if !ok || req.IsCall() {
		return nil, false
	}
	return req.Params, true
}

// deliverLocal sends an encoded notification to this instance's subscribers
// of uri.
func (s *subscriptions) deliverLocal(uri string, frame []byte) {
	s.mu.Lock()
	subs := make([]*clientSession, 0, len(s.local[uri]))
	for cs := range s.local[uri] {
		subs = append(subs, cs)
	}
	s.mu.Unlock()
	for _, cs := range subs {
		_ = cs.peer.SendEncoded(frame)
	}
	s.hub.metrics.fannedOut.WithLabelValues(mcp.NotificationResourceUpdated).Add(float64(len(subs)))
}

// publishLog fans a server's log message out to every instance, tagged with
// its server.
func (s *subscriptions) publishLog(ctx context.Context, server string, params json.RawMessage) {
	o, err := mcp.ParseObject(params)
	if err != nil {
		return
	}
	if l, _ := o.String("logger"); l == "" {
		o.Set("logger", server)
	}
	o.SetMeta(mcp.MetaServer, server)
	frame := (&jsonrpc.Request{Method: mcp.NotificationMessage, Params: o.Raw()}).Encode()
	if err := s.hub.broker.Publish(ctx, topicLogs, frame); err != nil {
		s.hub.log.Warn("publishing a log message failed", "server", server, "err", err)
	}
}

func (s *subscriptions) onLog(ctx context.Context, topic string, frame []byte) {
	params, ok := notificationParams(frame)
	if !ok {
		return
	}
	var p struct {
		Level mcp.LoggingLevel `json:"level"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	n := 0
	for _, cs := range s.hub.clientList() {
		if cs.admits(p.Level) {
			_ = cs.peer.SendEncoded(frame)
			n++
		}
	}
	s.hub.metrics.fannedOut.WithLabelValues(mcp.NotificationMessage).Add(float64(n))
}

// close stops the broker subscriptions.
func (s *subscriptions) close() {
	for _, sub := range s.broker {
		sub.Close()
	}
}
