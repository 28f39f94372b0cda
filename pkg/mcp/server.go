package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
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
}

// ServerOptions configure a Server. The zero value is usable.
type ServerOptions struct {
	// Instructions are returned to the hub in the initialize result.
	Instructions string
	// PageSize splits list results into pages of this many items; 0 sends
	// everything in one page.
	PageSize int
	// OnRootsChanged is called when a client says its roots changed.
	OnRootsChanged func(s *ServerSession)
	// Logger receives the server's own logs; nil discards them.
	Logger *slog.Logger
}

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
	s := &Server{info: info, sessions: make(map[*ServerSession]struct{})}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// AddTool registers a tool, replacing one of the same name.
func (s *Server) AddTool(t *Tool, h ToolHandler) {
	if len(t.InputSchema) == 0 {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	s.mu.Lock()
	s.tools = slices.DeleteFunc(s.tools, func(x *serverTool) bool { return x.tool.Name == t.Name })
	s.tools = append(s.tools, &serverTool{tool: t, handler: h})
	s.mu.Unlock()
	s.notifyAll(NotificationToolsListChanged)
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
	s.mu.Lock()
	s.tools = slices.DeleteFunc(s.tools, func(x *serverTool) bool { return x.tool.Name == name })
	s.mu.Unlock()
	s.notifyAll(NotificationToolsListChanged)
}

// AddResource registers a resource, replacing one with the same URI.
func (s *Server) AddResource(r *Resource, h ResourceHandler) {
	s.mu.Lock()
	s.resources = slices.DeleteFunc(s.resources, func(x *serverResource) bool { return x.resource.URI == r.URI })
	s.resources = append(s.resources, &serverResource{resource: r, handler: h})
	s.mu.Unlock()
	s.notifyAll(NotificationResourcesListChanged)
}

// RemoveResource unregisters a resource.
func (s *Server) RemoveResource(uri string) {
	s.mu.Lock()
	s.resources = slices.DeleteFunc(s.resources, func(x *serverResource) bool { return x.resource.URI == uri })
	s.mu.Unlock()
	s.notifyAll(NotificationResourcesListChanged)
}

// AddResourceTemplate registers a resource template; reads of URIs that
// match it and no listed resource go to h.
func (s *Server) AddResourceTemplate(t *ResourceTemplate, h ResourceHandler) {
	s.mu.Lock()
	s.templates = slices.DeleteFunc(s.templates, func(x *serverTemplate) bool { return x.template.URITemplate == t.URITemplate })
	s.templates = append(s.templates, &serverTemplate{template: t, match: ParseURITemplate(t.URITemplate), handler: h})
	s.mu.Unlock()
	s.notifyAll(NotificationResourcesListChanged)
}

// AddPrompt registers a prompt, replacing one of the same name.
func (s *Server) AddPrompt(p *Prompt, h PromptHandler) {
	s.mu.Lock()
	s.prompts = slices.DeleteFunc(s.prompts, func(x *serverPrompt) bool { return x.prompt.Name == p.Name })
	s.prompts = append(s.prompts, &serverPrompt{prompt: p, handler: h})
	s.mu.Unlock()
	s.notifyAll(NotificationPromptsListChanged)
}

// SetCompletionHandler sets the handler of completion/complete.
func (s *Server) SetCompletionHandler(h CompletionHandler) {
	s.mu.Lock()
	s.complete = h
	s.mu.Unlock()
}

// ResourceUpdated tells every session subscribed to uri that it changed.
func (s *Server) ResourceUpdated(ctx context.Context, uri string) {
	for _, ss := range s.liveSessions() {
		if ss.subscribed(uri) {
			_ = ss.peer.Notify(ctx, NotificationResourceUpdated, &ResourceUpdatedParams{URI: uri})
		}
	}
}

// Log sends a log message to every session whose level admits it.
func (s *Server) Log(ctx context.Context, level LoggingLevel, logger string, data any) {
	for _, ss := range s.liveSessions() {
		ss.log(ctx, level, logger, data, nil)
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

func (s *Server) notifyAll(method string) {
	for _, ss := range s.liveSessions() {
		if ss.isInitialized() {
			_ = ss.peer.Notify(context.Background(), method, nil)
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
			if ss.wasInitialized() {
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
// ends; the session's Wait tells when.
func (s *Server) Serve(ctx context.Context, conn peer.Conn) *ServerSession {
	ss := &ServerSession{server: s, ready: make(chan struct{}), subs: map[string]bool{}}
	ss.peer = peer.New(conn, &peer.Options{
		Handler:       peer.HandlerFunc(ss.handle),
		MaxConcurrent: 64,
		MaxPending:    1024,
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
	server *Server
	peer   *peer.Peer
	ready  chan struct{}

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

// ClientCapabilities returns what the client declared in initialize.
func (ss *ServerSession) ClientCapabilities() ClientCapabilities {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.initParams == nil {
		return ClientCapabilities{}
	}
	return ss.initParams.Capabilities
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

// serverMethods is what a Server answers, by method: the session-era
// requests and notifications of MethodSpec's table that a client sends.
// Anything else is -32601 (a notification is ignored).
var serverMethods map[string]func(ss *ServerSession, ctx context.Context, req *jsonrpc.Request) (any, error)

func init() {
	list := func(fn func(ss *ServerSession, req *jsonrpc.Request) (any, error)) func(*ServerSession, context.Context, *jsonrpc.Request) (any, error) {
		return func(ss *ServerSession, _ context.Context, req *jsonrpc.Request) (any, error) { return fn(ss, req) }
	}
	serverMethods = map[string]func(*ServerSession, context.Context, *jsonrpc.Request) (any, error){
		MethodInitialize: func(ss *ServerSession, _ context.Context, req *jsonrpc.Request) (any, error) {
			p, err := decodeParams[InitializeParams](req)
			if err != nil {
				return nil, err
			}
			ss.mu.Lock()
			ss.initParams = p
			ss.mu.Unlock()
			s := ss.server
			return &InitializeResult{
				ProtocolVersion: NegotiateVersion(p.ProtocolVersion),
				Capabilities:    s.capabilities(),
				ServerInfo:      s.info,
				Instructions:    s.opts.Instructions,
			}, nil
		},
		NotificationInitialized: func(ss *ServerSession, _ context.Context, _ *jsonrpc.Request) (any, error) {
			ss.mu.Lock()
			if !ss.initialized {
				ss.initialized = true
				close(ss.ready)
			}
			ss.mu.Unlock()
			return nil, nil
		},
		MethodPing: func(*ServerSession, context.Context, *jsonrpc.Request) (any, error) { return struct{}{}, nil },
		NotificationCancelled: func(ss *ServerSession, _ context.Context, req *jsonrpc.Request) (any, error) {
			if p, err := decodeParams[CancelledParams](req); err == nil {
				ss.peer.Cancel(p.RequestID)
			}
			return nil, nil
		},
		NotificationRootsListChanged: func(ss *ServerSession, _ context.Context, _ *jsonrpc.Request) (any, error) {
			if fn := ss.server.opts.OnRootsChanged; fn != nil {
				fn(ss)
			}
			return nil, nil
		},
		MethodToolsList: list(func(ss *ServerSession, req *jsonrpc.Request) (any, error) {
			s := ss.server
			return listPage(s, req, func() []*Tool {
				return mapSlice(s.tools, func(t *serverTool) *Tool { return t.tool })
			}, func(items []*Tool, next string) any { return &ListToolsResult{Tools: items, NextCursor: next} })
		}),
		MethodToolsCall: (*ServerSession).callTool,
		MethodResourcesList: list(func(ss *ServerSession, req *jsonrpc.Request) (any, error) {
			s := ss.server
			return listPage(s, req, func() []*Resource {
				return mapSlice(s.resources, func(r *serverResource) *Resource { return r.resource })
			}, func(items []*Resource, next string) any {
				return &ListResourcesResult{Resources: items, NextCursor: next}
			})
		}),
		MethodResourcesTemplatesList: list(func(ss *ServerSession, req *jsonrpc.Request) (any, error) {
			s := ss.server
			return listPage(s, req, func() []*ResourceTemplate {
				return mapSlice(s.templates, func(t *serverTemplate) *ResourceTemplate { return t.template })
			}, func(items []*ResourceTemplate, next string) any {
				return &ListResourceTemplatesResult{ResourceTemplates: items, NextCursor: next}
			})
		}),
		MethodResourcesRead: func(ss *ServerSession, ctx context.Context, req *jsonrpc.Request) (any, error) {
			p, err := decodeParams[ResourceParams](req)
			if err != nil {
				return nil, err
			}
			h := ss.server.resourceHandler(p.URI)
			if h == nil {
				return nil, ErrResourceNotFound.WithData(map[string]string{"uri": p.URI})
			}
			return h(ctx, &ResourceRequest{Session: ss, URI: p.URI})
		},
		MethodResourcesSubscribe:   (*ServerSession).subscribe,
		MethodResourcesUnsubscribe: (*ServerSession).subscribe,
		MethodPromptsList: list(func(ss *ServerSession, req *jsonrpc.Request) (any, error) {
			s := ss.server
			return listPage(s, req, func() []*Prompt {
				return mapSlice(s.prompts, func(p *serverPrompt) *Prompt { return p.prompt })
			}, func(items []*Prompt, next string) any { return &ListPromptsResult{Prompts: items, NextCursor: next} })
		}),
		MethodPromptsGet: func(ss *ServerSession, ctx context.Context, req *jsonrpc.Request) (any, error) {
			p, err := decodeParams[GetPromptParams](req)
			if err != nil {
				return nil, err
			}
			s := ss.server
			s.mu.RLock()
			i := slices.IndexFunc(s.prompts, func(x *serverPrompt) bool { return x.prompt.Name == p.Name })
			var h PromptHandler
			if i >= 0 {
				h = s.prompts[i].handler
			}
			s.mu.RUnlock()
			if h == nil {
				return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown prompt %q", p.Name)
			}
			return h(ctx, &PromptRequest{Session: ss, Params: p})
		},
		MethodCompletionComplete: func(ss *ServerSession, ctx context.Context, req *jsonrpc.Request) (any, error) {
			p, err := decodeParams[CompleteParams](req)
			if err != nil {
				return nil, err
			}
			s := ss.server
			s.mu.RLock()
			h := s.complete
			s.mu.RUnlock()
			if h == nil {
				return &CompleteResult{Completion: Completion{Values: []string{}}}, nil
			}
			return h(ctx, ss, p)
		},
		MethodLoggingSetLevel: func(ss *ServerSession, _ context.Context, req *jsonrpc.Request) (any, error) {
			p, err := decodeParams[SetLevelParams](req)
			if err != nil {
				return nil, err
			}
			if p.Level.Severity() < 0 {
				return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown level %q", p.Level)
			}
			ss.mu.Lock()
			ss.level = p.Level
			ss.mu.Unlock()
			return struct{}{}, nil
		},
	}
}

func (ss *ServerSession) handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	if fn, ok := serverMethods[req.Method]; ok {
		return fn(ss, ctx, req)
	}
	if req.IsNotification() {
		return nil, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s", req.Method)
}

func (ss *ServerSession) subscribe(_ context.Context, req *jsonrpc.Request) (any, error) {
	p, err := decodeParams[ResourceParams](req)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	if req.Method == MethodResourcesSubscribe {
		ss.subs[p.URI] = true
	} else {
		delete(ss.subs, p.URI)
	}
	ss.mu.Unlock()
	return struct{}{}, nil
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

func (ss *ServerSession) callTool(ctx context.Context, req *jsonrpc.Request) (any, error) {
	// Read the members in place, in one pass: the arguments stay the bytes
	// they came in.
	var rawName, meta []byte
	p := &CallToolParams{}
	for key, value := range jsonrpc.Members(req.Params) {
		switch string(key) {
		case "name":
			rawName = value
		case "arguments":
			p.Arguments = value
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
	s := ss.server
	s.mu.RLock()
	i := slices.IndexFunc(s.tools, func(t *serverTool) bool { return t.tool.Name == p.Name })
	var h ToolHandler
	if i >= 0 {
		h = s.tools[i].handler
	}
	s.mu.RUnlock()
	if h == nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown tool %q", p.Name)
	}
	tr := &ToolRequest{Session: ss, ID: req.ID, Params: p, progressToken: token}
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
	if res.Content == nil {
		res.Content = []Content{}
	}
	return res, nil
}

// ToolRequest is a tool call being served.
type ToolRequest struct {
	Session *ServerSession
	// ID is the request's id as this server received it. Requests to the
	// client made through this ToolRequest carry it in
	// _meta["switchboard/relatedRequest"], so the hub routes them to the
	// client that made this call.
	ID     jsonrpc.ID
	Params *CallToolParams

	progressToken json.RawMessage
}

// Progress reports progress to the caller, if it asked for it (else it does
// nothing).
func (r *ToolRequest) Progress(ctx context.Context, progress, total float64, message string) error {
	if len(r.progressToken) == 0 {
		return nil
	}
	return r.Session.peer.Notify(ctx, NotificationProgress, &ProgressParams{
		ProgressToken: r.progressToken, Progress: progress, Total: total, Message: message,
	})
}

// Log sends a log message about this call, if the session's level admits
// it. It names the call in _meta["switchboard/relatedRequest"]: the hub
// delivers it to the calling client only.
func (r *ToolRequest) Log(ctx context.Context, level LoggingLevel, logger string, data any) {
	r.Session.log(ctx, level, logger, data, r.related())
}

func (r *ToolRequest) related() Meta { return Meta{MetaRelatedRequest: r.ID} }

// CreateMessage asks the calling client's model for a message (sampling).
func (r *ToolRequest) CreateMessage(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error) {
	c := *p
	c.Meta = mergeMeta(p.Meta, r.related())
	var res CreateMessageResult
	if err := r.Session.peer.Call(ctx, MethodSamplingCreateMessage, &c, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Elicit asks the calling client's user for input.
func (r *ToolRequest) Elicit(ctx context.Context, p *ElicitParams) (*ElicitResult, error) {
	c := *p
	c.Meta = mergeMeta(p.Meta, r.related())
	var res ElicitResult
	if err := r.Session.peer.Call(ctx, MethodElicitationCreate, &c, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListRoots asks the calling client for its roots.
func (r *ToolRequest) ListRoots(ctx context.Context) (*ListRootsResult, error) {
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

// ResourceRequest is a resource read being served.
type ResourceRequest struct {
	Session *ServerSession
	URI     string
}

// PromptRequest is a prompts/get being served.
type PromptRequest struct {
	Session *ServerSession
	Params  *GetPromptParams
}
