package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// The call path. A client's tools/call, prompts/get, resources/read and
// completion/complete go through here, whatever its transport and wherever
// the server is:
//
//	resolve   the aggregated name (or URI) gives the server and its replicas;
//	          the params are edited as bytes, the server's own name spliced in
//	pick      the replica with the fewest calls in flight from this instance
//	forward   one policy for a replica here and one on another instance:
//	          one timeout, one way to cancel, one mapping of outcomes to
//	          wire errors
//	send      on the replica's instance: the call gets the hub's id and
//	          progress token on the server's connection (register), so that
//	          two clients' ids and tokens never meet there
//
// and back: the server's answer goes to the caller; its progress reports
// (progress), logs naming the call (forwardLog) and requests for the client
// (routeToClient) find the call by the hub's id or token and go to its
// caller, on this instance or, through the cluster, on the caller's.

// The entry of a client's call. Whatever its era and transport, a client's
// tools/call, prompts/get or resources/read comes in through routeCall, on
// its session's read loop: it is resolved (which checks what the token may
// call and read), draws on the rate limit (a refused call too: a flood of
// unknown names costs the hub as much as any), is counted if refused, and
// goes on its era's way, a callRoute: forwarded with the session as its
// caller (session.go), with an inputCall as its caller (session_modern.go), or, a
// retry of a call that asked for input, to that call (routing_input.go). The eras
// differ only there and in the shape of their answers (answerer).

// A callRoute takes an admitted call on its way to t; send answers the
// client, once; ctx carries the call's trace (tracing.go), not its
// cancellation. It returns how to give up on the call when the client
// cancels it, or nil when send has answered already.
type callRoute func(ctx context.Context, t *target, send func(json.RawMessage, error)) (giveUp func())

// routeCall is the entry of a client's routed call: m is what a modern
// request said of itself (nil for a session's request), route its way on.
// It reports false for what a worker answers: the hub's own resources.
func (s *session) routeCall(req *jsonrpc.Request, reply *peer.Reply, m *mcp.RequestMeta, route callRoute) bool {
	h := s.hub
	t, err := h.resolve(s, req)
	if err == nil && t == nil {
		return false
	}
	if limited := s.takeToken(req.Method); limited != nil {
		err = limited
	}
	ctx, span := s.traceReceived(context.Background(), req, m, t)
	send := ending(span, s.answerer(req, reply, m))
	if err != nil {
		if m != nil {
			err = modernError(err)
		}
		h.stats.refused(ctx, s, req, err)
		send(nil, err)
		return true
	}
	if giveUp := route(ctx, t, send); giveUp != nil {
		reply.OnCancel(giveUp)
	}
	return true
}

// answerer returns how a client's routed call is answered, once: counted,
// and in its era's shape (a modern answer says what it is, with its cache
// hints; a resource not found is -32602 there).
func (s *session) answerer(req *jsonrpc.Request, reply *peer.Reply, m *mcp.RequestMeta) func(json.RawMessage, error) {
	h := s.hub
	return func(raw json.RawMessage, err error) {
		if err != nil && m != nil {
			err = modernError(err)
		}
		h.metrics.observeRequest(req.Method, err)
		switch {
		case err != nil:
			reply.Send(nil, err)
		case m != nil:
			reply.Send(s.decorate(req.Method, raw), nil)
		default:
			reply.Send(raw, nil)
		}
	}
}

// forwardCall forwards a client's call to t for c, counted while it is in
// flight: a drain waits for it, and the session hears the logs of its
// server meanwhile. done runs once with the outcome (forward).
func (s *session) forwardCall(ctx context.Context, t *target, c caller, method string, done func(json.RawMessage, error)) *flight {
	return s.forwardIn(ctx, &flight{}, t, c, method, done)
}

// forwardIn is forwardCall in a flight f the caller made (one that holds
// c, say).
func (s *session) forwardIn(ctx context.Context, f *flight, t *target, c caller, method string, done func(json.RawMessage, error)) *flight {
	h := s.hub
	h.inflight.Add(1)
	s.callStarted(t.server)
	f.counted = s // uncounted as it ends (uncount), without a func wrapping done
	return h.forwardIn(ctx, f, t, c, method, done)
}

// uncount ends the counts of a flight's call that session.forwardIn
// started, before its done runs.
func (f *flight) uncount(h *Hub, server string) {
	if s := f.counted; s != nil {
		s.callEnded(server)
		h.inflight.Add(-1)
	}
}

// caller is the downstream end of a routed call: the client's call it
// serves, on this instance (sessionCall) or on another (remoteCaller, in
// cluster.go).
type caller interface {
	// notify sends the client a notification about the call: a progress
	// report (its own token already restored), or a log that names the
	// call.
	notify(method string, params json.RawMessage)
	// request sends the client a request of the server's (sampling,
	// elicitation, roots, ping) and returns at once: nothing waits while
	// the client thinks, and done runs once with the answer, on whichever
	// goroutine it arrives (or at once, with a refusal). abort gives up on
	// it: done then runs with abort's cause, unless the answer came first.
	// ctx carries the request's trace, not its cancellation. A client
	// holds at most clientMaxAsks of them at once.
	request(ctx context.Context, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error))
	// caps returns what the client declared it can do for servers.
	caps() clientCaps
	// client identifies the client across the cluster: the calls of one
	// client have equal client().
	client() string
	// logLevel is the least severe log level the client wants of the call
	// ("" for none), for a server of the stateless revision, which is told
	// per request.
	logLevel() mcp.LoggingLevel
	// owner is the principal whose call it is: a task made of it is
	// theirs (cluster_tasks.go).
	owner() identity
}

// sessionCall is a call of a client of this instance, known by the id the
// client gave it.
type sessionCall struct {
	s  *session
	id jsonrpc.ID
	// meta is what a modern request said of itself (session_modern.go); nil for a
	// session's request.
	meta *mcp.RequestMeta
}

var _ caller = (*sessionCall)(nil)

func (c *sessionCall) notify(method string, params json.RawMessage) {
	if method == mcp.NotificationMessage {
		level := logLevel(params)
		if c.meta != nil && !c.meta.Admits(level) || c.meta == nil && !c.s.admits(level) {
			return
		}
		params = withRelated(params, c.id)
	}
	c.s.notify(method, params)
}

// clientMaxAsks bounds the server requests waiting on one client at once
// (a session, or a modern client's call): a client that never answers
// holds no more than this, whatever its servers ask.
const clientMaxAsks = 64

// request names the client's call in _meta["switchboard/relatedRequest"],
// with the client's own id, so that the client (and a transport with one
// stream per call) knows which call asks. A modern client takes no request:
// its calls that may ask for input have an inputCall as their caller.
func (c *sessionCall) request(ctx context.Context, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	if c.meta != nil {
		done(nil, errCannotRoute(method, "a client of protocol version "+mcp.ModernVersion+
			" is asked for input only during tools/call, prompts/get or resources/read"))
		return noAbort
	}
	s := c.s
	if s.asks.Add(1) > clientMaxAsks {
		s.asks.Add(-1)
		done(nil, errTooManyAsks(clientMaxAsks))
		return noAbort
	}
	id := s.peer.NextID()
	_, params, span := s.traceAsk(ctx, id, method, withRelated(params, c.id))
	done = ending(span, done)
	err := s.peer.Go(id, method, params, func(resp *jsonrpc.Response, err error) {
		s.asks.Add(-1)
		done(answerOf(resp, err))
	})
	if err != nil {
		s.asks.Add(-1)
		done(nil, err)
		return noAbort
	}
	return func(cause error) { s.peer.Abort(id, cause) }
}

// noAbort is the abort of what has ended already.
func noAbort(error) {}

// answerOf reads the answer to a call sent with peer.Go: its result, or
// its error.
func answerOf(resp *jsonrpc.Response, err error) (json.RawMessage, error) {
	switch {
	case err != nil:
		return nil, err
	case resp.Error != nil:
		return nil, resp.Error
	}
	return resp.Result, nil
}

// await is an exchange that answers through done (a call, a request for a
// client) for one who waits: start begins it and returns how to abort it.
// await returns its outcome, or ctx's error once ctx ends (the exchange is
// then aborted with ctx's cause).
func await(ctx context.Context, start func(done func(json.RawMessage, error)) (abort func(error))) (json.RawMessage, error) {
	type outcome struct {
		raw json.RawMessage
		err error
	}
	ch := make(chan outcome, 1)
	abort := start(func(raw json.RawMessage, err error) { ch <- outcome{raw, err} })
	select {
	case o := <-ch:
		return o.raw, o.err
	case <-ctx.Done():
		abort(context.Cause(ctx))
		return nil, ctx.Err()
	}
}

func (c *sessionCall) caps() clientCaps {
	if c.meta != nil {
		return parseModernCaps(c.meta)
	}
	return c.s.caps()
}
func (c *sessionCall) client() string  { return c.s.key() }
func (c *sessionCall) owner() identity { return c.s.owner }

// logLevel is a modern request's own; a session's is the level it set, or
// every level until it sets one.
func (c *sessionCall) logLevel() mcp.LoggingLevel {
	if c.meta != nil {
		return c.meta.LogLevel
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.level == "" {
		return mcp.LevelDebug
	}
	return c.s.level
}

// withRelated returns params with _meta["switchboard/relatedRequest"] set to
// id.
func withRelated(params json.RawMessage, id jsonrpc.ID) json.RawMessage {
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		meta = []byte(`{}`)
	}
	meta, err := jsonrpc.SetMember(meta, mcp.MetaRelatedRequest, id.AppendJSON(nil))
	if err != nil {
		return params
	}
	out, err := jsonrpc.SetMember(params, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}

// withoutRelated returns params without _meta["switchboard/relatedRequest"],
// and the id it held.
func withoutRelated(params json.RawMessage) (json.RawMessage, json.RawMessage, bool) {
	o, err := mcp.ParseObject(params)
	if err != nil {
		return params, nil, false
	}
	related, ok := o.MetaValue(mcp.MetaRelatedRequest)
	if !ok {
		return params, nil, false
	}
	o.DeleteMeta(mcp.MetaRelatedRequest)
	return o.Raw(), related, true
}

// logLevel reads the level of a notifications/message.
func logLevel(params json.RawMessage) mcp.LoggingLevel {
	l, _ := jsonrpc.StringMember(params, "level")
	return mcp.LoggingLevel(l)
}

// target is where a routed request goes, and the params the server sees.
type target struct {
	server   string
	replicas []*replicaInfo
	item     string // the tool or prompt, by the server's name for it, for the statistics
	// body is the params as the server is to see them. While a rename is
	// pending (rename.name set), it is made from the client's on first
	// use (params): the first attempt writes the rename into its frame or
	// envelope instead (sendTo), copying the params once.
	body   json.RawMessage
	rename rename
	once   sync.Once
}

// rename is a tool's or a prompt's name in the client's params that the
// server's own (target.item) is to replace.
type rename struct {
	params json.RawMessage // the client's
	name   []byte          // the name, a slice of params, as the client sent it
	// meta is whether params hold a _meta member, as the walk that found
	// the name saw (resolveNamed): no search of the params for one later.
	meta bool
}

// params returns the params as the server is to see them.
func (t *target) params() json.RawMessage {
	t.once.Do(func() {
		if t.rename.name != nil {
			t.body, _ = jsonrpc.SpliceString(t.rename.params, t.rename.name, t.item) // the slice was found in them: it cannot fail
		}
	})
	return t.body
}

// resolve finds the target of tools/call, prompts/get and resources/read.
// For tools and prompts the aggregated name picks the server, and the
// params are edited in place, byte for byte but for the name: decoding and
// re-encoding them (arguments and all) was the hub's largest cost. It
// returns a nil target, and no error, for the hub's own resources.
func (h *Hub) resolve(s *session, req *jsonrpc.Request) (*target, error) {
	v := h.reg.view()
	if req.Method == mcp.MethodResourcesRead {
		if err := checkMeta(req.Params); err != nil {
			return nil, err
		}
		uri, err := requireString(req.Params, "uri")
		if err != nil {
			return nil, err
		}
		if isBuiltin(uri) && s.scope == "" {
			return nil, nil
		}
		server, err := h.resourceServer(s, v, uri)
		if err != nil {
			return nil, err
		}
		return &target{server: server, replicas: v.replicasForURI(server, uri), body: req.Params}, nil
	}
	k := kindTools
	if req.Method == mcp.MethodPromptsGet {
		k = kindPrompts
	}
	return h.resolveNamed(s, v, k, req.Params, true)
}

// checkParamHeaders checks the Mcp-Param-* headers of a tools/call POSTed
// without a session (SEP-2243) against tool, as the client's endpoint
// lists it, and the arguments the client sent: only here is the schema
// known.
func (s *session) checkParamHeaders(tool json.RawMessage, args []byte) error {
	if s.header == nil {
		return nil
	}
	schema, _ := jsonrpc.Member(tool, "inputSchema")
	if err := mcp.CheckParamHeaders(s.header, schema, args); err != nil {
		return err
	}
	return nil
}

// resolveNamed finds the target of a tools/call (k kindTools) or a
// prompts/get by the name in params, as the session's endpoint names it:
// the aggregate's names, a real server's own, a virtual server's
// (routing_virtual.go). In search mode the meta-tools come first (meta:
// a call_tool's own tool is called by name, not through them again).
func (h *Hub) resolveNamed(s *session, v *view, k listKind, params json.RawMessage, meta bool) (*target, error) {
	what := "tool"
	if k == kindPrompts {
		what = "prompt"
	}
	// One pass over params finds the name; the arguments, usually most of
	// the bytes, are then copied once, around the new name.
	var rawName, args []byte
	names, metas := 0, 0
	for key, value := range jsonrpc.Members(params) {
		switch string(key) {
		case "name":
			rawName, names = value, names+1
		case "arguments":
			args = value
		case "_meta":
			metas++
		}
	}
	if metas > 1 {
		return nil, errDuplicateMeta // as checkMeta, in the same pass as the name
	}
	name, _ := jsonrpc.Unquote(rawName)
	if name == "" {
		return nil, errNotString("name")
	}
	if meta && k == kindTools && v.searching(s.scope) {
		switch name {
		case catalog.SearchToolsName:
			if !s.who.has(RoleClient) {
				return nil, forbidden(s.who, "call tool "+strconv.Quote(name))
			}
			return nil, nil // the hub answers (session_search.go)
		case catalog.CallToolName:
			return h.resolveCallTool(s, v, params)
		}
	}
	// A tool the endpoint lists, called directly, has its Mcp-Param-*
	// headers checked; one called through call_tool, or by its name in
	// search mode (whose lists hold the meta-tools only), is not: its
	// client knows no schema to mirror its arguments from.
	listed := meta && !v.searching(s.scope)
	if vl := v.virtualOf(s.scope); vl != nil {
		if names > 1 {
			return nil, errDuplicateName
		}
		return h.resolveVirtual(s, v, vl, k, name, rawName, params, listed)
	}
	aggName := name
	if s.scope != "" {
		aggName = s.scope + h.cfg.Separator + name
	} else {
		aggName = v.canonical(k, name) // a name the catalog's policy lists
	}
	switch {
	case k == kindTools && !s.who.mayCall(aggName):
		return nil, h.forbiddenUnless(s.who, "call tool "+strconv.Quote(name), mayCall(aggName))
	case k == kindPrompts && !s.who.mayGetPrompt(aggName):
		return nil, h.forbiddenUnless(s.who, "get prompt "+strconv.Quote(name), mayCall(aggName))
	}
	it := v.lookup(k, aggName)
	if it == nil {
		return nil, errUnknownItem(what, name)
	}
	if k == kindTools && listed {
		if err := s.checkParamHeaders(it.raw, args); err != nil {
			return nil, err
		}
	}
	if s.scope != "" {
		if names > 1 {
			return nil, errDuplicateName
		}
		return &target{server: it.server, replicas: it.replicas, body: params, item: it.orig}, nil // already the server's own name
	}
	if names == 1 && bytes.HasPrefix(rawName, []byte{'"'}) && jsonrpc.Within(params, rawName) {
		return &target{server: it.server, replicas: it.replicas, item: it.orig, rename: rename{params: params, name: rawName, meta: metas > 0}}, nil
	}
	params, err := renamed(params, rawName, it.orig, names)
	if err != nil {
		return nil, err
	}
	return &target{server: it.server, replicas: it.replicas, body: params, item: it.orig}, nil
}

// renamed returns params with the name (rawName, as the client sent it,
// names times) replaced by the server's own, byte for byte but for it.
func renamed(params json.RawMessage, rawName []byte, orig string, names int) (json.RawMessage, error) {
	out, ok := jsonrpc.SpliceString(params, rawName, orig)
	if names > 1 || !ok {
		// Rename every one of them: a server that reads the first must not
		// see the hub's name either.
		var err error
		if out, err = jsonrpc.SetMember(params, "name", jsonrpc.AppendString(nil, orig)); err != nil {
			return nil, errParamsNotObject
		}
	}
	return out, nil
}

// resourceServer finds the server of a resource the session may use: one
// of its scope, one its token may read.
func (h *Hub) resourceServer(s *session, v *view, uri string) (string, error) {
	if vl := v.virtualOf(s.scope); vl != nil {
		return h.virtualResourceServer(s, vl, uri)
	}
	server, ok := v.serverOfURI(uri)
	if !ok || s.scope != "" && server != s.scope {
		return "", errResourceNotFound(uri)
	}
	if !s.who.mayRead(server, uri, h.cfg.Separator) {
		return "", h.forbiddenUnless(s.who, "use resource "+strconv.Quote(uri), h.mayRead(server, uri))
	}
	return server, nil
}

// checkMeta refuses params that hold _meta more than once: two readers
// could disagree on which holds the progress token, and the server might
// see the client's own, unrewritten.
func checkMeta(params json.RawMessage) error {
	n := 0
	for key := range jsonrpc.Members(params) {
		if string(key) == "_meta" {
			n++
		}
	}
	if n > 1 {
		return errDuplicateMeta
	}
	return nil
}

// resolveComplete finds the target of completion/complete by its reference:
// a prompt by its aggregated name, a resource template by its URI template.
func (h *Hub) resolveComplete(s *session, raw json.RawMessage) (*target, error) {
	if err := checkMeta(raw); err != nil {
		return nil, err
	}
	params, err := mcp.ParseObject(raw)
	if err != nil {
		return nil, err
	}
	ref, err := mcp.ParseObject(params["ref"])
	if err != nil {
		return nil, errRefNotObject
	}
	typ, _ := ref.String("type")
	v := h.reg.view()
	switch typ {
	case "ref/prompt":
		name, err := ref.RequireString("name")
		if err != nil {
			return nil, err
		}
		if vl := v.virtualOf(s.scope); vl != nil {
			return h.completeVirtualPrompt(s, v, vl, params, ref, name)
		}
		aggName := v.canonical(kindPrompts, name)
		if s.scope != "" {
			aggName = s.scope + h.cfg.Separator + name
		}
		if !s.who.admits(aggName) {
			return nil, forbidden(s.who, "complete prompt "+strconv.Quote(name))
		}
		it := v.lookup(kindPrompts, aggName)
		if it == nil {
			return nil, errUnknownItem("prompt", name)
		}
		if s.scope != "" {
			return &target{server: it.server, replicas: it.replicas, body: raw}, nil
		}
		ref.Set("name", it.orig)
		params["ref"] = ref.Raw()
		return &target{server: it.server, replicas: it.replicas, body: params.Raw()}, nil
	case "ref/resource":
		uri, err := ref.RequireString("uri")
		if err != nil {
			return nil, err
		}
		if vl := v.virtualOf(s.scope); vl != nil {
			if t, err := h.completeVirtualTemplate(s, v, vl, raw, uri); t != nil || err != nil {
				return t, err
			}
		} else if it := v.lookup(kindTemplates, uri); it != nil && (s.scope == "" || it.server == s.scope) {
			if !s.who.sees(kindTemplates, it, h.cfg.Separator) {
				return nil, forbidden(s.who, "use resource template "+strconv.Quote(uri))
			}
			return &target{server: it.server, replicas: it.replicas, body: raw}, nil
		}
		server, err := h.resourceServer(s, v, uri)
		if err != nil {
			return nil, err
		}
		return &target{server: server, replicas: v.replicasForURI(server, uri), body: raw}, nil
	}
	return nil, errRefType
}

// pick chooses the replica with the fewest calls in flight; ties go round
// robin, so that one call at a time still spreads over replicas. While
// some instance is dropped for its silence (it may only lag), its replicas
// are chosen only when no other has the server.
func (h *Hub) pick(replicas []*replicaInfo) *replicaInfo {
	if len(replicas) == 0 {
		return nil
	}
	if len(replicas) > 1 && h.cluster.silentOnes.Load() > 0 {
		replicas = h.cluster.heardOnly(replicas)
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

// forward sends a call to one replica of t's server, here or on another
// instance, and calls done exactly once with its outcome, already mapped to
// what the caller sees (upstreamError). It never blocks: done runs later,
// on whichever goroutine the answer arrives. The returned flight's cancel
// ends the call early, with cause context.Canceled (the caller gave up: the
// server is told) or context.DeadlineExceeded; ctx carries the call's
// trace, not its cancellation.
func (h *Hub) forward(ctx context.Context, t *target, c caller, method string, done func(json.RawMessage, error)) *flight {
	return h.forwardIn(ctx, &flight{}, t, c, method, done)
}

// forwardIn is forward in a new flight f that the caller made.
func (h *Hub) forwardIn(ctx context.Context, f *flight, t *target, c caller, method string, done func(json.RawMessage, error)) *flight {
	if h.draining.Load() {
		f.uncount(h, t.server)
		done(nil, errDraining)
		f.ended = true
		return f
	}
	f.start, f.trace = time.Now(), ctx
	h.attempt(f, t, c, method, nil, done) // nil: the target's own (sendTo)
	return f
}

// attempt sends one attempt of a call to a replica. There is one unless a
// server of the stateless revision answers a session-based client's call
// with input requests: the hub asks the client (answerInput, routing_input.go) and
// sends the call again with the answers, under the same flight: one
// timeout and one way to cancel, however many rounds. A call of a server
// whose replicas are leased goes to a replica its client may have, or
// waits for one (routing_lease.go).
func (h *Hub) attempt(f *flight, t *target, c caller, method string, params json.RawMessage, done func(json.RawMessage, error)) {
	ri := h.pick(t.replicas)
	if ri == nil {
		if f.end() {
			h.ended(f, t, c, method, nil, errServerGone(t.server), done)
		}
		return
	}
	gen := f.generation()
	if !ri.Leased {
		f.started(gen, h.sendTo(f, t, ri, c, method, params, done, nil), h.cfg.CallTimeout)
		return
	}
	send := func(ri *replicaInfo, release func()) func(error) {
		return h.sendTo(f, t, ri, c, method, params, done, release)
	}
	fail := func(err error) {
		if f.end() {
			h.ended(f, t, c, method, nil, h.upstreamError(t.server, err), done)
		}
	}
	f.started(gen, h.leases.route(t.server, t.replicas, c.client(), false, send, fail), h.cfg.CallTimeout)
}

// renamesInFrame reports whether an attempt of t at ri may have the tool's
// name renamed as its frame or envelope is written, so that a large call is
// copied once on its way: when a rename is pending and nothing on the way
// edits the params (a server of the session revisions, no trace; at a
// local replica also params without _meta and no task held, which the
// replica would edit).
func (h *Hub) renamesInFrame(t *target, ri *replicaInfo, c caller) bool {
	if t.rename.name == nil || ri.ProtocolVersion == mcp.ModernVersion || h.tracing.Enabled() {
		return false
	}
	rp := ri.local
	return rp == nil || !rp.modern && !t.rename.meta && !c.caps().Tasks
}

// sendTo sends an attempt of a call to the replica ri and returns how to
// abort it; release, when set, runs first when it ends (the end of its
// share of a lease). nil params are the target's own: renamed as its
// frame (replica.sendAs) or its envelope for another instance
// (cluster.sendCallRenamed) is written where renamesInFrame allows it;
// made first otherwise, once for all attempts (target.params).
func (h *Hub) sendTo(f *flight, t *target, ri *replicaInfo, c caller, method string, params json.RawMessage, done func(json.RawMessage, error), release func()) (abort func(error)) {
	renamedInFrame := params == nil && h.renamesInFrame(t, ri, c)
	if params == nil && !renamedInFrame {
		params = t.params()
	}
	ri.inflight.Add(1)
	start := time.Now()
	var once atomic.Bool
	finish := func(raw json.RawMessage, err error) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		if release != nil {
			release()
		}
		ri.inflight.Add(-1)
		h.metrics.observeRouted(f.trace, method, ri.local != nil, start)
		// params are nil only for a server of the session revisions, whose
		// answers take no next step.
		if step := h.nextStep(f, ri, t.server, c, method, params, raw, err); step != nil {
			h.goOn(f, t, c, method, done, step)
			return
		}
		if !f.end() {
			return
		}
		h.ended(f, t, c, method, raw, h.upstreamError(t.server, err), done)
	}
	switch {
	case ri.local != nil && renamedInFrame:
		borrows := h.borrows(f, ri)
		abort := ri.local.sendAs(f.trace, c, method, t.rename.params, t.rename.name, t.item, borrows, finish)
		// Written into its frame as it was sent, the call keeps nothing of
		// the client's params (no token of the hub's, no task, no trace;
		// one attempt, as a server of the session revisions takes). Set
		// once sent: an attempt a lease sends later may meet the end of
		// its flight (a timeout) meanwhile.
		f.frees.Store(borrows)
		return abort
	case ri.local != nil:
		return ri.local.sendAs(f.trace, c, method, params, nil, "", h.borrows(f, ri), finish)
	case renamedInFrame:
		return h.cluster.sendCallRenamed(f.trace, ri, t.server, c, method, t.rename.params, t.rename.name, t.item, finish)
	}
	return h.cluster.sendCall(f.trace, ri, t.server, c, method, params, finish)
}

// borrows reports whether an attempt of f at ri may lend its answer
// (flight.reply) as far as the hub's routing goes: with no trace, whose
// spans end with the answer, and at a server of the session revisions,
// whose answers take no next step (nextStep keeps a modern server's). The
// replica rules out what it adds itself (replica.sendAs).
func (h *Hub) borrows(f *flight, ri *replicaInfo) bool {
	return f.reply != nil && ri.ProtocolVersion != mcp.ModernVersion && !h.tracing.Enabled()
}

// sendOne sends one request to the replica ri, here or on another
// instance, and returns how to abort it; done runs with its answer. ctx
// carries the request's trace.
func (h *Hub) sendOne(ctx context.Context, ri *replicaInfo, server string, c caller, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	if ri.local != nil {
		return ri.local.send(ctx, c, method, params, done)
	}
	return h.cluster.sendCall(ctx, ri, server, c, method, params, done)
}

// nextStep returns what a call does next when its answer is not yet the
// client's: a modern server's input requests, which the hub asks a client
// that takes requests before sending the call again (routing_input.go);
// a server's task, or its demand for one (routing_tasks.go). nil when the
// answer is the client's. f is the call's flight: its trace, and the
// number of the round.
func (h *Hub) nextStep(f *flight, ri *replicaInfo, server string, c caller, method string, params, raw json.RawMessage, err error) flightStep {
	if err == nil && h.mustAnswerInput(ri, c, method, raw) {
		return func(ctx context.Context) (json.RawMessage, json.RawMessage, error) {
			ctx, round := h.traceRound(ctx, f.trace, method, server, f.generation())
			next, err := h.answerInput(ctx, c, raw, params)
			round.EndWith(nil, err)
			return next, nil, err
		}
	}
	return h.tasks.taskStep(ri, server, c, method, params, raw, err)
}

// goOn runs a call's next step on a goroutine of the hub's, under the same
// flight: one timeout and one way to cancel (which ends the step's ctx),
// however many steps.
func (h *Hub) goOn(f *flight, t *target, c caller, method string, done func(json.RawMessage, error), step flightStep) {
	ctx, stop := context.WithCancelCause(h.ctx)
	if !f.next(stop) {
		stop(nil)
		return // cancelled meanwhile: the flight ended
	}
	if !h.goOwned(func() {
		defer stop(nil)
		next, raw, err := step(ctx)
		switch {
		case err != nil:
			if f.end() {
				h.ended(f, t, c, method, nil, h.upstreamError(t.server, err), done)
			}
		case next != nil:
			h.attempt(f, t, c, method, next, done)
		default:
			if f.end() {
				h.ended(f, t, c, method, raw, nil, done)
			}
		}
	}) && f.end() {
		h.ended(f, t, c, method, nil, errDraining, done)
	}
}

// ended ends a flight's call with its outcome: counted in the statistics
// (the whole flight, every attempt of it), then told to done; the client's
// frame is then given back when nothing else refers to it (flight.frees).
func (h *Hub) ended(f *flight, t *target, c caller, method string, raw json.RawMessage, err error, done func(json.RawMessage, error)) {
	h.stats.observe(f.trace, t, c, method, f.start, raw, err)
	h.auditCall(t, c, method, f.start, err)
	f.uncount(h, t.server)
	done(raw, err)
	if f.frees.Load() {
		f.reply.Release() // answered: nothing refers to the client's params now
	}
}

// call is forward for a caller that waits: it returns when the answer
// comes or ctx ends (the call is then cancelled upstream).
func (h *Hub) call(ctx context.Context, t *target, c caller, method string) (json.RawMessage, error) {
	return await(ctx, func(done func(json.RawMessage, error)) func(error) {
		return h.forward(ctx, t, c, method, done).cancel
	})
}

// flight is the life of one forwarded call: it ends once, by its answer, its
// cancellation or its timeout, whichever comes first. A call answered in
// rounds (attempt) is one flight.
type flight struct {
	start   time.Time       // of its first attempt, for the statistics
	trace   context.Context // the call's trace (tracing.go): the parent of its spans
	mu      sync.Mutex
	ended   bool
	gen     int         // the attempt running now
	abort   func(error) // ends what runs now (an attempt at the replica, which then answers done, or the asking between attempts)
	pending error       // a cancellation that came before the call was sent
	timer   *time.Timer

	from    sessionCall // a session's call's caller, when the flight holds it (HandleAsync)
	counted *session    // the session whose counts of calls in flight include it (session.forwardIn)
	// reply, when set, is how the call's done answers its client, which
	// copies the answer into the client's frame before done returns: done
	// borrows the answer, and a server's answer that nothing on its way
	// keeps either is read into a buffer given back once done returns
	// (Hub.borrows). frees is then set when the attempt sent keeps nothing
	// of the client's params either (sendTo): once the call ended, the
	// client's frame is given back too (Reply.Release, in ended).
	reply *peer.Reply
	frees atomic.Bool
}

// generation returns the number of the attempt about to start.
func (f *flight) generation() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen
}

// started records how to end attempt gen and arms the call's timeout once,
// unless the call ended or moved on to another attempt; a cancellation
// that came while the call was being sent takes effect now. (Another
// instance's cancel can find the call between its registration and here:
// it was lost, once in a few runs under -race.)
func (f *flight) started(gen int, abort func(error), timeout time.Duration) {
	f.mu.Lock()
	if f.ended || gen != f.gen {
		f.mu.Unlock()
		return
	}
	f.abort = abort
	if cause := f.pending; cause != nil {
		f.mu.Unlock()
		abort(cause)
		return
	}
	if f.timer == nil {
		f.timer = time.AfterFunc(timeout, func() { f.cancel(context.DeadlineExceeded) })
	}
	f.mu.Unlock()
}

// next moves the call on from an attempt that asked for input: abort now
// ends the asking. It reports false if the call ended meanwhile.
func (f *flight) next(abort func(error)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return false
	}
	f.gen++
	f.abort = abort
	return true
}

// end marks the call ended; it reports false if it had ended already.
func (f *flight) end() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return false
	}
	f.ended = true
	if f.timer != nil {
		f.timer.Stop()
	}
	return true
}

// cancel ends the call early: the replica side tells the server and the
// call's done runs with cause.
func (f *flight) cancel(cause error) {
	f.mu.Lock()
	if f.ended {
		f.mu.Unlock()
		return
	}
	abort := f.abort
	if abort == nil {
		if f.pending == nil {
			f.pending = cause
		}
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	abort(cause)
}

// upstreamCall is a call this instance forwarded to one of its replicas.
type upstreamCall struct {
	caller      caller
	clientToken json.RawMessage // the caller's progress token, restored on progress reports
	trace       context.Context // the request sent to the server: the server's requests about the call continue its trace
}

// send forwards one call to the replica under a new id of the hub's and
// returns at once; done runs with the answer on the connection's read
// loop, or with the error that ended the call. The returned function ends
// the call early: the server hears notifications/cancelled with the hub's
// id. ctx carries the call's trace, which the server receives in _meta.
func (rp *replica) send(ctx context.Context, c caller, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	return rp.sendAs(ctx, c, method, params, nil, "", false, done)
}

// sendAs is send, with old (when set) renamed to name in the frame: the
// caller made sure nothing below changes params then. borrows says that
// done keeps nothing of a successful answer once it returns (Hub.borrows):
// the answer's frame is then read into a buffer of the peer's pools, given
// back once done returns (peer.GoBorrowing), unless the call is held as a
// task, which keeps its answer.
func (rp *replica) sendAs(ctx context.Context, c caller, method string, params json.RawMessage, old []byte, name string, borrows bool, done func(json.RawMessage, error)) (abort func(error)) {
	id := rp.peer.NextID()
	hc := rp.hub.tasks.hold(rp, c, method, params, done) // a call that may become a task (routing_heldtasks.go)
	if hc != nil {
		c, params, done = hc, hc.params, hc.finish
	}
	// params renamed in their frame hold no _meta (renamesInFrame), unless
	// a task or a trace gave them one: no search for it then.
	noMeta := old != nil && hc == nil
	switch {
	case rp.modern:
		params = rp.hub.tasks.forServer(rp, rp.modernMeta(c, params))
	case !noMeta:
		params = withoutModernMeta(params)
	}
	ctx, params, span := rp.traceSent(ctx, id, method, params)
	params, token := rp.register(ctx, id, c, params, noMeta && !span.Recording())
	finish := func(resp *jsonrpc.Response, err error) {
		if token != "" && err == nil {
			rp.flushProgress(token) // a report the rate limit held back comes before the answer
		}
		rp.unregister(id, token)
		if err == nil && resp.Error != nil {
			rp.noteRequired(c, resp.Error)
		}
		raw, err := answerOf(resp, err)
		span.EndWith(raw, err)
		done(raw, err)
	}
	var err error
	switch {
	case borrows && hc == nil && !rp.modern && !span.Recording():
		err = rp.peer.GoBorrowing(id, method, params, old, name, finish)
	case old != nil:
		err = rp.peer.GoRenamed(id, method, params, old, name, finish)
	default:
		err = rp.peer.Go(id, method, params, finish)
	}
	if err != nil {
		finish(nil, err)
	}
	abort = func(cause error) { rp.peer.Abort(id, cause) }
	if hc != nil {
		hc.sent(abort)
	}
	return abort
}

// register records a call forwarded under id, so that the server's
// progress reports, logs and requests about it find their way back: the id
// maps to its caller and, if the caller asked for progress, a progress
// token of the hub's replaces the caller's, so that tokens of two clients
// never collide here; ctx is the trace of the request sent. noMeta says
// that params are known to hold no _meta. It returns the params to send.
func (rp *replica) register(ctx context.Context, id jsonrpc.ID, c caller, params json.RawMessage, noMeta bool) (json.RawMessage, string) {
	uc := &upstreamCall{caller: c, trace: ctx}
	var token string
	if !noMeta && mayHaveMeta(params) {
		params, token = rp.swapToken(uc, params)
	}
	rp.mu.Lock()
	rp.calls[id] = uc
	if token != "" {
		rp.tokens[token] = uc
	}
	rp.mu.Unlock()
	return params, token
}

// mayHaveMeta reports whether params may hold a _meta member: a search for
// the key, much faster than walking params member by member, rules out
// most calls (those without progress). An escape might spell the key, so
// params with any escape are walked anyway.
func mayHaveMeta(params []byte) bool {
	return bytes.Contains(params, []byte(`_meta"`)) || bytes.Contains(params, []byte(`\u`))
}

// swapToken puts a progress token of the hub's in place of the caller's,
// which it notes in uc.
// The token is written on the stack and made a string once; where params
// hold one _meta with one token, as they do, the token is spliced into
// params in place (one copy, where setting it in _meta and _meta in params
// made two).
func (rp *replica) swapToken(uc *upstreamCall, params json.RawMessage) (json.RawMessage, string) {
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok {
		return params, ""
	}
	t, ok := jsonrpc.Member(meta, mcp.MetaProgressToken)
	if !ok {
		return params, ""
	}
	uc.clientToken = t
	var b [32]byte
	tb := append(strconv.AppendInt(append(b[:0], `"sb-`...), rp.hub.seq.Add(1), 10), '"')
	token := string(tb)
	if soleMember(params, "_meta") && soleMember(meta, mcp.MetaProgressToken) {
		if p, ok := jsonrpc.Splice(params, t, tb); ok {
			return p, token
		}
	}
	if meta, err := jsonrpc.SetMember(meta, mcp.MetaProgressToken, tb); err == nil {
		params, _ = jsonrpc.SetMember(params, "_meta", meta)
	}
	return params, token
}

// soleMember reports whether the object obj has the member key once.
func soleMember(obj []byte, key string) bool {
	n := 0
	for k := range jsonrpc.Members(obj) {
		if string(k) == key {
			n++
		}
	}
	return n == 1
}

func (rp *replica) unregister(id jsonrpc.ID, token string) {
	rp.mu.Lock()
	delete(rp.calls, id)
	if token != "" {
		delete(rp.tokens, token)
		delete(rp.held, token)
	}
	rp.mu.Unlock()
}

// progress maps a progress report back to the caller's token and sends it
// to the caller. It supersedes a report held back. It reports false when
// the report names no call in flight.
func (rp *replica) progress(params json.RawMessage) bool {
	token, ok := jsonrpc.Member(params, mcp.MetaProgressToken)
	if !ok {
		return false
	}
	rp.mu.Lock()
	uc := rp.tokens[string(token)]
	delete(rp.held, string(token))
	rp.mu.Unlock()
	if uc == nil {
		return false // the call already ended, or the token is not the hub's
	}
	if params, err := jsonrpc.SetMember(params, mcp.MetaProgressToken, uc.clientToken); err == nil {
		uc.caller.notify(mcp.NotificationProgress, params)
	}
	return true
}

// holdProgress keeps a progress report beyond the server's rate in place
// of the one held for its call before: the latest report of each call in
// flight, at most, waits for the call's answer.
func (rp *replica) holdProgress(params json.RawMessage) {
	token, ok := jsonrpc.Member(params, mcp.MetaProgressToken)
	if !ok {
		return
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.tokens[string(token)] == nil {
		return // not a call in flight: nowhere to go
	}
	if rp.held == nil {
		rp.held = map[string]json.RawMessage{}
	}
	rp.held[string(token)] = bytes.Clone(params)
}

// flushProgress sends the report held for a call, if any.
func (rp *replica) flushProgress(token string) {
	rp.mu.Lock()
	params := rp.held[token]
	delete(rp.held, token)
	rp.mu.Unlock()
	if params != nil {
		rp.progress(params)
	}
}

// callOf finds the call in flight that a server's message names in
// _meta["switchboard/relatedRequest"] (the id the server received it
// under), and returns params without that member. found is false when the
// message names no call; uc is nil when the call it names is not in flight.
func (rp *replica) callOf(params json.RawMessage) (uc *upstreamCall, rest json.RawMessage, found bool, err error) {
	rest, related, found := withoutRelated(params)
	if !found {
		return nil, params, false, nil
	}
	var id jsonrpc.ID
	if json.Unmarshal(related, &id) != nil {
		return nil, params, true, errRelatedNotID
	}
	rp.mu.Lock()
	uc = rp.calls[id]
	rp.mu.Unlock()
	return uc, rest, true, nil
}

// routeToClient sends a server's request to the client whose call the
// server is serving: the one named by _meta["switchboard/relatedRequest"],
// else the only client with a call in flight to this replica. The hub
// never guesses between two clients. It returns at once, holding nothing
// that the server's other requests need while the client thinks: done runs
// once with the answer (or the hub's own, or a refusal), within the call
// timeout; abort gives up on it (the server cancelled it, or left).
func (rp *replica) routeToClient(req *jsonrpc.Request, done func(json.RawMessage, error)) (abort func(error)) {
	uc, params, err := rp.clientOf(req)
	ctx, span := rp.traceAsked(uc, req)
	done = ending(span, done)
	switch {
	case err != nil:
		done(nil, err)
		return noAbort
	case uc == nil:
		done(rp.answerAlone(req.Method))
		return noAbort
	}
	c := uc.caller
	if err := c.caps().check(req.Method, params); err != nil {
		if req.Method == mcp.MethodRootsList {
			done(rp.answerAlone(req.Method)) // no roots from that client: the server's own, from its URL
		} else {
			done(nil, err)
		}
		return noAbort
	}
	// One timeout and one way to give up, as for a call (flight).
	f := &flight{}
	cancel := rp.ask(ctx, c, req.Method, params, func(raw json.RawMessage, err error) {
		if f.end() {
			done(raw, rp.hub.downstreamError(err))
		}
	})
	f.started(0, cancel, rp.hub.cfg.CallTimeout)
	return f.cancel
}

// clientOf finds the call whose caller a server's request goes to
// (routeToClient), and returns the request's params without the hub's
// routing hint. A nil call without error: no client has a call in flight
// here, and the hub answers itself (answerAlone).
func (rp *replica) clientOf(req *jsonrpc.Request) (*upstreamCall, mcp.Object, error) {
	params, err := mcp.ParseObject(req.Params)
	if err != nil {
		return nil, nil, err
	}
	uc, rest, named, err := rp.callOf(req.Params)
	switch {
	case err != nil:
		return nil, nil, err
	case named && uc == nil:
		return nil, nil, errCannotRoute(req.Method, "the call it names is not in flight")
	case named:
		params, err = mcp.ParseObject(rest)
		return uc, params, err
	}
	var only *upstreamCall
	n := 0
	rp.mu.Lock()
	for _, uc := range rp.calls {
		if only == nil {
			only, n = uc, 1
		} else if only.caller.client() != uc.caller.client() {
			n = 2
			break
		}
	}
	rp.mu.Unlock()
	if n > 1 {
		return nil, nil, errCannotRoute(req.Method, "several clients have calls in flight; set _meta[\""+
			mcp.MetaRelatedRequest+"\"] to the id of the call it serves")
	}
	return only, params, nil
}

// answerAlone answers a server's request that names no call while no client
// has one in flight: roots/list with the roots given on the server's URL
// (an empty list without: published servers ask for roots as they start),
// ping as the hub; sampling and elicitation cannot be, since only a person
// or a model behind a client can answer them.
func (rp *replica) answerAlone(method string) (json.RawMessage, error) {
	switch method {
	case mcp.MethodRootsList:
		roots := make([]mcp.Root, 0, len(rp.roots))
		for _, uri := range rp.roots {
			roots = append(roots, mcp.Root{URI: uri})
		}
		return jsonrpc.Marshal(&mcp.ListRootsResult{Roots: roots})
	case mcp.MethodPing:
		return json.RawMessage(`{}`), nil
	}
	return nil, errNoClient(method)
}

// rootsChanged tells the servers serving a client's calls that its roots
// changed: once per replica and ListChangedInterval, however often the
// client says so (a flood of them would make the hub drop the server as a
// slow consumer).
func (h *Hub) rootsChanged(s *session) {
	h.mu.Lock()
	var targets []string
	for rp := range h.replicas {
		rp.mu.Lock()
		for _, uc := range rp.calls {
			if uc.caller.client() == s.key() {
				targets = append(targets, rp.id)
				break
			}
		}
		rp.mu.Unlock()
	}
	h.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	c := s.rootChangesOf()
	for _, id := range targets {
		c.fire(id)
	}
}
