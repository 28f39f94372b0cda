package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Client is an MCP client connected to the hub (or to any MCP server). It
// speaks both eras of the protocol, as the official SDKs do: protocol
// version 2026-07-28 when the server does (server/discover, then every
// request describes itself in its _meta), else a session opened with
// initialize (see ClientOptions.ProtocolVersion). It lists, calls, reads and
// subscribes, and answers the server's requests (in 2026-07-28: the input
// requests of its results) with the handlers of its options.
type Client struct {
	peer   *peer.Peer
	opts   ClientOptions
	init   InitializeResult
	modern bool // protocol version 2026-07-28: no session
	caps   ClientCapabilities
	// modernCaps are caps with the extensions, which only requests of
	// 2026-07-28 declare.
	modernCaps ClientCapabilities

	// ctx ends on Close: the listen streams end with it; wg waits for them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	nextToken atomic.Int64
	mu        sync.Mutex
	closed    bool
	progress  map[string]func(*ProgressParams)
	level     LoggingLevel             // 2026-07-28: the log level every request asks for
	streams   map[string]*listenStream // listen streams open, by request id
	subs      map[string]*listenStream // Subscribe's, by URI
}

// ClientOptions configure a Client. The zero value is usable.
type ClientOptions struct {
	// Info introduces the client; default "switchboard-go-client".
	Info Implementation
	// ProtocolVersion chooses the era. "" (the default) tries 2026-07-28
	// first (server/discover) and falls back to a session opened with
	// initialize at LatestVersion when the server answers discover with any
	// error or speaks no version in common; a session-based version (such as
	// LatestVersion) opens a session with initialize only; ModernVersion
	// speaks 2026-07-28 only. Code that relies on sessions (logging/setLevel
	// once for all requests, resources/subscribe, logs not tied to a
	// request) asks for a session-based version.
	ProtocolVersion string
	// Header is sent with the handshake; Token, when set, adds
	// "Authorization: Bearer <Token>".
	Header http.Header
	Token  string
	// Sampling, Elicitation and Roots answer the server's requests (in
	// 2026-07-28 its input requests, see CallTool); each one set is
	// declared as a capability, in initialize or in every request's _meta.
	Sampling    func(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error)
	Elicitation func(ctx context.Context, p *ElicitParams) (*ElicitResult, error)
	Roots       func(ctx context.Context) ([]Root, error)
	// ElicitURL declares URL-mode elicitation besides form mode (with
	// Elicitation set): Elicitation then also gets requests whose Mode is
	// "url", and OnNotification the notifications/elicitation/complete
	// that tell of their end.
	ElicitURL bool
	// Tasks declares the tasks extension (ExtensionTasks) in every request
	// of protocol version 2026-07-28: the server may then answer a tool
	// call with a task, which CallTool follows to its result (StartTool
	// and AwaitTask take it apart).
	Tasks bool
	// OnNotification receives every notification (progress too). It runs
	// on the connection's read loop: it must return quickly. In 2026-07-28,
	// where a server sends list_changed only on a subscriptions/listen
	// stream, Connect opens one for the lists the server says may change
	// when OnNotification is set.
	OnNotification func(method string, params json.RawMessage)
	// Peer tunes the JSON-RPC peer (handler limits, queues); its Handler and
	// OnCancel are the client's own.
	Peer peer.Options
	// WebSocket tunes the connection.
	WebSocket peer.WebSocketOptions
	// HTTP tunes a Streamable HTTP connection (an http or https URL); its
	// Header is sent besides Header and Token.
	HTTP StreamableClientOptions
	// Logger receives the client's own logs; nil discards them.
	Logger *slog.Logger
}

// Connect connects to url, initializes the session and returns the client:
// over a WebSocket for ws:// and wss:// (the hub's /mcp), over Streamable
// HTTP for http:// and https:// (any MCP server's HTTP endpoint, or the
// hub's). When the server refuses the initialize POST with a 4xx status
// other than 401 and 403, Connect tries the older HTTP+SSE transport at the
// same URL (DialSSE).
func Connect(ctx context.Context, url string, opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	header := o.Header.Clone()
	if o.Token != "" {
		if header == nil {
			header = http.Header{}
		}
		header.Set("Authorization", "Bearer "+o.Token)
	}
	if strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://") {
		return connectHTTP(ctx, url, header, &o)
	}
	conn, err := peer.Dial(ctx, url, &peer.DialOptions{Header: header, WebSocketOptions: o.WebSocket})
	if err != nil {
		return nil, err
	}
	return ConnectConn(ctx, conn, &o)
}

// connectHTTP connects over Streamable HTTP, or over the older HTTP+SSE
// transport when the server refuses the initialize POST with a 4xx status
// other than 401 and 403, as the specification's backwards-compatibility
// note says to try.
func connectHTTP(ctx context.Context, url string, header http.Header, o *ClientOptions) (*Client, error) {
	ho := o.HTTP
	ho.Header = ho.Header.Clone()
	if ho.Header == nil {
		ho.Header = http.Header{}
	}
	for k, vs := range header {
		ho.Header[k] = vs
	}
	if ho.Logger == nil {
		ho.Logger = o.Logger
	}
	conn, err := DialStreamable(ctx, url, &ho)
	if err != nil {
		return nil, err
	}
	c, err := ConnectConn(ctx, conn, o)
	if err == nil || !legacyFallback(err) {
		return c, err
	}
	sse, sseErr := DialSSE(ctx, url, &ho)
	if sseErr != nil {
		return nil, fmt.Errorf("%w (and over HTTP+SSE: %w)", err, sseErr)
	}
	legacy := *o
	if legacy.ProtocolVersion == "" {
		legacy.ProtocolVersion = LatestVersion // HTTP+SSE is a transport of sessions
	}
	return ConnectConn(ctx, sse, &legacy)
}

// ConnectConn connects over an established connection: with
// server/discover, initialize or both, as ClientOptions.ProtocolVersion
// says.
func ConnectConn(ctx context.Context, conn peer.Conn, opts *ClientOptions) (*Client, error) {
	c := &Client{progress: map[string]func(*ProgressParams){}, streams: map[string]*listenStream{}, subs: map[string]*listenStream{}}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Info.Name == "" {
		c.opts.Info = Implementation{Name: "switchboard-go-client", Version: "0.1.0"}
	}
	log := c.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	po := c.opts.Peer
	po.Handler = peer.HandlerFunc(c.handle)
	po.OnCancel = cancelNotifier(func() *peer.Peer { return c.peer })
	if po.Logger == nil {
		po.Logger = c.opts.Logger
	}
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.peer = peer.New(conn, &po)
	c.peer.Start(context.WithoutCancel(ctx))

	if c.opts.Sampling != nil {
		c.caps.Sampling = &SamplingCap{}
	}
	if c.opts.Elicitation != nil {
		c.caps.Elicitation = &ElicitationCap{Form: &struct{}{}}
		if c.opts.ElicitURL {
			c.caps.Elicitation.URL = &struct{}{}
		}
	}
	if c.opts.Roots != nil {
		c.caps.Roots = &ListChangedCap{ListChanged: true}
	}
	c.modernCaps = c.caps
	if c.opts.Tasks {
		c.modernCaps.Extensions = map[string]json.RawMessage{ExtensionTasks: json.RawMessage(`{}`)}
	}
	var err error
	switch v := c.opts.ProtocolVersion; {
	case v == "":
		if err = c.discover(ctx); err != nil {
			log.Debug("mcp: server/discover failed; opening a session with initialize", "err", err)
			err = c.initialize(ctx, LatestVersion)
		}
	case IsModernVersion(v):
		err = c.discover(ctx)
	default:
		err = c.initialize(ctx, v)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	if c.modern && c.opts.OnNotification != nil {
		c.listenForChanges(ctx, log)
	}
	return c, nil
}

// initialize opens a session.
func (c *Client) initialize(ctx context.Context, version string) error {
	err := c.peer.Call(ctx, MethodInitialize, &InitializeParams{
		ProtocolVersion: version,
		Capabilities:    c.caps,
		ClientInfo:      c.opts.Info,
	}, &c.init)
	if err == nil {
		err = c.peer.Notify(ctx, NotificationInitialized, nil)
	}
	if err != nil {
		return fmt.Errorf("mcp: initialize: %w", err)
	}
	return nil
}

// InitializeResult returns what the server answered to initialize; in
// protocol version 2026-07-28, the same made of its server/discover answer.
func (c *Client) InitializeResult() *InitializeResult { return &c.init }

// Peer returns the client's JSON-RPC peer, for raw calls. In protocol
// version 2026-07-28 a raw request carries its own _meta (see RequestMeta):
// the peer adds nothing.
func (c *Client) Peer() *peer.Peer { return c.peer }

// Close closes the connection, and with it every listen stream.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	err := c.peer.Close()
	c.cancel()
	c.wg.Wait()
	return err
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.peer.Done() }

// clientMethods is what a Client answers, by method: the requests a server
// sends (each refused with -32601 when the client has no handler for it)
// and the notifications it acts on. Every notification also goes to
// ClientOptions.OnNotification.
var clientMethods map[string]func(c *Client, ctx context.Context, req *jsonrpc.Request) (any, error)

func init() {
	clientMethods = map[string]func(*Client, context.Context, *jsonrpc.Request) (any, error){
		MethodPing: func(*Client, context.Context, *jsonrpc.Request) (any, error) { return struct{}{}, nil },
		MethodSamplingCreateMessage: func(c *Client, ctx context.Context, req *jsonrpc.Request) (any, error) {
			if c.opts.Sampling == nil {
				return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "this client does not support sampling")
			}
			p, err := decodeParams[CreateMessageParams](req)
			if err != nil {
				return nil, err
			}
			return c.opts.Sampling(ctx, p)
		},
		MethodElicitationCreate: func(c *Client, ctx context.Context, req *jsonrpc.Request) (any, error) {
			if c.opts.Elicitation == nil {
				return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "this client does not support elicitation")
			}
			p, err := decodeParams[ElicitParams](req)
			if err != nil {
				return nil, err
			}
			return c.opts.Elicitation(ctx, p)
		},
		MethodRootsList: func(c *Client, ctx context.Context, _ *jsonrpc.Request) (any, error) {
			if c.opts.Roots == nil {
				return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "this client does not expose roots")
			}
			roots, err := c.opts.Roots(ctx)
			if err != nil {
				return nil, err
			}
			if roots == nil {
				roots = []Root{}
			}
			return &ListRootsResult{Roots: roots}, nil
		},
		NotificationCancelled: func(c *Client, _ context.Context, req *jsonrpc.Request) (any, error) {
			if p, err := decodeParams[CancelledParams](req); err == nil {
				c.peer.Cancel(p.RequestID)
			}
			return nil, nil
		},
		NotificationSubscriptionsAcknowledged: func(c *Client, _ context.Context, req *jsonrpc.Request) (any, error) {
			c.acknowledged(req.Params)
			return nil, nil
		},
		NotificationProgress: func(c *Client, _ context.Context, req *jsonrpc.Request) (any, error) {
			if p, err := decodeParams[ProgressParams](req); err == nil {
				c.mu.Lock()
				fn := c.progress[tokenKey(p.ProgressToken)]
				c.mu.Unlock()
				if fn != nil {
					fn(p)
				}
			}
			return nil, nil
		},
	}
}

func (c *Client) handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	fn, ok := clientMethods[req.Method]
	if req.IsNotification() {
		if ok {
			fn(c, ctx, req)
		}
		if c.opts.OnNotification != nil {
			c.opts.OnNotification(req.Method, req.Params)
		}
		return nil, nil
	}
	if ok {
		return fn(c, ctx, req)
	}
	return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s", req.Method)
}

func tokenKey(token any) string {
	switch t := token.(type) {
	case string:
		return "s:" + t
	case float64:
		return "n:" + strconv.FormatFloat(t, 'f', -1, 64)
	case json.RawMessage:
		var v any
		if json.Unmarshal(t, &v) == nil {
			return tokenKey(v)
		}
	}
	return fmt.Sprint(token)
}

// Ping checks that the server answers: with ping, or in protocol version
// 2026-07-28, which has none, with server/discover.
func (c *Client) Ping(ctx context.Context) error {
	if c.modern {
		return c.call(ctx, MethodServerDiscover, nil, nil)
	}
	return c.peer.Call(ctx, MethodPing, nil, nil)
}

// CallOptions tune one tool call.
type CallOptions struct {
	// Progress, when set, asks for progress reports and receives them. It
	// runs on the connection's read loop: it must return quickly.
	Progress func(*ProgressParams)
	// Meta is merged into the request's _meta.
	Meta Meta
}

// CallTool calls a tool with arguments (anything that encodes to a JSON
// object; nil for none). Cancelling ctx cancels the call on the server too.
// In protocol version 2026-07-28, when the server answers that it needs
// input first, CallTool fulfils its input requests with the Sampling,
// Elicitation and Roots handlers and calls again with the answers, until
// the server answers; GetPrompt and ReadResource do the same. When the
// server answers with a task (ClientOptions.Tasks), CallTool follows it to
// its result (AwaitTask), and cancels it (tasks/cancel) if it gives up
// first.
func (c *Client) CallTool(ctx context.Context, name string, args any, opts *CallOptions) (*CallToolResult, error) {
	res, task, err := c.StartTool(ctx, name, args, opts)
	if err != nil || task == nil {
		return res, err
	}
	return c.followTask(ctx, task.TaskID)
}

// StartTool calls a tool as CallTool does but does not follow a task: it
// returns the tool's result, or, when the server answered with a task
// (only to a client with ClientOptions.Tasks), the task, for AwaitTask or
// GetTask, UpdateTask and CancelTask.
func (c *Client) StartTool(ctx context.Context, name string, args any, opts *CallOptions) (*CallToolResult, *Task, error) {
	raw, err := jsonrpc.Marshal(args)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp: encoding arguments of %s: %w", name, err)
	}
	params := &CallToolParams{Name: name, Arguments: raw}
	if opts != nil {
		params.Meta = mergeMeta(opts.Meta, nil)
		if opts.Progress != nil {
			token := "p" + strconv.FormatInt(c.nextToken.Add(1), 10)
			params.Meta[MetaProgressToken] = token
			c.mu.Lock()
			c.progress["s:"+token] = opts.Progress
			c.mu.Unlock()
			defer func() {
				c.mu.Lock()
				delete(c.progress, "s:"+token)
				c.mu.Unlock()
			}()
		}
		if len(params.Meta) == 0 {
			params.Meta = nil
		}
	}
	var answer json.RawMessage
	err = c.call(ctx, MethodToolsCall, params, &answer)
	if c.modern && jsonrpc.CodeOf(err) == CodeHeaderMismatch {
		// Over Streamable HTTP a tool's schema may have arguments mirrored
		// in Mcp-Param-* headers (SEP-2243), which the conn learns from
		// the tools/list answers it carries: one it has not seen, or a
		// schema that changed, is learned by listing again, and the call
		// is sent once more, as the revision advises a client.
		if _, lerr := c.AllTools(ctx); lerr == nil {
			answer = nil
			err = c.call(ctx, MethodToolsCall, params, &answer)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return c.toolAnswer(answer)
}

// ListTools returns one page of tools.
func (c *Client) ListTools(ctx context.Context, cursor string) (*ListToolsResult, error) {
	var res ListToolsResult
	return &res, c.call(ctx, MethodToolsList, &PaginatedParams{Cursor: cursor}, &res)
}

// AllTools returns every tool, following cursors.
func (c *Client) AllTools(ctx context.Context) ([]*Tool, error) {
	return all(ctx, c.ListTools, func(r *ListToolsResult) ([]*Tool, string) { return r.Tools, r.NextCursor })
}

// ListResources returns one page of resources.
func (c *Client) ListResources(ctx context.Context, cursor string) (*ListResourcesResult, error) {
	var res ListResourcesResult
	return &res, c.call(ctx, MethodResourcesList, &PaginatedParams{Cursor: cursor}, &res)
}

// AllResources returns every resource, following cursors.
func (c *Client) AllResources(ctx context.Context) ([]*Resource, error) {
	return all(ctx, c.ListResources, func(r *ListResourcesResult) ([]*Resource, string) { return r.Resources, r.NextCursor })
}

// ListResourceTemplates returns one page of resource templates.
func (c *Client) ListResourceTemplates(ctx context.Context, cursor string) (*ListResourceTemplatesResult, error) {
	var res ListResourceTemplatesResult
	return &res, c.call(ctx, MethodResourcesTemplatesList, &PaginatedParams{Cursor: cursor}, &res)
}

// AllResourceTemplates returns every resource template, following cursors.
func (c *Client) AllResourceTemplates(ctx context.Context) ([]*ResourceTemplate, error) {
	return all(ctx, c.ListResourceTemplates, func(r *ListResourceTemplatesResult) ([]*ResourceTemplate, string) {
		return r.ResourceTemplates, r.NextCursor
	})
}

// ListPrompts returns one page of prompts.
func (c *Client) ListPrompts(ctx context.Context, cursor string) (*ListPromptsResult, error) {
	var res ListPromptsResult
	return &res, c.call(ctx, MethodPromptsList, &PaginatedParams{Cursor: cursor}, &res)
}

// AllPrompts returns every prompt, following cursors.
func (c *Client) AllPrompts(ctx context.Context) ([]*Prompt, error) {
	return all(ctx, c.ListPrompts, func(r *ListPromptsResult) ([]*Prompt, string) { return r.Prompts, r.NextCursor })
}

// all follows a list's cursors, bounded so that a server whose cursors never
// end cannot keep the client forever.
func all[R, T any](ctx context.Context, page func(context.Context, string) (*R, error), items func(*R) ([]T, string)) ([]T, error) {
	var out []T
	cursor := ""
	for range 10_000 {
		r, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		got, next := items(r)
		out = append(out, got...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("mcp: more than 10000 pages")
}

// ReadResource reads a resource.
func (c *Client) ReadResource(ctx context.Context, uri string) (*ReadResourceResult, error) {
	var res ReadResourceResult
	return &res, c.call(ctx, MethodResourcesRead, &ResourceParams{URI: uri}, &res)
}

// Subscribe asks for notifications/resources/updated about uri: with
// resources/subscribe, or in protocol version 2026-07-28 with a
// subscriptions/listen stream of its own, open until Unsubscribe or Close.
// It returns once the server has acknowledged it.
func (c *Client) Subscribe(ctx context.Context, uri string) error {
	if !c.modern {
		return c.peer.Call(ctx, MethodResourcesSubscribe, &ResourceParams{URI: uri}, nil)
	}
	c.mu.Lock()
	_, dup := c.subs[uri]
	c.mu.Unlock()
	if dup {
		return nil
	}
	st, err := c.openListen(ctx, SubscriptionFilter{ResourceSubscriptions: []string{uri}})
	if err != nil {
		return err
	}
	if !slices.Contains(st.honoured.ResourceSubscriptions, uri) {
		st.stop()
		return jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "the server offers no subscriptions to resources")
	}
	c.mu.Lock()
	_, dup = c.subs[uri]
	if !dup {
		c.subs[uri] = st
	}
	c.mu.Unlock()
	if dup {
		st.stop() // another Subscribe won
	}
	return nil
}

// Unsubscribe stops notifications about uri.
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	if !c.modern {
		return c.peer.Call(ctx, MethodResourcesUnsubscribe, &ResourceParams{URI: uri}, nil)
	}
	c.mu.Lock()
	st := c.subs[uri]
	delete(c.subs, uri)
	c.mu.Unlock()
	if st != nil {
		st.stop()
	}
	return nil
}

// GetPrompt renders a prompt.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (*GetPromptResult, error) {
	var res GetPromptResult
	return &res, c.call(ctx, MethodPromptsGet, &GetPromptParams{Name: name, Arguments: args}, &res)
}

// Complete asks for completions of an argument.
func (c *Client) Complete(ctx context.Context, p *CompleteParams) (*CompleteResult, error) {
	var res CompleteResult
	return &res, c.call(ctx, MethodCompletionComplete, p, &res)
}

// SetLoggingLevel sets the least severe level of log messages to receive:
// with logging/setLevel, or in protocol version 2026-07-28, which has none,
// as the level every later request asks for in its _meta (a server then
// sends log messages about that request only).
func (c *Client) SetLoggingLevel(ctx context.Context, level LoggingLevel) error {
	if !c.modern {
		return c.peer.Call(ctx, MethodLoggingSetLevel, &SetLevelParams{Level: level}, nil)
	}
	if level.Severity() < 0 {
		return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown level %q", level)
	}
	c.mu.Lock()
	c.level = level
	c.mu.Unlock()
	return nil
}

// NotifyRootsChanged tells the server the client's roots changed. In
// protocol version 2026-07-28 it does nothing: a server asks for the roots
// whenever it needs them.
func (c *Client) NotifyRootsChanged(ctx context.Context) error {
	if c.modern {
		return nil
	}
	return c.peer.Notify(ctx, NotificationRootsListChanged, nil)
}
