package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// handshakeTimeout bounds a server's initialize and listing.
const handshakeTimeout = 30 * time.Second

// maxPages bounds the pages of one list, so that a server whose cursors
// never end cannot hold the hub.
const maxPages = 1000

// serverMaxPending bounds the requests of one server connection that the
// hub holds at once, on a worker or waiting on a client (HandleAsync):
// beyond it the server's request is refused at once (-32004).
const serverMaxPending = 256

// replica is one connection of an MCP server dialing out to this instance.
// Toward it the hub is the MCP client.
type replica struct {
	hub     *Hub
	id      string
	peer    *peer.Peer
	log     *slog.Logger
	who     *principal
	release func()   // frees the token's connection slot
	notes   *bucket  // its notifications' rate limit; nil for none
	roots   []string // the roots given on its URL (?root=), for roots/list outside any call

	// modern marks a server of the 2026-07-28 revision (replica_modern.go);
	// set by the handshake, before the replica is registered. needsSession:
	// its URL said ?era=session (a server whose tools send clients requests
	// of their own mid-call): it is initialized, never discovered.
	modern       bool
	needsSession bool
	listen       upstreamListen // a modern server's listen stream

	// untagged: the server's URL said ?lease=client, as the connector says
	// of a published stdio server, whose requests to clients cannot name
	// their call; unless it is modern, its replicas are then leased
	// (routing_lease.go).
	untagged bool
	// holder is the client whose calls a leased replica serves ("" while it
	// is free) and leased their number; under the hub's leases.mu.
	holder string
	leased int

	mu         sync.Mutex
	info       *replicaInfo // published; nil until registered
	calls      map[jsonrpc.ID]*upstreamCall
	tokens     map[string]*upstreamCall     // by the raw JSON of the hub's progress token
	acks       map[jsonrpc.ID]chan struct{} // listen streams waiting for their acknowledgement
	held       map[string]json.RawMessage   // the last progress report of a call the rate limit held back, by token
	updates    map[string]json.RawMessage   // the last resources/updated of a URI the rate limit held back, by URI
	flushing   bool                         // a goroutine sends the held updates (flushUpdates)
	refreshing bool
	dirty      [numKinds]bool
	relisted   time.Time // when the last re-listing round started
}

func (h *Hub) serveServer(w http.ResponseWriter, r *http.Request) {
	who, release := h.admit(w, r, "/mcp/server", RoleServer)
	if who == nil {
		return
	}
	conn, err := peer.Accept(w, r, h.acceptOptions())
	if err != nil {
		release()
		return // Accept has answered with an HTTP error
	}
	rp := &replica{
		hub:     h,
		id:      h.nextKey(),
		who:     who,
		release: release,
		calls:   map[jsonrpc.ID]*upstreamCall{},
		tokens:  map[string]*upstreamCall{},
		acks:    map[jsonrpc.ID]chan struct{}{},
		listen:  upstreamListen{turn: make(chan struct{}, 1)},
	}
	if h.cfg.ServerNotificationRate > 0 {
		rp.notes = newBucket(h.cfg.ServerNotificationRate, h.cfg.ServerNotificationBurst)
	}
	rp.log = h.log.With("replica", rp.id[len(h.id)+1:])
	rp.peer = peer.New(conn, &peer.Options{
		Handler:        rp, // a peer.Handler and a peer.AsyncHandler
		MaxConcurrent:  16,
		MaxPending:     serverMaxPending,
		Overloaded:     errOverloaded(serverMaxPending),
		Limits:         h.cfg.limits(),
		SendQueue:      h.cfg.SendQueue,
		CloseOnInvalid: true,
		OnCancel:       rp.onCancel,
		Logger:         rp.log,
	})
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		release()
		conn.Close(peer.CloseGoingAway, "hub shutting down")
		return
	}
	h.replicas[rp] = struct{}{}
	h.mu.Unlock()
	h.metrics.connections.WithLabelValues("server").Inc()
	rp.peer.Start(h.ctx)
	nameHint := r.URL.Query().Get("name")
	rp.roots = r.URL.Query()["root"]
	rp.untagged = r.URL.Query().Get("lease") == "client"
	rp.needsSession = r.URL.Query().Get("era") == "session"
	if !h.goOwned(func() { rp.run(nameHint) }) {
		rp.peer.CloseWith(peer.CloseGoingAway, "hub shutting down")
	}
}

// run registers the replica, waits until it disconnects and unregisters it.
func (rp *replica) run(nameHint string) {
	h := rp.hub
	defer func() {
		rp.release()
		h.mu.Lock()
		delete(h.replicas, rp)
		h.mu.Unlock()
		h.metrics.connections.WithLabelValues("server").Dec()
		rp.peer.Wait()
	}()
	if err := rp.handshake(nameHint); err != nil {
		code, reason := peer.ClosePolicyViolation, err.Error()
		var ce *peer.CloseError
		if errors.As(err, &ce) {
			code, reason = ce.Code, ce.Reason
		}
		rp.log.Warn("server dropped during its handshake", "reason", reason)
		rp.peer.CloseWith(code, reason)
		rp.peer.Wait()
		if name := rp.intendedName(nameHint); name != "" {
			h.departed(name, rp.peer.Err())
		}
		return
	}
	<-rp.peer.Done()
	err := rp.peer.Err()
	if errors.Is(err, peer.ErrSlowConsumer) {
		h.metrics.slowConsumers.Inc()
	}
	name := rp.name()
	last := true
	for _, ri := range h.reg.view().servers[name] {
		last = last && ri.ID == rp.id
	}
	if last {
		// Recorded before the server leaves the view: whoever sees it gone
		// can see why.
		h.departed(name, err)
	}
	h.removeLocal(rp.id)
	if rp.untagged {
		h.leases.left(name)
	}
	rp.log.Info("server disconnected", "reason", err)
}

// intendedName is the name a server that never registered would have had,
// as far as its credentials or URL say.
func (rp *replica) intendedName(hint string) string {
	if n := rp.who.fixedServerName(); n != "" {
		return n
	}
	return normalizeName(hint)
}

// handshake opens the server in the newest revision both sides speak
// (open), lists what it offers and registers it.
func (rp *replica) handshake(nameHint string) error {
	h := rp.hub
	ctx, cancel := context.WithTimeout(h.ctx, handshakeTimeout)
	defer cancel()
	init, err := rp.open(ctx, nameHint)
	if err != nil {
		return err
	}
	// The name comes from the credentials when they fix one, else from
	// ?name=, else from serverInfo.name.
	raw := rp.who.fixedServerName()
	if raw == "" {
		raw = nameHint
	}
	if raw == "" {
		raw = init.ServerInfo.Name
	}
	name := normalizeName(raw)
	switch {
	case name == "":
		return errors.New("server name is empty: set serverInfo.name or ?name=")
	case name == reservedName:
		return fmt.Errorf("server name %q is reserved", name)
	case h.reg.view().isVirtual(name):
		return fmt.Errorf("server name %q is a virtual server's (the catalog)", name)
	case h.authOn() && !rp.who.mayRegister(name):
		return fmt.Errorf("token %q may not register server name %q", rp.who.name, name)
	}
	if err := h.reg.checkName(name, rp.who.name); err != nil {
		return err
	}
	if err := h.claimName(ctx, name, rp.who.name); err != nil {
		return err
	}
	if !rp.modern {
		if err := rp.peer.Notify(ctx, mcp.NotificationInitialized, nil); err != nil {
			return err
		}
	}
	info := &replicaInfo{
		ID:              rp.id,
		Name:            name,
		Instance:        h.id,
		ServerInfo:      init.ServerInfo,
		ProtocolVersion: init.ProtocolVersion,
		ConnectedAt:     time.Now().UTC(),
		Owner:           rp.who.name,
		Instructions:    init.Instructions,
		Leased:          rp.untagged && !rp.modern, // a modern server sends no requests
		local:           rp,
		inflight:        new(atomic.Int64),
	}
	info.Capabilities, _ = json.Marshal(init.Capabilities)
	caps := init.Capabilities
	for k := range numKinds {
		if !offersKind(caps, k) {
			continue
		}
		items, err := rp.fetchList(ctx, k, name)
		if err != nil {
			return err
		}
		info.lists[k] = items
	}
	if err := h.checkListBytes(info); err != nil {
		return err
	}
	rp.mu.Lock()
	rp.info = info
	rp.mu.Unlock()
	rp.log = rp.log.With("server", name)
	if rp.modern {
		// Its list_changed come on a listen stream, open before it is
		// registered so that no change goes unheard.
		if err := rp.relisten(ctx, "", false); err != nil {
			return err
		}
	}
	if err := h.setLocal(info); err != nil {
		return err
	}
	if info.Leased {
		h.leases.joined(name, rp)
	}
	rp.log.Info("server registered", "serverInfo", init.ServerInfo.Name, "version", init.ProtocolVersion,
		"tools", len(info.lists[kindTools]), "resources", len(info.lists[kindResources]),
		"templates", len(info.lists[kindTemplates]), "prompts", len(info.lists[kindPrompts]))
	return nil
}

// checkListBytes refuses a server whose lists, all together, are larger
// than the hub's limit: every instance holds them, and they travel in
// snapshots.
func (h *Hub) checkListBytes(ri *replicaInfo) error {
	n := 0
	for k := range numKinds {
		for _, it := range ri.lists[k] {
			n += len(it.raw)
		}
	}
	if n > h.cfg.MaxListBytes {
		return fmt.Errorf("its lists hold %d bytes, over the hub's limit of %d", n, h.cfg.MaxListBytes)
	}
	return nil
}

func offersKind(c mcp.ServerCapabilities, k listKind) bool {
	switch k {
	case kindTools:
		return c.Tools != nil
	case kindResources, kindTemplates:
		return c.Resources != nil
	}
	return c.Prompts != nil
}

// fetchList reads every page of one list.
func (rp *replica) fetchList(ctx context.Context, k listKind, server string) ([]listItem, error) {
	var items []listItem
	cursor := ""
	for range maxPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var raw json.RawMessage
		if err := rp.call(ctx, k.method(), params, &raw); err != nil {
			if k == kindTemplates && errors.Is(err, jsonrpc.ErrMethodNotFound) {
				return nil, nil // a server with resources but no templates
			}
			return nil, fmt.Errorf("%s failed: %w", k.method(), err)
		}
		res, err := mcp.ParseObject(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: result is not an object", k.method())
		}
		var page []json.RawMessage
		if f, ok := res[k.field()]; ok && json.Unmarshal(f, &page) != nil {
			return nil, fmt.Errorf("%s: %q is not an array", k.method(), k.field())
		}
		cfg := &rp.hub.cfg
		limit := cfg.MaxListItems
		if k == kindTemplates {
			limit = cfg.MaxTemplates
		}
		for _, r := range page {
			if len(r) > cfg.MaxItemBytes {
				return nil, fmt.Errorf("%s: an item of %d bytes is over the hub's limit of %d", k.method(), len(r), cfg.MaxItemBytes)
			}
			it, ok := newListItem(k, server, cfg.Separator, r)
			if !ok {
				return nil, fmt.Errorf("%s: an item has no %q", k.method(), k.key())
			}
			if k == kindResources || k == kindTemplates {
				uri := it.key
				if it.tmpl != nil {
					uri = it.tmpl.Literal()
				}
				if !rp.who.mayUseURI(uri) {
					rp.log.Warn("not serving an item outside the token's resources", "kind", k.conflictKind(), "key", it.key)
					rp.hub.metrics.refused.WithLabelValues("resource_outside_token").Inc()
					continue
				}
			}
			items = append(items, it)
			if len(items) > limit {
				return nil, fmt.Errorf("%s: more than %d items, the hub's limit", k.method(), limit)
			}
		}
		next, _ := res.String("nextCursor")
		if next == "" {
			return items, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("%s: more than %d pages", k.method(), maxPages)
}

// refresh re-lists the given kinds after the server said they changed. One
// refresh runs at a time per replica, and rounds start ListChangedInterval
// apart at least: changes announced meanwhile are picked up by the next
// round, so that a server that keeps announcing changes cannot make its
// instance re-list (and republish its snapshot) without pause, and the last
// change is always listed.
func (rp *replica) refresh(kinds ...listKind) {
	rp.mu.Lock()
	for _, k := range kinds {
		rp.dirty[k] = true
	}
	if rp.refreshing || rp.info == nil {
		rp.mu.Unlock()
		return
	}
	rp.refreshing = true
	rp.mu.Unlock()
	started := rp.hub.goOwned(func() {
		for {
			rp.mu.Lock()
			pending := rp.dirty != ([numKinds]bool{})
			if !pending {
				rp.refreshing = false
			}
			last := rp.relisted
			rp.mu.Unlock()
			if !pending || !rp.pause(last) {
				return
			}
			rp.mu.Lock()
			rp.relisted = time.Now()
			dirty := rp.dirty
			rp.dirty = [numKinds]bool{}
			info := rp.info
			rp.mu.Unlock()

			next := *info
			ctx, cancel := context.WithTimeout(rp.hub.ctx, handshakeTimeout)
			var err error
			for k := range numKinds {
				if dirty[k] {
					next.lists[k], err = rp.fetchList(ctx, k, info.Name)
					if err != nil {
						break
					}
				}
			}
			if err == nil {
				err = rp.hub.checkListBytes(&next)
			}
			cancel()
			if err != nil {
				rp.log.Warn("refreshing lists failed; dropping the server", "err", err)
				rp.peer.CloseWith(peer.ClosePolicyViolation, err.Error())
				rp.mu.Lock()
				rp.refreshing = false
				rp.mu.Unlock()
				return
			}
			rp.mu.Lock()
			rp.info = &next
			rp.mu.Unlock()
			select {
			case <-rp.peer.Done():
			default:
				_ = rp.hub.setLocal(&next) // the same replica: its name is its own
			}
		}
	})
	if !started {
		rp.mu.Lock()
		rp.refreshing = false
		rp.mu.Unlock()
	}
}

// pause waits until ListChangedInterval has passed since last; it reports
// false (and ends the refreshing) if the replica or the hub ends first.
func (rp *replica) pause(last time.Time) bool {
	wait := rp.hub.cfg.ListChangedInterval - time.Since(last)
	if last.IsZero() || wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-rp.peer.Done():
	case <-rp.hub.ctx.Done():
	}
	rp.mu.Lock()
	rp.refreshing = false
	rp.mu.Unlock()
	return false
}

// currentInfo returns what the replica published (nil before).
func (rp *replica) currentInfo() *replicaInfo {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.info
}

// closed reports whether the replica's connection has ended.
func (rp *replica) closed() bool {
	select {
	case <-rp.peer.Done():
		return true
	default:
		return false
	}
}

func (rp *replica) name() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.info == nil {
		return ""
	}
	return rp.info.Name
}

// onCancel tells the server that the hub gave up on a request it forwarded
// (the client cancelled or left, or the call timed out).
func (rp *replica) onCancel(id jsonrpc.ID, cause error) {
	reason := "cancelled by the client"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "request timed out"
	}
	_ = rp.peer.Notify(context.Background(), mcp.NotificationCancelled, &mcp.CancelledParams{RequestID: id, Reason: reason})
}

// replicaMethods is the hub's method table toward servers: what it does
// with each request and notification a server sends (the Relay of pkg/mcp's
// table says it for every notification). A request not in it is -32601; a
// notification not in it, or one that finds nobody to go to, is counted and
// logged (unrouted).
var replicaMethods map[string]func(rp *replica, ctx context.Context, req *jsonrpc.Request) (any, error)

func init() {
	toClient := (*replica).awaitClient
	// notification adapts a notification's handler, which reports whether
	// it found where the notification goes.
	notification := func(fn func(rp *replica, ctx context.Context, params json.RawMessage) bool) func(*replica, context.Context, *jsonrpc.Request) (any, error) {
		return func(rp *replica, ctx context.Context, req *jsonrpc.Request) (any, error) {
			if !fn(rp, ctx, req.Params) {
				rp.unrouted(req.Method, unroutedNoDestination)
			}
			return nil, nil
		}
	}
	// acts adapts a handler that always does something with its
	// notification (and counts what it refuses itself).
	acts := func(fn func(rp *replica, ctx context.Context, params json.RawMessage)) func(*replica, context.Context, *jsonrpc.Request) (any, error) {
		return notification(func(rp *replica, ctx context.Context, params json.RawMessage) bool {
			fn(rp, ctx, params)
			return true
		})
	}
	refresh := func(kinds ...listKind) func(*replica, context.Context, *jsonrpc.Request) (any, error) {
		return acts(func(rp *replica, _ context.Context, _ json.RawMessage) { rp.refresh(kinds...) })
	}
	replicaMethods = map[string]func(*replica, context.Context, *jsonrpc.Request) (any, error){
		mcp.MethodPing: func(rp *replica, ctx context.Context, req *jsonrpc.Request) (any, error) {
			// A ping naming a call goes to that call's client; any other
			// ping is the server checking on the hub, which answers it.
			if forClient(req) {
				return rp.awaitClient(ctx, req)
			}
			return struct{}{}, nil
		},
		mcp.MethodSamplingCreateMessage: toClient,
		mcp.MethodElicitationCreate:     toClient,
		mcp.MethodRootsList:             toClient,
		mcp.NotificationProgress: notification(func(rp *replica, _ context.Context, params json.RawMessage) bool {
			return rp.progress(params)
		}),
		mcp.NotificationCancelled: notification(func(rp *replica, _ context.Context, params json.RawMessage) bool {
			var p mcp.CancelledParams
			return json.Unmarshal(params, &p) == nil && rp.peer.Cancel(p.RequestID)
		}),
		mcp.NotificationResourceUpdated:           acts((*replica).resourceUpdated),
		mcp.NotificationSubscriptionsAcknowledged: acts((*replica).acknowledged),
		mcp.NotificationMessage:                   notification((*replica).forwardLog),
		mcp.NotificationElicitationComplete:       notification((*replica).elicitationComplete),
		mcp.NotificationToolsListChanged:          refresh(kindTools),
		mcp.NotificationResourcesListChanged:      refresh(kindResources, kindTemplates),
		mcp.NotificationPromptsListChanged:        refresh(kindPrompts),
	}
}

// unlimited are the notifications a server may send beyond its rate:
// cancellations only end work, a listen stream's acknowledgement comes once
// a stream, and list_changed only marks lists for a re-listing, which is
// coalesced (refresh): dropping one would leave the hub's lists stale.
var unlimited = map[string]bool{
	mcp.NotificationCancelled:                 true,
	mcp.NotificationSubscriptionsAcknowledged: true,
	mcp.NotificationToolsListChanged:          true,
	mcp.NotificationResourcesListChanged:      true,
	mcp.NotificationPromptsListChanged:        true,
}

var (
	_ peer.Handler      = (*replica)(nil)
	_ peer.AsyncHandler = (*replica)(nil)
)

// forClient reports whether a server's request goes to a client:
// sampling, elicitation and roots, and a ping that names a call.
func forClient(req *jsonrpc.Request) bool {
	switch req.Method {
	case mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate, mcp.MethodRootsList:
		return true
	case mcp.MethodPing:
		meta, ok := jsonrpc.Member(req.Params, "_meta")
		if ok {
			_, ok = jsonrpc.Member(meta, mcp.MetaRelatedRequest)
		}
		return ok
	}
	return false
}

// HandleAsync routes a server's request for a client from the read loop
// (routeToClient), so that requests waiting on clients hold none of the
// workers that the server's other requests (its ping to the hub, another
// client's sampling) need: one client's silence never delays another.
// Everything else takes a worker (Handle).
func (rp *replica) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	if !forClient(req) {
		return false
	}
	abort := rp.routeToClient(req, reply.Send)
	reply.OnCancel(func() { abort(context.Canceled) })
	return true
}

// awaitClient is routeToClient for a worker: it waits for the answer. The
// method table names it for every request that goes to a client, though
// HandleAsync takes all of them, those of a batch too: a caller of Handle
// gets the same routing.
func (rp *replica) awaitClient(ctx context.Context, req *jsonrpc.Request) (any, error) {
	return await(ctx, func(done func(json.RawMessage, error)) func(error) {
		return rp.routeToClient(req, done)
	})
}

// Handle answers the server's requests and notifications by the method
// table.
func (rp *replica) Handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	if req.IsNotification() && rp.notes != nil && !unlimited[req.Method] {
		if ok, retry := rp.notes.take(time.Now()); !ok {
			// A flood from one server must not drown its clients: beyond
			// its rate, its notifications are dropped, but for the last
			// progress report of each call, which goes before its answer,
			// and the last update of each resource, which goes when the
			// rate allows.
			rp.hub.metrics.refused.WithLabelValues("server_notification_rate").Inc()
			switch req.Method {
			case mcp.NotificationProgress:
				rp.holdProgress(req.Params)
			case mcp.NotificationResourceUpdated:
				rp.holdUpdate(req.Params, retry)
			}
			return nil, nil
		}
	}
	if fn, ok := replicaMethods[req.Method]; ok {
		return fn(rp, ctx, req)
	}
	if req.IsCall() {
		return nil, errNotAnswered(req.Method)
	}
	reason := unroutedUnknown
	if _, ok := mcp.LookupMethod(req.Method); ok {
		reason = unroutedNever
	}
	rp.unrouted(req.Method, reason)
	return nil, nil
}

// Why a server's notification was not passed on (the reason label of
// switchboard_server_notifications_unrouted_total).
const (
	unroutedUnknown       = "unknown"        // not a method MCP defines
	unroutedNever         = "not_routed"     // one the hub never passes on (mcp.RelayNotRouted, or a client's)
	unroutedNoDestination = "no_destination" // the call, elicitation or client it is for is not known, or gone
)

// unrouted counts and logs a server's notification that goes nowhere:
// never silently dropped.
func (rp *replica) unrouted(method, reason string) {
	rp.hub.unrouted(method, reason, "server", rp.name())
}

// resourceUpdated passes on a server's notifications/resources/updated,
// only for a URI its server serves: a server cannot speak for another's
// resources, nor for the hub's own.
func (rp *replica) resourceUpdated(ctx context.Context, params json.RawMessage) {
	name, uri, owned := rp.updateOf(params)
	if !owned {
		if uri != "" {
			rp.log.Debug("ignoring an update for a resource of another server", "uri", uri)
			rp.hub.metrics.refused.WithLabelValues("foreign_update").Inc()
		}
		return
	}
	rp.mu.Lock()
	delete(rp.updates, uri) // this one is newer than any held back
	rp.mu.Unlock()
	rp.hub.subs.publishUpdate(ctx, name, withoutSubscriptionID(params))
}

// updateOf reads a server's resources/updated: its server's name, the URI
// ("" when either is missing), and whether that server serves the URI (a
// server may speak only for its own resources).
func (rp *replica) updateOf(params json.RawMessage) (name, uri string, owned bool) {
	name = rp.name()
	uri, _ = jsonrpc.StringMember(params, "uri")
	if name == "" || uri == "" {
		return name, "", false
	}
	owner, ok := rp.hub.reg.view().serverOfURI(uri)
	return name, uri, ok && owner == name
}

// holdUpdate keeps the last resources/updated of a URI that the rate limit
// held back, for flushUpdates to send when the rate allows: a subscriber
// always hears of a resource's last change. Only URIs the server serves
// are held, at most MaxListItems of them.
func (rp *replica) holdUpdate(params json.RawMessage, retry time.Duration) {
	_, uri, owned := rp.updateOf(params)
	if !owned {
		return
	}
	rp.mu.Lock()
	if _, ok := rp.updates[uri]; !ok && len(rp.updates) >= rp.hub.cfg.MaxListItems {
		rp.mu.Unlock()
		return
	}
	if rp.updates == nil {
		rp.updates = map[string]json.RawMessage{}
	}
	rp.updates[uri] = bytes.Clone(params)
	if rp.flushing {
		rp.mu.Unlock()
		return
	}
	rp.flushing = true
	rp.mu.Unlock()
	if !rp.hub.goOwned(func() { rp.flushUpdates(retry) }) {
		rp.mu.Lock()
		rp.flushing = false
		rp.mu.Unlock()
	}
}

// flushUpdates sends the updates held back, one for each notification the
// rate allows, starting after wait, until none is left or the server leaves.
func (rp *replica) flushUpdates(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-rp.peer.Done():
			return
		case <-rp.hub.ctx.Done():
			return
		}
		for {
			rp.mu.Lock()
			if len(rp.updates) == 0 {
				rp.flushing = false
				rp.mu.Unlock()
				return
			}
			ok, retry := rp.notes.take(time.Now())
			if !ok {
				rp.mu.Unlock()
				t.Reset(retry)
				break
			}
			var params json.RawMessage
			for uri, p := range rp.updates {
				params = p
				delete(rp.updates, uri)
				break
			}
			rp.mu.Unlock()
			rp.resourceUpdated(rp.hub.ctx, params)
		}
	}
}

// forwardLog passes on a server's notifications/message, tagged with its server:
// to the caller of the call it names in _meta["switchboard/relatedRequest"]
// only, else to the clients whose level admits it, on every instance. It
// reports false for a log it could not pass on (not an object, or naming a
// call that has ended).
func (rp *replica) forwardLog(ctx context.Context, params json.RawMessage) bool {
	name := rp.name()
	if name == "" {
		return false
	}
	o, err := mcp.ParseObject(params)
	if err != nil {
		return false
	}
	if l, _ := o.String("logger"); l == "" {
		o.Set("logger", name)
	}
	o.SetMeta(mcp.MetaServer, name)
	uc, rest, named, err := rp.callOf(o.Raw())
	switch {
	case err != nil:
		return false
	case named && uc != nil:
		uc.caller.notify(mcp.NotificationMessage, rest)
	case named:
		// The call it names has ended: its client alone may see it, and is
		// no longer known.
		return false
	default:
		rp.hub.subs.publishLog(ctx, name, rest)
	}
	return true
}
