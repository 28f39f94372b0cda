package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// ErrSessionGone is why a Streamable HTTP client conn ends when the server
// answers 404 for its session: the server ended it or forgot it (a
// restart). A new session needs a new initialize.
var ErrSessionGone = errors.New("mcp: session gone: the server answered 404 Not Found for it")

// StreamableClientOptions configure DialStreamable. The zero value is usable.
type StreamableClientOptions struct {
	// HTTPClient sends the requests; default http.DefaultClient. It must
	// not time out whole requests: SSE streams last.
	HTTPClient *http.Client
	// Header is sent with every request (Authorization, ...).
	Header http.Header
	// MaxMessageBytes bounds one message read from the server (a JSON body
	// or an SSE event); default 4 MiB.
	MaxMessageBytes int
	// Retry is the delay before reconnecting a stream when the server named
	// none (SSE retry); default 1 s. MaxRetries bounds reconnections that
	// bring nothing new, in a row; default 5.
	Retry      time.Duration
	MaxRetries int
	// DeleteTimeout bounds the DELETE that Close sends; default 5 s.
	DeleteTimeout time.Duration
	// Logger receives the conn's own logs; nil discards them.
	Logger *slog.Logger
	// NameRelated sets _meta["switchboard/relatedRequest"] (MetaRelatedRequest)
	// on the server's requests and log messages that come on the stream of
	// a POST carrying one request, to that request's id, unless they name
	// one already: the stream says which call they belong to, and a relay
	// that passes the messages on (`hub connect`) would lose it.
	NameRelated bool
	// TraceHeaders sends the W3C trace context of a POST's one request
	// (traceparent, tracestate and baggage of its _meta) as HTTP headers
	// too, for a server that reads them there.
	TraceHeaders bool
}

// StreamableClientConn is the client end of an MCP Streamable HTTP session,
// as a peer.Conn: Write POSTs each frame, and Read returns the messages the
// server sends back, from JSON answers, the POSTs' SSE streams and the GET
// stream. It learns the session id from the answer to initialize and sends
// it, with MCP-Protocol-Version, on every later request; it opens the GET
// stream once notifications/initialized is sent (a 405 means the server has
// none), resumes dropped streams with Last-Event-ID after the server's
// retry delay, and DELETEs the session on Close.
//
// A Write that carries requests returns once the POST's body is sent; the
// answers come through Read. A request whose POST fails gets an error answer
// through Read (the HTTP status and the server's message), so calls never
// hang on a lost POST. A 404 for the session ends the conn with
// ErrSessionGone. A POST of notifications or answers that fails with a
// context's error while the conn is open is sent once more: that error is
// another request's (foreignCancellation).
//
// A message of protocol version 2026-07-28 (its _meta names that version)
// goes in a POST of its own, without a session: MCP-Protocol-Version is
// the version its _meta names, Mcp-Method its method, Mcp-Name its tool or
// prompt name or resource URI; notifications that follow such requests
// (notifications/cancelled) get the same headers. Its stream is not
// resumed. Writing notifications/cancelled for a request sent alone ends
// its POST: a stateless server learns of the cancellation so, and a
// session's server need not hold the stream for a client that no longer
// reads it.
type StreamableClientConn struct {
	url    string
	client *http.Client
	opts   StreamableClientOptions
	log    *slog.Logger

	ctx    context.Context // ends on Close: every request in flight stops
	cancel context.CancelFunc
	in     inbox
	wg     sync.WaitGroup

	mu        sync.Mutex
	sessionID string
	version   string
	modern    string                            // the version of the last stateless request
	posts     map[jsonrpc.ID]context.CancelFunc // POSTs of one request in flight, by its id
	// lists are the stateless tools/list requests in flight; schemas the
	// input schemas their answers taught, of the tools that mirror
	// arguments in Mcp-Param-* headers, by name (noteTools).
	lists   map[jsonrpc.ID]bool
	schemas map[string]json.RawMessage
	initID  jsonrpc.ID // the initialize request in flight
	initOK  bool
	getOpen bool // the GET stream was started
	closed  bool
}

var _ peer.Conn = (*StreamableClientConn)(nil)

// DialStreamable returns a conn to the Streamable HTTP endpoint url. It
// sends nothing yet: the first Write (initialize) opens the session.
func DialStreamable(ctx context.Context, url string, opts *StreamableClientOptions) (*StreamableClientConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp: streamable HTTP URL: %w", err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("mcp: streamable HTTP URL: scheme %q is not http or https", req.URL.Scheme)
	}
	c := &StreamableClientConn{url: url, in: newInbox(), posts: map[jsonrpc.ID]context.CancelFunc{}}
	if opts != nil {
		c.opts = *opts
	}
	c.client = c.opts.HTTPClient
	if c.client == nil {
		c.client = http.DefaultClient
	}
	if c.opts.MaxMessageBytes <= 0 {
		c.opts.MaxMessageBytes = jsonrpc.DefaultMaxBytes
	}
	if c.opts.Retry <= 0 {
		c.opts.Retry = time.Second
	}
	if c.opts.MaxRetries <= 0 {
		c.opts.MaxRetries = 5
	}
	if c.opts.DeleteTimeout <= 0 {
		c.opts.DeleteTimeout = 5 * time.Second
	}
	c.log = c.opts.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// SessionID returns the session id the server gave, or "".
func (c *StreamableClientConn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// ProtocolVersion returns the version the server answered to initialize.
func (c *StreamableClientConn) ProtocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Read returns the next message from the server.
func (c *StreamableClientConn) Read(ctx context.Context) ([]byte, error) {
	return c.in.read(ctx)
}

// fail ends the conn with err (the first error wins).
func (c *StreamableClientConn) fail(err error) { c.in.fail(err) }

// deliver hands a frame from the server to Read.
func (c *StreamableClientConn) deliver(frame []byte) {
	c.noteInit(frame)
	c.noteTools(frame)
	c.in.put(c.ctx, frame)
}

// maxSchemas bounds the tools whose schemas a conn keeps (noteTools).
const maxSchemas = 10000

// noteTools learns, from the answer to a stateless tools/list, which tools
// mirror arguments in Mcp-Param-* headers (x-mcp-header), so that a later
// tools/call sends them (SEP-2243: a client must). A conn knows a tool from
// the lists it carried: whoever writes on it (a Client, the hub through
// `hub connect`) lists before it calls.
func (c *StreamableClientConn) noteTools(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lists) == 0 {
		return
	}
	for _, m := range jsonrpc.Decode(frame).Messages {
		resp, ok := m.(*jsonrpc.Response)
		if !ok || !c.lists[resp.ID] {
			continue
		}
		delete(c.lists, resp.ID)
		var page struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if resp.Error != nil || json.Unmarshal(resp.Result, &page) != nil {
			continue
		}
		for _, t := range page.Tools {
			if len(paramHeaders(t.InputSchema)) == 0 {
				delete(c.schemas, t.Name)
				continue
			}
			if c.schemas == nil {
				c.schemas = map[string]json.RawMessage{}
			}
			if _, known := c.schemas[t.Name]; known || len(c.schemas) < maxSchemas {
				c.schemas[t.Name] = t.InputSchema
			}
		}
	}
}

// noteInit learns the protocol version from the answer to initialize.
func (c *StreamableClientConn) noteInit(frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.initID.IsValid() {
		return
	}
	f := jsonrpc.Decode(frame)
	for _, m := range f.Messages {
		if resp, ok := m.(*jsonrpc.Response); ok && resp.ID == c.initID {
			c.initID = jsonrpc.ID{}
			if v, ok := jsonrpc.StringMember(resp.Result, "protocolVersion"); ok && resp.Error == nil {
				c.version = v
				c.initOK = true
			}
		}
	}
}

func (c *StreamableClientConn) newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.opts.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	c.mu.Lock()
	if c.sessionID != "" {
		req.Header.Set(HeaderSessionID, c.sessionID)
	}
	if c.version != "" {
		req.Header.Set(HeaderProtocolVersion, c.version)
	}
	c.mu.Unlock()
	return req, nil
}

// Write POSTs one frame.
func (c *StreamableClientConn) Write(ctx context.Context, frame []byte) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	err := c.in.failure()
	if closed {
		return net.ErrClosed
	}
	if err != nil {
		// Closed: Read tells why, and a peer takes the reason from there.
		return fmt.Errorf("%w: %w", net.ErrClosed, err)
	}
	f := jsonrpc.Decode(frame)
	var calls []jsonrpc.ID
	initialized := false
	for _, m := range f.Messages {
		if req, ok := m.(*jsonrpc.Request); ok {
			switch {
			case req.IsCall():
				calls = append(calls, req.ID)
				if req.Method == MethodInitialize {
					c.mu.Lock()
					c.initID = req.ID
					c.mu.Unlock()
				}
			case req.Method == NotificationInitialized:
				initialized = true
			case req.Method == NotificationCancelled:
				c.cancelPOST(req.Params)
			}
		}
	}
	var single *jsonrpc.Request
	if !f.Batch && len(f.Messages) == 1 {
		single, _ = f.Messages[0].(*jsonrpc.Request)
	}
	stateless := c.statelessVersion(single)
	postCtx, cancel := context.WithCancel(c.ctx)
	body := append([]byte(nil), frame...)
	req, err := c.newRequest(postCtx, http.MethodPost, body)
	if err != nil {
		cancel()
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if stateless != "" {
		setStatelessHeaders(req.Header, stateless, single)
		c.mirrorArguments(req.Header, single)
	}
	if c.opts.TraceHeaders {
		setTraceHeaders(req.Header, single)
	}

	if len(calls) == 0 {
		// Notifications and answers: the server says 202 at once.
		defer cancel()
		resp, err := c.client.Do(req)
		if err != nil && postCtx.Err() == nil && foreignCancellation(err) {
			again := req.Clone(postCtx)
			again.Body, _ = req.GetBody() // a bytes.Reader's: it cannot fail
			resp, err = c.client.Do(again)
		}
		if err != nil {
			return c.transportErr(err)
		}
		c.handle(postCtx, resp, nil, false)
		if initialized {
			c.startGET()
		}
		return nil
	}
	// Requests: the answer may take long, so it is read on a goroutine of
	// its own; Write returns once the body is on its way, which keeps the
	// order of the POSTs.
	sb := &signalBody{r: bytes.NewReader(body), sent: make(chan struct{})}
	req.Body = sb
	req.GetBody = nil
	if !c.track() {
		cancel()
		return net.ErrClosed
	}
	if single != nil {
		c.mu.Lock()
		c.posts[single.ID] = cancel
		c.mu.Unlock()
	}
	go func() {
		defer c.wg.Done()
		defer func() {
			if single != nil {
				c.mu.Lock()
				delete(c.posts, single.ID)
				c.mu.Unlock()
			}
			cancel()
		}()
		resp, err := c.client.Do(req)
		sb.signal()
		if err != nil {
			if postCtx.Err() == nil {
				c.answerErrors(calls, jsonrpc.NewError(CodeConnectionClosed, "POST failed: %v", err))
			}
			return
		}
		c.handle(postCtx, resp, calls, stateless != "")
	}()
	select {
	case <-sb.sent:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// statelessVersion returns the protocol version of a message of 2026-07-28
// (which its _meta names), or of a notification that follows such
// requests; "" for a message of a session.
func (c *StreamableClientConn) statelessVersion(req *jsonrpc.Request) string {
	if req == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if raw, ok := metaMember(req.Params, MetaProtocolVersion); ok {
		if v, ok := jsonrpc.Unquote(raw); ok && IsModernVersion(v) {
			c.modern = v
			return v
		}
	}
	if req.IsNotification() && c.sessionID == "" {
		return c.modern
	}
	return ""
}

// setStatelessHeaders sets the headers a POST of 2026-07-28 mirrors its
// message in, in place of a session's: a name that cannot go in a header
// as it is goes in the base64 form (EncodeHeaderValue).
func setStatelessHeaders(h http.Header, version string, req *jsonrpc.Request) {
	h.Del(HeaderSessionID)
	h.Set(HeaderProtocolVersion, version)
	h.Set(HeaderMethod, req.Method)
	if key := NameMember(req.Method); key != "" {
		if name, ok := jsonrpc.StringMember(req.Params, key); ok {
			h.Set(HeaderName, EncodeHeaderValue(name))
		}
	}
}

// mirrorArguments sets the Mcp-Param-* headers of a stateless tools/call
// of a tool whose schema a tools/list taught the conn (noteTools), and
// notes a stateless tools/list, so that its answer teaches it.
func (c *StreamableClientConn) mirrorArguments(h http.Header, req *jsonrpc.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch req.Method {
	case MethodToolsList:
		if req.IsCall() {
			if c.lists == nil {
				c.lists = map[jsonrpc.ID]bool{}
			}
			c.lists[req.ID] = true
		}
	case MethodToolsCall:
		name, _ := jsonrpc.StringMember(req.Params, "name")
		if schema, ok := c.schemas[name]; ok {
			args, _ := jsonrpc.Member(req.Params, "arguments")
			SetParamHeaders(h, schema, args)
		}
	}
}

// cancelPOST ends the POST of a request being cancelled. Without a session
// its connection is all the server can watch; with one, the server owes no
// answer and may hold the stream open until the client leaves it (the hub
// and the SDKs' servers do, so that the client has no reason to resume it).
func (c *StreamableClientConn) cancelPOST(params json.RawMessage) {
	var p CancelledParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.posts[p.RequestID]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// track counts a goroutine Close must wait for; false once closed.
func (c *StreamableClientConn) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// foreignCancellation reports whether a POST whose own context is live
// failed with a context's error: another request's. net/http gives a
// connection back to its pool as soon as it has read a response without a
// body (the 202 of notifications and answers), before that response
// reaches its caller; a request that takes the connection meanwhile and is
// cancelled (a GET stream ended by Close, of this conn or of another one
// on the same http.Client) closes it, and the first request fails with
// the other's "context canceled" (golang/go#41600). Sent again, the
// notifications or answers are sent twice at worst, which MCP makes
// harmless: a repeated notifications/initialized or cancellation changes
// nothing, and a peer drops an answer to a request already answered.
func foreignCancellation(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// transportErr reports a request that failed to reach the server: after
// Close it is net.ErrClosed.
func (c *StreamableClientConn) transportErr(err error) error {
	if c.ctx.Err() != nil {
		return net.ErrClosed
	}
	return fmt.Errorf("mcp: streamable HTTP: %w", err)
}

// handle reads a POST's response: the answers to calls (nil for a POST of
// notifications and answers). ctx is the POST's.
func (c *StreamableClientConn) handle(ctx context.Context, resp *http.Response, calls []jsonrpc.ID, stateless bool) {
	defer resp.Body.Close()
	if id := resp.Header.Get(HeaderSessionID); id != "" && !stateless {
		c.mu.Lock()
		if c.sessionID == "" {
			c.sessionID = id
		}
		c.mu.Unlock()
	}
	if resp.StatusCode == http.StatusNotFound && !stateless && c.SessionID() != "" {
		c.fail(ErrSessionGone)
		return
	}
	if stateless && (resp.StatusCode < 200 || resp.StatusCode > 299) && len(calls) == 1 {
		// 2026-07-28 answers a request it refuses with its JSON-RPC error,
		// data and all, under a status: that error is the answer.
		if body, ok := answerIn(resp, calls[0], c.opts.MaxMessageBytes); ok {
			c.deliver(body)
			return
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := httpErrorOf(resp, c.opts.MaxMessageBytes)
		if len(calls) == 0 {
			c.log.Warn("streamable HTTP: the server refused a message", "status", resp.StatusCode, "err", e.Message)
		}
		c.answerErrors(calls, e)
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		c.readStream(ctx, resp, calls, "", stateless)
	case mt == "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.opts.MaxMessageBytes)+1))
		if err != nil || len(body) > c.opts.MaxMessageBytes {
			c.answerErrors(calls, jsonrpc.NewError(CodeConnectionClosed, "reading the answer failed"))
			return
		}
		if len(bytes.TrimSpace(body)) > 0 {
			c.deliver(body)
		} else {
			c.answerErrors(calls, jsonrpc.NewError(CodeInternalError, "the server sent an empty answer"))
		}
	default:
		c.answerErrors(calls, jsonrpc.NewError(CodeInternalError, "the server answered with Content-Type %q", resp.Header.Get("Content-Type")))
	}
}

// answerIn returns an error status's body when it is the JSON-RPC answer
// to the request id. It reads at most limit bytes; the body is consumed
// either way, and httpErrorOf then names the status alone.
func answerIn(resp *http.Response, id jsonrpc.ID, limit int) ([]byte, bool) {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil || len(body) > limit {
		return nil, false
	}
	m, err := jsonrpc.DecodeMessage(body)
	if r, ok := m.(*jsonrpc.Response); err == nil && ok && r.ID == id && r.Error != nil {
		return body, true
	}
	resp.Body = io.NopCloser(bytes.NewReader(body)) // for httpErrorOf
	return nil, false
}

// httpErrorOf turns an error status into a JSON-RPC error: the server's own
// code and message when its body holds one, else ones naming the status;
// its data is {"httpStatus": status}.
func httpErrorOf(resp *http.Response, limit int) *jsonrpc.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, int64(min(limit, 64<<10))))
	code := CodeInternalError
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = CodeForbidden
	case http.StatusTooManyRequests:
		code = CodeRateLimited
	case http.StatusBadRequest, http.StatusNotAcceptable, http.StatusUnsupportedMediaType, http.StatusRequestEntityTooLarge:
		code = CodeInvalidRequest
	}
	msg := ""
	if m, err := jsonrpc.DecodeMessage(body); err == nil {
		if r, ok := m.(*jsonrpc.Response); ok && r.Error != nil {
			code, msg = r.Error.Code, r.Error.Message
		}
	}
	if msg == "" {
		msg = string(bytes.TrimSpace(body))
		if len(msg) > 200 || !jsonrpc.Valid([]byte(`"`+msg+`"`)) {
			msg = http.StatusText(resp.StatusCode)
		}
	}
	return jsonrpc.NewError(code, "HTTP %d: %s", resp.StatusCode, msg).WithData(map[string]int{"httpStatus": resp.StatusCode})
}

// answerErrors answers calls locally with e, so that nobody waits for
// answers that cannot come.
func (c *StreamableClientConn) answerErrors(calls []jsonrpc.ID, e *jsonrpc.Error) {
	for _, id := range calls {
		c.deliver((&jsonrpc.Response{ID: id, Error: e}).Encode())
	}
}

// readStream reads an SSE stream, resuming it with Last-Event-ID when it
// drops before every answer owed on it came (unless it is a stateless
// request's, which cannot be resumed). calls are the answers owed; nil for
// the GET stream, which is resumed until the conn closes. ctx is the
// request's.
func (c *StreamableClientConn) readStream(ctx context.Context, resp *http.Response, calls []jsonrpc.ID, lastID string, stateless bool) {
	owed := map[jsonrpc.ID]bool{}
	for _, id := range calls {
		owed[id] = true
	}
	retry := c.opts.Retry
	failures := 0
	for {
		progressed := false
		rd := newSSEReader(resp.Body, c.opts.MaxMessageBytes)
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if ev.Retry > 0 {
				retry = ev.Retry
			}
			progressed = true
			if ev.HasID {
				lastID = ev.ID
			}
			if len(bytes.TrimSpace(ev.Data)) == 0 || ev.Name != "" && ev.Name != "message" {
				continue
			}
			f := jsonrpc.Decode(ev.Data)
			for _, m := range f.Messages {
				if r, ok := m.(*jsonrpc.Response); ok {
					delete(owed, r.ID)
				}
			}
			if c.opts.NameRelated && len(calls) == 1 && !stateless {
				ev.Data = nameRelated(f, ev.Data, calls[0])
			}
			c.deliver(ev.Data)
			if calls != nil && len(owed) == 0 {
				resp.Body.Close()
				return // every answer is in: the stream is done
			}
		}
		resp.Body.Close()
		if ctx.Err() != nil {
			return
		}
		if calls != nil && (lastID == "" || stateless) {
			c.answerErrors(mapKeys(owed), jsonrpc.NewError(CodeConnectionClosed, "the stream ended before the answer, and cannot be resumed"))
			return
		}
		if progressed {
			failures = 0
		} else {
			failures++
		}
		if failures > c.opts.MaxRetries {
			if calls != nil {
				c.answerErrors(mapKeys(owed), jsonrpc.NewError(CodeConnectionClosed, "the stream could not be resumed"))
			}
			return
		}
		// Resume after the server's delay (doubled while it fails).
		delay := retry << min(failures, 5)
		t := time.NewTimer(delay)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next, ok := c.resume(lastID, calls != nil)
		if !ok {
			if calls != nil {
				c.answerErrors(mapKeys(owed), jsonrpc.NewError(CodeConnectionClosed, "the stream could not be resumed"))
			}
			return
		}
		if next == nil {
			failures++
			continue
		}
		resp = next
	}
}

// nameRelated returns frame (decoded as f) with the related request set to
// id, when it is one request or log message that names none.
func nameRelated(f jsonrpc.Frame, frame []byte, id jsonrpc.ID) []byte {
	if f.Batch || len(f.Messages) != 1 {
		return frame
	}
	req, ok := f.Messages[0].(*jsonrpc.Request)
	if !ok || !req.IsCall() && req.Method != NotificationMessage {
		return frame
	}
	params, err := ParseObject(req.Params)
	if err != nil {
		return frame
	}
	if _, named := params.MetaValue(MetaRelatedRequest); named {
		return frame
	}
	params.SetMeta(MetaRelatedRequest, id)
	return (&jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params.Raw()}).Encode()
}

// resume GETs a stream again from lastID. It returns nil and true for a
// failure worth retrying, false when the stream is gone for good.
func (c *StreamableClientConn) resume(lastID string, post bool) (*http.Response, bool) {
	req, err := c.newRequest(c.ctx, http.MethodGet, nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set(HeaderLastEventID, lastID)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, c.ctx.Err() == nil
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusOK && mt == "text/event-stream":
		return resp, true
	case resp.StatusCode == http.StatusNotFound:
		resp.Body.Close()
		c.fail(ErrSessionGone)
		return nil, false
	case resp.StatusCode == http.StatusMethodNotAllowed:
		resp.Body.Close()
		return nil, false // no GET streams here
	case resp.StatusCode == http.StatusConflict && !post:
		resp.Body.Close()
		return nil, true // the old stream is still being served: try later
	}
	c.log.Debug("streamable HTTP: resuming a stream failed", "status", resp.StatusCode)
	resp.Body.Close()
	return nil, resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
}

// startGET opens the GET stream once, for the server's own messages.
func (c *StreamableClientConn) startGET() {
	c.mu.Lock()
	if c.getOpen || c.sessionID == "" || c.closed {
		c.mu.Unlock()
		return
	}
	c.getOpen = true
	c.wg.Add(1) // under mu, so that Close's Wait never races it
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		resp, ok := c.resume("", false)
		if resp == nil {
			if ok {
				c.log.Debug("streamable HTTP: the GET stream did not open")
			}
			return
		}
		c.readStream(c.ctx, resp, nil, "", false)
	}()
}

// Close DELETEs the session, stops every request in flight and ends the
// conn.
func (c *StreamableClientConn) Close(peer.CloseCode, string) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	id, gone := c.sessionID, errors.Is(c.in.failure(), ErrSessionGone)
	c.mu.Unlock()
	c.cancel()
	if id != "" && !gone {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.DeleteTimeout)
		if req, err := c.newRequest(ctx, http.MethodDelete, nil); err == nil {
			if resp, err := c.client.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
			}
		}
		cancel()
	}
	c.wg.Wait()
	c.fail(net.ErrClosed)
	return nil
}

// signalBody is a request body that says when the transport has read it
// all (or gave up on it).
type signalBody struct {
	r    *bytes.Reader
	sent chan struct{}
	once sync.Once
}

func (b *signalBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.signal()
	}
	return n, err
}

func (b *signalBody) Close() error {
	b.signal()
	return nil
}

func (b *signalBody) signal() { b.once.Do(func() { close(b.sent) }) }

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
