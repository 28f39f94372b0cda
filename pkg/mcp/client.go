package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Client is an MCP client connected to the hub (or to any MCP server over
// WebSocket). It initializes the session on Connect, lists, calls, reads and
// subscribes, and answers the server's requests with the handlers of its
// options.
type Client struct {
	peer *peer.Peer
	opts ClientOptions
	init InitializeResult

	nextToken atomic.Int64
	mu        sync.Mutex
	progress  map[string]func(*ProgressParams)
}

// ClientOptions configure a Client. The zero value is usable.
type ClientOptions struct {
	// Info introduces the client; default "switchboard-go-client".
	Info Implementation
	// ProtocolVersion to ask for; default LatestVersion.
	ProtocolVersion string
	// Header is sent with the handshake; Token, when set, adds
	// "Authorization: Bearer <Token>".
	Header http.Header
	Token  string
	// Sampling, Elicitation and Roots answer the server's requests; each one
	// set is declared as a capability in initialize.
	Sampling    func(ctx context.Context, p *CreateMessageParams) (*CreateMessageResult, error)
	Elicitation func(ctx context.Context, p *ElicitParams) (*ElicitResult, error)
	Roots       func(ctx context.Context) ([]Root, error)
	// OnNotification receives every notification (progress too). It runs
	// on the connection's read loop: it must return quickly.
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
	return ConnectConn(ctx, sse, o)
}

// ConnectConn initializes a session over an established connection.
func ConnectConn(ctx context.Context, conn peer.Conn, opts *ClientOptions) (*Client, error) {
	c := &Client{progress: map[string]func(*ProgressParams){}}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Info.Name == "" {
		c.opts.Info = Implementation{Name: "switchboard-go-client", Version: "0.1.0"}
	}
	if c.opts.ProtocolVersion == "" {
		c.opts.ProtocolVersion = LatestVersion
	}
	po := c.opts.Peer
	po.Handler = peer.HandlerFunc(c.handle)
	po.OnCancel = cancelNotifier(func() *peer.Peer { return c.peer })
	if po.Logger == nil {
		po.Logger = c.opts.Logger
	}
	c.peer = peer.New(conn, &po)
	c.peer.Start(context.WithoutCancel(ctx))

	caps := ClientCapabilities{}
	if c.opts.Sampling != nil {
		caps.Sampling = &SamplingCap{}
	}
	if c.opts.Elicitation != nil {
		caps.Elicitation = &ElicitationCap{Form: &struct{}{}}
	}
	if c.opts.Roots != nil {
		caps.Roots = &ListChangedCap{ListChanged: true}
	}
	err := c.peer.Call(ctx, MethodInitialize, &InitializeParams{
		ProtocolVersion: c.opts.ProtocolVersion,
		Capabilities:    caps,
		ClientInfo:      c.opts.Info,
	}, &c.init)
	if err == nil {
		err = c.peer.Notify(ctx, NotificationInitialized, nil)
	}
	if err != nil {
		c.peer.Close()
		return nil, fmt.Errorf("mcp: initialize: %w", err)
	}
	return c, nil
}

// InitializeResult returns what the server answered to initialize.
func (c *Client) InitializeResult() *InitializeResult { return &c.init }

// Peer returns the client's JSON-RPC peer, for raw calls.
func (c *Client) Peer() *peer.Peer { return c.peer }

// Close closes the connection.
func (c *Client) Close() error { return c.peer.Close() }

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

// Ping checks that the server answers.
func (c *Client) Ping(ctx context.Context) error {
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
func (c *Client) CallTool(ctx context.Context, name string, args any, opts *CallOptions) (*CallToolResult, error) {
	raw, err := jsonrpc.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("mcp: encoding arguments of %s: %w", name, err)
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
	var res CallToolResult
	if err := c.peer.Call(ctx, MethodToolsCall, params, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ListTools returns one page of tools.
func (c *Client) ListTools(ctx context.Context, cursor string) (*ListToolsResult, error) {
	var res ListToolsResult
	return &res, c.peer.Call(ctx, MethodToolsList, &PaginatedParams{Cursor: cursor}, &res)
}

// AllTools returns every tool, following cursors.
func (c *Client) AllTools(ctx context.Context) ([]*Tool, error) {
	return all(ctx, c.ListTools, func(r *ListToolsResult) ([]*Tool, string) { return r.Tools, r.NextCursor })
}

// ListResources returns one page of resources.
func (c *Client) ListResources(ctx context.Context, cursor string) (*ListResourcesResult, error) {
	var res ListResourcesResult
	return &res, c.peer.Call(ctx, MethodResourcesList, &PaginatedParams{Cursor: cursor}, &res)
}

// AllResources returns every resource, following cursors.
func (c *Client) AllResources(ctx context.Context) ([]*Resource, error) {
	return all(ctx, c.ListResources, func(r *ListResourcesResult) ([]*Resource, string) { return r.Resources, r.NextCursor })
}

// ListResourceTemplates returns one page of resource templates.
func (c *Client) ListResourceTemplates(ctx context.Context, cursor string) (*ListResourceTemplatesResult, error) {
	var res ListResourceTemplatesResult
	return &res, c.peer.Call(ctx, MethodResourcesTemplatesList, &PaginatedParams{Cursor: cursor}, &res)
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
	return &res, c.peer.Call(ctx, MethodPromptsList, &PaginatedParams{Cursor: cursor}, &res)
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
	return &res, c.peer.Call(ctx, MethodResourcesRead, &ResourceParams{URI: uri}, &res)
}

// Subscribe asks for notifications/resources/updated about uri.
func (c *Client) Subscribe(ctx context.Context, uri string) error {
	return c.peer.Call(ctx, MethodResourcesSubscribe, &ResourceParams{URI: uri}, nil)
}

// Unsubscribe stops notifications about uri.
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	return c.peer.Call(ctx, MethodResourcesUnsubscribe, &ResourceParams{URI: uri}, nil)
}

// GetPrompt renders a prompt.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (*GetPromptResult, error) {
	var res GetPromptResult
	return &res, c.peer.Call(ctx, MethodPromptsGet, &GetPromptParams{Name: name, Arguments: args}, &res)
}

// Complete asks for completions of an argument.
func (c *Client) Complete(ctx context.Context, p *CompleteParams) (*CompleteResult, error) {
	var res CompleteResult
	return &res, c.peer.Call(ctx, MethodCompletionComplete, p, &res)
}

// SetLoggingLevel sets the least severe level of log messages to receive.
func (c *Client) SetLoggingLevel(ctx context.Context, level LoggingLevel) error {
	return c.peer.Call(ctx, MethodLoggingSetLevel, &SetLevelParams{Level: level}, nil)
}

// NotifyRootsChanged tells the server the client's roots changed.
func (c *Client) NotifyRootsChanged(ctx context.Context) error {
	return c.peer.Notify(ctx, NotificationRootsListChanged, nil)
}
