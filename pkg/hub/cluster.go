package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// The cluster: instances find each other and route to each other's servers
// through the broker.
//
// Every instance publishes, on topicRegistry, a heartbeat each interval and
// a snapshot of its replicas (names, lists) whenever they change. An
// instance that hears a heartbeat whose version it has no snapshot of asks
// its sender for one; one that stays silent for 3 intervals is dropped, and
// its servers leave the lists. Silence is judged over the time this
// instance was itself running and reading (expire): a stall of its own is
// no one else's. One that leaves says goodbye: on the
// registry, which takes its servers off the lists at once, and in each
// other's inbox, behind the answers it sent there, which ends its calls
// (sayGoodbye, leaving).
//
// The exchanges between instances (calls, requests, answers, resumptions)
// are in cluster_calls.go, their wire format in cluster_wire.go, and HTTP
// requests relayed to their session's owner in cluster_http.go.
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
	left     bool      // it said goodbye on the registry
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
	// silentOnes is len(silent), read without the lock by routing (pick),
	// which steers calls around those instances only while there are any.
	silentOnes atomic.Int32

	mu       sync.Mutex
	remotes  map[string]*remoteInstance
	calls    map[uint64]*outCall   // calls, subs and sreqs we sent, by number
	served   map[servedID]canceler // calls, subs, sreqs and relayed requests we serve for others: how to end them
	relays   map[uint64]*relay     // HTTP requests we relayed to their session's owner, by number
	partial  map[string]*snapParts // snapshots in parts still coming, by instance
	silent   map[string]time.Time  // instances dropped for their silence lately, by when (awaitOwner)
	joined   chan struct{}         // closed, and replaced, when an instance not known is heard
	brokerUp bool
	epoch    uint64    // counts our broker (re)connections
	upSince  time.Time // when the broker connection was last (re)established
	echoed   time.Time // when our own last heartbeat came back to us through the broker
	subs     []pubsub.Subscription
	dirty    chan struct{} // our snapshot changed

	state     chan bool // the broker's connection went down or up (Watch)
	stopWatch func()

	inboxMu sync.RWMutex
	inboxes map[string]string // instance -> its inbox topic
}

func newCluster(h *Hub) *cluster {
	return &cluster{
		hub:     h,
		remotes: map[string]*remoteInstance{},
		calls:   map[uint64]*outCall{},
		served:  map[servedID]canceler{},
		relays:  map[uint64]*relay{},
		partial: map[string]*snapParts{},
		silent:  map[string]time.Time{},
		joined:  make(chan struct{}),
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
	c.brokerUp, c.epoch, c.upSince = up, 1, time.Now()
	c.echoed = c.upSince
	c.mu.Unlock()
	if !h.goOwned(c.loop) {
		return errors.New("hub closed")
	}
	c.publish(ctx, topicRegistry, &envelope{Kind: envHello})
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
	lastTick := time.Now()
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
			c.sayGoodbye()
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
			// A tick that comes late says this instance stalled (a GC
			// pause, a starved CPU, a throttled container): the others'
			// heartbeats of that time may wait unread in its subscription.
			now := time.Now()
			c.excuse(now.Sub(lastTick)-interval, now)
			lastTick = now
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
		c.upSince = time.Now()
		c.echoed = c.upSince
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
		c.publish(ctx, topicRegistry, &envelope{Kind: envHello})
		c.publishSnapshot(ctx)
		h.goOwned(h.tasks.brokerBack) // the records it keeps, to a Redis that may have lost them
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
	c.publish(ctx, topicRegistry, &envelope{Kind: envHeartbeat, Version: c.version.Load(), Clients: clients, Deaf: !up})
	h.renewNames(ctx)
	now := time.Now()
	c.expire(now)
	h.reg.expire(now)
}

// excuse forgives the others the time this instance stalled: a heartbeat
// tick late by stalled moves when each was last heard that much later (not
// past now), so that silence is counted over the time this instance ran.
// Without it, the first tick after a stall longer than missedHeartbeats
// intervals dropped every other instance, whose heartbeats sat unread in
// the subscription, failed their calls, and learnt them again a moment
// later.
func (c *cluster) excuse(stalled time.Duration, now time.Time) {
	if stalled <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.remotes {
		if r.lastSeen = r.lastSeen.Add(stalled); r.lastSeen.After(now) {
			r.lastSeen = now
		}
	}
}

// expire drops the instances that missed too many heartbeats. While the
// broker is up, silence is judged only as far as this instance's own
// subscription is known to be read: up to an interval after its own last
// heartbeat came back to it. If that echo is overdue, what the others sent
// may be waiting unread (a reader starved of CPU, a backlog), and their
// silence is not counted while it is, for missedHeartbeats intervals at
// most: a subscription that stays silent longer is not lagging but lost
// (the broker's shard down for this instance alone, a one-way partition),
// and this instance, which hears no one, drops them all as before. While
// the broker is down nothing comes back and silence is judged against now,
// as the others are unreachable anyway. An instance dropped for its
// silence, unless it said goodbye, is noted as such for missedHeartbeats
// intervals: its servers stay listed, the requests for its sessions wait
// for it (awaitOwner), and what is under way with it (calls either way,
// relayed requests, tasks, subscriptions kept for its clients) goes on:
// that ends, and its servers leave, only if it is not heard again within
// those intervals (dropSilent).
func (c *cluster) expire(now time.Time) {
	interval := c.hub.cfg.HeartbeatInterval
	limit := time.Duration(missedHeartbeats) * interval
	c.mu.Lock()
	judged := now
	if read := c.echoed.Add(interval); c.brokerUp && read.Before(judged) {
		judged = read
		if lagged := now.Add(-limit); lagged.After(judged) {
			judged = lagged
		}
	}
	gone := map[string]bool{} // whether each may only lag: it did not say goodbye (see awaitOwner)
	for id, r := range c.remotes {
		if judged.Sub(r.lastSeen) > limit {
			gone[id] = !r.left
		}
	}
	// One not heard again in time is gone after all: what was under way
	// with it ends, taken under the lock that heard takes, so that nothing
	// begun with it once it is heard again is ended with the rest.
	var lost []string
	var ended []exchanges
	for id, at := range c.silent {
		if now.Sub(at) > limit {
			delete(c.silent, id)
			lost = append(lost, id)
			ended = append(ended, c.takeExchangesLocked(id, true))
		}
	}
	c.silentOnes.Store(int32(len(c.silent)))
	c.mu.Unlock()
	for i, id := range lost {
		ended[i].end(errInstanceGone, true)
		if !c.knows(id) { // else heard again meanwhile: what it asked of us since is its own
			c.hub.log.Warn("instance not heard again; dropping its servers", "peer", shortID(id))
			c.hub.reg.setRemote(id, nil, nil)
			c.unsync(id) // should it be heard meanwhile, its servers come back
			c.hub.subs.dropInstance(id)
			c.hub.tasks.instanceGone(id)
		}
	}
	for id, lagging := range gone {
		if lagging {
			c.hub.log.Warn("instance went silent; its servers wait for it", "peer", shortID(id))
			c.dropSilent(id, now)
		} else {
			c.hub.log.Warn("instance went silent; dropping its servers", "peer", shortID(id))
			c.drop(id)
		}
	}
}

// sayGoodbye tells the others that this instance leaves: in the inbox of
// each (behind the answers it sent there, which the goodbye must not
// overtake) and on the registry (for those it does not know yet).
func (c *cluster) sayGoodbye() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.mu.Lock()
	others := slices.Collect(maps.Keys(c.remotes))
	c.mu.Unlock()
	for _, id := range others {
		c.publish(ctx, topicInboxPrefix+id, &envelope{Kind: envBye})
	}
	c.publish(ctx, topicRegistry, &envelope{Kind: envBye})
}

// leaving handles an instance's goodbye on the registry: its servers go at
// once, so that no call is sent there any more. Its calls in flight end
// with the goodbye it sent to our inbox, which comes after their answers
// (the registry's messages and the inbox's are delivered apart, and an
// answer it sent before leaving could otherwise arrive after its calls
// were failed: "instance gone", after a drain had waited for them); or,
// should that one be lost, once its heartbeats are missed (expire).
func (c *cluster) leaving(id string) {
	c.mu.Lock()
	r, known := c.remotes[id]
	if known {
		r.left = true
	}
	c.mu.Unlock()
	if known {
		c.hub.reg.setRemote(id, nil, nil)
	}
}

// drop forgets an instance: its servers, its calls and what it asked of us.
func (c *cluster) drop(id string) {
	known := c.forget(id, time.Time{})
	c.endExchanges(id, errInstanceGone, true)
	if known {
		c.hub.reg.setRemote(id, nil, nil)
		c.hub.tasks.instanceGone(id) // its tasks' followers hear they failed
	}
	c.hub.subs.dropInstance(id)
}

// dropSilent forgets an instance that went silent at now, which may only
// lag (expire), and fails the requests held for it, never sent. Its
// servers stay listed, so that a lag does not take their tools from every
// client and give them back (list_changed twice); calls go to them only
// when no heard instance has a replica of theirs (pick), and wait for it.
// What is under way with it (its calls, what it asked of us, the tasks it
// holds, the subscriptions this instance keeps for its clients, which it
// would not know to ask again) waits for it too: expire ends all that, and
// drops its servers, if it is not heard again within missedHeartbeats
// intervals.
func (c *cluster) dropSilent(id string, now time.Time) {
	c.forget(id, now)
	c.endHeld(id, errInstanceGone)
}

// forget takes an instance off the cluster, noting it as silent since
// silentAt unless that is zero, and reports whether it was known.
func (c *cluster) forget(id string, silentAt time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, known := c.remotes[id]
	delete(c.remotes, id)
	delete(c.partial, id)
	if silentAt.IsZero() {
		delete(c.silent, id)
	} else {
		c.silent[id] = silentAt
	}
	c.silentOnes.Store(int32(len(c.silent)))
	return known
}

// unsync forgets the snapshot held of instance, if it is heard again: its
// next heartbeat then asks for another. (Its servers were dropped from the
// registry outside the lock that hearing it takes, perhaps after a
// snapshot of it came in.)
func (c *cluster) unsync(instance string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.remotes[instance]; r != nil {
		r.snap, r.version = nil, 0
	}
}

// heardOnly returns the replicas of instances this one hears (its own among
// them), leaving out those of instances dropped for their silence; all of
// them when none is heard.
func (c *cluster) heardOnly(replicas []*replicaInfo) []*replicaInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*replicaInfo, 0, len(replicas))
	for _, ri := range replicas {
		if _, silent := c.silent[ri.Instance]; !silent {
			out = append(out, ri)
		}
	}
	if len(out) == 0 {
		return replicas
	}
	return out
}

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
		c.publish(ctx, topicRegistry, &envelope{Kind: envSnapshot, Version: version, Snapshot: snap})
		return
	}
	var chunks [][]byte
	for len(raw) > 0 {
		n := min(len(raw), h.cfg.SnapshotChunkBytes)
		chunks, raw = append(chunks, raw[:n]), raw[n:]
	}
	for i, chunk := range chunks {
		if c.publish(ctx, topicRegistry, &envelope{Kind: envSnapPart, Version: version, Part: i, Parts: len(chunks), Chunk: chunk}) != nil {
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
		delete(c.silent, instance)
		c.silentOnes.Store(int32(len(c.silent)))
		close(c.joined) // wakes the requests waiting for their session's owner (awaitOwner)
		c.joined = make(chan struct{})
	}
	r.lastSeen = now
	if hears != hearsAsBefore {
		r.deaf = hears == hearsNot
	}
	var release []func()
	var held exchanges
	switch {
	case r.deaf:
		held.failed = c.takeHeldLocked(instance)
		r.waiting = nil
	case c.brokerUp && r.heard != c.epoch:
		r.heard = c.epoch
		release, r.waiting = r.waiting, nil
	}
	c.mu.Unlock()
	held.end(errNotListening, false)
	for _, fn := range release {
		fn()
	}
	return r
}

func (c *cluster) onRegistry(ctx context.Context, topic string, payload []byte) {
	env, ok := decodeEnvelope(payload)
	if !ok {
		return
	}
	now := time.Now()
	if env.From == c.hub.id {
		if env.Kind == envHeartbeat {
			c.mu.Lock()
			c.echoed = now // what the others sent before it has been read (expire)
			c.mu.Unlock()
		}
		return
	}
	switch env.Kind {
	case envBye:
		c.leaving(env.From)
	case envHello:
		// It (re)joined: what we sent it before may be lost, and what it
		// served for us may never answer.
		c.interrupt(env.From)
		c.heard(env.From, now, hearsNow)
		c.localChanged() // publish our snapshot for the newcomer
		c.hub.subs.rejoined(env.From)
	case envHeartbeat:
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
			c.publish(ctx, topicInboxPrefix+env.From, &envelope{Kind: envSync})
		}
	case envSnapshot:
		if env.Snapshot != nil {
			c.applySnapshot(env.From, env.Version, env.Snapshot, now)
		}
	case envSnapPart:
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

// knows reports whether instance is one this instance hears from.
func (c *cluster) knows(instance string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, known := c.remotes[instance]
	return known
}

// mayHear reports whether instance is one this instance hears, or one
// dropped for its silence lately, which may be heard again (expire).
func (c *cluster) mayHear(instance string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, known := c.remotes[instance]
	_, silent := c.silent[instance]
	return known || silent
}

// settled reports whether this instance has been in the cluster long
// enough to have heard every live instance (missedHeartbeats since its
// broker connection was last established): one it does not know then is
// gone.
func (c *cluster) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokerUp && time.Since(c.upSince) > time.Duration(missedHeartbeats)*c.hub.cfg.HeartbeatInterval
}

// awaitOwner waits until instance, which owns a session this instance was
// asked to serve, is one it hears from, and reports whether it is. One
// dropped for its silence lately may be alive all the same: the silence
// was a lag (a stall, a backlog on either side), and it is heard again in
// a moment. A request for its session waits for it then, for
// missedHeartbeats intervals after the drop at most, rather than be told
// that the session is gone (404), which makes its client give the session
// up. So does a request for one never heard while this instance has not
// yet heard everyone (it started, or its broker connection came back, less
// than missedHeartbeats intervals ago: settled). While the broker is down
// none is known.
func (c *cluster) awaitOwner(ctx context.Context, instance string) bool {
	limit := time.Duration(missedHeartbeats) * c.hub.cfg.HeartbeatInterval
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		c.mu.Lock()
		_, known := c.remotes[instance]
		until, lagging := c.silent[instance]
		if !lagging {
			until = c.upSince // not heard yet, maybe
		}
		up, joined := c.brokerUp, c.joined
		c.mu.Unlock()
		wait := time.Until(until.Add(limit))
		switch {
		case known:
			return true
		case !up, wait <= 0:
			return false
		case timer == nil:
			timer = time.NewTimer(wait)
		default:
			timer.Reset(wait)
		}
		select {
		case <-joined:
		case <-timer.C:
		case <-ctx.Done():
			return false
		}
	}
}

// hasRemotes reports whether this instance knows another.
func (c *cluster) hasRemotes() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.remotes) > 0
}

// departures returns the servers that left the other instances lately, as
// their snapshots say.
func (c *cluster) departures() []departure {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []departure
	for _, r := range c.remotes {
		if r.snap != nil {
			out = append(out, r.snap.Departed...)
		}
	}
	return out
}

func (c *cluster) close() {
	if c.stopWatch != nil {
		c.stopWatch()
	}
	for _, s := range c.subs {
		s.Close()
	}
}
