package hub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// downstream is where a routed call came from and where what the server
// says about it goes: a client on this instance, or (through the cluster)
// one on another.
type downstream interface {
	// notify sends a notification about the call (progress).
	notify(method string, params json.RawMessage)
	// request sends a request of the server's (sampling, elicitation,
	// roots) and returns the answer.
	request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// caps returns what the client declared it can do for servers.
	caps() clientCaps
	// key identifies the client across the cluster: two downstreams with
	// the same key are the same client.
	key() string
}

// clientSession is one client connection. Toward it the hub is the MCP
// server.
type clientSession struct {
	hub       *Hub
	id        string
	peer      *peer.Peer
	who       *principal
	role      string  // for metrics: "client" or "dashboard"
	limit     *bucket // nil: no rate limit
	release   func()  // frees the token's connection slot
	initTimer *time.Timer

	closed      atomic.Bool // the connection is closing: no longer a client
	mu          sync.Mutex
	initialized bool
	name        string           // its clientInfo.name, for logs
	declared    clientCaps       // what it can do for servers
	level       mcp.LoggingLevel // "" until the client sets one: then everything is sent
}

var _ downstream = (*clientSession)(nil)

// clientMaxConcurrent bounds the handlers of one client connection running
// at once; each routed call holds one while it waits on a server.
const clientMaxConcurrent = 64

func (h *Hub) serveClient(w http.ResponseWriter, r *http.Request) {
	who, release := h.admit(w, r, "/mcp", RoleClient, RoleDashboard)
	if who == nil {
		return
	}
	conn, err := peer.Accept(w, r, h.acceptOptions())
	if err != nil {
		release()
		return
	}
	cs := &clientSession{hub: h, id: h.nextID(), who: who, role: "client", limit: h.bucketFor(who), release: release}
	if !who.has(RoleClient) {
		cs.role = "dashboard"
	}
	cs.peer = peer.New(conn, &peer.Options{
		Handler:       cs, // a peer.Handler and a peer.AsyncHandler
		MaxConcurrent: min(clientMaxConcurrent, h.cfg.MaxInFlight),
		MaxPending:    h.cfg.MaxInFlight,
		Overloaded: (&jsonrpc.Error{Code: mcp.CodeRateLimited, Message: "too many requests in flight on this connection"}).
			WithData(map[string]any{"retryAfterMs": 100, "maxInFlight": h.cfg.MaxInFlight}),
		SendQueue: h.cfg.SendQueue,
		Limits:    h.cfg.limits(),
		OnCancel:  cs.onCancel,
		OnClose:   cs.onClose,
		OnDone: func() {
			h.mu.Lock()
			delete(h.clients, cs)
			h.mu.Unlock()
		},
		Logger: h.log, // shared: a logger of its own would cost every idle connection ~1 KiB
	})
	// A client that has not sent initialize in time is closed. (Neither
	// this nor the session holds a goroutine: the peer's hooks clean up.)
	cs.initTimer = time.AfterFunc(h.cfg.InitializeTimeout, func() {
		if !cs.isInitialized() {
			cs.peer.CloseWith(peer.ClosePolicyViolation, "initialize not received in time")
		}
	})
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		cs.initTimer.Stop()
		release()
		conn.Close(peer.CloseGoingAway, "hub shutting down")
		return
	}
	h.clients[cs] = struct{}{}
	h.metrics.connections.WithLabelValues(cs.role).Inc()
	h.mu.Unlock()
	h.log.Info("client connected", "client", cs.id, "token", who.name, "remote", r.RemoteAddr)
	cs.peer.Start(context.WithoutCancel(h.ctx)) // the hub closes its peers itself
}

// onClose forgets the client as soon as its connection starts closing
// (the close handshake, of up to a few seconds, finishes meanwhile).
func (cs *clientSession) onClose(err error) {
	h := cs.hub
	cs.closed.Store(true)
	cs.initTimer.Stop()
	if errors.Is(err, peer.ErrSlowConsumer) {
		h.metrics.slowConsumers.Inc()
	}
	cs.release()
	h.metrics.connections.WithLabelValues(cs.role).Dec()
	h.subs.dropClient(cs)
	h.builtinsChanged()
	h.log.Info("client disconnected", "client", cs.id, "clientInfo", cs.clientName(), "reason", err)
}

func (cs *clientSession) clientName() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.name
}

func (cs *clientSession) isInitialized() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.initialized
}

func (cs *clientSession) notify(method string, params json.RawMessage) {
	_ = cs.peer.SendEncoded((&jsonrpc.Request{Method: method, Params: params}).Encode())
}

func (cs *clientSession) request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	var raw json.RawMessage
	err := cs.peer.Call(ctx, method, params, &raw)
	return raw, err
}

func (cs *clientSession) caps() clientCaps {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.declared
}

func (cs *clientSession) key() string { return cs.hub.id + "/" + cs.id }

// onCancel tells the client that the hub gave up on a request it routed to
// it (the server cancelled it, or it timed out).
func (cs *clientSession) onCancel(id jsonrpc.ID, cause error) {
	reason := "cancelled by the server"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "request timed out"
	}
	_ = cs.peer.Notify(context.Background(), mcp.NotificationCancelled, &mcp.CancelledParams{RequestID: id, Reason: reason})
}

// errNotInitialized answers requests sent before initialize.
var errNotInitialized = jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "session not initialized: send initialize first")

// Handle counts, limits and answers a client's message on a worker.
func (cs *clientSession) Handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	if req.IsNotification() {
		return cs.dispatch(ctx, req)
	}
	h := cs.hub
	if cs.limit != nil && req.Method != mcp.MethodPing {
		if ok, retry := cs.limit.take(time.Now()); !ok {
			h.metrics.rateLimited.Inc()
			h.metrics.observeRequest(req.Method, errRateLimited(retry))
			return nil, errRateLimited(retry)
		}
	}
	h.inflight.Add(1)
	res, err := cs.dispatch(ctx, req)
	h.inflight.Add(-1)
	h.metrics.observeRequest(req.Method, err)
	if err != nil && h.log.Enabled(ctx, slog.LevelDebug) {
		h.log.Debug("request failed", "client", cs.id, "req", req.ID.String(), "method", req.Method, "err", err)
	}
	return res, err
}

// dispatch answers one message by its method.
func (cs *clientSession) dispatch(ctx context.Context, req *jsonrpc.Request) (any, error) {
	switch req.Method {
	case mcp.MethodInitialize:
		return cs.initialize(req)
	case mcp.MethodPing:
		return struct{}{}, nil
	}
	if !cs.isInitialized() {
		if req.IsNotification() {
			return nil, nil
		}
		return nil, errNotInitialized
	}
	h := cs.hub
	switch req.Method {
	case mcp.NotificationInitialized:
		return nil, nil
	case mcp.NotificationCancelled:
		var p mcp.CancelledParams
		if json.Unmarshal(req.Params, &p) == nil {
			cs.peer.Cancel(p.RequestID)
		}
		return nil, nil
	case mcp.NotificationRootsListChanged:
		h.rootsChanged(cs)
		return nil, nil
	case mcp.MethodToolsList:
		if len(cs.who.tools) > 0 && cs.who.has(RoleClient) && !cs.who.has(RoleAdmin) {
			return h.listPage(kindTools, req.Params, func(it *aggItem) bool { return cs.who.mayCall(it.key) })
		}
		return h.listPage(kindTools, req.Params, nil)
	case mcp.MethodResourcesList:
		return h.listPage(kindResources, req.Params, nil)
	case mcp.MethodResourcesTemplatesList:
		return h.listPage(kindTemplates, req.Params, nil)
	case mcp.MethodPromptsList:
		return h.listPage(kindPrompts, req.Params, nil)
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		return h.forward(ctx, cs, req)
	case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		params, err := mcp.ParseObject(req.Params)
		if err != nil {
			return nil, err
		}
		uri, err := params.RequireString("uri")
		if err != nil {
			return nil, err
		}
		if req.Method == mcp.MethodResourcesSubscribe {
			err = h.subs.subscribe(ctx, cs, uri)
		} else {
			h.subs.unsubscribe(cs, uri)
		}
		if err != nil {
			return nil, err
		}
		return struct{}{}, nil
	case mcp.MethodCompletionComplete:
		return h.complete(ctx, cs, req)
	case mcp.MethodLoggingSetLevel:
		var p mcp.SetLevelParams
		if err := json.Unmarshal(req.Params, &p); err != nil || p.Level.Severity() < 0 {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "level must be one of debug, info, notice, warning, error, critical, alert, emergency")
		}
		cs.mu.Lock()
		cs.level = p.Level
		cs.mu.Unlock()
		return struct{}{}, nil
	}
	if req.IsNotification() {
		return nil, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s", req.Method)
}

func (cs *clientSession) initialize(req *jsonrpc.Request) (any, error) {
	var p mcp.InitializeParams
	var raw struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "initialize: %v", err)
	}
	_ = json.Unmarshal(req.Params, &raw)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.initialized {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "already initialized")
	}
	cs.initialized = true
	cs.name = p.ClientInfo.Name
	cs.declared = parseClientCaps(raw.Capabilities)
	return &mcp.InitializeResult{
		ProtocolVersion: mcp.NegotiateVersion(p.ProtocolVersion),
		Capabilities: mcp.ServerCapabilities{
			Tools:       &mcp.ListChangedCap{ListChanged: true},
			Resources:   &mcp.ResourcesCap{Subscribe: true, ListChanged: true},
			Prompts:     &mcp.ListChangedCap{ListChanged: true},
			Completions: &struct{}{},
			Logging:     &struct{}{},
		},
		ServerInfo:   mcp.Implementation{Name: "switchboard", Title: "Switchboard", Version: Version},
		Instructions: "Switchboard aggregates the tools, resources and prompts of many MCP servers. Tool and prompt names are <server>" + cs.hub.cfg.Separator + "<name>.",
	}, nil
}

// admits reports whether the client wants a log message of this level.
func (cs *clientSession) admits(level mcp.LoggingLevel) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.initialized && (cs.level == "" || level.Severity() >= cs.level.Severity())
}

// listPage answers a list request with one page of the aggregated list. The
// cursor is the key of the page's last item, so paging stays in order while
// servers come and go.
func (h *Hub) listPage(k listKind, raw json.RawMessage, keep func(*aggItem) bool) (any, error) {
	params, err := mcp.ParseObject(raw)
	if err != nil {
		return nil, err
	}
	items := h.reg.view().lists[k]
	if keep != nil {
		var kept []*aggItem
		for _, it := range items {
			if keep(it) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	start := 0
	if c, ok := params.String("cursor"); ok && c != "" {
		last, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "invalid cursor")
		}
		start = sort.Search(len(items), func(i int) bool { return items[i].key > string(last) })
	}
	end := min(start+h.cfg.PageSize, len(items))
	b := make([]byte, 0, 256)
	b = append(b, '{')
	b = jsonrpc.AppendString(b, k.field())
	b = append(b, ':', '[')
	for i, it := range items[start:end] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it.raw...)
	}
	b = append(b, ']')
	if end < len(items) {
		b = append(b, `,"nextCursor":`...)
		b = jsonrpc.AppendString(b, base64.RawURLEncoding.EncodeToString([]byte(items[end-1].key)))
	}
	b = append(b, '}')
	return json.RawMessage(b), nil
}

// target is where a routed request goes, and the params the server sees.
type target struct {
	server   string
	replicas []*replicaInfo
	params   json.RawMessage
}

// resolve finds the target of tools/call, prompts/get and resources/read.
// For tools and prompts the aggregated name picks the server, and the
// params are edited in place, byte for byte but for the name: decoding and
// re-encoding them (arguments and all) was the hub's largest cost. It
// returns a nil target, and no error, for the hub's own resources.
func (h *Hub) resolve(cs *clientSession, req *jsonrpc.Request) (*target, error) {
	v := h.reg.view()
	if req.Method == mcp.MethodResourcesRead {
		uri, err := requireString(req.Params, "uri")
		if err != nil {
			return nil, err
		}
		if isBuiltin(uri) {
			return nil, nil
		}
		server, ok := v.serverOfURI(uri)
		if !ok {
			return nil, mcp.ErrResourceNotFound.WithData(map[string]string{"uri": uri})
		}
		return &target{server: server, replicas: v.replicasForURI(server, uri), params: req.Params}, nil
	}
	k, what := kindTools, "tool"
	if req.Method == mcp.MethodPromptsGet {
		k, what = kindPrompts, "prompt"
	}
	// One pass over params finds the name; the arguments, usually most of
	// the bytes, are then copied once, around the new name.
	var rawName []byte
	names := 0
	for key, value := range jsonrpc.Members(req.Params) {
		if string(key) == "name" {
			rawName, names = value, names+1
		}
	}
	name, _ := jsonrpc.Unquote(rawName)
	if name == "" {
		return nil, errNotString("name")
	}
	switch {
	case k == kindTools && !cs.who.mayCall(name):
		return nil, forbidden(cs.who, "call tool "+strconv.Quote(name))
	case k == kindPrompts && !cs.who.has(RoleClient):
		return nil, forbidden(cs.who, "get prompts")
	}
	it := v.lookup(k, name)
	if it == nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown %s %q", what, name)
	}
	orig := jsonrpc.AppendString(nil, it.orig)
	params, ok := jsonrpc.Splice(req.Params, rawName, orig)
	if names > 1 || !ok {
		// Rename every one of them: a server that reads the first must not
		// see the hub's name either.
		var err error
		if params, err = jsonrpc.SetMember(req.Params, "name", orig); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params must be a JSON object")
		}
	}
	return &target{server: it.server, replicas: it.replicas, params: params}, nil
}

// forward answers tools/call, prompts/get and resources/read on a worker.
func (h *Hub) forward(ctx context.Context, cs *clientSession, req *jsonrpc.Request) (any, error) {
	t, err := h.resolve(cs, req)
	if err != nil {
		return nil, err
	}
	if t == nil {
		uri, _ := jsonrpc.StringMember(req.Params, "uri")
		return h.readBuiltin(uri)
	}
	return h.route(ctx, cs, t.server, t.replicas, req.Method, t.params)
}

var (
	_ peer.Handler      = (*clientSession)(nil)
	_ peer.AsyncHandler = (*clientSession)(nil)
)

// HandleAsync forwards tools/call, prompts/get and resources/read without
// holding a worker goroutine while the server works: to a server on this
// instance the request is sent from the client's read loop and answered
// from the server connection's; to one on another instance, a goroutine of
// the hub's waits for the cluster. Everything else takes the worker path
// (Handle).
func (cs *clientSession) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	switch req.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
	default:
		return false
	}
	h := cs.hub
	if !cs.isInitialized() || h.draining.Load() {
		return false
	}
	t, err := h.resolve(cs, req)
	var ri *replicaInfo
	switch {
	case err != nil:
	case t == nil:
		return false // the hub's own resources
	default:
		if ri = h.pick(t.replicas); ri == nil {
			err = errServerGone(t.server)
		}
	}
	if err == nil && cs.limit != nil {
		if ok, retry := cs.limit.take(time.Now()); !ok {
			h.metrics.rateLimited.Inc()
			err = errRateLimited(retry)
		}
	}
	if err != nil {
		h.metrics.observeRequest(req.Method, err)
		reply.Send(nil, err)
		return true
	}
	h.inflight.Add(1)
	start := time.Now()
	finish := func(ctx context.Context, raw json.RawMessage, err error) {
		if err != nil {
			err = h.upstreamError(ctx, t.server, err)
		}
		h.metrics.observeRouted(req.Method, ri.local != nil, start)
		h.metrics.observeRequest(req.Method, err)
		h.inflight.Add(-1)
		reply.Send(raw, err)
	}
	if ri.local != nil {
		id := ri.local.callAsync(ri.inflight, cs, req.Method, t.params, func(raw json.RawMessage, err error) {
			finish(context.Background(), raw, err)
		})
		reply.OnCancel(func() { ri.local.peer.Abort(id, context.Canceled) })
		return true
	}
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout)
	reply.OnCancel(cancel)
	if !h.goOwned(func() {
		defer cancel()
		raw, err := h.callRemote(ctx, ri, cs, req.Method, t.params)
		finish(ctx, raw, err)
	}) {
		cancel()
		finish(ctx, nil, errDraining)
	}
	return true
}

// requireString reads a member of params that must be a non-empty string.
func requireString(params json.RawMessage, key string) (string, error) {
	s, ok := jsonrpc.StringMember(params, key)
	if !ok || s == "" {
		return "", errNotString(key)
	}
	return s, nil
}

func errNotString(key string) error {
	return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%q must be a non-empty string", key)
}

// complete routes completion/complete by its reference: a prompt by its
// aggregated name, a resource template by its URI template.
func (h *Hub) complete(ctx context.Context, origin downstream, req *jsonrpc.Request) (any, error) {
	params, err := mcp.ParseObject(req.Params)
	if err != nil {
		return nil, err
	}
	ref, err := mcp.ParseObject(params["ref"])
	if err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `"ref" must be an object`)
	}
	typ, _ := ref.String("type")
	v := h.reg.view()
	switch typ {
	case "ref/prompt":
		name, err := ref.RequireString("name")
		if err != nil {
			return nil, err
		}
		it := v.lookup(kindPrompts, name)
		if it == nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown prompt %q", name)
		}
		ref.Set("name", it.orig)
		params["ref"] = ref.Raw()
		return h.route(ctx, origin, it.server, it.replicas, req.Method, params.Raw())
	case "ref/resource":
		uri, err := ref.RequireString("uri")
		if err != nil {
			return nil, err
		}
		if it := v.lookup(kindTemplates, uri); it != nil {
			return h.route(ctx, origin, it.server, it.replicas, req.Method, req.Params)
		}
		server, ok := v.serverOfURI(uri)
		if !ok {
			return nil, mcp.ErrResourceNotFound.WithData(map[string]string{"uri": uri})
		}
		return h.route(ctx, origin, server, v.replicasForURI(server, uri), req.Method, req.Params)
	}
	return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `"ref.type" must be "ref/prompt" or "ref/resource"`)
}

// route sends a request to one replica of server, the one with the fewest
// calls in flight from this instance, and returns its raw answer.
func (h *Hub) route(ctx context.Context, origin downstream, server string, replicas []*replicaInfo, method string, params json.RawMessage) (json.RawMessage, error) {
	if h.draining.Load() {
		return nil, errDraining
	}
	ri := h.pick(replicas)
	if ri == nil {
		return nil, errServerGone(server)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	defer h.metrics.observeRouted(method, ri.local != nil, time.Now())
	var raw json.RawMessage
	var err error
	if ri.local != nil {
		raw, err = ri.local.call(ctx, ri.inflight, origin, method, params)
	} else {
		raw, err = h.callRemote(ctx, ri, origin, method, params)
	}
	if err != nil {
		return nil, h.upstreamError(ctx, server, err)
	}
	return raw, nil
}

// pick chooses the replica with the fewest calls in flight; ties go round
// robin, so that one call at a time still spreads over replicas.
func (h *Hub) pick(replicas []*replicaInfo) *replicaInfo {
	if len(replicas) == 0 {
		return nil
	}
	offset := int(h.seq.Add(1) % int64(len(replicas)))
	var best *replicaInfo
	var bestN int64
	for i := range replicas {
		ri := replicas[(offset+i)%len(replicas)]
		if n := ri.inflight.Load(); best == nil || n < bestN {
			best, bestN = ri, n
		}
	}
	return best
}

// rootsChanged tells the servers serving a client's calls that its roots
// changed.
func (h *Hub) rootsChanged(cs *clientSession) {
	h.mu.Lock()
	var targets []*replica
	for rp := range h.replicas {
		rp.mu.Lock()
		for _, uc := range rp.calls {
			if uc.origin.key() == cs.key() {
				targets = append(targets, rp)
				break
			}
		}
		rp.mu.Unlock()
	}
	h.mu.Unlock()
	for _, rp := range targets {
		_ = rp.peer.Notify(context.Background(), mcp.NotificationRootsListChanged, nil)
	}
}
