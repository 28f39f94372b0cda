package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// The cluster: instances find each other and route to each other's servers
// through the broker.
//
// Every instance publishes, on topicRegistry, a heartbeat each interval and
// a snapshot of its replicas (names, lists) whenever they change. An
// instance that hears a heartbeat whose version it has no snapshot of asks
// its sender for one; one that stays silent for 3 intervals is dropped, and
// its servers leave the lists.
//
// A request for a server on another instance travels to that instance's
// inbox topic; its answer, progress reports, logs and the server's own
// requests for the client come back to the caller's inbox, and a
// cancellation follows the request. Ids are the caller's call numbers, so
// nothing of one client can be confused with another's.
//
// The broker delivers at most once, and nothing published to an instance
// while its broker connection is down reaches it. So an exchange never
// spans an interruption: when this instance loses the broker, the calls it
// sent fail at once (errInterrupted) and those it serves for others are
// cancelled, and when another instance says it rejoined (hello), the same
// happens to the exchanges with it. After its own reconnection an instance
// sends nothing to another until it has heard from it again, which proves
// the other is subscribed: calls wait for that (within their timeout)
// instead of vanishing. A request is taken for unsent only when the broker
// says so (pubsub.ErrNotSent); after any other failure to publish it may
// have arrived, so it fails and its cancellation follows it.
const (
	topicRegistry    = "registry"
	topicInboxPrefix = "inbox/"
	missedHeartbeats = 3
)

// remoteInstance is what this instance knows of another.
type remoteInstance struct {
	version  uint64 // of the snapshot we hold
	lastSeen time.Time
	clients  int
	snap     *snapshot
	asked    time.Time // when we last asked it for a snapshot
	heard    uint64    // our broker epoch when we last heard from it
	waiting  []func()  // sends held until we hear from it in this epoch
	deaf     bool      // its last heartbeat said its subscriptions are down
}

// hearing is what a message from another instance says of its
// subscriptions.
type hearing uint8

const (
	hearsNow      hearing = iota // a hello, or the heartbeat of an instance that listens
	hearsNot                     // the heartbeat of an instance whose subscriptions are down
	hearsAsBefore                // a snapshot: it says nothing of them
)

// cluster is this instance's side of the cluster.
type cluster struct {
	hub      *Hub
	version  atomic.Uint64 // of our own snapshot
	nextCall atomic.Uint64

	mu       sync.Mutex
	remotes  map[string]*remoteInstance
	calls    map[uint64]*outCall   // calls, subs and sreqs we sent, by number
	served   map[servedID]canceler // calls, subs, sreqs and relayed requests we serve for others: how to end them
	relays   map[uint64]*relay     // HTTP requests we relayed to their session's owner, by number
	partial  map[string]*snapParts // snapshots in parts still coming, by instance
	brokerUp bool
	epoch    uint64 // counts our broker (re)connections
	subs     []pubsub.Subscription
	dirty    chan struct{} // our snapshot changed

	state     chan bool // the broker's connection went down or up (Watch)
	stopWatch func()

	inboxMu sync.RWMutex
	inboxes map[string]string // instance -> its inbox topic
}

// outCall is a request this instance sent to another and waits on.
type outCall struct {
	instance string
	caller   caller                       // for calls: where progress, logs and the server's requests go
	done     func(json.RawMessage, error) // the answer, or why there is none
	started  bool                         // the request is being sent (guarded by cluster.mu)
	sent     chan struct{}                // closed once the broker took the request, or refused it
}

func newCluster(h *Hub) *cluster {
	return &cluster{
		hub:     h,
		remotes: map[string]*remoteInstance{},
		calls:   map[uint64]*outCall{},
		served:  map[servedID]canceler{},
		relays:  map[uint64]*relay{},
		partial: map[string]*snapParts{},
		dirty:   make(chan struct{}, 1),
		state:   make(chan bool, 2),
		inboxes: map[string]string{},
	}
}

func (c *cluster) start(ctx context.Context) error {
	h := c.hub
	// The broker says at once when its connection drops or comes back, in
	// order (it folds what is pending to at most down, then up); the loop
	// acts on it.
	c.stopWatch = h.broker.Watch(func(up bool) {
		select {
		case c.state <- up:
		case <-h.ctx.Done():
		}
	})
	for topic, fn := range map[string]pubsub.Handler{
		topicRegistry:           c.onRegistry,
		topicInboxPrefix + h.id: c.onInbox,
	} {
		sub, err := h.broker.Subscribe(ctx, topic, fn)
		if err != nil {
			return err
		}
		c.subs = append(c.subs, sub)
	}
	up := h.broker.Ready(ctx) == nil
	c.mu.Lock() // the subscriptions' handlers read them already
	c.brokerUp, c.epoch = up, 1
	c.mu.Unlock()
	if !h.goOwned(c.loop) {
		return errors.New("hub closed")
	}
	c.publish(ctx, topicRegistry, &envelope{Kind: kindHello})
	return nil
}

// localChanged marks our snapshot stale; the loop publishes it.
func (c *cluster) localChanged() {
	c.version.Add(1)
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// loop publishes heartbeats and snapshots and drops silent instances.
func (c *cluster) loop() {
	h := c.hub
	interval := h.cfg.HeartbeatInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// While the broker is down it is checked more often than heartbeats go
	// out, so that the cluster re-forms soon after it comes back.
	recheck := time.NewTicker(max(interval/10, 20*time.Millisecond))
	defer recheck.Stop()
	for {
		// The broker's news first: after a reconnection the first thing
		// this instance publishes must be its hello.
		select {
		case up := <-c.state:
			c.brokerState(up)
			continue
		default:
		}
		select {
		case <-recheck.C:
			c.mu.Lock()
			down := !c.brokerUp
			c.mu.Unlock()
			if down {
				c.checkBroker()
			}
		case <-h.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c.publish(ctx, topicRegistry, &envelope{Kind: kindBye})
			cancel()
			return
		case up := <-c.state:
			c.brokerState(up)
		case <-c.dirty:
			// While the broker is down the snapshot waits: brokerState
			// publishes it, after the hello, once the broker is back.
			if c.isBrokerUp() {
				c.publishSnapshot(h.ctx)
			}
		case <-tick.C:
			c.heartbeat()
		}
	}
}

// checkBroker follows the broker's state (see brokerState): the loop
// checks it while the broker is down, besides what Watch says.
func (c *cluster) checkBroker() {
	h := c.hub
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.HeartbeatInterval)
	defer cancel()
	c.brokerState(h.broker.Ready(ctx) == nil)
}

// isBrokerUp reports whether the broker's connection is up, as far as the
// loop knows.
func (c *cluster) isBrokerUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokerUp
}

// brokerState records whether the broker connection is up. When it is lost,
// every exchange with other instances in flight ends (their answers may be
// lost with it); when it comes back, this instance says so, so that every
// instance sends its snapshot at once instead of at its next heartbeat, and
// it waits to hear from each other instance before sending it anything.
func (c *cluster) brokerState(up bool) {
	h := c.hub
	c.mu.Lock()
	wasUp := c.brokerUp
	c.brokerUp = up
	if up && !wasUp {
		c.epoch++
	}
	c.mu.Unlock()
	if up {
		h.metrics.brokerUp.Set(1)
	} else {
		h.metrics.brokerUp.Set(0)
	}
	switch {
	case up && !wasUp:
		h.log.Info("broker reachable again; rejoining the cluster")
		// What was sent while this instance believed the broker down may
		// have gone out after all, to an instance not yet listening, and
		// answers to it may have come while this one was not: those
		// exchanges end now, clearly, rather than at their timeout.
		c.interrupt("")
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.HeartbeatInterval)
		defer cancel()
		c.publish(ctx, topicRegistry, &envelope{Kind: kindHello})
		c.publishSnapshot(ctx)
	case !up && wasUp:
		h.log.Warn("broker unreachable: only this instance's servers can be reached until it is back")
		c.interrupt("")
	}
}

func (c *cluster) heartbeat() {
	h := c.hub
	// Others take a heartbeat for proof that this instance listens, unless
	// it says it does not (its publishing connection may be back before its
	// subscriptions are): then it only says it is alive. Whether it listens
	// is what the broker reported (Watch), not a readiness check of the
	// moment: a check that is slow under load is no lost message, and
	// taking it for one would interrupt every exchange with the others.
	up := c.isBrokerUp()
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.HeartbeatInterval)
	defer cancel()
	clients := len(h.sessionList())
	c.publish(ctx, topicRegistry, &envelope{Kind: kindHeartbeat, Version: c.version.Load(), Clients: clients, Deaf: !up})
	h.renewNames(ctx)
	now := time.Now()
	c.expire(now)
	h.reg.expire(now)
}

// expire drops the instances that missed too many heartbeats.
func (c *cluster) expire(now time.Time) {
	limit := time.Duration(missedHeartbeats) * c.hub.cfg.HeartbeatInterval
	c.mu.Lock()
	var gone []string
	for id, r := range c.remotes {
		if now.Sub(r.lastSeen) > limit {
			gone = append(gone, id)
		}
	}
	c.mu.Unlock()
	for _, id := range gone {
		c.hub.log.Warn("instance went silent; dropping its servers", "peer", shortID(id))
		c.drop(id)
	}
}

// drop forgets an instance: its servers, its calls and what it asked of us.
func (c *cluster) drop(id string) {
	h := c.hub
	c.mu.Lock()
	_, known := c.remotes[id]
	delete(c.remotes, id)
	delete(c.partial, id)
	c.mu.Unlock()
	c.endExchanges(id, errInstanceGone, true)
	if known {
		h.reg.setRemote(id, nil, nil)
	}
	h.subs.dropInstance(id)
}

// interrupt ends the exchanges in flight with instance ("" for every
// instance) after an interruption of the broker: the calls we sent fail
// with errInterrupted, and those we serve for it are cancelled. Requests
// still held, never sent, are kept: they go out once the instance is heard.
func (c *cluster) interrupt(instance string) {
	c.endExchanges(instance, errInterrupted, false)
}

// endExchanges fails the requests we sent to instance ("" for all) with
// err (those never sent too when all is set) and cancels those we serve
// for it: a call we serve is answered err, in case its caller still waits
// for it (it sent it after it rejoined, and we heard of the call before
// its hello), unless the caller is gone (all).
func (c *cluster) endExchanges(instance string, err error, all bool) {
	c.mu.Lock()
	var failed []*outCall
	for n, oc := range c.calls {
		if (instance == "" || oc.instance == instance) && (all || oc.started) {
			failed = append(failed, oc)
			delete(c.calls, n)
		}
	}
	var cancels []canceler
	for key, cancel := range c.served {
		if instance == "" || servedBy(key, instance) {
			cancels = append(cancels, cancel)
		}
	}
	for n, rl := range c.relays {
		if instance == "" || rl.instance == instance {
			delete(c.relays, n)
			close(rl.lost)
		}
	}
	c.mu.Unlock()
	for _, oc := range failed {
		oc.done(nil, err)
	}
	cause := err
	if all {
		cause = context.Canceled // no one to answer
	}
	for _, cancel := range cancels {
		cancel.cancel(cause)
	}
}

// servedID names a request another instance sent us: its sender, and the
// sender's number for it.
type servedID struct {
	from string
	call uint64
}

// servedKey names a request another instance sent us.
func servedKey(from string, n uint64) servedID { return servedID{from: from, call: n} }

func servedBy(key servedID, instance string) bool { return key.from == instance }

// publishSnapshot publishes this instance's replicas: in one message, or,
// when that would be larger than SnapshotChunkBytes, in parts, so that no
// message comes near the broker's limits (Redis drops a subscriber whose
// output buffer passes 32 MiB, and every instance with it).
func (c *cluster) publishSnapshot(ctx context.Context) {
	h := c.hub
	// The version is read first: a snapshot may hold more than its version
	// says, never less. (Read after, a change made while the snapshot was
	// built gave it the version of a content it lacked; the snapshot that
	// followed with that content had the same version, and the others,
	// holding it already, kept the one without: a server never appeared
	// on them.)
	version := c.version.Load()
	snap := &snapshot{Addr: h.cfg.Addr, StartedAt: h.start.UTC(), Departed: h.gone.list(), Reserved: h.reg.localReservations()}
	for _, ri := range h.reg.localReplicas() {
		rs := replicaSnap{ID: ri.ID, Name: ri.Name, ServerInfo: ri.ServerInfo, ProtocolVersion: ri.ProtocolVersion,
			ConnectedAt: ri.ConnectedAt, Since: ri.Since, Owner: ri.Owner, Capabilities: ri.Capabilities, Instructions: ri.Instructions, Leased: ri.Leased}
		for k := range numKinds {
			for _, it := range ri.lists[k] {
				rs.Lists[k] = append(rs.Lists[k], it.raw)
			}
		}
		snap.Replicas = append(snap.Replicas, rs)
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		h.log.Error("encoding the snapshot failed", "err", err)
		return
	}
	if len(raw) <= h.cfg.SnapshotChunkBytes {
		c.publish(ctx, topicRegistry, &envelope{Kind: kindSnapshot, Version: version, Snapshot: snap})
		return
	}
	var chunks [][]byte
	for len(raw) > 0 {
		n := min(len(raw), h.cfg.SnapshotChunkBytes)
		chunks, raw = append(chunks, raw[:n]), raw[n:]
	}
	for i, chunk := range chunks {
		if c.publish(ctx, topicRegistry, &envelope{Kind: kindSnapPart, Version: version, Part: i, Parts: len(chunks), Chunk: chunk}) != nil {
			return // the others ask again: their heartbeat shows a version they do not hold
		}
	}
}

// snapParts gathers the parts of a snapshot another instance published.
type snapParts struct {
	version uint64
	parts   [][]byte
	got     int
}

// onSnapPart keeps a part of another instance's snapshot; the last one
// makes it whole.
func (c *cluster) onSnapPart(env *envelope, now time.Time) {
	if env.Parts <= 0 || env.Parts > maxSnapParts || env.Part < 0 || env.Part >= env.Parts {
		return
	}
	c.mu.Lock()
	p := c.partial[env.From]
	if p == nil || p.version != env.Version || len(p.parts) != env.Parts {
		p = &snapParts{version: env.Version, parts: make([][]byte, env.Parts)}
		c.partial[env.From] = p
	}
	if p.parts[env.Part] == nil && len(env.Chunk) > 0 {
		p.parts[env.Part] = env.Chunk
		p.got++
	}
	complete := p.got == env.Parts
	if complete {
		delete(c.partial, env.From)
	}
	c.mu.Unlock()
	if !complete {
		return
	}
	var snap snapshot
	if err := json.Unmarshal(bytes.Join(p.parts, nil), &snap); err != nil {
		c.hub.log.Warn("a snapshot in parts did not decode", "peer", shortID(env.From), "err", err)
		return
	}
	c.applySnapshot(env.From, env.Version, &snap, now)
}

// maxSnapParts bounds the parts of one snapshot a receiver keeps.
const maxSnapParts = 4096

// publish sends an envelope; it reports whether the broker took it.
func (c *cluster) publish(ctx context.Context, topic string, env *envelope) error {
	env.From = c.hub.id
	b, err := env.encode()
	if err != nil {
		return err
	}
	if err := c.hub.broker.Publish(ctx, topic, b); err != nil {
		c.hub.log.Debug("publishing to the cluster failed", "topic", topic, "kind", env.Kind, "err", err)
		return err
	}
	return nil
}

// post publishes an envelope to another instance's inbox as send does,
// without waiting: done, if not nil, is told what send would have returned,
// on the broker's goroutine (it must not block), and counts the publish
// (h.metrics.published) itself, which saves wrapping it per envelope. Envelopes posted, or sent,
// from one goroutine leave in order. A call between instances is four
// envelopes: none holds a goroutine while Redis answers. Where the broker
// cannot publish without waiting, a goroutine of the hub's waits instead.
func (c *cluster) post(instance string, env *envelope, done func(error)) {
	h := c.hub
	if done == nil {
		done = h.metrics.published
	}
	env.From = h.id
	b, err := env.encode()
	if err != nil {
		done(err)
		return
	}
	broker := h.broker
	if mb, ok := broker.(*meteredBroker); ok {
		broker = mb.Broker // done counts the publish
	}
	if ap, ok := broker.(pubsub.AsyncPublisher); ok {
		ap.PublishAsync(c.inbox(instance), b, done)
		return
	}
	if !h.goOwned(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), time.Second)
		defer cancel()
		done(broker.Publish(ctx, c.inbox(instance), b))
	}) {
		done(errDraining)
	}
}

// inbox returns the inbox topic of instance, from a small cache: every
// envelope posted names one.
func (c *cluster) inbox(instance string) string {
	c.inboxMu.RLock()
	t, ok := c.inboxes[instance]
	c.inboxMu.RUnlock()
	if ok {
		return t
	}
	t = topicInboxPrefix + instance
	c.inboxMu.Lock()
	if len(c.inboxes) >= maxCachedInboxes {
		clear(c.inboxes) // instances come and go
	}
	c.inboxes[instance] = t
	c.inboxMu.Unlock()
	return t
}

// maxCachedInboxes bounds the cache of inbox topics.
const maxCachedInboxes = 256

// send publishes an envelope to another instance's inbox, bounded by a
// second but not by any caller's cancellation: a message that the broker
// may already have delivered must be followed by its cancellation, never
// taken for unsent.
func (c *cluster) send(instance string, env *envelope) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.hub.ctx), time.Second)
	defer cancel()
	return c.publish(ctx, topicInboxPrefix+instance, env)
}

// heard records that a message came from instance: it is alive, and,
// since this instance's broker connection is up, subscribed (unless it
// says it is deaf); the sends held for it go out. An instance that says it
// is deaf gets nothing until it listens again: what was held for it fails
// now, with a clear error, and so do new requests (startRequest).
func (c *cluster) heard(instance string, now time.Time, hears hearing) *remoteInstance {
	c.mu.Lock()
	r := c.remotes[instance]
	if r == nil {
		r = &remoteInstance{}
		c.remotes[instance] = r
	}
	r.lastSeen = now
	if hears != hearsAsBefore {
		r.deaf = hears == hearsNot
	}
	var release []func()
	var failed []*outCall
	switch {
	case r.deaf:
		for n, oc := range c.calls {
			if oc.instance == instance && !oc.started { // held, not sent
				failed = append(failed, oc)
				delete(c.calls, n)
			}
		}
		r.waiting = nil
	case c.brokerUp && r.heard != c.epoch:
		r.heard = c.epoch
		release, r.waiting = r.waiting, nil
	}
	c.mu.Unlock()
	for _, oc := range failed {
		oc.done(nil, errNotListening)
	}
	for _, fn := range release {
		fn()
	}
	return r
}

func (c *cluster) onRegistry(ctx context.Context, topic string, payload []byte) {
	env, ok := decodeEnvelope(payload)
	if !ok || env.From == c.hub.id {
		return
	}
	now := time.Now()
	switch env.Kind {
	case kindBye:
		c.drop(env.From)
	case kindHello:
		// It (re)joined: what we sent it before may be lost, and what it
		// served for us may never answer.
		c.interrupt(env.From)
		c.heard(env.From, now, hearsNow)
		c.localChanged() // publish our snapshot for the newcomer
		c.hub.subs.rejoined(env.From)
	case kindHeartbeat:
		hears := hearsNow
		if env.Deaf {
			hears = hearsNot
		}
		r := c.heard(env.From, now, hears)
		c.mu.Lock()
		r.clients = env.Clients
		ask := !env.Deaf && (r.snap == nil || r.version != env.Version) && now.Sub(r.asked) > c.hub.cfg.HeartbeatInterval/2
		if ask {
			r.asked = now
		}
		c.mu.Unlock()
		if ask {
			c.publish(ctx, topicInboxPrefix+env.From, &envelope{Kind: kindSync})
		}
	case kindSnapshot:
		if env.Snapshot != nil {
			c.applySnapshot(env.From, env.Version, env.Snapshot, now)
		}
	case kindSnapPart:
		c.heard(env.From, now, hearsAsBefore)
		c.onSnapPart(env, now)
	}
}

// applySnapshot takes another instance's snapshot into the registry.
func (c *cluster) applySnapshot(from string, version uint64, snap *snapshot, now time.Time) {
	r := c.heard(from, now, hearsAsBefore)
	c.mu.Lock()
	same := r.snap != nil && r.version == version
	r.version, r.snap = version, snap
	c.mu.Unlock()
	if !same {
		for _, res := range snap.Reserved {
			res.compile()
		}
		c.hub.reg.setRemote(from, c.replicasOf(from, snap), snap.Reserved)
	}
}

// replicasOf turns a snapshot into registry entries.
func (c *cluster) replicasOf(instance string, s *snapshot) []*replicaInfo {
	sep := c.hub.cfg.Separator
	out := make([]*replicaInfo, 0, len(s.Replicas))
	for _, rs := range s.Replicas {
		ri := &replicaInfo{ID: rs.ID, Name: rs.Name, Instance: instance, ServerInfo: rs.ServerInfo,
			ProtocolVersion: rs.ProtocolVersion, ConnectedAt: rs.ConnectedAt, Since: rs.Since, Owner: rs.Owner,
			Capabilities: rs.Capabilities, Instructions: rs.Instructions, Leased: rs.Leased}
		for k := range numKinds {
			for _, raw := range rs.Lists[k] {
				if it, ok := newListItem(k, rs.Name, sep, raw); ok {
					ri.lists[k] = append(ri.lists[k], it)
				}
			}
		}
		out = append(out, ri)
	}
	return out
}

// remoteInstances describes the other instances, for switchboard://instances.
func (h *Hub) remoteInstances() []instanceDoc {
	c := h.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]instanceDoc, 0, len(c.remotes))
	for id, r := range c.remotes {
		d := instanceDoc{ID: id, Clients: r.clients}
		if r.snap != nil {
			d.Addr, d.StartedAt = r.snap.Addr, r.snap.StartedAt
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// call forwards a call to a replica on another instance and returns at
// once; done runs with the answer when it comes back. The returned function
// ends the call early: the other instance is told to give up.
func (c *cluster) call(ri *replicaInfo, server string, cl caller, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	env := &envelope{Kind: kindCall, Replica: ri.ID, Server: server, Method: method, Params: params, Caps: cl.caps().shared(), Client: cl.client(),
		LogLevel: cl.logLevel()}
	return c.startRequest(ri.Instance, env, cl, done)
}

// request sends a request (a sub, or a server's request for a client) to
// another instance and waits for the answer; if ctx ends first, the other
// instance is told to give up.
func (c *cluster) request(ctx context.Context, instance string, env *envelope) (json.RawMessage, error) {
	return await(ctx, func(done func(json.RawMessage, error)) func(error) {
		return c.startRequest(instance, env, nil, done)
	})
}

// startRequest registers a request under a new number, sends it (once the other
// instance is known to listen) and returns how to abort it. done runs
// exactly once: with the answer, a failure to send, an interruption, or the
// abort's cause.
func (c *cluster) startRequest(instance string, env *envelope, cl caller, done func(json.RawMessage, error)) (abort func(error)) {
	h := c.hub
	n := c.nextCall.Add(1)
	env.Call = n
	oc := &outCall{instance: instance, caller: cl, done: done, sent: make(chan struct{})}
	c.mu.Lock()
	c.calls[n] = oc
	r := c.remotes[instance]
	if r != nil && r.deaf {
		// Sent now, it would be lost: fail it clearly, at once, rather
		// than hold it for as long as the other's broker is down.
		delete(c.calls, n)
		c.mu.Unlock()
		done(nil, errNotListening)
		return func(error) {}
	}
	held := r != nil && c.brokerUp && r.heard != c.epoch
	if held {
		r.waiting = append(r.waiting, func() {
			c.mu.Lock()
			_, live := c.calls[n]
			oc.started = live
			c.mu.Unlock()
			if live {
				c.sendRequest(n, oc, env)
			}
		})
	} else {
		oc.started = true
	}
	c.mu.Unlock()
	if !held {
		c.sendRequest(n, oc, env)
	}
	return func(cause error) {
		if !c.finish(n, nil, cause) {
			return
		}
		c.mu.Lock()
		started := oc.started
		c.mu.Unlock()
		if !started {
			return
		}
		// The cancellation follows the request, never overtakes it.
		h.goOwned(func() {
			select {
			case <-oc.sent:
			case <-h.ctx.Done():
				return
			}
			c.cancelSent(instance, env, cause)
		})
	}
}

// cancelSent tells instance to give up a call, retry or sreq this instance
// sent it (other requests have nothing to cancel), and whether it timed
// out.
func (c *cluster) cancelSent(instance string, req *envelope, cause error) {
	timeout := errors.Is(cause, context.DeadlineExceeded)
	switch req.Kind {
	case kindCall, kindResume:
		c.send(instance, &envelope{Kind: kindCancel, Call: req.Call, Timeout: timeout})
	case kindSReq:
		c.send(instance, &envelope{Kind: kindSCancel, Call: req.Call, Timeout: timeout})
	}
}

// sendFailed ends request n, whose publish failed: certainly not sent
// (pubsub.ErrNotSent), or perhaps delivered (a write that timed out, a
// connection lost after the write), and then the other instance may be
// serving it: it is told to stop, as when the caller gives up.
func (c *cluster) sendFailed(n uint64, instance string, env *envelope, err error) {
	if errors.Is(err, pubsub.ErrNotSent) {
		c.finish(n, nil, errBrokerDown(err))
		return
	}
	if c.finish(n, nil, errUnconfirmed(err)) {
		c.cancelSent(instance, env, context.Canceled)
	}
}

// sendRequest posts request n; a failure to send ends it (sendFailed).
func (c *cluster) sendRequest(n uint64, oc *outCall, env *envelope) {
	c.post(oc.instance, env, func(err error) {
		c.hub.metrics.published(err)
		close(oc.sent)
		// Off the broker's goroutine: ending a call answers its client.
		if err != nil && !c.hub.goOwned(func() { c.sendFailed(n, oc.instance, env, err) }) {
			c.finish(n, nil, errDraining)
		}
	})
}

// finish ends a request we sent; it reports false when it had ended
// already.
func (c *cluster) finish(n uint64, raw json.RawMessage, err error) bool {
	c.mu.Lock()
	oc := c.calls[n]
	delete(c.calls, n)
	c.mu.Unlock()
	if oc == nil {
		return false
	}
	oc.done(raw, err)
	return true
}

// serving returns how many requests of other instances this one serves.
func (c *cluster) serving() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.served)
}

func (c *cluster) onInbox(ctx context.Context, topic string, payload []byte) {
	env, ok := decodeEnvelope(payload)
	if !ok {
		return
	}
	h := c.hub
	switch env.Kind {
	case kindSync:
		c.localChanged()
	case kindResult, kindSRes:
		raw, err := env.outcome()
		c.finish(env.Call, raw, err)
	case kindNotify:
		c.mu.Lock()
		oc := c.calls[env.Call]
		c.mu.Unlock()
		if oc != nil && oc.caller != nil {
			oc.caller.notify(env.Method, env.Params)
		}
	case kindClientNotify:
		if !c.hub.notifyLocalClient(env.Client, env.Method, env.Params) {
			c.hub.unrouted(env.Method, unroutedNoDestination, "client", env.Client)
		}
	case kindCancel, kindSCancel:
		key := servedKey(env.From, env.Call)
		c.mu.Lock()
		cancel := c.served[key]
		c.mu.Unlock()
		if cancel != nil {
			cause := context.Canceled
			if env.Timeout {
				cause = context.DeadlineExceeded // the server hears the call timed out
			}
			cancel.cancel(cause)
		}
	case kindCall:
		c.serveCall(env)
	case kindResume:
		c.serveResume(env)
	case kindHTTP:
		if env.HTTP != nil {
			c.serveRelayed(env)
		}
	case kindHTTPRes:
		c.onRelayPart(env)
	case kindSub, kindSReq:
		// Served on a goroutine of its own: the inbox must keep flowing
		// (the answer to a sampling request this call makes comes through
		// it).
		key := servedKey(env.From, env.Call)
		tctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout+time.Second)
		sctx, stop := context.WithCancelCause(tctx)
		c.mu.Lock()
		c.served[key] = cancelFunc(stop)
		c.mu.Unlock()
		if !h.goOwned(func() {
			defer cancel()
			defer c.unserve(key) // once answered: until then a drain waits
			res, err := c.serveRequest(sctx, env)
			switch cause := context.Cause(sctx); {
			case errors.Is(cause, context.Canceled):
				return // the caller gave up, or left: no one wants the answer
			case errors.Is(cause, errInterrupted):
				res, err = nil, cause // as for a call (endExchanges)
			}
			kind := kindResult
			if env.Kind == kindSReq {
				kind = kindSRes
			}
			c.answer(env, kind, res, err)
		}) {
			c.unserve(key)
			cancel()
		}
	}
}

// canceler ends something this instance serves for another: a
// *servedCall (a call's flight), or a cancelFunc.
type canceler interface{ cancel(cause error) }

// cancelFunc is a canceler made of a function.
type cancelFunc func(cause error)

func (f cancelFunc) cancel(cause error) { f(cause) }

func (c *cluster) unserve(key servedID) {
	c.mu.Lock()
	delete(c.served, key)
	c.mu.Unlock()
}

// answer sends the outcome of a request another instance sent, and
// returns once the broker took it (or it was given up: postAnswer).
func (c *cluster) answer(req *envelope, kind string, res json.RawMessage, err error) {
	posted := make(chan struct{})
	c.postAnswer(req, kind, res, err, func(error) { close(posted) })
	<-posted
}

// postAnswer is answer without waiting: done learns the outcome once the
// broker has it. The caller waits for the answer and nothing else would
// tell it, so an answer the broker did not take (a Redis Cluster shard
// whose master changed, before the route to the new one is known) is
// posted again, a little later each time, for as long as the request may
// last, unless the caller's instance leaves or this hub closes. A copy
// that arrives twice is taken once.
func (c *cluster) postAnswer(req *envelope, kind string, res json.RawMessage, err error, done func(error)) {
	h := c.hub
	if done == nil {
		done = h.metrics.published
	}
	ans := answerTo(req, kind, res, err)
	until := time.Now().Add(h.cfg.CallTimeout)
	var try func(wait time.Duration)
	try = func(wait time.Duration) {
		c.post(req.From, ans, func(err error) {
			if err == nil || !c.worthRetrying(req.From, until, err) {
				done(err)
				return
			}
			h.metrics.published(err) // this try
			h.log.Debug("posting an answer failed; trying again", "peer", shortID(req.From), "err", err)
			if !h.goOwned(func() {
				t := time.NewTimer(wait)
				defer t.Stop()
				select {
				case <-t.C:
					try(min(2*wait, time.Second))
				case <-h.ctx.Done():
					done(err)
				}
			}) {
				done(err)
			}
		})
	}
	try(20 * time.Millisecond)
}

// worthRetrying reports whether an answer to instance that the broker did
// not take (err) should be posted again: the broker could not reach Redis,
// the request may still be waited for, and its instance is still known.
func (c *cluster) worthRetrying(instance string, until time.Time, err error) bool {
	unavailable := errors.Is(err, pubsub.ErrUnavailable) || errors.Is(err, pubsub.ErrNotSent)
	if !unavailable || c.hub.ctx.Err() != nil || time.Now().After(until) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, known := c.remotes[instance]
	return known
}

func answerTo(req *envelope, kind string, res json.RawMessage, err error) *envelope {
	ans := &envelope{Kind: kind, Call: req.Call, Result: res}
	if err != nil {
		ans.Result, ans.Error = nil, toWire(err)
	}
	return ans
}

// serveCall forwards a call another instance sent to one of this
// instance's replicas, without a goroutine waiting: the answer is published
// from wherever it arrives. A call of a server whose replicas are leased
// goes to a replica of this instance its client may have, or waits here for
// one (lease.go).
func (c *cluster) serveCall(env *envelope) {
	h := c.hub
	rp := h.localReplica(env.Replica)
	if rp == nil {
		h.goOwned(func() { c.answer(env, kindResult, nil, errServerGone(env.Server)) })
		return
	}
	sc := &servedCall{env: env,
		remoteCaller: remoteCaller{c: c, instance: env.From, call: env.Call, clientKey: env.Client, declared: env.Caps, level: env.LogLevel}}
	c.mu.Lock()
	c.served[servedKey(env.From, env.Call)] = sc
	c.mu.Unlock()
	ri := rp.currentInfo()
	var abort func(error)
	if ri.Leased {
		abort = h.leases.route(ri.Name, h.reg.view().servers[ri.Name], env.Client, true, sc.sendTo,
			func(err error) { sc.finish(nil, err) })
	} else {
		abort = sc.sendTo(ri, nil)
	}
	// The caller times the call out and cancels it; this bound only holds
	// if that cancellation is lost.
	sc.started(0, abort, h.cfg.CallTimeout+time.Second)
}

// servedCall is a call another instance sent, on its way through one of
// this instance's replicas: one allocation for all it needs.
type servedCall struct {
	remoteCaller
	flight
	env     *envelope
	ri      *replicaInfo // the replica it was sent to; nil while it waits for a lease
	release func()       // ends its share of the replica's lease, if leased
}

// sendTo sends the call to ri, a replica of this instance; release, when
// set, runs when it ends.
func (sc *servedCall) sendTo(ri *replicaInfo, release func()) (abort func(error)) {
	sc.ri, sc.release = ri, release
	ri.inflight.Add(1)
	return ri.local.send(&sc.remoteCaller, sc.env.Method, sc.env.Params, sc.finish)
}

// finish sends the call's answer back, once.
func (sc *servedCall) finish(raw json.RawMessage, err error) {
	if !sc.end() {
		return
	}
	c := sc.c
	server := sc.env.Server
	if sc.ri != nil {
		if sc.release != nil {
			sc.release()
		}
		sc.ri.inflight.Add(-1)
		server = sc.ri.Name
	}
	if errors.Is(err, context.Canceled) {
		c.unserve(servedKey(sc.env.From, sc.env.Call))
		return // the caller gave up, or the exchange was interrupted: no one wants the answer
	}
	// The call stays served until its answer is published: a drain that
	// saw it gone would close the hub before the answer left, and the
	// caller would hear "instance gone" instead.
	c.postAnswer(sc.env, kindResult, raw, c.hub.upstreamError(server, err), sc.answered)
}

// answered ends the call's service once its answer is published (or could
// not be).
func (sc *servedCall) answered(err error) {
	sc.c.hub.metrics.published(err)
	sc.c.unserve(servedKey(sc.env.From, sc.env.Call))
}

// resume sends owner's retry of a call that asked for input to the
// instance whose requestState it carries (input.go), which checks that the
// call is owner's; done runs with what comes next: the call's answer, or
// its next input requests. The returned function gives up on it.
func (c *cluster) resume(instance string, owner identity, method string, params json.RawMessage, cl caller, done func(json.RawMessage, error)) (abort func(error), err error) {
	c.mu.Lock()
	_, known := c.remotes[instance]
	c.mu.Unlock()
	if !known {
		return nil, errBadState("the hub instance that gave it has left; send the request again without it")
	}
	env := &envelope{Kind: kindResume, Method: method, Params: params, Client: cl.client(), Owner: owner}
	return c.startRequest(instance, env, cl, done), nil
}

// serveResume takes a retry another instance sent for a call of this one,
// in the name of the principal the envelope says (the sender checked its
// credentials): the client there waits for what comes next.
func (c *cluster) serveResume(env *envelope) {
	h := c.hub
	key := servedKey(env.From, env.Call)
	answer := func(raw json.RawMessage, err error) {
		c.unserve(key)
		h.goOwned(func() { c.answer(env, kindResult, raw, err) })
	}
	st, ok := h.inputs.stateOf(env.Params)
	m, err := mcp.ParseRequestMeta(env.Params)
	if !ok || err != nil {
		answer(nil, errBadState("the retry carries no requestState of the hub's"))
		return
	}
	w := &inputWaiter{c: &remoteCaller{c: c, instance: env.From, call: env.Call, clientKey: env.Client}, meta: m,
		token: progressToken(env.Params), send: answer}
	c.mu.Lock()
	c.served[key] = cancelFunc(func(error) {
		c.unserve(key)
		h.inputs.giveUp(st.call, w)
	})
	c.mu.Unlock()
	if err := h.inputs.resumeWith(st, env.Owner, env.Method, env.Params, w); err != nil {
		answer(nil, err)
	}
}

// serveRequest carries out a sub or a sreq another instance sent.
func (c *cluster) serveRequest(ctx context.Context, env *envelope) (json.RawMessage, error) {
	h := c.hub
	switch env.Kind {
	case kindSub:
		rp := h.localReplica(env.Replica)
		if env.Unsub {
			h.subs.coordRemove(env.URI, env.Replica, env.From)
			return json.RawMessage(`{}`), nil
		}
		if rp == nil {
			return nil, errServerGone(env.Server)
		}
		if err := h.subs.coordAdd(ctx, rp, env.URI, env.From); err != nil {
			return nil, err
		}
		return json.RawMessage(`{}`), nil
	case kindSReq:
		oc := c.callerOf(env.Of, env.Client)
		if oc == nil {
			return nil, errCannotRoute(env.Method, "the call it serves has ended")
		}
		params, err := mcp.ParseObject(env.Params)
		if err != nil {
			return nil, err
		}
		if err := oc.caller.caps().check(env.Method, params); err != nil {
			return nil, err
		}
		raw, err := await(ctx, func(done func(json.RawMessage, error)) func(error) {
			return oc.caller.request(env.Method, env.Params, done)
		})
		if err != nil {
			return nil, h.downstreamError(err)
		}
		return raw, nil
	}
	return nil, jsonrpc.ErrInternal
}

// remoteCaller is a client's call on another instance, as the replica
// serving it sees it.
type remoteCaller struct {
	c         *cluster
	instance  string
	call      uint64 // the caller's number for the call
	clientKey string // the caller's key for its client
	declared  *clientCaps
	level     mcp.LoggingLevel
}

var _ caller = (*remoteCaller)(nil)

// notify posts at once, from the replica's read loop, so that a progress
// report is never overtaken by the answer it precedes: both leave in the
// order they were posted.
func (o *remoteCaller) notify(method string, params json.RawMessage) {
	o.c.post(o.instance, &envelope{Kind: kindNotify, Call: o.call, Method: method, Params: params}, nil)
}

func (o *remoteCaller) request(method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	// The sreq names the caller's call, so that the caller's instance finds
	// the client; the answer comes back under this instance's own number.
	return o.c.startRequest(o.instance, &envelope{Kind: kindSReq, Method: method, Params: params, Of: o.call, Client: o.clientKey}, nil, done)
}

func (o *remoteCaller) caps() clientCaps {
	if o.declared == nil {
		return clientCaps{}
	}
	return *o.declared
}

func (o *remoteCaller) client() string { return o.clientKey }

func (o *remoteCaller) logLevel() mcp.LoggingLevel { return o.level }

// callerOf finds the call in flight from this instance that a server's
// request is for: the one numbered n, else, when it has ended, another of
// the same client (client, when set). A request that names no call goes to
// whichever of its client's calls the server's instance saw first, and the
// answer to that one may overtake the request on the way here (a server
// whose replicas are leased serves many calls of one client at once). nil
// when the client has no call in flight here.
func (c *cluster) callerOf(n uint64, client string) *outCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	if oc := c.calls[n]; oc != nil && oc.caller != nil {
		return oc
	}
	if client == "" {
		return nil
	}
	for _, oc := range c.calls {
		if oc.caller != nil && oc.caller.client() == client {
			return oc
		}
	}
	return nil
}

// askRemote asks another instance to keep uri subscribed at its replica ri
// for this instance, or no longer.
func (h *Hub) askRemote(ctx context.Context, ri *replicaInfo, uri string, subscribe bool) error {
	_, err := h.cluster.request(ctx, ri.Instance, &envelope{Kind: kindSub, Replica: ri.ID, Server: ri.Name, URI: uri, Unsub: !subscribe})
	return err
}

func (c *cluster) close() {
	if c.stopWatch != nil {
		c.stopWatch()
	}
	for _, s := range c.subs {
		s.Close()
	}
}
