package hub

import (
	"context"
	"encoding/json"
	"strconv"
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
// Every instance counts its own sessions per URI and, while it has any,
// asks the URI's coordinator to keep the resource subscribed. The
// coordinator is the oldest replica (by connection time, then ID) among
// those serving the URI, a choice every instance makes alike from the
// shared registry, and one that a replica joining later never changes; its
// instance subscribes upstream for the first instance that asks and
// unsubscribes after the last one leaves. When the coordinating replica
// goes, every instance asks the new one, and releases the old one if it is
// still there. Updates from servers go to the broker and every instance
// delivers them to its own subscribers.
//
// Lock order: subscriptions.mu is never held while calling a peer or the
// broker, nor while taking another lock of the hub's.
type subscriptions struct {
	hub *Hub

	mu        sync.Mutex
	local     map[string]map[*session]struct{} // uri -> this instance's subscribers
	bySession map[*session]map[string]struct{}
	perToken  map[string]int          // subscriptions by token name (not counted without tokens)
	upstream  map[string]*upstreamSub // uri -> what this instance asked of the coordinator
	coord     map[coordKey]*coordSub  // what this instance keeps subscribed at its replicas, for the instances that asked
	busy      map[coordKey]struct{}   // a subscribe or unsubscribe of the key is under way at its replica
	broker    []pubsub.Subscription
}

// upstreamSub is this instance's request that a resource stay subscribed.
type upstreamSub struct {
	server   string
	replica  string        // the coordinating replica asked
	instance string        // and its instance
	ready    chan struct{} // closed once the coordinator answered
	err      error
}

// coordKey names one upstream subscription: a URI at one replica.
type coordKey struct {
	uri     string
	replica string
}

// coordSub is a resource this instance keeps subscribed at one of its
// replicas, for the instances that asked.
type coordSub struct {
	replica   *replica
	instances map[string]struct{}
}

func newSubscriptions(h *Hub) *subscriptions {
	return &subscriptions{
		hub:       h,
		local:     map[string]map[*session]struct{}{},
		bySession: map[*session]map[string]struct{}{},
		perToken:  map[string]int{},
		upstream:  map[string]*upstreamSub{},
		coord:     map[coordKey]*coordSub{},
		busy:      map[coordKey]struct{}{},
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

// subscribe adds a session's subscription; the first on this instance asks
// the coordinator, and the client gets the coordinator's answer.
func (s *subscriptions) subscribe(ctx context.Context, ss *session, uri string) error {
	h := s.hub
	server := reservedName
	if !isBuiltin(uri) {
		var ok bool
		if server, ok = ss.serverOfURI(h.reg.view(), uri); !ok {
			return errResourceNotFound(uri)
		}
	} else if err := h.builtinAccess(ss, uri); err != nil {
		return err
	}
	s.mu.Lock()
	// The check is made under the lock that dropSession takes after the
	// session is marked closed: a subscription is either seen by
	// dropSession or refused here, never kept for a session that left.
	if ss.closed.Load() {
		s.mu.Unlock()
		return errClientGone
	}
	if _, ok := s.bySession[ss][uri]; ok {
		s.mu.Unlock()
		return nil
	}
	if err := s.checkLimitsLocked(ss); err != nil {
		s.mu.Unlock()
		s.hub.metrics.refused.WithLabelValues("subscriptions").Inc()
		return err
	}
	if ss.who != anonymous {
		s.perToken[ss.who.name]++
	}
	if s.local[uri] == nil {
		s.local[uri] = map[*session]struct{}{}
	}
	s.local[uri][ss] = struct{}{}
	if s.bySession[ss] == nil {
		s.bySession[ss] = map[string]struct{}{}
	}
	s.bySession[ss][uri] = struct{}{}
	if server == reservedName {
		s.mu.Unlock()
		h.stats.watched(uri, false) // the traffic resources update while subscribed
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
		// The ask belongs to the hub, not to this request: a client that
		// leaves meanwhile must not fail it for the others waiting on it.
		if !h.goOwned(func() {
			up.err = s.ask(h.ctx, up, uri)
			close(up.ready)
		}) {
			up.err = errDraining
			close(up.ready)
		}
	}
	select {
	case <-up.ready:
	case <-ctx.Done():
		s.unsubscribe(ss, uri)
		return ctx.Err()
	}
	if up.err != nil {
		s.unsubscribe(ss, uri)
		return up.err
	}
	return nil
}

// checkLimitsLocked refuses a subscription beyond the session's or its
// token's limit.
func (s *subscriptions) checkLimitsLocked(ss *session) error {
	cfg := &s.hub.cfg
	if len(s.bySession[ss]) >= cfg.MaxSubscriptions {
		return errTooManySubscriptions("this connection", cfg.MaxSubscriptions)
	}
	if ss.who != anonymous && s.perToken[ss.who.name] >= cfg.MaxSubscriptionsPerToken {
		return errTooManySubscriptions("token "+strconv.Quote(ss.who.name), cfg.MaxSubscriptionsPerToken)
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
	return h.upstreamError(up.server, err)
}

// coordinator picks the replica that keeps uri subscribed: the oldest of
// those that can serve it, so that a replica joining later takes nothing
// over.
func coordinator(v *view, server, uri string) *replicaInfo {
	var best *replicaInfo
	for _, ri := range v.replicasForURI(server, uri) {
		if best == nil || ri.olderThan(best) {
			best = ri
		}
	}
	return best
}

// unsubscribe removes a session's subscription; the last on this instance
// releases the upstream subscription, in the background.
func (s *subscriptions) unsubscribe(ss *session, uri string) {
	s.mu.Lock()
	up := s.removeLocked(ss, uri)
	s.mu.Unlock()
	if up != nil {
		s.releaseAll(map[string]*upstreamSub{uri: up})
	}
}

// removeLocked removes one subscription of a session and returns the
// upstream subscription to release when it was this instance's last.
func (s *subscriptions) removeLocked(ss *session, uri string) *upstreamSub {
	if _, ok := s.bySession[ss][uri]; !ok {
		return nil
	}
	delete(s.bySession[ss], uri)
	if len(s.bySession[ss]) == 0 {
		delete(s.bySession, ss)
	}
	if ss.who != anonymous {
		if s.perToken[ss.who.name]--; s.perToken[ss.who.name] <= 0 {
			delete(s.perToken, ss.who.name)
		}
	}
	delete(s.local[uri], ss)
	if len(s.local[uri]) > 0 {
		return nil
	}
	delete(s.local, uri)
	up := s.upstream[uri]
	delete(s.upstream, uri)
	return up
}

// dropSession removes every subscription of a session that left. It never
// waits: the releases upstream happen on one goroutine of the hub's.
func (s *subscriptions) dropSession(ss *session) {
	s.mu.Lock()
	var release map[string]*upstreamSub // made for the first: most sessions held none
	for uri := range s.bySession[ss] {
		if up := s.removeLocked(ss, uri); up != nil {
			if release == nil {
				release = map[string]*upstreamSub{}
			}
			release[uri] = up
		}
	}
	s.mu.Unlock()
	if len(release) > 0 {
		s.releaseAll(release)
	}
}

// releaseAll tells the coordinators that this instance no longer needs the
// URIs, one after the other on one goroutine. An ask still in flight is
// waited for first: its coordinator must hear the release too.
func (s *subscriptions) releaseAll(ups map[string]*upstreamSub) {
	h := s.hub
	h.goOwned(func() {
		for uri, up := range ups {
			select {
			case <-up.ready:
			case <-h.ctx.Done():
				return
			}
			s.release(up, uri)
		}
	})
}

// release tells up's coordinator that this instance no longer needs uri.
func (s *subscriptions) release(up *upstreamSub, uri string) {
	h := s.hub
	if up.err != nil || up.replica == "" {
		return
	}
	if up.instance == h.id {
		s.coordRemove(uri, up.replica, h.id)
		return
	}
	for _, ri := range h.reg.view().servers[up.server] {
		if ri.ID == up.replica {
			ctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout)
			defer cancel()
			if err := h.askRemote(ctx, ri, uri, false); err != nil {
				h.log.Debug("releasing a subscription failed", "uri", uri, "err", err)
			}
			return
		}
	}
}

// coordAdd keeps uri subscribed at replica rp for an instance: the first
// instance makes the replica subscribe upstream.
//
// The replica is told one thing at a time per URI: a subscribe or an
// unsubscribe is sent only once the one before it was answered, and
// whoever sent the last one tells the replica again if the need changed
// meanwhile (settle). A server may carry out two requests in either order:
// a subscribe sent while the unsubscribe of the instance's last client was
// still under way (an instance that dropped another and heard its hello a
// moment later; a client that unsubscribed and subscribed again) could be
// overtaken by it, and the resource stayed unsubscribed upstream while its
// subscribers waited for updates. An instance that asks while an
// unsubscribe is under way is answered at once, as one that joins a
// subscribe under way is; the subscribe follows the unsubscribe's answer.
func (s *subscriptions) coordAdd(ctx context.Context, rp *replica, uri, instance string) error {
	key := coordKey{uri: uri, replica: rp.id}
	s.mu.Lock()
	if c := s.coord[key]; c != nil {
		c.instances[instance] = struct{}{}
		s.mu.Unlock()
		return nil
	}
	c := &coordSub{replica: rp, instances: map[string]struct{}{instance: {}}}
	s.coord[key] = c
	if _, busy := s.busy[key]; busy {
		s.mu.Unlock()
		return nil // the unsubscribe under way is followed by a subscribe
	}
	s.busy[key] = struct{}{}
	s.mu.Unlock()
	err := rp.subscribe(ctx, uri)
	if err != nil {
		s.mu.Lock()
		if s.coord[key] == c {
			delete(s.coord, key)
		}
		s.mu.Unlock()
	}
	s.settle(key, rp, err == nil)
	return err
}

// coordRemove drops an instance's need for uri at a replica; after the last
// one the replica unsubscribes upstream.
func (s *subscriptions) coordRemove(uri, replicaID, instance string) {
	key := coordKey{uri: uri, replica: replicaID}
	s.mu.Lock()
	c := s.coord[key]
	if c == nil {
		s.mu.Unlock()
		return
	}
	delete(c.instances, instance)
	if len(c.instances) > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.coord, key)
	if _, busy := s.busy[key]; busy {
		s.mu.Unlock()
		return // what is under way is followed by an unsubscribe
	}
	s.busy[key] = struct{}{}
	s.mu.Unlock()
	s.settle(key, c.replica, true)
}

// settle ends a turn at the replica of key, whose upstream subscription is
// now on or off: when the instances' need changed meanwhile, a goroutine of
// the hub's tells the replica again, one request after the other, until
// what it was last told is what is needed.
func (s *subscriptions) settle(key coordKey, rp *replica, on bool) {
	if s.settled(key, on) {
		return
	}
	h := s.hub
	if !h.goOwned(func() {
		for !s.settled(key, on) {
			on = s.tell(key, rp, !on)
		}
	}) {
		s.mu.Lock()
		delete(s.busy, key)
		s.mu.Unlock()
	}
}

// settled reports whether a replica whose upstream subscription of key is
// on (or off) is as the instances need it, and if so ends the turn.
func (s *subscriptions) settled(key coordKey, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.coord[key] != nil) != on {
		return false
	}
	delete(s.busy, key)
	return true
}

// tell subscribes (or unsubscribes) the replica upstream, for settle, and
// returns whether it is subscribed now. A subscribe that fails drops the
// coordination, as coordAdd's does for the instances that joined it while
// it was under way, and says so in the log.
func (s *subscriptions) tell(key coordKey, rp *replica, subscribe bool) bool {
	h := s.hub
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout)
	defer cancel()
	if !subscribe {
		if err := rp.unsubscribe(ctx, key.uri); err != nil {
			h.log.Debug("unsubscribing upstream failed", "uri", key.uri, "err", err)
		}
		return false
	}
	if err := rp.subscribe(ctx, key.uri); err != nil {
		h.log.Warn("subscribing upstream again failed", "uri", key.uri, "err", err)
		s.mu.Lock()
		delete(s.coord, key)
		s.mu.Unlock()
		return false
	}
	return true
}

// dropInstance forgets what a departed instance asked this one to keep.
func (s *subscriptions) dropInstance(instance string) {
	s.mu.Lock()
	var keys []coordKey
	for key, c := range s.coord {
		if _, ok := c.instances[instance]; ok {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	for _, key := range keys {
		s.coordRemove(key.uri, key.replica, instance)
	}
}

// viewChanged follows servers that moved: coordinations at replicas that
// left are forgotten, and every subscription whose coordinator changed is
// asked again, of the new one, as is every one whose last ask failed (the
// broker was out of reach, say).
func (s *subscriptions) viewChanged(v *view) {
	h := s.hub
	s.mu.Lock()
	for key, c := range s.coord {
		select {
		case <-c.replica.peer.Done():
			delete(s.coord, key)
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
		case ri.ID != up.replica || up.err != nil:
			moved = append(moved, uri) // moved, or a re-ask that failed: ask again
		}
	}
	s.mu.Unlock()
	for _, uri := range moved {
		h.goOwned(func() { s.reask(uri) })
	}
}

// rejoined asks instance again for every subscription it keeps for this
// one: it says it (re)joined, and an instance forgets what it kept for
// those it stopped hearing from, which may still have heard it all along
// and have no other reason to ask.
func (s *subscriptions) rejoined(instance string) {
	s.mu.Lock()
	var uris []string
	for uri, up := range s.upstream {
		select {
		case <-up.ready:
			if up.instance == instance {
				uris = append(uris, uri)
			}
		default: // still being asked
		}
	}
	s.mu.Unlock()
	for _, uri := range uris {
		s.hub.goOwned(func() { s.reask(uri) })
	}
}

// reask asks the current coordinator of uri again, for the subscribers this
// instance still has, then releases the previous one if it is still there:
// a resource is never left subscribed twice.
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
	// Read before up is ready: once it is, viewChanged may clear it (under
	// s.mu) when its server is gone.
	s.mu.Lock()
	moved := old.replica != up.replica
	s.mu.Unlock()
	close(up.ready)
	if up.err != nil {
		s.hub.log.Warn("resubscribing after a server moved failed", "uri", uri, "err", up.err)
	}
	if moved {
		s.release(old, uri)
	}
}

// publishUpdate fans a server's resources/updated out to every instance.
func (s *subscriptions) publishUpdate(ctx context.Context, server string, params json.RawMessage) {
	span := s.hub.tracePublish(server, params)
	defer span.End()
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
	subs := make([]*session, 0, len(s.local[uri]))
	for ss := range s.local[uri] {
		subs = append(subs, ss)
	}
	s.mu.Unlock()
	key := "updated:" + uri // the latest update of a URI says it all: it replaces a queued one
	for _, ss := range subs {
		ss.deliverUpdate(uri, key, frame)
	}
}

// publishLog fans a server's log message (already tagged with its server)
// out to every instance.
func (s *subscriptions) publishLog(ctx context.Context, server string, params json.RawMessage) {
	frame := (&jsonrpc.Request{Method: mcp.NotificationMessage, Params: params}).Encode()
	if err := s.hub.broker.Publish(ctx, topicLogs, frame); err != nil {
		s.hub.log.Warn("publishing a log message failed", "server", server, "err", err)
	}
}

func (s *subscriptions) onLog(ctx context.Context, topic string, frame []byte) {
	params, ok := notificationParams(frame)
	if !ok {
		return
	}
	level := logLevel(params)
	var server string
	if meta, ok := jsonrpc.Member(params, "_meta"); ok {
		server, _ = jsonrpc.StringMember(meta, mcp.MetaServer)
	}
	for _, ss := range s.hub.sessionList() {
		if ss.hears(server, level) {
			ss.sendLog(frame)
		}
	}
}

// close stops the broker subscriptions.
func (s *subscriptions) close() {
	for _, sub := range s.broker {
		sub.Close()
	}
}
