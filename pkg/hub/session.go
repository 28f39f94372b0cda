package hub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// session is one client's session with the hub: toward it the hub is one MCP
// server aggregating every server. It does not care how the client is
// connected: its peer runs over a WebSocket (session_ws.go) or any other
// peer.Conn. Calls it routes go through routing.go.
type session struct {
	hub       *Hub
	id        string
	clientKey string // instance/id: key, built once since every call between instances carries it
	peer      *peer.Peer
	who       *principal
	owner     identity // who its calls, input requests and HTTP session belong to
	httpID    string   // the Mcp-Session-Id of a Streamable HTTP session, for traces; "" on a WebSocket
	scope     string   // the one server of /servers/<name>/mcp; "" for the whole hub
	limit     *bucket  // nil: no rate limit
	release   func()   // frees the token's connection slot
	// initTimer closes a session not initialized in time; dropped once it
	// is, since an idle session keeps nothing it does not need.
	initTimer atomic.Pointer[time.Timer]
	expiry    *time.Timer // closes a WebSocket session as its access token expires (auth_oauth.go)
	since     int64       // when it connected, in Unix nanoseconds (8 bytes where a time.Time takes 24)

	// listChanges coalesces the list_changed to this client, rootChanges
	// the roots/list_changed from it, by replica. Both are made under mu
	// when first needed (changesLocked): most sessions never need them, a
	// 2026-07-28 request without a session least of all.
	listChanges *coalescer
	rootChanges *coalescer

	// header is a stateless session's request's HTTP headers: a tools/call's
	// Mcp-Param-* headers are checked against its tool's schema (resolve).
	header http.Header

	closed      atomic.Bool  // the session is ending: no longer a client
	modernSeen  atomic.Bool  // a modern request came: initialize is not awaited
	logsDropped atomic.Int64 // log lines dropped since one got through
	asks        atomic.Int32 // servers' requests waiting on the client (sessionCall.request)
	mu          sync.Mutex
	listeners   map[*listener]struct{} // its subscriptions/listen streams (session_listen.go)
	holds       map[string]*hold       // resource subscriptions, by URI: who holds each (session_listen.go)
	subscribed  map[string]bool        // the URIs it subscribed with resources/subscribe
	name        string                 // its clientInfo.name, for logs
	version     string                 // its clientInfo.version, for switchboard://clients
	protocol    string                 // the protocol version it negotiated, for traces
	declared    clientCaps             // what it can do for servers
	initialized bool
	owed        uint8            // the list_changed it is to hear of (listBit)
	level       mcp.LoggingLevel // "" until the client sets one: then everything is sent
	sinceGen    uint64           // the view it initialized in: it hears of later changes only
	calling     map[string]int   // calls in flight, by server

	// Set by newSession, then only read. (They are here, with the flags
	// above, because every client holds its session while it is idle: the
	// session fits the allocator's 320-byte class.)
	//
	// stateless marks the session of one Streamable HTTP request of the
	// 2026-07-28 revision: every request on it is modern (session_modern.go).
	// overHTTP marks a Streamable HTTP client's session (transport), and
	// dashboard one whose principal had no client role when it connected
	// (role: a reload of the tokens may change that, and the session's
	// metrics stay under one role).
	stateless bool
	overHTTP  bool
	dashboard bool
}

// role names the kind of client, for metrics: "client" or "dashboard".
func (s *session) role() string {
	if s.dashboard {
		return "dashboard"
	}
	return "client"
}

// transport names how the client is connected, for the dashboard's view
// of clients and for traces: "http" or "websocket".
func (s *session) transport() string {
	if s.overHTTP {
		return "http"
	}
	return "websocket"
}

// sessionMaxConcurrent bounds the handlers of one session running at once.
const sessionMaxConcurrent = 64

// newSession makes the session of a client that the admission let in, on
// conn. Start it with start.
func (h *Hub) newSession(conn peer.Conn, who *principal, release func(), transport, scope string) *session {
	key := h.nextKey()
	s := &session{hub: h, id: h.keyID(key), clientKey: key, who: who, owner: who.identity(), overHTTP: transport == "http", dashboard: !who.has(RoleClient), scope: scope,
		limit: h.bucketFor(who), release: release, since: time.Now().UnixNano()}
	s.peer = peer.New(conn, &peer.Options{
		Handler:       s, // a peer.Handler, a peer.AsyncHandler and peer.Hooks
		MaxConcurrent: min(sessionMaxConcurrent, h.cfg.MaxInFlight),
		MaxPending:    h.cfg.MaxInFlight,
		Overloaded:    h.overloaded,
		SendQueue:     h.cfg.SendQueue,
		Limits:        h.cfg.limits(),
		Logger:        h.log, // shared: a logger of its own would cost every idle connection ~1 KiB
	})
	return s
}

// start registers the session and starts reading; it reports false (and
// closes conn) when the hub is closing.
func (s *session) start(conn peer.Conn) bool {
	h := s.hub
	// A client that has not sent initialize in time is closed. (Neither
	// this nor the session holds a goroutine: the peer's hooks clean up.)
	// A stateless request's session has no initialize to wait for.
	if !s.stateless {
		s.initTimer.Store(time.AfterFunc(h.cfg.InitializeTimeout, func() {
			if !s.isInitialized() && !s.modernSeen.Load() {
				s.peer.CloseWith(peer.ClosePolicyViolation, "initialize not received in time")
			}
		}))
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.stopInitTimer()
		s.stopExpiry()
		s.release()
		conn.Close(peer.CloseGoingAway, "hub shutting down")
		return false
	}
	h.sessions[s] = struct{}{}
	h.metrics.connections.WithLabelValues(s.role()).Inc()
	h.mu.Unlock()
	s.peer.Start(h.peerCtx) // the hub closes its peers itself
	return true
}

// stopInitTimer stops the initialize timer, and forgets it.
func (s *session) stopInitTimer() {
	if t := s.initTimer.Swap(nil); t != nil {
		t.Stop()
	}
}

// OnDone forgets the session once its peer's goroutines have ended (a
// peer.Hooks method, as OnClose and OnCancel: a stateless request makes a
// session, and its peer, per POST).
func (s *session) OnDone() {
	h := s.hub
	h.mu.Lock()
	delete(h.sessions, s)
	h.mu.Unlock()
}

// OnClose forgets the client as soon as its session starts ending (a
// WebSocket's close handshake, of up to a few seconds, finishes meanwhile).
func (s *session) OnClose(err error) {
	h := s.hub
	s.closed.Store(true)
	s.stopInitTimer()
	s.stopExpiry()
	s.mu.Lock()
	lists, roots := s.listChanges, s.rootChanges
	s.mu.Unlock()
	lists.stop()
	roots.stop()
	if errors.Is(err, peer.ErrSlowConsumer) {
		h.metrics.slowConsumers.Inc()
	}
	s.release()
	h.metrics.connections.WithLabelValues(s.role()).Dec()
	h.subs.dropSession(s)
	h.elicits.forgetClient(s.key())
	if s.stateless {
		// One request, not a connection: worth neither a line at info nor
		// telling the watchers of switchboard://servers and instances,
		// who were not told when it opened.
		return
	}
	h.builtinsChanged()
	h.log.Info("client disconnected", "client", s.id, "clientInfo", s.clientName(), "reason", err)
}

func (s *session) clientName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name
}

// owe notes that the session is to hear of a list_changed (method) that
// made view gen, and reports whether it is: its session if it initialized
// before that view, and each of its listen streams opened before it that
// asked for that kind. (A view is swapped in before its changes are told:
// a client that initialized, or a stream that opened, in between got its
// lists from it, and a list_changed then would be a stray one.)
//
// It returns the session's coalescer of list_changed to fire when it is
// owed, nil otherwise (or once the session is closing).
func (s *session) owe(method string, gen uint64) *coalescer {
	bit := listBit(method)
	s.mu.Lock()
	defer s.mu.Unlock()
	owed := false
	if s.initialized && s.sinceGen < gen {
		s.owed |= bit
		owed = true
	}
	for l := range s.listeners {
		if l.sinceGen < gen && l.wants(method) {
			l.owed |= bit
			owed = true
		}
	}
	if !owed {
		return nil
	}
	return s.changesLocked(&s.listChanges, s.listChanged)
}

// changesLocked returns *c, made with send if it is not yet, or nil once
// the session is closing (onClose stops what it finds made). s.mu is held.
func (s *session) changesLocked(c **coalescer, send func(key string)) *coalescer {
	if *c == nil {
		if s.closed.Load() {
			return nil
		}
		*c = newCoalescer(s.hub.cfg.ListChangedInterval, send)
	}
	return *c
}

// rootChangesOf returns the coalescer of the roots/list_changed that the
// client sends to the servers serving its calls, or nil once the session
// is closing.
func (s *session) rootChangesOf() *coalescer {
	h := s.hub
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changesLocked(&s.rootChanges, func(replica string) {
		if rp := h.reg.localReplica(replica); rp != nil && !rp.modern { // the stateless revision has no such notification
			_ = rp.peer.Notify(context.Background(), mcp.NotificationRootsListChanged, nil)
		}
	})
}

// listBit is a list_changed notification's bit among the owed ones.
func listBit(method string) uint8 {
	switch method {
	case mcp.NotificationToolsListChanged:
		return 1
	case mcp.NotificationResourcesListChanged:
		return 2
	case mcp.NotificationPromptsListChanged:
		return 4
	}
	return 0
}

func (s *session) isInitialized() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized
}

// key identifies the session across the cluster.
func (s *session) key() string { return s.clientKey }

// caps returns what the client declared it can do for servers.
func (s *session) caps() clientCaps {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.declared
}

// admits reports whether the client wants a log message of this level.
func (s *session) admits(level mcp.LoggingLevel) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initialized && (s.level == "" || level.Severity() >= s.level.Severity())
}

// notify sends the client a notification about one of its calls: a
// progress report or a log line.
func (s *session) notify(method string, params json.RawMessage) {
	frame := (&jsonrpc.Request{Method: method, Params: params}).Encode()
	if method == mcp.NotificationMessage {
		s.sendLog(frame)
		return
	}
	s.notice(method, frame, "")
}

// notice sends the client a notification it may do without when it reads
// too slowly to get everything (peer.SendNotice): never blocking, never
// closing it for that alone; a keyed one replaces a queued one of the same
// key. It reports whether it was queued.
func (s *session) notice(method string, frame []byte, key string) bool {
	if s.peer.SendNotice(frame, key) {
		s.hub.metrics.fannedOut.WithLabelValues(method).Inc()
		return true
	}
	s.hub.metrics.dropped.WithLabelValues(method).Inc()
	return false
}

// sendLog sends a log line, after a line that says how many were dropped
// since the last that got through, if any were.
func (s *session) sendLog(frame []byte) {
	if n := s.logsDropped.Load(); n > 0 {
		gap := encodeNotification(mcp.NotificationMessage, &mcp.LoggingMessageParams{Level: mcp.LevelWarning, Logger: "switchboard",
			Data: fmt.Sprintf("%d log messages were dropped: this client reads more slowly than they come", n)})
		if !s.notice(mcp.NotificationMessage, gap, "") {
			s.logsDropped.Add(1)
			return
		}
		s.logsDropped.Add(-n)
	}
	if !s.notice(mcp.NotificationMessage, frame, "") {
		s.logsDropped.Add(1)
	}
}

// OnCancel tells the client that the hub gave up on a request it routed to
// it (the server cancelled it, or it timed out).
func (s *session) OnCancel(id jsonrpc.ID, cause error) {
	reason := "cancelled by the server"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "request timed out"
	}
	_ = s.peer.Notify(context.Background(), mcp.NotificationCancelled, &mcp.CancelledParams{RequestID: id, Reason: reason})
}

// sessionMethod is how a session answers one method.
type sessionMethod struct {
	// handle answers on a worker (a nil result for a notification).
	handle func(s *session, ctx context.Context, req *jsonrpc.Request) (any, error)
	// routed methods go to a server through routing.go, from the read loop
	// (HandleAsync) without holding a worker.
	routed bool
	// anytime methods may come before initialize.
	anytime bool
}

// sessionMethods is the hub's method table toward clients. A method not in
// it is -32601 (a notification not in it is ignored).
var sessionMethods map[string]sessionMethod

func init() {
	sessionMethods = map[string]sessionMethod{
		mcp.MethodInitialize: {handle: (*session).initialize, anytime: true},
		mcp.MethodPing:       {handle: func(*session, context.Context, *jsonrpc.Request) (any, error) { return struct{}{}, nil }, anytime: true},
		mcp.MethodToolsList: {handle: func(s *session, _ context.Context, req *jsonrpc.Request) (any, error) {
			return s.listPage(kindTools, req.Params)
		}},
		mcp.MethodResourcesList: {handle: func(s *session, _ context.Context, req *jsonrpc.Request) (any, error) {
			return s.listPage(kindResources, req.Params)
		}},
		mcp.MethodResourcesTemplatesList: {handle: func(s *session, _ context.Context, req *jsonrpc.Request) (any, error) {
			return s.listPage(kindTemplates, req.Params)
		}},
		mcp.MethodPromptsList: {handle: func(s *session, _ context.Context, req *jsonrpc.Request) (any, error) {
			return s.listPage(kindPrompts, req.Params)
		}},
		mcp.MethodToolsCall:            {handle: (*session).route, routed: true},
		mcp.MethodPromptsGet:           {handle: (*session).route, routed: true},
		mcp.MethodResourcesRead:        {handle: (*session).route, routed: true},
		mcp.MethodCompletionComplete:   {handle: (*session).complete},
		mcp.MethodResourcesSubscribe:   {handle: (*session).subscribe},
		mcp.MethodResourcesUnsubscribe: {handle: (*session).subscribe},
		mcp.MethodLoggingSetLevel:      {handle: (*session).setLevel},
		mcp.MethodTasksGet:             {handle: (*session).getTask}, // session_tasks.go
		mcp.MethodTasksUpdate:          {handle: (*session).changeTask},
		mcp.MethodTasksCancel:          {handle: (*session).changeTask},

		mcp.NotificationInitialized: {handle: func(*session, context.Context, *jsonrpc.Request) (any, error) { return nil, nil }},
		mcp.NotificationCancelled: {handle: func(s *session, _ context.Context, req *jsonrpc.Request) (any, error) {
			var p mcp.CancelledParams
			if json.Unmarshal(req.Params, &p) == nil {
				s.peer.Cancel(p.RequestID)
			}
			return nil, nil
		}, anytime: true}, // a modern client's requests need no initialize, nor do their cancellations
		mcp.NotificationRootsListChanged: {handle: func(s *session, _ context.Context, _ *jsonrpc.Request) (any, error) {
			s.hub.rootsChanged(s)
			return nil, nil
		}},
	}
}

var (
	_ peer.Handler      = (*session)(nil)
	_ peer.AsyncHandler = (*session)(nil)
)

// Handle counts, limits and answers a client's message on a worker (a
// notification on the read loop).
func (s *session) Handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	if req.IsNotification() {
		// Notifications draw on the rate limit too (a flood of them costs
		// the servers that hear of them), but for cancellations, which
		// only end work. Over it, they are dropped: there is no one to
		// answer.
		if req.Method != mcp.NotificationCancelled && s.takeToken(req.Method) != nil {
			s.hub.metrics.refused.WithLabelValues("notification_rate").Inc()
			return nil, nil
		}
		return s.dispatch(ctx, req)
	}
	h := s.hub
	m, err := s.modernMeta(req)
	if limited := s.takeToken(req.Method); limited != nil {
		err = limited // refused or not (HandleAsync)
	}
	ctx, span := s.traceReceived(ctx, req, m, nil)
	if err != nil {
		span.EndWith(nil, err)
		h.metrics.observeRequest(req.Method, err)
		return nil, err
	}
	h.inflight.Add(1)
	var res any
	if m != nil {
		res, err = s.handleModern(withModernMeta(ctx, m), req, m)
	} else {
		res, err = s.dispatch(ctx, req)
	}
	h.inflight.Add(-1)
	raw, _ := res.(json.RawMessage)
	span.EndWith(raw, err)
	h.metrics.observeRequest(req.Method, err)
	if err != nil && h.log.Enabled(ctx, slog.LevelDebug) {
		h.log.Debug("request failed", "client", s.id, "req", req.ID.String(), "method", req.Method, "err", err)
	}
	return res, err
}

// callStarted and callEnded count the session's calls in flight to a
// server: its untagged logs reach the clients calling it. A stateless
// request's session is never told them (it is not initialized: admits
// refuses every log), and counts none.
func (s *session) callStarted(server string) {
	if s.stateless {
		return
	}
	s.mu.Lock()
	if s.calling == nil {
		s.calling = map[string]int{}
	}
	s.calling[server]++
	s.mu.Unlock()
}

func (s *session) callEnded(server string) {
	if s.stateless {
		return
	}
	s.mu.Lock()
	if s.calling[server]--; s.calling[server] <= 0 {
		delete(s.calling, server)
	}
	s.mu.Unlock()
}

// hears reports whether the session gets a server's logs that name no
// call: operators (admin, dashboard) do, and so do clients of that server
// (its own endpoint's, or with a call in flight to it), at their level.
func (s *session) hears(server string, level mcp.LoggingLevel) bool {
	if !s.admits(level) {
		return false
	}
	if s.who.has(RoleDashboard) || s.scope == server {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calling[server] > 0
}

// takeToken spends one request of the rate limit (pings are free).
func (s *session) takeToken(method string) error {
	if s.limit == nil || method == mcp.MethodPing {
		return nil
	}
	if ok, retry := s.limit.take(time.Now()); !ok {
		s.hub.metrics.rateLimited.Inc()
		return errRateLimited(retry)
	}
	return nil
}

// dispatch answers one message by the method table.
func (s *session) dispatch(ctx context.Context, req *jsonrpc.Request) (any, error) {
	m, ok := sessionMethods[req.Method]
	switch {
	case !ok && req.IsNotification():
		return nil, nil
	case !ok:
		return nil, errMethodNotFound(req.Method)
	case !m.anytime && !s.isInitialized():
		if req.IsNotification() {
			return nil, nil
		}
		return nil, errNotInitialized
	}
	return m.handle(s, ctx, req)
}

// HandleAsync routes tools/call, prompts/get and resources/read from the
// read loop, without holding a worker while the server works (see
// routing.go). Everything else takes the worker path (Handle).
func (s *session) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	h := s.hub
	if s.stateless || isModernRequest(req) {
		return s.handleModernAsync(req, reply)
	}
	if !sessionMethods[req.Method].routed || !s.isInitialized() || h.draining.Load() {
		return false
	}
	return s.routeCall(req, reply, nil, func(ctx context.Context, t *target, send func(json.RawMessage, error)) func() {
		// The call's caller lives in its flight: one allocation for both.
		// send answers through reply, which copies the answer into the
		// client's frame before it returns (flight.reply).
		f := &flight{from: sessionCall{s: s, id: req.ID}, reply: reply}
		s.forwardIn(ctx, f, t, &f.from, req.Method, send)
		return func() { f.cancel(context.Canceled) }
	})
}

// route answers tools/call, prompts/get and resources/read on a worker:
// the hub's own resources, and any call while draining.
func (s *session) route(ctx context.Context, req *jsonrpc.Request) (any, error) {
	h := s.hub
	t, err := h.resolve(s, req)
	if err != nil {
		return nil, err
	}
	if t == nil && req.Method == mcp.MethodToolsCall {
		return s.searchTools(req.Params) // search mode (session_search.go)
	}
	if t == nil {
		uri, _ := jsonrpc.StringMember(req.Params, "uri")
		return h.readBuiltin(s, uri)
	}
	return s.call(ctx, t, req)
}

// call routes a request to t on a worker, counting it as a call to its
// server.
func (s *session) call(ctx context.Context, t *target, req *jsonrpc.Request) (json.RawMessage, error) {
	s.callStarted(t.server)
	defer s.callEnded(t.server)
	return s.hub.call(ctx, t, &sessionCall{s: s, id: req.ID, meta: modernMetaFrom(ctx)}, req.Method)
}

// complete routes completion/complete.
func (s *session) complete(ctx context.Context, req *jsonrpc.Request) (any, error) {
	t, err := s.hub.resolveComplete(s, req.Params)
	if err != nil {
		return nil, err
	}
	return s.call(ctx, t, req)
}

func (s *session) subscribe(ctx context.Context, req *jsonrpc.Request) (any, error) {
	uri, err := requireString(req.Params, "uri")
	if err != nil {
		return nil, err
	}
	if !isBuiltin(uri) || s.scope != "" {
		if _, err := s.hub.resourceServer(s, s.hub.reg.view(), uri); err != nil && req.Method == mcp.MethodResourcesSubscribe {
			return nil, err
		}
	}
	if req.Method == mcp.MethodResourcesSubscribe {
		err = s.subscribeURI(ctx, uri)
	} else {
		s.unsubscribeURI(uri)
	}
	if err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (s *session) setLevel(_ context.Context, req *jsonrpc.Request) (any, error) {
	var p mcp.SetLevelParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.Level.Severity() < 0 {
		return nil, errInvalidLevel
	}
	s.mu.Lock()
	s.level = p.Level
	s.mu.Unlock()
	return struct{}{}, nil
}

func (s *session) initialize(_ context.Context, req *jsonrpc.Request) (any, error) {
	var p mcp.InitializeParams
	var raw struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, errBadInitialize(err)
	}
	_ = json.Unmarshal(req.Params, &raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.initialized {
		return nil, errAlreadyInitialized
	}
	s.initialized = true
	s.stopInitTimer()
	s.sinceGen = s.hub.reg.view().gen
	s.name, s.version = p.ClientInfo.Name, p.ClientInfo.Version
	s.declared = parseClientCaps(raw.Capabilities)
	s.protocol = mcp.NegotiateVersion(p.ProtocolVersion)
	return s.initializeResult(s.protocol), nil
}

// initializeResult is what the hub (or, on a server's own endpoint, that
// server) says of itself to a client of version.
func (s *session) initializeResult(version string) *mcp.InitializeResult {
	if vl := s.hub.reg.view().virtualOf(s.scope); vl != nil {
		res := s.hub.virtualInitialize(vl, version)
		if version == mcp.ModernVersion {
			withTasks(&res.Capabilities) // its members' tasks, as on /mcp (session_tasks.go)
		}
		return res
	}
	if s.scope != "" {
		return s.hub.scopedInitialize(s.scope, version)
	}
	res := &mcp.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    aggregateCapabilities(),
		ServerInfo:      mcp.Implementation{Name: "switchboard", Title: "Switchboard", Version: Version},
		Instructions:    "Switchboard aggregates the tools, resources and prompts of many MCP servers. Tool and prompt names are <server>" + s.hub.cfg.Separator + "<name>.",
	}
	if version == mcp.ModernVersion {
		withTasks(&res.Capabilities) // session_tasks.go
	}
	return res
}

// aggregateCapabilities is what the hub offers where it aggregates: on
// /mcp, and on a virtual server's endpoint, whose members come and go.
func aggregateCapabilities() mcp.ServerCapabilities {
	return mcp.ServerCapabilities{
		Tools:       &mcp.ListChangedCap{ListChanged: true},
		Resources:   &mcp.ResourcesCap{Subscribe: true, ListChanged: true},
		Prompts:     &mcp.ListChangedCap{ListChanged: true},
		Completions: &struct{}{},
		Logging:     &struct{}{},
	}
}

// scopedInitialize answers initialize on a server's own endpoint: that
// server's serverInfo and instructions, and the capabilities of its that
// the hub can route (list_changed is the hub's to send, logging its to
// filter).
func (h *Hub) scopedInitialize(server, version string) *mcp.InitializeResult {
	var oldest *replicaInfo
	for _, ri := range h.reg.view().servers[server] {
		if oldest == nil || ri.olderThan(oldest) {
			oldest = ri
		}
	}
	res := &mcp.InitializeResult{ProtocolVersion: version, ServerInfo: mcp.Implementation{Name: server},
		Capabilities: mcp.ServerCapabilities{Logging: &struct{}{}}}
	if oldest == nil {
		return res
	}
	res.ServerInfo, res.Instructions = oldest.ServerInfo, oldest.Instructions
	var caps mcp.ServerCapabilities
	_ = json.Unmarshal(oldest.Capabilities, &caps)
	if caps.Tools != nil {
		res.Capabilities.Tools = &mcp.ListChangedCap{ListChanged: true}
	}
	if caps.Resources != nil {
		res.Capabilities.Resources = &mcp.ResourcesCap{Subscribe: caps.Resources.Subscribe, ListChanged: true}
	}
	if caps.Prompts != nil {
		res.Capabilities.Prompts = &mcp.ListChangedCap{ListChanged: true}
	}
	res.Capabilities.Completions = caps.Completions
	if version == mcp.ModernVersion && h.offersTasks(server, oldest.Capabilities) {
		withTasks(&res.Capabilities) // session_tasks.go
	}
	return res
}

// items returns the list of kind k as this session sees it: the whole
// hub's, or its server's own (a real or a virtual server's); only what its
// token may see.
func (s *session) items(v *view, k listKind) []*aggItem {
	return s.itemsOf(v.listOf(s.scope, k), k)
}

// itemsOf returns the items of kind k that the session's token may see.
func (s *session) itemsOf(items []*aggItem, k listKind) []*aggItem {
	if s.who.unrestricted() {
		return items
	}
	var kept []*aggItem
	for _, it := range items {
		if s.who.sees(k, it, s.hub.cfg.Separator) {
			kept = append(kept, it)
		}
	}
	return kept
}

// listPage answers a list request with one page of the list the session
// sees. The cursor is the key of the page's last item, so paging stays in
// order while servers come and go.
func (s *session) listPage(k listKind, raw json.RawMessage) (any, error) {
	h := s.hub
	params, err := mcp.ParseObject(raw)
	if err != nil {
		return nil, err
	}
	items := s.items(h.reg.view(), k)
	key, item := func(it *aggItem) string { return it.key }, func(it *aggItem) []byte { return it.raw }
	if s.scope != "" {
		key, item = func(it *aggItem) string { return it.orig }, func(it *aggItem) []byte { return it.own }
	}
	start := 0
	if c, ok := params.String("cursor"); ok && c != "" {
		last, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil {
			return nil, errInvalidCursor
		}
		start = sort.Search(len(items), func(i int) bool { return key(items[i]) > string(last) })
	}
	end := min(start+h.cfg.PageSize, len(items))
	b := make([]byte, 0, 256)
	b = append(b, '{')
	b = jsonrpc.AppendString(b, k.field())
	b = append(b, ':', '[')
	for i, it := range items[start:end] {
		if i > 0 && len(b)+len(item(it)) > h.cfg.PageBytes {
			end = start + i // the page is full by bytes: the rest on the next
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, item(it)...)
	}
	b = append(b, ']')
	if end < len(items) {
		b = append(b, `,"nextCursor":`...)
		b = jsonrpc.AppendString(b, base64.RawURLEncoding.EncodeToString([]byte(key(items[end-1]))))
	}
	b = append(b, '}')
	return json.RawMessage(b), nil
}

// requireString reads a member of params that must be a non-empty string.
func requireString(params json.RawMessage, key string) (string, error) {
	s, ok := jsonrpc.StringMember(params, key)
	if !ok || s == "" {
		return "", errNotString(key)
	}
	return s, nil
}
