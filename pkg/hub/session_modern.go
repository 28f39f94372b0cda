package hub

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Clients of the 2026-07-28 revision ("modern" clients). Such a client
// needs no session: each request says in its _meta which revision it
// speaks, what the client can do and which log level it wants, and is
// served on any connection (a WebSocket, whether or not it also carries
// an initialized session) or as a Streamable HTTP POST without a session.
// Everything else is the session's: the same method table, lists, limits,
// and the call path of routing.go. What differs is here:
//
//   - a modern request is checked in the revision's order: a method the
//     revision does not have is -32601, a _meta that does not describe the
//     request is -32602, a version the hub does not speak is -32022;
//   - every answer says what it is (resultType), and lists and reads how
//     long they may be cached (ttlMs, cacheScope: see cacheHints);
//   - the server's requests for the client during a call (sampling,
//     elicitation, roots) become input requests of an InputRequiredResult,
//     and the call goes on when the client retries (routing_input.go);
//   - subscriptions/listen replaces resources/subscribe and the session's
//     list_changed (session_listen.go).

// modernMeta returns what a modern request says of itself, or nil for a
// request of a session. An error answers the request.
func (s *session) modernMeta(req *jsonrpc.Request) (*mcp.RequestMeta, error) {
	if !s.stateless && !isModernRequest(req) {
		return nil, nil
	}
	spec, ok := mcp.LookupMethod(req.Method)
	if !ok || spec.Eras&mcp.StatelessEra == 0 || spec.Direction&mcp.ClientToServer == 0 {
		return nil, errMethodNotFound(req.Method) // first: a method that does not exist needs no valid _meta
	}
	if !s.offers(spec.ServerCap) {
		return nil, errMethodNotFound(req.Method) // what this endpoint's server does not offer does not exist
	}
	m, err := mcp.ParseRequestMeta(req.Params)
	if err != nil {
		return nil, err
	}
	if err := mcp.CheckModernVersion(m.ProtocolVersion); err != nil {
		return nil, err
	}
	s.modernSeen.Store(true)
	return m, nil
}

// offers reports whether the session's endpoint has a server capability
// ("" for a method that needs none): the hub's /mcp has them all, a
// server's own endpoint those of its server.
func (s *session) offers(capability string) bool {
	return s.scope == "" || capability == "" || s.initializeResult(mcp.ModernVersion).Capabilities.Has(capability)
}

// isModernRequest reports whether a request on a connection that may carry
// a session is of the stateless revision: its _meta names that revision or a
// later one.
func isModernRequest(req *jsonrpc.Request) bool {
	if req.ParamsWithoutMeta() || !mayHaveMeta(req.Params) {
		return false
	}
	meta, ok := jsonrpc.Member(req.Params, "_meta")
	if !ok {
		return false
	}
	v, ok := jsonrpc.StringMember(meta, mcp.MetaProtocolVersion)
	return ok && mcp.IsModernVersion(v)
}

type modernMetaKey struct{}

// withModernMeta returns ctx carrying a modern request's meta, for the
// worker that serves it.
func withModernMeta(ctx context.Context, m *mcp.RequestMeta) context.Context {
	return context.WithValue(ctx, modernMetaKey{}, m)
}

// modernMetaFrom returns the meta withModernMeta put in ctx, or nil.
func modernMetaFrom(ctx context.Context) *mcp.RequestMeta {
	m, _ := ctx.Value(modernMetaKey{}).(*mcp.RequestMeta)
	return m
}

// handleModern answers a modern request on a worker (Handle).
func (s *session) handleModern(ctx context.Context, req *jsonrpc.Request, m *mcp.RequestMeta) (any, error) {
	if req.Method == mcp.MethodServerDiscover {
		return s.discover(), nil
	}
	if req.Method == mcp.MethodSubscriptionsListen {
		// Only while draining does listen come here (HandleAsync takes it
		// otherwise): there is nothing left to listen to.
		return nil, errDraining
	}
	sm, ok := sessionMethods[req.Method]
	if !ok {
		return nil, errMethodNotFound(req.Method)
	}
	res, err := sm.handle(s, ctx, req)
	if err != nil {
		return nil, modernError(err)
	}
	return s.decorate(req.Method, res), nil
}

// discover answers server/discover: the revisions the hub speaks and what
// it offers, as initialize would.
func (s *session) discover() *mcp.DiscoverResult {
	init := s.initializeResult(mcp.ModernVersion)
	ttl, scope := s.cacheHints(mcp.MethodServerDiscover)
	return &mcp.DiscoverResult{
		SupportedVersions: mcp.AllVersions,
		Capabilities:      init.Capabilities,
		Instructions:      init.Instructions,
		ResultType:        mcp.ResultComplete,
		TTLMs:             ttl,
		CacheScope:        scope,
		Meta:              mcp.Meta{mcp.MetaServerInfo: init.ServerInfo},
	}
}

// decorate returns a modern answer: the result with its resultType and,
// for lists and reads, its cache hints.
func (s *session) decorate(method string, res any) json.RawMessage {
	raw, ok := res.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = jsonrpc.Marshal(res); err != nil {
			raw = json.RawMessage(`{}`)
		}
	}
	ttl, scope := s.cacheHints(method)
	return mcp.Decorate(raw, ttl, scope)
}

// cacheHints returns the ttlMs and cacheScope of a method's answer, or a
// negative ttl for an answer that is not cacheable. The hub's lists change
// whenever a server connects, leaves or changes its own: a list may be kept
// for Config.ListTTL only by a principal that listens on this instance for
// its changes (subscriptions/listen), whose client hears of a change as
// list_changed and evicts the list then; any other is promised no
// freshness (ttlMs 0). A list is public only when every client sees the
// same one (no tokens), and a read is private: a server may answer each
// client its own. A result that carries its own hints (a modern server's)
// keeps them.
func (s *session) cacheHints(method string) (int64, string) {
	switch {
	case !mcp.IsCacheable(method):
		return -1, ""
	case method == mcp.MethodResourcesRead:
		return 0, mcp.CachePrivate
	}
	var ttl int64
	if bit := listBit(listChangeOf(method)); bit != 0 && s.hub.cfg.ListTTL > 0 && s.hub.listening.hears(s.owner, bit) {
		ttl = s.hub.cfg.ListTTL.Milliseconds()
	}
	if method == mcp.MethodServerDiscover || !s.hub.authOn() {
		return ttl, mcp.CachePublic
	}
	return ttl, mcp.CachePrivate
}

// listChangeOf returns the list_changed notification that tells of a list
// method's changes, or "".
func listChangeOf(method string) string {
	switch method {
	case mcp.MethodToolsList:
		return mcp.NotificationToolsListChanged
	case mcp.MethodPromptsList:
		return mcp.NotificationPromptsListChanged
	case mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList:
		return mcp.NotificationResourcesListChanged
	}
	return ""
}

// listening counts the listen streams open on this instance by principal
// and by the lists (listBit) whose changes they hear of. Without tokens
// every client is one principal: one that listens lets all keep their
// lists for the TTL, which bounds how stale a list of one that does not
// listen can be. Its mutex is taken last (under a session's).
type listening struct {
	mu sync.Mutex
	n  map[listenKey]int
}

type listenKey struct {
	who identity
	bit uint8
}

// filterBits returns the listBits of the lists a stream's filter hears of.
func filterBits(f mcp.SubscriptionFilter) []uint8 {
	var bits []uint8
	if f.ToolsListChanged {
		bits = append(bits, listBit(mcp.NotificationToolsListChanged))
	}
	if f.PromptsListChanged {
		bits = append(bits, listBit(mcp.NotificationPromptsListChanged))
	}
	if f.ResourcesListChanged {
		bits = append(bits, listBit(mcp.NotificationResourcesListChanged))
	}
	return bits
}

// add counts a stream of who's (d = 1) or uncounts it (d = -1).
func (l *listening) add(who identity, f mcp.SubscriptionFilter, d int) {
	bits := filterBits(f)
	if len(bits) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[listenKey]int{}
	}
	for _, b := range bits {
		k := listenKey{who, b}
		if l.n[k] += d; l.n[k] <= 0 {
			delete(l.n, k)
		}
	}
}

// hears reports whether who has a stream that hears of bit's list changes.
func (l *listening) hears(who identity, bit uint8) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[listenKey{who, bit}] > 0
}

// handleModernAsync routes a modern request from the read loop: calls to
// servers (with their input requests, routing_input.go) and listen streams
// (session_listen.go). It reports false for what a worker answers (Handle).
func (s *session) handleModernAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	h := s.hub
	m, err := s.modernMeta(req)
	if err == nil && m == nil {
		return false
	}
	if err == nil {
		switch {
		case h.draining.Load():
			return false
		case req.Method == mcp.MethodSubscriptionsListen:
			err = s.takeToken(req.Method)
			if err == nil {
				err = s.listen(req, m, reply)
			}
		case sessionMethods[req.Method].routed:
			return s.routeModern(req, m, reply)
		default:
			return false
		}
	}
	if err != nil {
		h.metrics.observeRequest(req.Method, err)
		reply.Send(nil, err)
	}
	return true
}

// routeModern routes a modern client's tools/call, prompts/get or
// resources/read (routeCall): a retry of a call that asked for input goes
// on with it (routing_input.go); any other goes to its server like a session's
// call, with an inputCall as its caller.
func (s *session) routeModern(req *jsonrpc.Request, m *mcp.RequestMeta, reply *peer.Reply) bool {
	h := s.hub
	name, st, retry := callParams(req)
	if retry {
		return s.routeCall(req, reply, m, func(ctx context.Context, _ *target, send func(json.RawMessage, error)) func() {
			return h.inputs.resume(ctx, s, st, req, m, send)
		})
	}
	return s.routeCall(req, reply, m, func(ctx context.Context, t *target, send func(json.RawMessage, error)) func() {
		ic, first := h.inputs.start(ctx, s.owner, t.server, req, name, sessionCall{s: s, id: req.ID, meta: m}, send)
		f := s.forwardIn(ctx, &ic.inFlight, t, ic, req.Method, ic.finish)
		ic.started(f)
		return func() { ic.giveUp(first) }
	})
}
