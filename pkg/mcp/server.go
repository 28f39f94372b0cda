package mcp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Server is an MCP server written in Go that dials out to the hub: tools,
// resources, templates and prompts registered on it are offered to every
// client of the hub. Registration may happen before or while connected;
// changes while connected are announced with list_changed.
type Server struct {
	info Implementation
	opts ServerOptions
	log  *slog.Logger

	mu        sync.RWMutex
	tools     []*serverTool
	resources []*serverResource
	templates []*serverTemplate
	prompts   []*serverPrompt
	complete  CompletionHandler
	sessions  map[*ServerSession]struct{}
	listeners map[*listener]struct{}

	tasks *taskEngine // nil unless ServerOptions.Tasks offers the extension
}

// ServerOptions configure a Server. The zero value is usable.
type ServerOptions struct {
	// Instructions are returned to the hub in the initialize result (and
	// the server/discover result).
	Instructions string
	// ProtocolVersions are the versions the server speaks; default
	// AllVersions. Without a session-based version the server speaks
	// 2026-07-28 only: it answers initialize with -32601, which is how a
	// client (the hub among them) learns to use server/discover instead.
	// Without 2026-07-28, requests of that version get -32022.
	ProtocolVersions []string
	// CacheTTL is how long a client of protocol version 2026-07-28 may
	// reuse a list, read or discover result (its ttlMs). The default, 0,
	// says not at all: registrations change whenever the program calls
	// AddTool and the like, and a client learns of it only through
	// subscriptions/listen. Lists and discover are the same for every
	// client, so their cacheScope is "public"; a read's is "private", since
	// a handler may answer each client differently.
	CacheTTL time.Duration
	// PageSize splits list results into pages of this many items; 0 sends
	// everything in one page.
	PageSize int
	// OnRootsChanged is called when a client says its roots changed.
	OnRootsChanged func(s *ServerSession)
	// OnSubscribe, when set, is called when a client subscribes to a
	// resource (subscribed true) or no longer does: by resources/subscribe
	// and resources/unsubscribe, or by a subscriptions/listen stream that
	// opens or ends. Updates of the URI reach the client from then on.
	OnSubscribe func(s *ServerSession, uri string, subscribed bool)
	// Tasks, when set, offers the tasks extension (ExtensionTasks) to
	// requests of protocol version 2026-07-28: a tool handler may then run
	// its work as a task (ToolRequest.RunAsTask). See TaskOptions.
	Tasks *TaskOptions
	// MaxPending bounds the requests of one session accepted and not yet
	// answered (running, or queued for one of its 64 handlers); a request
	// beyond it gets -32603 at once. Default DefaultMaxPending: a server
	// behind a hub serves all of the hub's clients on one connection, and
	// the hub's subscriptions/listen stream holds one for as long as it is
	// open.
	MaxPending int
	// LendRequests reads each request that comes alone in its frame on a
	// WebSocket into a buffer of the peer's pools (peer.Options.LendRequests),
	// given back once its answer is written: a server answering large
	// tool calls then allocates no buffer per call for the garbage
	// collector. The ownership rule: what a handler is given of a request
	// (a ToolRequest's Params.Arguments, RequestMeta's raw members) is
	// valid until the answer is written. The result may refer to it (a
	// tool echoing its arguments as StructuredContent), being encoded
	// first; a handler that keeps any of it beyond its return (a
	// goroutine of its own, a cache) copies what it keeps. A task's work
	// (RunAsTask) is given copies by the Server.
	LendRequests bool
	// Logger receives the server's own logs; nil discards them.
	Logger *slog.Logger
}

// DefaultMaxPending is ServerOptions.MaxPending's default: room for the
// calls of many clients at once (each request queued costs a few hundred
// bytes until a handler takes it).
const DefaultMaxPending = 4096

type serverTool struct {
	tool    *Tool
	handler ToolHandler
}

type serverResource struct {
	resource *Resource
	handler  ResourceHandler
}

type serverTemplate struct {
	template *ResourceTemplate
	match    *URITemplate
	handler  ResourceHandler
}

type serverPrompt struct {
	prompt  *Prompt
	handler PromptHandler
}

// ToolHandler runs a tool call. An error that is a *jsonrpc.Error is sent as
// a protocol error; any other error becomes a result with IsError set and the
// error's text, which is what a model should see.
type ToolHandler func(ctx context.Context, req *ToolRequest) (*CallToolResult, error)

// ResourceHandler reads a resource.
type ResourceHandler func(ctx context.Context, req *ResourceRequest) (*ReadResourceResult, error)

// PromptHandler renders a prompt.
type PromptHandler func(ctx context.Context, req *PromptRequest) (*GetPromptResult, error)

// CompletionHandler completes an argument of a prompt or resource template.
type CompletionHandler func(ctx context.Context, s *ServerSession, params *CompleteParams) (*CompleteResult, error)

// NewServer returns a server that introduces itself as info.
func NewServer(info Implementation, opts *ServerOptions) *Server {
	s := &Server{info: info, sessions: make(map[*ServerSession]struct{}), listeners: make(map[*listener]struct{})}
	if opts != nil {
		s.opts = *opts
	}
	if len(s.opts.ProtocolVersions) == 0 {
		s.opts.ProtocolVersions = AllVersions
	}
	s.opts.ProtocolVersions = slices.Clone(s.opts.ProtocolVersions)
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.Tasks != nil {
		s.tasks = newTaskEngine(s, *s.opts.Tasks)
	}
	return s
}

// AddTool registers a tool, replacing one of the same name.
func (s *Server) AddTool(t *Tool, h ToolHandler) {
	if len(t.InputSchema) == 0 {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	put(s, &s.tools, &serverTool{tool: t, handler: h}, NotificationToolsListChanged)
}

// AddTypedTool registers a tool whose arguments decode into In. When the
// tool has no InputSchema, one is derived from In (see SchemaFor). Arguments
// that do not decode are answered with invalid params.
func AddTypedTool[In any](s *Server, t *Tool, h func(ctx context.Context, req *ToolRequest, args In) (*CallToolResult, error)) {
	if len(t.InputSchema) == 0 {
		t.InputSchema = SchemaFor[In]()
	}
	s.AddTool(t, func(ctx context.Context, req *ToolRequest) (*CallToolResult, error) {
		var args In
		raw := req.Params.Arguments
		if len(raw) == 0 || string(raw) == "null" {
			raw = json.RawMessage(`{}`)
		}
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "arguments of %s: %v", t.Name, err)
		}
		return h(ctx, req, args)
	})
}

// RemoveTool unregisters a tool.
func (s *Server) RemoveTool(name string) {
	remove(s, &s.tools, name, NotificationToolsListChanged)
}

// AddResource registers a resource, replacing one with the same URI.
func (s *Server) AddResource(r *Resource, h ResourceHandler) {
	put(s, &s.resources, &serverResource{resource: r, handler: h}, NotificationResourcesListChanged)
}

// RemoveResource unregisters a resource.
func (s *Server) RemoveResource(uri string) {
	remove(s, &s.resources, uri, NotificationResourcesListChanged)
}

// AddResourceTemplate registers a resource template; reads of URIs that
// match it and no listed resource go to h.
func (s *Server) AddResourceTemplate(t *ResourceTemplate, h ResourceHandler) {
	put(s, &s.templates, &serverTemplate{template: t, match: ParseURITemplate(t.URITemplate), handler: h}, NotificationResourcesListChanged)
}

// AddPrompt registers a prompt, replacing one of the same name.
func (s *Server) AddPrompt(p *Prompt, h PromptHandler) {
	put(s, &s.prompts, &serverPrompt{prompt: p, handler: h}, NotificationPromptsListChanged)
}

// RemovePrompt unregisters a prompt.
func (s *Server) RemovePrompt(name string) {
	remove(s, &s.prompts, name, NotificationPromptsListChanged)
}

// entry is what a Server lists: a tool, resource, template or prompt, and
// the key that names it (a name, a URI or a URI template).
type entry interface{ key() string }

func (t *serverTool) key() string     { return t.tool.Name }
func (r *serverResource) key() string { return r.resource.URI }
func (t *serverTemplate) key() string { return t.template.URITemplate }
func (p *serverPrompt) key() string   { return p.prompt.Name }

// put adds e to list, replacing the entry of the same key, and tells the
// sessions the list changed.
func put[E entry](s *Server, list *[]E, e E, changed string) {
	s.mu.Lock()
	*list = append(slices.DeleteFunc(*list, func(x E) bool { return x.key() == e.key() }), e)
	s.mu.Unlock()
	s.notifyAll(changed)
}

// remove drops the entry of key from list, and tells the sessions the list
// changed.
func remove[E entry](s *Server, list *[]E, key, changed string) {
	s.mu.Lock()
	*list = slices.DeleteFunc(*list, func(x E) bool { return x.key() == key })
	s.mu.Unlock()
	s.notifyAll(changed)
}

// SetCompletionHandler sets the handler of completion/complete.
func (s *Server) SetCompletionHandler(h CompletionHandler) {
	s.mu.Lock()
	s.complete = h
	s.mu.Unlock()
}

// ResourceUpdated tells every session subscribed to uri
// (resources/subscribe), and every subscriptions/listen stream that asked
// for it, that it changed.
func (s *Server) ResourceUpdated(ctx context.Context, uri string) {
	for _, ss := range s.liveSessions() {
		if ss.subscribed(uri) {
			_ = ss.peer.Notify(ctx, NotificationResourceUpdated, &ResourceUpdatedParams{URI: uri})
		}
	}
	for _, l := range s.liveListeners() {
		if slices.Contains(l.filter.ResourceSubscriptions, uri) {
			l.notify(NotificationResourceUpdated, &ResourceUpdatedParams{URI: uri})
		}
	}
}

// Log sends a log message to every session opened with initialize whose
// level admits it. It reaches no request of protocol version 2026-07-28:
// those get the messages their handler sends (ToolRequest.Log), at the
// level their _meta asks for.
func (s *Server) Log(ctx context.Context, level LoggingLevel, logger string, data any) {
	for _, ss := range s.liveSessions() {
		if ss.opened() {
			ss.log(ctx, level, logger, data, nil)
		}
	}
}

func (s *Server) liveSessions() []*ServerSession {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*ServerSession, 0, len(s.sessions))
	for ss := range s.sessions {
		out = append(out, ss)
	}
	return out
}

// notifyAll announces a list change to every initialized session and every
// subscriptions/listen stream that asked for it.
func (s *Server) notifyAll(method string) {
	for _, ss := range s.liveSessions() {
		if ss.isInitialized() {
			_ = ss.peer.Notify(context.Background(), method, nil)
		}
	}
	for _, l := range s.liveListeners() {
		if l.wants(method) {
			l.notify(method, &struct {
				Meta Meta `json:"_meta,omitempty"`
			}{})
		}
	}
}

// DialOptions configure Server.Dial.
type DialOptions struct {
	// Header is sent with every handshake; Token, when set, adds
	// "Authorization: Bearer <Token>".
	Header http.Header
	Token  string
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts (defaults 100 ms and 5 s), with jitter.
	MinBackoff, MaxBackoff time.Duration
	// OnConnect is called when a session starts, OnDisconnect when it ends.
	OnConnect    func(*ServerSession)
	OnDisconnect func(*ServerSession, error)
	// WebSocket tunes the connection.
	WebSocket peer.WebSocketOptions
}

// Dial connects to the hub's server endpoint (ws://host/mcp/server) and
// serves it, reconnecting with backoff whenever the connection ends, so the
// server re-registers by itself after the hub restarts. It returns when ctx
// ends, or at once when the hub refuses the credentials (HTTP 401 or 403).
func (s *Server) Dial(ctx context.Context, url string, opts *DialOptions) error {
	var o DialOptions
	if opts != nil {
		o = *opts
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	header := o.Header.Clone()
	if o.Token != "" {
		if header == nil {
			header = http.Header{}
		}
		header.Set("Authorization", "Bearer "+o.Token)
	}
	backoff := o.MinBackoff
	for {
		conn, err := peer.Dial(ctx, url, &peer.DialOptions{Header: header, WebSocketOptions: o.WebSocket})
		if err == nil {
			ss := s.Serve(ctx, conn)
			if o.OnConnect != nil {
				o.OnConnect(ss)
			}
			err = ss.Wait()
			if o.OnDisconnect != nil {
				o.OnDisconnect(ss, err)
			}
			if ss.wasInitialized() || ss.served.Load() {
				backoff = o.MinBackoff
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var he *peer.HandshakeError
		if errors.As(err, &he) && (he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden) {
			return err
		}
		s.log.Info("disconnected from the hub; reconnecting", "err", err, "backoff", backoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, o.MaxBackoff)
	}
}

// Serve serves one connection to the hub (or to any MCP client) until it
// ends; the session's Wait tells when. On the conn of a StreamSession
// (served with its Context) that carries one stateless request, the
// request is served as one of protocol version 2026-07-28 whatever it says.
func (s *Server) Serve(ctx context.Context, conn peer.Conn) *ServerSession {
	ss := &ServerSession{server: s, ready: make(chan struct{}), subs: map[string]bool{}}
	if st := StreamSessionFromContext(ctx); st != nil && st.Conn() == conn {
		ss.stateless, ss.header = st.stateless, st.header
	}
	ss.peer = peer.New(conn, &peer.Options{
		Handler:       sessionHandler{ss},
		MaxConcurrent: 64,
		MaxPending:    cmp.Or(s.opts.MaxPending, DefaultMaxPending),
		LendRequests:  s.opts.LendRequests,
		Logger:        s.log,
		OnCancel:      cancelNotifier(func() *peer.Peer { return ss.peer }),
	})
	s.mu.Lock()
	s.sessions[ss] = struct{}{}
	s.mu.Unlock()
	ss.peer.Start(ctx)
	go func() {
		<-ss.peer.Done()
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
	}()
	return ss
}

// cancelNotifier returns a peer OnCancel hook that tells the other side with
// notifications/cancelled.
func cancelNotifier(p func() *peer.Peer) func(id jsonrpc.ID, cause error) {
	return func(id jsonrpc.ID, cause error) {
		reason := "cancelled"
		if cause != nil {
			reason = cause.Error()
		}
		_ = p().Notify(context.Background(), NotificationCancelled, &CancelledParams{RequestID: id, Reason: reason})
	}
}

// ServerSession is one connection of a Server.
type ServerSession struct {
	server    *Server
	peer      *peer.Peer
	ready     chan struct{}
	stateless bool        // every request is modern: see Serve
	header    http.Header // a stateless HTTP request's headers (Mcp-Param-*)
	served    atomic.Bool // a request was answered

	mu          sync.Mutex
	initParams  *InitializeParams
	initialized bool
	level       LoggingLevel
	subs        map[string]bool
}

// Peer returns the session's JSON-RPC peer.
func (ss *ServerSession) Peer() *peer.Peer { return ss.peer }

// Ready is closed once the client sent notifications/initialized.
func (ss *ServerSession) Ready() <-chan struct{} { return ss.ready }

// Wait waits until the connection ends.
func (ss *ServerSession) Wait() error { return ss.peer.Wait() }

// Close closes the connection.
func (ss *ServerSession) Close() error { return ss.peer.Close() }

// ClientCapabilities returns what the client declared in initialize. A
// request of protocol version 2026-07-28 declares its own: see
// ToolRequest.ClientCapabilities.
func (ss *ServerSession) ClientCapabilities() ClientCapabilities {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.initParams == nil {
		return ClientCapabilities{}
	}
	return ss.initParams.Capabilities
}

// opened reports whether the client sent initialize.
func (ss *ServerSession) opened() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.initParams != nil
}

func (ss *ServerSession) isInitialized() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.initialized
}

func (ss *ServerSession) wasInitialized() bool {
	select {
	case <-ss.ready:
		return true
	default:
		return false
	}
}

func (ss *ServerSession) subscribed(uri string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.subs[uri]
}

// log sends a log message if the session's level admits it; meta names
// the call it is about, if any (the hub then sends it to that call's
// client only).
func (ss *ServerSession) log(ctx context.Context, level LoggingLevel, logger string, data any, meta Meta) {
	ss.mu.Lock()
	min := ss.level
	ss.mu.Unlock()
	if min != "" && level.Severity() < min.Severity() {
		return
	}
	_ = ss.peer.Notify(ctx, NotificationMessage, &LoggingMessageParams{Level: level, Logger: logger, Data: data, Meta: meta})
}

func decodeParams[T any](req *jsonrpc.Request) (*T, error) {
	v := new(T)
	if len(req.Params) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(req.Params, v); err != nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s: %v", req.Method, err)
	}
	return v, nil
}

// inbound is a request being served: its session, and what a request of
// protocol version 2026-07-28 says of itself.
type inbound struct {
	ss   *ServerSession
	req  *jsonrpc.Request
	meta *RequestMeta // nil for a request of a session
}

// clientCapabilities returns what the client can do for this request: what
// it declared in _meta, or in initialize.
func (in *inbound) clientCapabilities() ClientCapabilities {
	if in.meta != nil {
		return in.meta.Capabilities
	}
	return in.ss.ClientCapabilities()
}

// classify tells a request of protocol version 2026-07-28 from one of a
// session and checks the former as that revision asks, in its order: the
// method (-32601: unknown, removed, or of a capability the server lacks),
// then the _meta (-32602), then the version (-32022). A request is of
// 2026-07-28 when its _meta names a protocol version (IsModernRequest),
// when it came alone on a stateless HTTP session, or when the server
// speaks no session-based version at all.
func (in *inbound) classify() error {
	s, req := in.ss.server, in.req
	if !in.ss.stateless && s.speaksSessions() && !IsModernRequest(req.Params) {
		if spec, ok := LookupMethod(req.Method); ok && spec.Eras&SessionEra == 0 {
			return jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s is a method of protocol version %s, whose requests carry params._meta[%q]",
				req.Method, ModernVersion, MetaProtocolVersion)
		}
		return nil
	}
	spec, ok := LookupMethod(req.Method)
	if !ok || spec.Eras&StatelessEra == 0 || spec.Direction&ClientToServer == 0 || !s.offers(spec.ServerCap) {
		return jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%q is not a method of this server in protocol version %s", req.Method, ModernVersion)
	}
	if req.IsNotification() {
		return nil
	}
	meta, err := ParseRequestMeta(req.Params)
	if err != nil {
		return err
	}
	if !IsModernVersion(meta.ProtocolVersion) || !slices.Contains(s.opts.ProtocolVersions, meta.ProtocolVersion) {
		e := ErrUnsupportedVersion(meta.ProtocolVersion)
		if IsSupportedVersion(meta.ProtocolVersion) {
			e.Message += " without a session (send initialize)"
		}
		return e.WithData(map[string]any{
			"requested": meta.ProtocolVersion, "supported": s.opts.ProtocolVersions,
		})
	}
	in.meta = meta
	return nil
}

// speaksSessions reports whether the server speaks a session-based version.
func (s *Server) speaksSessions() bool {
	return slices.ContainsFunc(s.opts.ProtocolVersions, IsSupportedVersion)
}

// offers reports whether the server has the capability a method needs
// ("" for none).
func (s *Server) offers(capability string) bool { return s.capabilities().Has(capability) }

// negotiate answers initialize's protocol version: the one asked for when
// the server speaks it, else its latest session-based one.
func (s *Server) negotiate(requested string) string {
	if IsSupportedVersion(requested) && slices.Contains(s.opts.ProtocolVersions, requested) {
		return requested
	}
	latest := ""
	for _, v := range s.opts.ProtocolVersions {
		if IsSupportedVersion(v) && v > latest {
			latest = v
		}
	}
	return latest
}

// decorate gives a modern request's result what the revision asks of
// every result: resultType, ttlMs and cacheScope where they apply (see
// ServerOptions.CacheTTL), and the server's name in _meta.
func (s *Server) decorate(method string, res any) (json.RawMessage, error) {
	raw, err := jsonrpc.Marshal(res)
	if err != nil {
		return nil, err
	}
	ttl, scope := int64(-1), CachePublic
	if IsCacheable(method) {
		ttl = s.opts.CacheTTL.Milliseconds()
		if method == MethodResourcesRead {
			scope = CachePrivate
		}
	}
	return s.stamp(Decorate(raw, ttl, scope)), nil
}

// stamp sets _meta["io.modelcontextprotocol/serverInfo"] in a result.
func (s *Server) stamp(result json.RawMessage) json.RawMessage {
	info, err := json.Marshal(s.info)
	if err != nil {
		return result
	}
	meta, ok := jsonrpc.Member(result, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		meta = []byte(`{}`)
	}
	meta, err = jsonrpc.SetMember(meta, MetaServerInfo, info)
	if err != nil {
		return result
	}
	out, err := jsonrpc.SetMember(result, "_meta", meta)
	if err != nil {
		return result
	}
	return out
}

// serverMethods is what a Server answers, by method: the requests and
// notifications of MethodSpec's table that a client sends (classify has
// checked which revision defines them). Anything else is -32601 (a
// notification is ignored).
var serverMethods map[string]func(ctx context.Context, in *inbound) (any, error)

func init() {
	list := func(fn func(s *Server, req *jsonrpc.Request) (any, error)) func(context.Context, *inbound) (any, error) {
		return func(_ context.Context, in *inbound) (any, error) { return fn(in.ss.server, in.req) }
	}
	serverMethods = map[string]func(context.Context, *inbound) (any, error){
		MethodInitialize: func(_ context.Context, in *inbound) (any, error) {
			p, err := decodeParams[InitializeParams](in.req)
			if err != nil {
				return nil, err
			}
			ss := in.ss
			ss.mu.Lock()
			ss.initParams = p
			ss.mu.Unlock()
			s := ss.server
			caps := s.capabilities()
			caps.Extensions = nil // the session-based revisions have none
			return &InitializeResult{
				ProtocolVersion: s.negotiate(p.ProtocolVersion),
				Capabilities:    caps,
				ServerInfo:      s.info,
				Instructions:    s.opts.Instructions,
			}, nil
		},
		MethodServerDiscover: func(_ context.Context, in *inbound) (any, error) {
			s := in.ss.server
			return &DiscoverResult{
				SupportedVersions: s.opts.ProtocolVersions,
				Capabilities:      s.capabilities(),
				Instructions:      s.opts.Instructions,
				ResultType:        ResultComplete,
				TTLMs:             s.opts.CacheTTL.Milliseconds(),
				CacheScope:        CachePublic,
			}, nil
		},
		MethodSubscriptionsListen: func(context.Context, *inbound) (any, error) {
			// Alone in its frame it is served by sessionHandler.HandleAsync.
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "subscriptions/listen cannot be sent in a batch")
		},
		NotificationInitialized: func(_ context.Context, in *inbound) (any, error) {
			ss := in.ss
			ss.mu.Lock()
			if !ss.initialized {
				ss.initialized = true
				close(ss.ready)
			}
			ss.mu.Unlock()
			return nil, nil
		},
		MethodPing: func(context.Context, *inbound) (any, error) { return struct{}{}, nil },
		NotificationCancelled: func(_ context.Context, in *inbound) (any, error) {
			if p, err := decodeParams[CancelledParams](in.req); err == nil {
				in.ss.peer.Cancel(p.RequestID)
			}
			return nil, nil
		},
		NotificationRootsListChanged: func(_ context.Context, in *inbound) (any, error) {
			if fn := in.ss.server.opts.OnRootsChanged; fn != nil {
				fn(in.ss)
			}
			return nil, nil
		},
		MethodToolsList: list(func(s *Server, req *jsonrpc.Request) (any, error) {
			return listPage(s, req, func() []*Tool {
				return mapSlice(s.tools, func(t *serverTool) *Tool { return t.tool })
			}, func(items []*Tool, next string) any { return &ListToolsResult{Tools: items, NextCursor: next} })
		}),
		MethodToolsCall: callTool,
		MethodResourcesList: list(func(s *Server, req *jsonrpc.Request) (any, error) {
			return listPage(s, req, func() []*Resource {
				return mapSlice(s.resources, func(r *serverResource) *Resource { return r.resource })
			}, func(items []*Resource, next string) any {
				return &ListResourcesResult{Resources: items, NextCursor: next}
			})
		}),
		MethodResourcesTemplatesList: list(func(s *Server, req *jsonrpc.Request) (any, error) {
			return listPage(s, req, func() []*ResourceTemplate {
				return mapSlice(s.templates, func(t *serverTemplate) *ResourceTemplate { return t.template })
			}, func(items []*ResourceTemplate, next string) any {
				return &ListResourceTemplatesResult{ResourceTemplates: items, NextCursor: next}
			})
		}),
		MethodResourcesRead:        readResource,
		MethodResourcesSubscribe:   subscribe,
		MethodResourcesUnsubscribe: subscribe,
		MethodPromptsList: list(func(s *Server, req *jsonrpc.Request) (any, error) {
			return listPage(s, req, func() []*Prompt {
				return mapSlice(s.prompts, func(p *serverPrompt) *Prompt { return p.prompt })
			}, func(items []*Prompt, next string) any { return &ListPromptsResult{Prompts: items, NextCursor: next} })
		}),
		MethodPromptsGet: getPrompt,
		MethodCompletionComplete: func(ctx context.Context, in *inbound) (any, error) {
			p, err := decodeParams[CompleteParams](in.req)
			if err != nil {
				return nil, err
			}
			s := in.ss.server
			s.mu.RLock()
			h := s.complete
			s.mu.RUnlock()
			if h == nil {
				return &CompleteResult{Completion: Completion{Values: []string{}}}, nil
			}
			return h(ctx, in.ss, p)
		},
		MethodTasksGet:    getTask,
		MethodTasksUpdate: updateTask,
		MethodTasksCancel: cancelTask,
		MethodLoggingSetLevel: func(_ context.Context, in *inbound) (any, error) {
			p, err := decodeParams[SetLevelParams](in.req)
			if err != nil {
				return nil, err
			}
			if p.Level.Severity() < 0 {
				return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown level %q", p.Level)
			}
			in.ss.mu.Lock()
			in.ss.level = p.Level
			in.ss.mu.Unlock()
			return struct{}{}, nil
		},
	}
}

// sessionHandler is a session's peer.Handler: Handle serves every request,
// and HandleAsync takes subscriptions/listen, which waits for as long as
// the client listens without holding a worker.
type sessionHandler struct{ ss *ServerSession }

var _ peer.AsyncHandler = sessionHandler{}

func (h sessionHandler) Handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	return h.ss.handle(ctx, req)
}

func (h sessionHandler) HandleAsync(req *jsonrpc.Request, reply *peer.Reply) bool {
	if req.Method != MethodSubscriptionsListen {
		return false
	}
	h.ss.listen(req, reply)
	return true
}

func (ss *ServerSession) handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	in := &inbound{ss: ss, req: req}
	if err := in.classify(); err != nil {
		if req.IsNotification() {
			return nil, nil
		}
		return nil, err
	}
	fn, ok := serverMethods[req.Method]
	if !ok {
		if req.IsNotification() {
			return nil, nil
		}
		return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s", req.Method)
	}
	res, err := fn(ctx, in)
	if err != nil || req.IsNotification() {
		return res, err
	}
	ss.served.Store(true)
	if in.meta == nil {
		return res, nil
	}
	return ss.server.decorate(req.Method, res)
}

func subscribe(_ context.Context, in *inbound) (any, error) {
	p, err := decodeParams[ResourceParams](in.req)
	if err != nil {
		return nil, err
	}
	ss := in.ss
	on := in.req.Method == MethodResourcesSubscribe
	ss.mu.Lock()
	if on {
		ss.subs[p.URI] = true
	} else {
		delete(ss.subs, p.URI)
	}
	ss.mu.Unlock()
	ss.server.subscribed(ss, p.URI, on)
	return struct{}{}, nil
}

// subscribed tells OnSubscribe.
func (s *Server) subscribed(ss *ServerSession, uri string, on bool) {
	if fn := s.opts.OnSubscribe; fn != nil {
		fn(ss, uri, on)
	}
}

func (s *Server) capabilities() ServerCapabilities {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := ServerCapabilities{Logging: &struct{}{}}
	if len(s.tools) > 0 {
		c.Tools = &ListChangedCap{ListChanged: true}
	}
	if len(s.resources) > 0 || len(s.templates) > 0 {
		c.Resources = &ResourcesCap{Subscribe: true, ListChanged: true}
	}
	if len(s.prompts) > 0 {
		c.Prompts = &ListChangedCap{ListChanged: true}
	}
	if s.complete != nil {
		c.Completions = &struct{}{}
	}
	if s.tasks != nil {
		c.Extensions = map[string]json.RawMessage{ExtensionTasks: json.RawMessage(`{}`)}
	}
	return c
}

func (s *Server) resourceHandler(uri string) ResourceHandler {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range s.resources {
		if r.resource.URI == uri {
			return r.handler
		}
	}
	for _, t := range s.templates {
		if t.match.Match(uri) {
			return t.handler
		}
	}
	return nil
}

func mapSlice[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// listPage answers a list request with one page of items (all of them when
// the server has no page size), the cursor being the offset of the next page.
func listPage[T any](s *Server, req *jsonrpc.Request, items func() []T, result func([]T, string) any) (any, error) {
	p, err := decodeParams[PaginatedParams](req)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	all := items()
	s.mu.RUnlock()
	start := 0
	if p.Cursor != "" {
		start, err = strconv.Atoi(p.Cursor)
		if err != nil || start < 0 || start > len(all) {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "invalid cursor")
		}
	}
	end := len(all)
	if s.opts.PageSize > 0 {
		end = min(start+s.opts.PageSize, len(all))
	}
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return result(all[start:end], next), nil
}

// decodeInput reads a retry's inputResponses and requestState members:
// null or absent is none; anything else that is not an object of answers,
// or a string, is invalid params.
func decodeInput(method string, rawResponses, rawState []byte) (map[string]json.RawMessage, string, error) {
	var responses map[string]json.RawMessage
	if len(rawResponses) > 0 && string(rawResponses) != "null" {
		if err := json.Unmarshal(rawResponses, &responses); err != nil {
			return nil, "", jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s: inputResponses must be an object of answers by key", method)
		}
	}
	state := ""
	if len(rawState) > 0 && string(rawState) != "null" {
		var ok bool
		if state, ok = jsonrpc.Unquote(rawState); !ok {
			return nil, "", jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s: requestState must be a string", method)
		}
	}
	return responses, state, nil
}

func callTool(ctx context.Context, in *inbound) (any, error) {
	// Read the members in place, in one pass: the arguments stay the bytes
	// they came in.
	var rawName, meta, rawResponses, rawState []byte
	p := &CallToolParams{}
	for key, value := range jsonrpc.Members(in.req.Params) {
		switch string(key) {
		case "name":
			rawName = value
		case "arguments":
			p.Arguments = value
		case "inputResponses":
			rawResponses = value
		case "requestState":
			rawState = value
		case "_meta":
			meta = value
		}
	}
	var ok bool
	if p.Name, ok = jsonrpc.Unquote(rawName); !ok {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `tools/call: "name" must be a string`)
	}
	var token json.RawMessage
	if meta != nil {
		if err := json.Unmarshal(meta, &p.Meta); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "tools/call: _meta: %v", err)
		}
		token, _ = jsonrpc.Member(meta, MetaProgressToken)
	}
	var err error
	if p.InputResponses, p.RequestState, err = decodeInput(MethodToolsCall, rawResponses, rawState); err != nil {
		return nil, err
	}
	s := in.ss.server
	s.mu.RLock()
	i := slices.IndexFunc(s.tools, func(t *serverTool) bool { return t.tool.Name == p.Name })
	var h ToolHandler
	var schema json.RawMessage
	if i >= 0 {
		h, schema = s.tools[i].handler, s.tools[i].tool.InputSchema
	}
	s.mu.RUnlock()
	if h == nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown tool %q", p.Name)
	}
	if in.ss.header != nil {
		// Over Streamable HTTP without a session: the arguments the
		// schema mirrors in headers must say what the body does.
		if err := CheckParamHeaders(in.ss.header, schema, p.Arguments); err != nil {
			return nil, err
		}
	}
	var created *CreateTaskResult // when the handler made a task of the call (RunAsTask)
	res, err := serveInput(ctx, in, p.InputResponses, p.RequestState, func(responses map[string]json.RawMessage, state string) (*CallToolResult, error) {
		tr := &ToolRequest{Session: in.ss, ID: in.req.ID, Params: p, InputResponses: responses, RequestState: state,
			servedRequest: servedRequest{in}, progressToken: token}
		res, err := runTool(ctx, h, tr)
		created = tr.created
		return res, err
	})
	if err == nil && created != nil {
		return created, nil
	}
	return res, err
}

// runTool runs a tool handler as the Server answers it: an error that is a
// *jsonrpc.Error, or the end of ctx, is the call's error; any other error
// becomes a result with IsError and the error's text, for the model to
// see; a result without content gets an empty list.
func runTool(ctx context.Context, h ToolHandler, tr *ToolRequest) (*CallToolResult, error) {
	res, err := h(ctx, tr)
	if err != nil {
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return nil, rpcErr
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &CallToolResult{Content: []Content{TextContent(err.Error())}, IsError: true}, nil
	}
	if res == nil {
		res = &CallToolResult{}
	}
	if res.Content == nil && len(res.InputRequests) == 0 {
		res.Content = []Content{}
	}
	return res, nil
}

func readResource(ctx context.Context, in *inbound) (any, error) {
	p, err := decodeParams[struct {
		URI            string          `json:"uri"`
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	}](in.req)
	if err != nil {
		return nil, err
	}
	responses, state, err := decodeInput(MethodResourcesRead, p.InputResponses, p.RequestState)
	if err != nil {
		return nil, err
	}
	h := in.ss.server.resourceHandler(p.URI)
	if h == nil {
		if in.meta != nil {
			// 2026-07-28 says -32602, with the URI.
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "resource not found").WithData(map[string]string{"uri": p.URI})
		}
		return nil, ErrResourceNotFound.WithData(map[string]string{"uri": p.URI})
	}
	return serveInput(ctx, in, responses, state, func(responses map[string]json.RawMessage, state string) (*ReadResourceResult, error) {
		res, err := h(ctx, &ResourceRequest{Session: in.ss, URI: p.URI, InputResponses: responses, RequestState: state,
			servedRequest: servedRequest{in}})
		if err == nil && res == nil {
			res = &ReadResourceResult{}
		}
		if err == nil && res.Contents == nil && len(res.InputRequests) == 0 {
			res.Contents = []ResourceContents{}
		}
		return res, err
	})
}

func getPrompt(ctx context.Context, in *inbound) (any, error) {
	p, err := decodeParams[struct {
		GetPromptParams
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	}](in.req)
	if err != nil {
		return nil, err
	}
	params := &p.GetPromptParams
	if params.InputResponses, params.RequestState, err = decodeInput(MethodPromptsGet, p.InputResponses, p.RequestState); err != nil {
		return nil, err
	}
	s := in.ss.server
	s.mu.RLock()
	i := slices.IndexFunc(s.prompts, func(x *serverPrompt) bool { return x.prompt.Name == params.Name })
	var h PromptHandler
	if i >= 0 {
		h = s.prompts[i].handler
	}
	s.mu.RUnlock()
	if h == nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown prompt %q", params.Name)
	}
	return serveInput(ctx, in, params.InputResponses, params.RequestState, func(responses map[string]json.RawMessage, state string) (*GetPromptResult, error) {
		res, err := h(ctx, &PromptRequest{Session: in.ss, Params: params, InputResponses: responses, RequestState: state,
			servedRequest: servedRequest{in}})
		if err == nil && res == nil {
			res = &GetPromptResult{}
		}
		if err == nil && res.Messages == nil && len(res.InputRequests) == 0 {
			res.Messages = []*PromptMessage{}
		}
		return res, err
	})
}

// servedRequest is what ToolRequest, PromptRequest and ResourceRequest
// share: the request they serve.
type servedRequest struct{ in *inbound }

// ClientCapabilities returns what the client can do for this request: for
// a request of protocol version 2026-07-28, what it declared in its _meta
// (a server must not infer them from other requests); else what the
// session's client declared in initialize. A handler checks it before it
// asks for input (the Server answers -32021 for input the client cannot
// give).
func (r servedRequest) ClientCapabilities() ClientCapabilities { return r.in.clientCapabilities() }

// RequestMeta returns what a request of protocol version 2026-07-28 says
// of itself (its version, capabilities, client and log level), or nil for
// a request of a session.
func (r servedRequest) RequestMeta() *RequestMeta { return r.in.meta }

// ToolRequest is a tool call being served.
//
// A handler that needs input from the client (a message from its model, a
// form filled by its user, its roots) returns a CallToolResult with
// InputRequests (ElicitInput, SamplingInput, RootsInput) by keys of its
// choosing and, if it wants it back, a RequestState; it is then called
// again with the client's answers in InputResponses (read them with
// InputResponse) and that state in RequestState. A client of protocol
// version 2026-07-28 gets an InputRequiredResult and retries; for a client
// of a session the Server asks the client itself. State kept in
// RequestState comes back from the client: protect it (an HMAC) when it
// matters.
type ToolRequest struct {
	Session *ServerSession
	// ID is the request's id as this server received it. Requests to the
	// client made through this ToolRequest carry it in
	// _meta["switchboard/relatedRequest"], so the hub routes them to the
	// client that made this call.
	ID     jsonrpc.ID
	Params *CallToolParams
	// InputResponses are the client's answers to the input requests of the
	// previous round, by key; RequestState is that round's state.
	InputResponses map[string]json.RawMessage
	RequestState   string
	servedRequest

	progressToken json.RawMessage
	task          *taskRun          // the task this request's work runs in, if any
	created       *CreateTaskResult // the task RunAsTask made of this request
}

// detach gives r copies of the bytes it holds of the frame its request
// was read from, which go back to the pools once the call is answered
// when the Server lends requests (ServerOptions.LendRequests): for work
// that outlives the answer, a task's.
func (r *ToolRequest) detach() {
	params := *r.Params
	params.Arguments = bytes.Clone(params.Arguments)
	r.Params = &params
	in := *r.in
	req := *in.req
	req.Params = bytes.Clone(req.Params)
	in.req = &req
	if in.meta != nil {
		meta := *in.meta
		meta.RawCapabilities = bytes.Clone(meta.RawCapabilities)
		meta.ProgressToken = bytes.Clone(meta.ProgressToken)
		in.meta = &meta
	}
	r.in = &in
	r.progressToken = bytes.Clone(r.progressToken)
}

// Progress reports progress to the caller, if it asked for it (else it does
// nothing). Inside a task (RunAsTask) it becomes the task's statusMessage.
func (r *ToolRequest) Progress(ctx context.Context, progress, total float64, message string) error {
	if r.task != nil {
		return r.task.progress(ctx, progress, total, message)
	}
	if len(r.progressToken) == 0 {
		return nil
	}
	return r.Session.peer.Notify(ctx, NotificationProgress, &ProgressParams{
		ProgressToken: r.progressToken, Progress: progress, Total: total, Message: message,
	})
}

// Log sends a log message about this call: for a request of a session, if
// the session's level (logging/setLevel) admits it; for a request of
// protocol version 2026-07-28, only if its _meta asked for a log level and
// that level admits it. It names the call in
// _meta["switchboard/relatedRequest"]: the hub delivers it to the calling
// client only. Inside a task (RunAsTask) it sends nothing: the extension
// has no log messages for tasks.
func (r *ToolRequest) Log(ctx context.Context, level LoggingLevel, logger string, data any) {
	if r.task != nil {
		return
	}
	if m := r.in.meta; m != nil {
		if m.Admits(level) {
			_ = r.Session.peer.Notify(ctx, NotificationMessage, &LoggingMessageParams{Level: level, Logger: logger, Data: data, Meta: r.related()})
		}
		return
	}
	r.Session.log(ctx, level, logger, data, r.related())
}

func (r *ToolRequest) related() Meta { return Meta{MetaRelatedRequest: r.ID} }

// canAsk reports whether the blocking helpers may send the client a
// request: only on a session, and not from a task. A request of 2026-07-28
// on a connection whose client also opened a session with initialize (the
// hub, forwarding a modern client's call to a server it initialized) still
// has that session to send on; one without (a stateless HTTP request, a
// client that never initialized) has none.
func (r *ToolRequest) canAsk() error {
	if r.task != nil || r.in.meta != nil && !r.Session.opened() {
		return ErrNoServerRequests
	}
	return nil
}

// CreateMessage asks the calling client's model for a message (sampling),
// and waits for it. For a request of protocol version 2026-07-28 without a
// session it returns ErrNoServerRequests: return SamplingInput in
// InputRequests instead, which serves both eras.
func (r *ToolRequest) CreateMessage(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error) {
	if err := r.canAsk(); err != nil {
		return nil, err
	}
	c := *p
	c.Meta = mergeMeta(p.Meta, r.related())
	var res CreateMessageResult
	if err := r.Session.peer.Call(ctx, MethodSamplingCreateMessage, &c, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Elicit asks the calling client's user for input, and waits for it. For a
// request of protocol version 2026-07-28 without a session it returns
// ErrNoServerRequests: return ElicitInput in InputRequests instead.
func (r *ToolRequest) Elicit(ctx context.Context, p *ElicitParams) (*ElicitResult, error) {
	if err := r.canAsk(); err != nil {
		return nil, err
	}
	c := *p
	c.Meta = mergeMeta(p.Meta, r.related())
	var res ElicitResult
	if err := r.Session.peer.Call(ctx, MethodElicitationCreate, &c, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListRoots asks the calling client for its roots, and waits for them. For
// a request of protocol version 2026-07-28 without a session it returns
// ErrNoServerRequests: return RootsInput in InputRequests instead.
func (r *ToolRequest) ListRoots(ctx context.Context) (*ListRootsResult, error) {
	if err := r.canAsk(); err != nil {
		return nil, err
	}
	var res ListRootsResult
	if err := r.Session.peer.Call(ctx, MethodRootsList, map[string]any{"_meta": r.related()}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func mergeMeta(a, b Meta) Meta {
	out := Meta{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// ResourceRequest is a resource read being served. It may ask for input
// as a ToolRequest does.
type ResourceRequest struct {
	Session *ServerSession
	URI     string
	// InputResponses and RequestState are a retry's, as in ToolRequest.
	InputResponses map[string]json.RawMessage
	RequestState   string
	servedRequest
}

// PromptRequest is a prompts/get being served. It may ask for input as a
// ToolRequest does.
type PromptRequest struct {
	Session *ServerSession
	Params  *GetPromptParams
	// InputResponses and RequestState are a retry's, as in ToolRequest.
	InputResponses map[string]json.RawMessage
	RequestState   string
	servedRequest
}
