package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Streamable HTTP header names.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderLastEventID     = "Last-Event-Id"
	// HeaderMethod and HeaderName mirror a 2026-07-28 request's method and
	// its tool or prompt name (or resource URI), for proxies.
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// MetaProtocolVersion is the _meta key by which a 2026-07-28 request states
// its protocol version: a POST without a session whose request carries it
// is a stateless request (see StreamableOptions.Stateless).
const MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// ResponseMode says how a StreamableHandler answers a POST that carries
// requests.
type ResponseMode int

const (
	// ResponseAuto answers with one application/json body when the answer is
	// the only thing the POST's stream carries, and switches to an SSE stream
	// as soon as anything else (progress, a log, a request to the client)
	// must go to it first, or when the answer takes longer than KeepAlive.
	ResponseAuto ResponseMode = iota
	// ResponseSSE always answers with an SSE stream.
	ResponseSSE
)

// Defaults for StreamableOptions.
const (
	DefaultStreamableMaxBody  = 4 << 20
	DefaultStreamableIdle     = 10 * time.Minute
	DefaultReplayEvents       = 256
	DefaultReplayBytes        = 1 << 20
	DefaultSSERetry           = time.Second
	DefaultSSEKeepAlive       = 20 * time.Second
	DefaultStreamWriteTimeout = 30 * time.Second
)

// sessionInbox is how many POST bodies a session holds for its peer to
// read; a POST beyond waits for room (or for its client to give up).
const sessionInbox = 64

// StreamableOptions configure a StreamableHandler. The zero value is usable
// but accepts no session: Open must be set for initialize to succeed.
//
// Security: the handler checks neither Origin nor Host, nor credentials. An
// owner must do admission before it (a browser page of another origin must
// not reach a local server: DNS rebinding), and must check in Open and
// Check that every request of a session comes from the client that opened
// it.
type StreamableOptions struct {
	// Open is called for a POST that opens a session: an initialize request
	// without Mcp-Session-Id. The owner starts its peer on s.Conn() (for
	// example Server.Serve(s.Context(), s.Conn())) and may keep data in the
	// session. An error refuses the session: an *HTTPError chooses the
	// status (401, 403, ...), any other error is a 500 whose text is logged,
	// not sent.
	Open func(r *http.Request, s *StreamSession) error
	// Check, when set, is called for every later request of a session
	// (POST, GET, DELETE) before it is served; an error refuses it as Open's
	// does. The hub checks here that the token is the session's.
	Check func(r *http.Request, s *StreamSession) error
	// Stateless, when set, serves a POST without a session that carries a
	// request of the 2026-07-28 revision (its MCP-Protocol-Version header,
	// or its params._meta["io.modelcontextprotocol/protocolVersion"], names
	// that revision or a later one): s is a session of that one request,
	// never registered, whose conn ends once the request is answered or its
	// client leaves. The handler checks the headers against the body first
	// (-32020); the owner judges the version and the request's _meta. An
	// error answer of such a request goes with the HTTP status the revision
	// gives its code (HTTPStatusOf). A notification POSTed so is accepted
	// (202) and dropped: with no session there is nothing it could be about.
	// Without Stateless such a POST is refused with 400, as any other
	// request without a session.
	Stateless func(r *http.Request, s *StreamSession) error
	// Screen, when set, is called for every POST whose body is valid
	// JSON-RPC, with its messages, before any of them reaches a session or
	// opens one; an error refuses the whole POST as Open's does. The hub
	// answers here a call that needs a scope the token lacks (HTTP 403,
	// step-up authorization), which a JSON-RPC error could not say.
	Screen func(r *http.Request, msgs []jsonrpc.Message) error
	// NewSessionID returns a new session id: visible ASCII, unguessable.
	// Default: 128 random bits in hex.
	NewSessionID func() string
	// ProtocolVersions are the values of the MCP-Protocol-Version header
	// accepted (400 otherwise); default SupportedVersions. An absent header
	// means 2025-03-26, as the specification says.
	ProtocolVersions []string
	// ResponseMode chooses JSON or SSE answers to POSTs (default auto).
	ResponseMode ResponseMode
	// MaxBodyBytes bounds a POST body (413 beyond); default 4 MiB.
	MaxBodyBytes int64
	// Limits bound the JSON-RPC in a POST body (batch length, nesting);
	// MaxBytes is MaxBodyBytes.
	Limits jsonrpc.Limits
	// IdleTimeout ends a session that has had no request in progress and no
	// stream open for this long: its conn's Read then fails, so the owner's
	// peer closes. Default 10 minutes; negative never ends one.
	IdleTimeout time.Duration
	// ReplayEvents and ReplayBytes bound the SSE events a session keeps for
	// resumption (Last-Event-ID) and for a GET stream not yet open, over
	// all its streams; the oldest go first. Defaults 256 and 1 MiB.
	ReplayEvents int
	ReplayBytes  int
	// Retry is the reconnection delay an SSE stream's priming event asks
	// for; default 1 s, negative sends none.
	Retry time.Duration
	// KeepAlive is how often an open SSE stream with nothing to say sends a
	// comment, so that proxies do not take it for dead, and how long a POST
	// waits for its answer before it becomes an SSE stream in auto mode;
	// default 20 s, negative sends none and never switches.
	KeepAlive time.Duration
	// WriteTimeout bounds each write to a response: a client that stops
	// reading loses its stream (it may resume it with Last-Event-ID)
	// instead of holding a goroutine for ever. Default 30 s.
	WriteTimeout time.Duration
	// TraceHeaders puts the W3C trace context of a POST's headers
	// (traceparent, tracestate, baggage) into params._meta of each request
	// it carries that has no traceparent of its own, where the owner reads
	// a message's trace context whichever transport brought it (see
	// MetaTraceparent). Off, requests reach the owner as they were sent.
	TraceHeaders bool
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
}

// HTTPError refuses a request with an HTTP status. Open and Check return it;
// the body is a JSON-RPC error with id null carrying Code (default -32600
// for a 4xx status, -32603 otherwise) and Message.
type HTTPError struct {
	Status  int
	Code    jsonrpc.Code
	Message string
	// Header is added to the response (e.g. WWW-Authenticate).
	Header http.Header
}

// Error implements the error interface.
func (e *HTTPError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// StreamableHandler serves the MCP Streamable HTTP transport (2025-03-26 to
// 2025-11-25) on one endpoint: POST sends messages, GET opens a stream for
// the server's own messages, DELETE ends a session. Each session is a
// peer.Conn (StreamSession.Conn) on which an owner runs a peer exactly as
// on a WebSocket; the handler turns the owner's outgoing frames into the
// right HTTP responses and SSE streams (see docs/protocol.md).
//
// A StreamableHandler works with any http.ResponseWriter whose
// ResponseController can flush it.
type StreamableHandler struct {
	opts StreamableOptions
	log  *slog.Logger

	mu       sync.Mutex
	closed   bool
	sessions map[string]*StreamSession
}

// NewStreamableHandler returns a handler with opts (nil for defaults).
func NewStreamableHandler(opts *StreamableOptions) *StreamableHandler {
	h := &StreamableHandler{sessions: map[string]*StreamSession{}}
	if opts != nil {
		h.opts = *opts
	}
	o := &h.opts
	if o.NewSessionID == nil {
		o.NewSessionID = randomID
	}
	if len(o.ProtocolVersions) == 0 {
		o.ProtocolVersions = SupportedVersions
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultStreamableMaxBody
	}
	o.Limits.MaxBytes = int(o.MaxBodyBytes)
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultStreamableIdle
	}
	if o.ReplayEvents <= 0 {
		o.ReplayEvents = DefaultReplayEvents
	}
	if o.ReplayBytes <= 0 {
		o.ReplayBytes = DefaultReplayBytes
	}
	if o.Retry == 0 {
		o.Retry = DefaultSSERetry
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultSSEKeepAlive
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultStreamWriteTimeout
	}
	h.log = o.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Sessions returns the number of live sessions.
func (h *StreamableHandler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// Session returns the live session with id, or nil.
func (h *StreamableHandler) Session(id string) *StreamSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[id]
}

// Close ends every session (their conns' Reads fail with 1001 "going away")
// and refuses new ones with 503.
func (h *StreamableHandler) Close() {
	h.mu.Lock()
	h.closed = true
	all := make([]*StreamSession, 0, len(h.sessions))
	for _, s := range h.sessions {
		all = append(all, s)
	}
	h.mu.Unlock()
	for _, s := range all {
		s.end(errGoingAway)
	}
}

func (h *StreamableHandler) forget(s *StreamSession) {
	h.mu.Lock()
	if h.sessions[s.ID()] == s {
		delete(h.sessions, s.ID())
	}
	h.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (h *StreamableHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		h.servePOST(w, r)
	case http.MethodGet:
		h.serveGET(w, r)
	case http.MethodDelete:
		h.serveDELETE(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeHTTPError(w, http.StatusMethodNotAllowed, 0, "method not allowed")
	}
}

// writeHTTPError writes a JSON-RPC error with id null as the body of an
// error status.
func writeHTTPError(w http.ResponseWriter, status int, code jsonrpc.Code, msg string) {
	if code == 0 {
		code = jsonrpc.CodeInvalidRequest
		if status >= 500 {
			code = jsonrpc.CodeInternalError
		}
	}
	writeRPCError(w, status, jsonrpc.NewError(code, "%s", msg))
}

// writeRPCError writes e, with id null, as the body of an error status.
func writeRPCError(w http.ResponseWriter, status int, e *jsonrpc.Error) {
	body := (&jsonrpc.Response{ID: jsonrpc.NullID(), Error: e}).Encode()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// refuse answers a request that a hook refused.
func (h *StreamableHandler) refuse(w http.ResponseWriter, err error) {
	var he *HTTPError
	if errors.As(err, &he) {
		for k, vs := range he.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		writeHTTPError(w, he.Status, he.Code, he.Message)
		return
	}
	h.log.Warn("streamable HTTP: a hook failed", "err", err)
	writeHTTPError(w, http.StatusInternalServerError, 0, "internal error")
}

// accepts reports whether the Accept header admits the media type mt
// ("type/subtype"), wildcards included, with a q above 0.
func accepts(header []string, mt string) bool {
	typ, _, _ := strings.Cut(mt, "/")
	for _, h := range header {
		for part := range strings.SplitSeq(h, ",") {
			part = strings.TrimSpace(part)
			if !strings.Contains(part, ";") {
				// No parameters, as most clients send it: compared as
				// mime.ParseMediaType would read it, without its map.
				if strings.EqualFold(part, mt) || part == "*/*" || isWildcardOf(part, typ) {
					return true
				}
				continue
			}
			media, params, err := mime.ParseMediaType(part)
			if err != nil {
				continue
			}
			if q, ok := params["q"]; ok && strings.Trim(q, "0.") == "" {
				continue // q=0: explicitly not acceptable
			}
			if media == mt || media == "*/*" || media == typ+"/*" {
				return true
			}
		}
	}
	return false
}

// isWildcardOf reports whether media is typ/*, in any case.
func isWildcardOf(media, typ string) bool {
	return len(media) == len(typ)+2 && strings.EqualFold(media[:len(typ)], typ) && media[len(typ):] == "/*"
}

// isJSON reports whether a Content-Type is application/json: compared as
// is first, which is how clients send it, and parsed otherwise.
func isJSON(contentType string) bool {
	if strings.EqualFold(contentType, "application/json") {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// jsonContentType is the Content-Type of JSON answers, set without
// allocating a value slice per response (net/http copies what it sends).
var jsonContentType = []string{"application/json"}

// routingHeaders are the headers a proxy in front may route or authorize a
// request by: each may be given once.
var routingHeaders = [...]string{HeaderProtocolVersion, HeaderMethod, HeaderName}

// checkVersion checks the routing headers and the MCP-Protocol-Version
// header. One given twice is a mismatch (-32020), whatever its values: a
// proxy that reads the last of two would judge another request than the
// one served here, which reads the first.
func (h *StreamableHandler) checkVersion(w http.ResponseWriter, r *http.Request) bool {
	for _, name := range routingHeaders {
		if n := len(r.Header[name]); n > 1 {
			writeRPCError(w, http.StatusBadRequest, ErrHeaderMismatch("the %s header is given %d times: give it once", name, n))
			return false
		}
	}
	v := r.Header.Get(HeaderProtocolVersion)
	if v == "" || slices.Contains(h.opts.ProtocolVersions, v) || h.opts.Stateless != nil && IsModernVersion(v) {
		return true // a modern one is the owner's to judge, in the body's terms
	}
	// 400 is what the transport specifies; the body is the 2026-07-28 error,
	// so that a client trying a newer revision learns what to fall back to.
	writeRPCError(w, http.StatusBadRequest, jsonrpc.NewError(CodeUnsupportedProtocolVersion,
		"unsupported %s %q (supported: %s)", HeaderProtocolVersion, v, strings.Join(h.opts.ProtocolVersions, ", ")).
		WithData(map[string]any{"supported": h.opts.ProtocolVersions, "requested": v}))
	return false
}

// lookup finds the session a GET, DELETE or later POST names, answering 400
// or 404 itself when there is none, and runs Check.
func (h *StreamableHandler) lookup(w http.ResponseWriter, r *http.Request) *StreamSession {
	id := r.Header.Get(HeaderSessionID)
	if id == "" {
		writeHTTPError(w, http.StatusBadRequest, 0, "missing "+HeaderSessionID+" header")
		return nil
	}
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil {
		writeHTTPError(w, http.StatusNotFound, 0, "session not found")
		return nil
	}
	if h.opts.Check != nil {
		if err := h.opts.Check(r, s); err != nil {
			h.refuse(w, err)
			return nil
		}
	}
	return s
}

func (h *StreamableHandler) serveDELETE(w http.ResponseWriter, r *http.Request) {
	if !h.checkVersion(w, r) {
		return
	}
	s := h.lookup(w, r)
	if s == nil {
		return
	}
	s.end(errDeleted)
	w.WriteHeader(http.StatusNoContent)
}

func (h *StreamableHandler) serveGET(w http.ResponseWriter, r *http.Request) {
	if !accepts(r.Header.Values("Accept"), "text/event-stream") {
		writeHTTPError(w, http.StatusNotAcceptable, 0, "a GET must accept text/event-stream")
		return
	}
	if !h.checkVersion(w, r) {
		return
	}
	s := h.lookup(w, r)
	if s == nil {
		return
	}
	if !s.begin() {
		writeHTTPError(w, http.StatusNotFound, 0, "session not found")
		return
	}
	defer s.finish()
	st, att, err := s.attachGET(r.Header.Get(HeaderLastEventID))
	if err != nil {
		writeHTTPError(w, http.StatusConflict, 0, err.Error())
		return
	}
	s.serveStream(w, r, st, att)
}

// servePOST reads and checks a POST, finds or opens its session, and hands
// its messages to the session's conn.
func (h *StreamableHandler) servePOST(w http.ResponseWriter, r *http.Request) {
	accept := r.Header.Values("Accept")
	if !accepts(accept, "application/json") || !accepts(accept, "text/event-stream") {
		writeHTTPError(w, http.StatusNotAcceptable, 0, "a POST must accept both application/json and text/event-stream")
		return
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		writeHTTPError(w, http.StatusUnsupportedMediaType, 0, "Content-Type must be application/json")
		return
	}
	if !h.checkVersion(w, r) {
		return
	}
	body, herr := ReadBody(w, r, h.opts.MaxBodyBytes)
	if herr != nil {
		writeHTTPError(w, herr.Status, herr.Code, herr.Message)
		return
	}
	frame := h.opts.Limits.Decode(body)
	if len(frame.Replies) > 0 {
		// Invalid JSON-RPC is answered here, in the HTTP response: it reaches
		// no session, and the owner's peer never sees it.
		var out []byte
		if frame.Batch {
			ms := make([]jsonrpc.Message, len(frame.Replies))
			for i, rep := range frame.Replies {
				ms[i] = rep
			}
			out = jsonrpc.EncodeBatch(ms)
		} else {
			out = frame.Replies[0].Encode()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(out)
		return
	}
	msgs := frame.Messages // its own: Limits.Decode keeps nothing
	if h.opts.Screen != nil {
		if err := h.opts.Screen(r, msgs); err != nil {
			h.refuse(w, err)
			return
		}
	}
	if h.opts.TraceHeaders {
		withTraceHeadersAll(msgs, r.Header)
	}

	var s *StreamSession
	if r.Header.Get(HeaderSessionID) == "" {
		single, _ := msgs[0].(*jsonrpc.Request)
		if frame.Batch || len(msgs) != 1 {
			single = nil
		}
		version, stateless := "", false
		if h.opts.Stateless != nil && single != nil {
			version, stateless = statelessVersion(r, single)
		}
		switch {
		case single != nil && isCall(single, MethodInitialize) && !IsModernVersion(r.Header.Get(HeaderProtocolVersion)):
			s = h.open(w, r, single)
		case stateless:
			h.serveStateless(w, r, body, msgs, version)
			return
		case slices.ContainsFunc(msgs, func(m jsonrpc.Message) bool { return isCall(m, MethodInitialize) }):
			writeHTTPError(w, http.StatusBadRequest, 0, "initialize must be sent alone, not in a batch")
			return
		case single != nil && single.IsCall() && !isKnownMethod(single.Method):
			// An unknown method is -32601 in every state, before a session too.
			writeAnswer(w, http.StatusBadRequest, &jsonrpc.Response{ID: single.ID,
				Error: jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "method %q not found", single.Method)})
			return
		default:
			writeHTTPError(w, http.StatusBadRequest, 0, "missing "+HeaderSessionID+" header: initialize first")
			return
		}
	} else {
		s = h.lookup(w, r)
	}
	if s == nil {
		return
	}
	if !s.begin() {
		writeHTTPError(w, http.StatusNotFound, 0, "session not found")
		return
	}
	defer s.finish()
	s.servePOST(w, r, body, msgs, frame.Batch)
}

// ReadBody reads a request's body, at most limit bytes. Its error says how
// to answer: 413 beyond limit, 408 when the body did not arrive before the
// connection's read deadline (an owner sets one against clients that send
// a byte now and then: see http.ResponseController.SetReadDeadline), 400
// when it could not be read.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *HTTPError) {
	var body []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= limit {
		body, err = readExactly(r.Body, n)
	} else {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	}
	if err == nil {
		return body, nil
	}
	var mbe *http.MaxBytesError // declared here: errors.As's target escapes, and a body read costs no allocation for it
	switch {
	case errors.As(err, &mbe):
		return nil, &HTTPError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("body exceeds %d bytes", mbe.Limit)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &HTTPError{Status: http.StatusRequestTimeout, Message: "the body did not arrive in time"}
	}
	return nil, &HTTPError{Status: http.StatusBadRequest, Message: "reading the body failed"}
}

// readExactly reads a body of n bytes, as its Content-Length says, in one
// allocation, then to its end (net/http's reader stops at Content-Length;
// reading its EOF tells whoever wraps it that the body is in).
func readExactly(body io.Reader, n int64) ([]byte, error) {
	b := make([]byte, n, n+1) // room to read the end into
	if _, err := io.ReadFull(body, b); err != nil {
		return nil, err
	}
	if m, err := body.Read(b[n : n+1]); m > 0 || err != io.EOF {
		return nil, errors.Join(errors.New("a body longer than its Content-Length"), err)
	}
	return b, nil
}

// open starts a session for an initialize request, or answers why not.
func (h *StreamableHandler) open(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) *StreamSession {
	if h.opts.Open == nil {
		writeHTTPError(w, http.StatusForbidden, 0, "this endpoint accepts no sessions")
		return nil
	}
	version, _ := jsonrpc.StringMember(req.Params, "protocolVersion")
	s := newStreamSession(h, h.opts.NewSessionID(), version)
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		s.end(errGoingAway)
		writeHTTPError(w, http.StatusServiceUnavailable, 0, "shutting down")
		return nil
	}
	if err := h.opts.Open(r, s); err != nil {
		s.end(errRefused)
		h.refuse(w, err)
		return nil
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.end(errGoingAway)
		writeHTTPError(w, http.StatusServiceUnavailable, 0, "shutting down")
		return nil
	}
	h.sessions[s.ID()] = s
	h.mu.Unlock()
	h.log.Debug("streamable HTTP session opened", "session", s.ID(), "version", version)
	return s
}

// serveStateless serves one self-describing request without a session,
// msgs[0]; version is the one its _meta states ("" for none).
func (h *StreamableHandler) serveStateless(w http.ResponseWriter, r *http.Request, body []byte, msgs []jsonrpc.Message, version string) {
	req := msgs[0].(*jsonrpc.Request)
	if !req.IsCall() {
		w.WriteHeader(http.StatusAccepted) // nothing to do: see StreamableOptions.Stateless
		return
	}
	if err := checkHeaders(r, req, version); err != nil {
		writeAnswer(w, http.StatusBadRequest, &jsonrpc.Response{ID: req.ID, Error: err})
		return
	}
	s := newStreamSession(h, "", version)
	s.stateless = true
	s.header = r.Header
	if err := h.opts.Stateless(r, s); err != nil {
		s.end(errRefused)
		h.refuse(w, err)
		return
	}
	defer s.end(errStatelessDone)
	s.begin()
	defer s.finish()
	s.servePOST(w, r, body, msgs, false)
}

func isCall(m jsonrpc.Message, method string) bool {
	req, ok := m.(*jsonrpc.Request)
	return ok && req.IsCall() && req.Method == method
}

// statelessVersion returns the protocol version a request without a
// session states in its _meta ("" for none), read once, and reports whether
// the request is one of the stateless revision: by its header, or by that
// version.
func statelessVersion(r *http.Request, req *jsonrpc.Request) (string, bool) {
	version := ""
	if v, ok := metaMember(req.Params, MetaProtocolVersion); ok {
		version, _ = unquoteVersion(v)
	}
	return version, IsModernVersion(r.Header.Get(HeaderProtocolVersion)) || IsModernVersion(version)
}

// isKnownMethod reports whether MCP defines method.
func isKnownMethod(method string) bool {
	_, ok := LookupMethod(method)
	return ok
}

// checkHeaders checks that a stateless request's headers say what its body
// does, as SEP-2243 has a server do: the protocol version (when the body
// states one; a body without it is the owner's to refuse with -32602), the
// method (Mcp-Method, on every request), and for the methods NameMember
// names, the tool or prompt name, resource URI or task id (Mcp-Name, which
// may come in the base64 form of DecodeHeaderValue). A header missing or
// saying something else is -32020. The Mcp-Param-* headers need the tool's
// schema: the Server (or the hub) checks them (CheckParamHeaders).
func checkHeaders(r *http.Request, req *jsonrpc.Request, version string) *jsonrpc.Error {
	header := r.Header.Get(HeaderProtocolVersion)
	switch {
	case version != "" && header == "":
		return ErrHeaderMismatch("missing %s header (the body says %s)", HeaderProtocolVersion, version)
	case version != "" && header != version:
		return ErrHeaderMismatch("the %s header says %q, the body's _meta %q", HeaderProtocolVersion, header, version)
	}
	m := r.Header.Values(HeaderMethod)
	switch {
	case len(m) == 0:
		return ErrHeaderMismatch("missing %s header (the body's method is %q)", HeaderMethod, req.Method)
	case strings.Trim(m[0], " \t") != req.Method:
		return ErrHeaderMismatch("the %s header says %q, the body %q", HeaderMethod, m[0], req.Method)
	}
	key := NameMember(req.Method)
	if key == "" {
		return nil
	}
	raw, ok := jsonrpc.Member(req.Params, key)
	if !ok {
		return nil // the owner refuses the body itself (-32602)
	}
	n := r.Header.Values(HeaderName)
	if len(n) > 0 {
		if said, err := DecodeHeaderValue(n[0]); err == nil && isJSONString(raw, said) {
			return nil // the usual case, compared in place: no copy of the name
		}
	}
	name, ok := jsonrpc.Unquote(raw)
	if !ok {
		return nil // not a string: the owner refuses the body itself (-32602)
	}
	if len(n) == 0 {
		return ErrHeaderMismatch("missing %s header (the body's %s is %q)", HeaderName, key, name)
	}
	said, err := DecodeHeaderValue(n[0])
	if err != nil {
		err.Message = HeaderName + ": " + err.Message
		return err
	}
	if said != name {
		return ErrHeaderMismatch("the %s header says %q, the body's %s %q", HeaderName, said, key, name)
	}
	return nil
}

// writeAnswer writes one JSON-RPC answer as the body of status.
func writeAnswer(w http.ResponseWriter, status int, resp *jsonrpc.Response) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(resp.Encode())
}

// metaMember returns params._meta[key], raw.
func metaMember(params []byte, key string) ([]byte, bool) {
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok {
		return nil, false
	}
	return jsonrpc.Member(meta, key)
}

// StreamSessionFromContext returns the session whose Context ctx derives
// from, or nil: a handler of an owner that serves with
// Serve(s.Context(), s.Conn()) finds its session this way.
func StreamSessionFromContext(ctx context.Context) *StreamSession {
	s, _ := ctx.Value(streamSessionKey{}).(*StreamSession)
	return s
}

type streamSessionKey struct{}
