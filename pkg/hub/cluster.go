package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
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
// inbox topic; its answer, progress reports and the server's own requests
// for the client come back to the caller's inbox, and a cancellation follows
// the request. Ids are the caller's call numbers, so nothing of one client
// can be confused with another's.
const (
	topicRegistry    = "registry"
	topicInboxPrefix = "inbox/"
	missedHeartbeats = 3
)

// Envelope kinds.
const (
	kindHeartbeat = "hb"   // registry: I am alive at this version
	kindSnapshot  = "snap" // registry: my replicas
	kindBye       = "bye"  // registry: I am leaving
	kindHello     = "hi"   // registry: I (re)joined; everyone please send a snapshot
	kindSync      = "sync" // inbox: please publish your snapshot
	kindCall      = "call" // inbox: forward this request to your replica
	kindSub       = "sub"  // inbox: keep this resource subscribed for me (or not)
	kindResult    = "res"  // inbox: the answer to a call or sub
	kindCancel    = "cxl"  // inbox: the caller gave up on a call
	kindNotify    = "ntf"  // inbox: a notification about a call (progress)
	kindSReq      = "sreq" // inbox: a server's request for the client of a call
	kindSRes      = "sres" // inbox: the answer to a sreq
	kindSCancel   = "scxl" // inbox: the server gave up on a sreq
)

// envelope is every message between instances.
type envelope struct {
	Kind string `json:"k"`
	From string `json:"f"`

	Version  uint64    `json:"v,omitempty"`
	Clients  int       `json:"n,omitempty"`
	Snapshot *snapshot `json:"s,omitempty"`

	Call    uint64          `json:"c,omitempty"` // the sender's number for a call, sub or sreq
	Of      uint64          `json:"o,omitempty"` // for a sreq: the call it serves
	Client  string          `json:"cl,omitempty"`
	Replica string          `json:"r,omitempty"`
	Method  string          `json:"m,omitempty"`
	Params  json.RawMessage `json:"p,omitempty"`
	Caps    *clientCaps     `json:"cap,omitempty"`
	Result  json.RawMessage `json:"res,omitempty"`
	Error   *wireError      `json:"err,omitempty"`
	URI     string          `json:"u,omitempty"`
	Unsub   bool            `json:"x,omitempty"`
	Body    string          `json:"b,omitempty"` // on the wire: which of Params and Result follows the header
}

// On the wire an envelope is its JSON header, and when it carries params or
// a result (usually most of its bytes), a newline and those, raw:
// encoding/json would re-scan them twice on the way out and twice on the way
// in, where this copies them once and validates them once. A header never
// holds a newline, which encoding/json always escapes.
const (
	bodyParams = "p"
	bodyResult = "res"
)

// encode returns the envelope's wire form.
func (env *envelope) encode() ([]byte, error) {
	head := *env
	var body []byte
	switch {
	case len(env.Params) > 0 && len(env.Result) > 0: // never sent; both stay in the header
	case len(env.Params) > 0:
		head.Body, head.Params, body = bodyParams, nil, env.Params
	case len(env.Result) > 0:
		head.Body, head.Result, body = bodyResult, nil, env.Result
	}
	b, err := json.Marshal(&head)
	if err != nil || body == nil {
		return b, err
	}
	out := make([]byte, 0, len(b)+1+len(body))
	out = append(append(b, '\n'), body...)
	return out, nil
}

// decodeEnvelope reads an envelope's wire form. The params or result it
// returns share payload's memory.
func decodeEnvelope(payload []byte) (*envelope, bool) {
	head, body, hasBody := bytes.Cut(payload, []byte{'\n'})
	env := new(envelope)
	if json.Unmarshal(head, env) != nil || env.From == "" {
		return nil, false
	}
	switch {
	case !hasBody && env.Body == "":
		return env, true
	case !hasBody || !jsonrpc.Valid(body):
		return nil, false
	case env.Body == bodyParams:
		env.Params = body
	case env.Body == bodyResult:
		env.Result = body
	default:
		return nil, false
	}
	return env, true
}

// wireError is a JSON-RPC error object in an envelope.
type wireError struct {
	Code    jsonrpc.Code    `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func toWire(err error) *wireError {
	e := jsonrpc.ErrorOf(err)
	return &wireError{Code: e.Code, Message: e.Message, Data: e.Data}
}

func (w *wireError) err() error {
	return &jsonrpc.Error{Code: w.Code, Message: w.Message, Data: w.Data}
}

// snapshot is what one instance offers.
type snapshot struct {
	Addr      string        `json:"addr,omitempty"`
	StartedAt time.Time     `json:"startedAt"`
	Replicas  []replicaSnap `json:"replicas"`
}

type replicaSnap struct {
	ID              string                      `json:"id"`
	Name            string                      `json:"name"`
	ServerInfo      mcp.Implementation          `json:"serverInfo"`
	ProtocolVersion string                      `json:"protocolVersion"`
	ConnectedAt     time.Time                   `json:"connectedAt"`
	Owner           string                      `json:"owner"`
	Lists           [numKinds][]json.RawMessage `json:"lists"`
}

// remoteInstance is what this instance knows of another.
type remoteInstance struct {
	version  uint64 // of the snapshot we hold
	lastSeen time.Time
	clients  int
	snap     *snapshot
	asked    time.Time // when we last asked it for a snapshot
}

// cluster is this instance's side of the cluster.
type cluster struct {
	hub      *Hub
	version  atomic.Uint64 // of our own snapshot
	nextCall atomic.Uint64

	mu       sync.Mutex
	remotes  map[string]*remoteInstance
	calls    map[uint64]*outCall           // calls, subs and sreqs we sent, by number
	serving  map[string]context.CancelFunc // calls and sreqs we serve for others, by "from/number"
	brokerUp bool
	subs     []pubsub.Subscription
	dirty    chan struct{} // our snapshot changed
}

// outCall is a request this instance sent to another and waits on.
type outCall struct {
	instance string
	origin   downstream // for calls: where progress and sreqs go
	answer   chan *envelope
}

func newCluster(h *Hub) *cluster {
	return &cluster{
		hub:     h,
		remotes: map[string]*remoteInstance{},
		calls:   map[uint64]*outCall{},
		serving: map[string]context.CancelFunc{},
		dirty:   make(chan struct{}, 1),
	}
}

func (c *cluster) start(ctx context.Context) error {
	h := c.hub
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
	c.brokerUp = h.broker.Ready(ctx) == nil
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
		case <-c.dirty:
			c.publishSnapshot(h.ctx)
		case <-tick.C:
			c.heartbeat()
		}
	}
}

// checkBroker notices the broker coming back after an outage, and then says
// so, so that every instance sends its snapshot at once instead of at its
// next heartbeat.
func (c *cluster) checkBroker() {
	h := c.hub
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.HeartbeatInterval)
	defer cancel()
	up := h.broker.Ready(ctx) == nil
	c.mu.Lock()
	wasUp := c.brokerUp
	c.brokerUp = up
	c.mu.Unlock()
	if up {
		h.metrics.brokerUp.Set(1)
	} else {
		h.metrics.brokerUp.Set(0)
	}
	switch {
	case up && !wasUp:
		h.log.Info("broker reachable again; rejoining the cluster")
		c.publish(ctx, topicRegistry, &envelope{Kind: kindHello})
		c.publishSnapshot(ctx)
	case !up && wasUp:
		h.log.Warn("broker unreachable: only this instance's servers can be reached until it is back")
	}
}

func (c *cluster) heartbeat() {
	h := c.hub
	c.checkBroker()
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.HeartbeatInterval)
	defer cancel()
	clients := len(h.clientList())
	c.publish(ctx, topicRegistry, &envelope{Kind: kindHeartbeat, Version: c.version.Load(), Clients: clients})
	c.expire(time.Now())
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
	var failed []*outCall
	for n, oc := range c.calls {
		if oc.instance == id {
			failed = append(failed, oc)
			delete(c.calls, n)
		}
	}
	for key, cancel := range c.serving {
		if len(key) > len(id) && key[:len(id)] == id && key[len(id)] == '/' {
			cancel()
			delete(c.serving, key)
		}
	}
	c.mu.Unlock()
	for _, oc := range failed {
		oc.answer <- &envelope{Kind: kindResult, Error: toWire(errInstanceGone)}
	}
	if known {
		h.reg.setRemote(id, nil)
	}
	h.subs.dropInstance(id)
}

var errInstanceGone = &jsonrpc.Error{Code: mcp.CodeConnectionClosed, Message: "the hub instance serving this server left"}

func (c *cluster) publishSnapshot(ctx context.Context) {
	h := c.hub
	snap := &snapshot{Addr: h.cfg.Addr, StartedAt: h.start.UTC()}
	for _, ri := range h.reg.localReplicas() {
		rs := replicaSnap{ID: ri.ID, Name: ri.Name, ServerInfo: ri.ServerInfo, ProtocolVersion: ri.ProtocolVersion,
			ConnectedAt: ri.ConnectedAt, Owner: ri.Owner}
		for k := range numKinds {
			for _, it := range ri.lists[k] {
				rs.Lists[k] = append(rs.Lists[k], it.raw)
			}
		}
		snap.Replicas = append(snap.Replicas, rs)
	}
	c.publish(ctx, topicRegistry, &envelope{Kind: kindSnapshot, Version: c.version.Load(), Snapshot: snap})
}

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
		c.localChanged() // publish our snapshot for the newcomer
	case kindHeartbeat:
		c.mu.Lock()
		r := c.remotes[env.From]
		if r == nil {
			r = &remoteInstance{}
			c.remotes[env.From] = r
		}
		r.lastSeen, r.clients = now, env.Clients
		ask := (r.snap == nil || r.version != env.Version) && now.Sub(r.asked) > c.hub.cfg.HeartbeatInterval/2
		if ask {
			r.asked = now
		}
		c.mu.Unlock()
		if ask {
			c.publish(ctx, topicInboxPrefix+env.From, &envelope{Kind: kindSync})
		}
	case kindSnapshot:
		if env.Snapshot == nil {
			return
		}
		c.mu.Lock()
		r := c.remotes[env.From]
		if r == nil {
			r = &remoteInstance{}
			c.remotes[env.From] = r
		}
		r.lastSeen = now
		same := r.snap != nil && r.version == env.Version
		r.version, r.snap = env.Version, env.Snapshot
		c.mu.Unlock()
		if !same {
			c.hub.reg.setRemote(env.From, c.replicasOf(env.From, env.Snapshot))
		}
	}
}

// replicasOf turns a snapshot into registry entries.
func (c *cluster) replicasOf(instance string, s *snapshot) []*replicaInfo {
	sep := c.hub.cfg.Separator
	out := make([]*replicaInfo, 0, len(s.Replicas))
	for _, rs := range s.Replicas {
		ri := &replicaInfo{ID: rs.ID, Name: rs.Name, Instance: instance, ServerInfo: rs.ServerInfo,
			ProtocolVersion: rs.ProtocolVersion, ConnectedAt: rs.ConnectedAt, Owner: rs.Owner}
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

// callRemote forwards a request to a replica on another instance and waits
// for its answer, relaying progress and the server's requests meanwhile.
func (h *Hub) callRemote(ctx context.Context, ri *replicaInfo, origin downstream, method string, params json.RawMessage) (json.RawMessage, error) {
	ri.inflight.Add(1)
	defer ri.inflight.Add(-1)
	caps := origin.caps()
	env := &envelope{Kind: kindCall, Replica: ri.ID, Method: method, Params: params, Caps: &caps, Client: origin.key()}
	res, err := h.cluster.request(ctx, ri.Instance, env, origin)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// askRemote asks another instance to keep uri subscribed at its replica ri
// for this instance, or no longer.
func (h *Hub) askRemote(ctx context.Context, ri *replicaInfo, uri string, subscribe bool) error {
	_, err := h.cluster.request(ctx, ri.Instance, &envelope{Kind: kindSub, Replica: ri.ID, URI: uri, Unsub: !subscribe}, nil)
	return err
}

// errBrokerDown is what a cross-instance request gets while the broker is
// unreachable: at once, instead of a timeout.
func errBrokerDown(err error) error {
	return (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
		Message: "the server is on another hub instance, unreachable now: the broker is unavailable"}).
		WithData(map[string]string{"reason": "broker unavailable"})
}

// request sends an envelope to another instance's inbox and waits for the
// answer; if ctx ends first, the other instance is told to give up.
func (c *cluster) request(ctx context.Context, instance string, env *envelope, origin downstream) (json.RawMessage, error) {
	n := c.nextCall.Add(1)
	env.Call = n
	oc := &outCall{instance: instance, origin: origin, answer: make(chan *envelope, 1)}
	c.mu.Lock()
	c.calls[n] = oc
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, n)
		c.mu.Unlock()
	}()
	if err := c.publish(ctx, topicInboxPrefix+instance, env); err != nil {
		return nil, errBrokerDown(err)
	}
	select {
	case ans := <-oc.answer:
		if ans.Error != nil {
			return nil, ans.Error.err()
		}
		return ans.Result, nil
	case <-ctx.Done():
		if env.Kind == kindCall || env.Kind == kindSReq {
			cancelKind := kindCancel
			if env.Kind == kindSReq {
				cancelKind = kindSCancel
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			c.publish(cctx, topicInboxPrefix+instance, &envelope{Kind: cancelKind, Call: n})
			cancel()
		}
		return nil, ctx.Err()
	}
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
		c.mu.Lock()
		oc := c.calls[env.Call]
		delete(c.calls, env.Call)
		c.mu.Unlock()
		if oc != nil {
			oc.answer <- env
		}
	case kindNotify:
		c.mu.Lock()
		oc := c.calls[env.Call]
		c.mu.Unlock()
		if oc != nil && oc.origin != nil {
			oc.origin.notify(env.Method, env.Params)
		}
	case kindCancel, kindSCancel:
		key := env.From + "/" + strconv.FormatUint(env.Call, 10)
		c.mu.Lock()
		cancel := c.serving[key]
		delete(c.serving, key)
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	case kindCall, kindSub, kindSReq:
		// Served on a goroutine of its own: the inbox must keep flowing
		// (the answer to a sampling request this call makes comes through
		// it).
		key := env.From + "/" + strconv.FormatUint(env.Call, 10)
		sctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout+time.Second)
		c.mu.Lock()
		c.serving[key] = cancel
		c.mu.Unlock()
		if !h.goOwned(func() {
			defer func() {
				c.mu.Lock()
				delete(c.serving, key)
				c.mu.Unlock()
				cancel()
			}()
			res, err := c.serve(sctx, env)
			ans := &envelope{Kind: kindResult, Call: env.Call, Result: res}
			if env.Kind == kindSReq {
				ans.Kind = kindSRes
			}
			if err != nil {
				ans.Result, ans.Error = nil, toWire(err)
			}
			if sctx.Err() != nil && errors.Is(context.Cause(sctx), context.Canceled) && err != nil {
				return // the caller gave up: it wants no answer
			}
			pctx, pcancel := context.WithTimeout(h.ctx, time.Second)
			defer pcancel()
			c.publish(pctx, topicInboxPrefix+env.From, ans)
		}) {
			cancel()
		}
	}
}

// serve carries out a request another instance sent.
func (c *cluster) serve(ctx context.Context, env *envelope) (json.RawMessage, error) {
	h := c.hub
	switch env.Kind {
	case kindCall:
		rp := h.localReplica(env.Replica)
		if rp == nil {
			return nil, errServerGone("")
		}
		origin := &remoteOrigin{c: c, instance: env.From, call: env.Call, client: env.Client, declared: env.Caps}
		ri := rp.currentInfo()
		raw, err := rp.call(ctx, ri.inflight, origin, env.Method, env.Params)
		if err != nil {
			return nil, h.upstreamError(ctx, ri.Name, err)
		}
		return raw, nil
	case kindSub:
		rp := h.localReplica(env.Replica)
		if env.Unsub {
			h.subs.coordRemove(env.URI, env.From)
			return json.RawMessage(`{}`), nil
		}
		if rp == nil {
			return nil, errServerGone("")
		}
		if err := h.subs.coordAdd(ctx, rp, env.URI, env.From); err != nil {
			return nil, err
		}
		return json.RawMessage(`{}`), nil
	case kindSReq:
		c.mu.Lock()
		oc := c.calls[env.Of]
		c.mu.Unlock()
		if oc == nil || oc.origin == nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "cannot route %s: the call it serves has ended", env.Method)
		}
		params, err := mcp.ParseObject(env.Params)
		if err != nil {
			return nil, err
		}
		if err := oc.origin.caps().check(env.Method, params); err != nil {
			return nil, err
		}
		raw, err := oc.origin.request(ctx, env.Method, env.Params)
		if err != nil {
			return nil, h.downstreamError(ctx, err)
		}
		return raw, nil
	}
	return nil, fmt.Errorf("unknown request kind %q", env.Kind)
}

// remoteOrigin is a client on another instance, as the replica serving its
// call sees it.
type remoteOrigin struct {
	c        *cluster
	instance string
	call     uint64 // the caller's number for the call
	client   string // the caller's key for its client
	declared *clientCaps
}

func (o *remoteOrigin) notify(method string, params json.RawMessage) {
	ctx, cancel := context.WithTimeout(o.c.hub.ctx, time.Second)
	defer cancel()
	o.c.publish(ctx, topicInboxPrefix+o.instance, &envelope{Kind: kindNotify, Call: o.call, Method: method, Params: params})
}

func (o *remoteOrigin) request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	// The sreq names the caller's call, so that the caller's instance finds
	// the client; the answer comes back under this instance's own number.
	return o.c.request(ctx, o.instance, &envelope{Kind: kindSReq, Method: method, Params: params, Of: o.call}, nil)
}

func (o *remoteOrigin) caps() clientCaps {
	if o.declared == nil {
		return clientCaps{}
	}
	return *o.declared
}

func (o *remoteOrigin) key() string { return o.client }

func (c *cluster) close() {
	for _, s := range c.subs {
		s.Close()
	}
}
