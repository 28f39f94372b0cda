package hub

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The audit trail: one JSON line per authorization decision (a request or
// upgrade let in or refused, a session closed as its token expired) and
// per routed call (a client's call to a server, or the hub's refusal of
// it). Who (the principal: issuer and subject, or the static token's
// name; the OAuth client), where (instance, endpoint), what (method,
// server, tool or URI), the decision and why, the outcome and how long it
// took. Never a token, never arguments.
//
// Writing costs a caller a copy into a bounded channel: one goroutine of
// the log's own encodes and writes. A line that finds the channel full is
// dropped and counted (switchboard_audit_dropped_total), so a slow disk
// never slows a call. A hub without an audit log pays a nil check.

// AuditLog is an audit trail written to a file (or the standard output).
// It is safe for concurrent use.
type AuditLog struct {
	path    string
	lines   chan auditRecord
	reopen  chan chan error
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	dropped atomic.Int64
	written atomic.Int64

	f *os.File // the writer goroutine's
	w *bufio.Writer
}

// auditQueue bounds the lines waiting to be written.
const auditQueue = 8192

// OpenAuditLog opens (creating it, mode 0600, or appending to it) the
// audit log file at path, or the standard output for "-", and starts
// writing to it. Close it after the hub.
func OpenAuditLog(path string) (*AuditLog, error) {
	a := &AuditLog{path: path, lines: make(chan auditRecord, auditQueue), reopen: make(chan chan error),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := a.open(); err != nil {
		return nil, err
	}
	go a.run()
	return a, nil
}

func (a *AuditLog) open() error {
	if a.path == "-" {
		a.f = os.Stdout
	} else {
		f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		a.f = f
	}
	a.w = bufio.NewWriterSize(a.f, 64<<10)
	return nil
}

// Reopen closes the file and opens it again at its path: after a log
// rotation moved it (SIGHUP). Lines written meanwhile wait in the queue.
func (a *AuditLog) Reopen() error {
	reply := make(chan error, 1)
	select {
	case a.reopen <- reply:
		return <-reply
	case <-a.done:
		return errors.New("audit log: closed")
	}
}

// Close writes what is queued and closes the file. Lines recorded after
// Close are dropped.
func (a *AuditLog) Close() error {
	a.once.Do(func() { close(a.stop) })
	<-a.done
	return nil
}

// Dropped returns how many lines were dropped because the queue was full.
func (a *AuditLog) Dropped() int64 { return a.dropped.Load() }

// Written returns how many lines were written.
func (a *AuditLog) Written() int64 { return a.written.Load() }

// run writes lines until Close, flushing whenever the queue is empty.
func (a *AuditLog) run() {
	defer close(a.done)
	for {
		select {
		case rec := <-a.lines:
			a.write(&rec)
			if len(a.lines) == 0 {
				_ = a.w.Flush()
			}
		case reply := <-a.reopen:
			_ = a.w.Flush()
			a.closeFile()
			reply <- a.open()
		case <-a.stop:
			for {
				select {
				case rec := <-a.lines:
					a.write(&rec)
				default:
					_ = a.w.Flush()
					a.closeFile()
					return
				}
			}
		}
	}
}

func (a *AuditLog) write(rec *auditRecord) {
	if a.w == nil {
		a.dropped.Add(1) // a reopen failed: nowhere to write
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	_, _ = a.w.Write(append(b, '\n'))
	a.written.Add(1)
}

func (a *AuditLog) closeFile() {
	if a.f != nil && a.f != os.Stdout {
		_ = a.f.Close()
	}
	a.f, a.w = nil, nil
}

// record queues a line, or drops it when the queue is full.
func (a *AuditLog) record(rec auditRecord) {
	select {
	case <-a.stop:
		a.dropped.Add(1)
		return
	default:
	}
	select {
	case a.lines <- rec:
	default:
		a.dropped.Add(1)
	}
}

// auditRecord is one line of the audit trail.
type auditRecord struct {
	Time     time.Time `json:"time"`
	Instance string    `json:"instance"`
	// Event is "authorization" (a request or an upgrade), "call" (a routed
	// call) or "session" (a session closed by the hub).
	Event string `json:"event"`
	// Principal is the identity: "oauth:<issuer> <subject>", "token:<name>"
	// or "anonymous"; empty when none could be established.
	Principal string `json:"principal,omitempty"`
	Issuer    string `json:"issuer,omitempty"`
	Subject   string `json:"subject,omitempty"`
	ClientID  string `json:"clientId,omitempty"` // the OAuth client of the token
	Session   string `json:"session,omitempty"`  // the hub's session: "<instance>/<n>"
	Endpoint  string `json:"endpoint,omitempty"`
	Remote    string `json:"remote,omitempty"`
	// Method is the HTTP method of an authorization, the MCP method of a
	// call.
	Method string `json:"method,omitempty"`
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"` // a tool or prompt, by the server's name for it
	URI    string `json:"uri,omitempty"`
	// Decision is "allow" or "deny"; Reason says why a denial.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Status is an authorization's HTTP status; Code a call's JSON-RPC
	// error code (0: it succeeded).
	Status     int     `json:"status,omitempty"`
	Code       int64   `json:"code,omitempty"`
	DurationMs float64 `json:"durationMs,omitempty"`
}

// setPrincipal fills the record's principal.
func (rec *auditRecord) setPrincipal(p *principal) {
	if p == nil {
		return
	}
	rec.Principal = string(p.identity())
	if tok := p.g().token; tok != nil {
		rec.Issuer, rec.Subject, rec.ClientID = tok.Issuer, tok.Subject, tok.ClientID
	}
}

// auditDecision records the authorization of a request to endpoint: status
// 200 lets it in, anything else refuses it for why.
func (h *Hub) auditDecision(r *http.Request, endpoint string, p *principal, status int, why string) {
	a := h.cfg.Audit
	if a == nil {
		return
	}
	rec := auditRecord{Time: time.Now().UTC(), Instance: h.id, Event: "authorization", Endpoint: endpoint,
		Remote: r.RemoteAddr, Method: r.Method, Status: status, Decision: "allow", Reason: why}
	if isUpgrade(r) {
		rec.Method = "websocket"
	}
	if status != http.StatusOK {
		rec.Decision = "deny"
	}
	rec.setPrincipal(p)
	a.record(rec)
}

// auditEvent records the hub's decision about a session: closing it, for
// why.
func (h *Hub) auditEvent(s *session, what, why string) {
	a := h.cfg.Audit
	if a == nil {
		return
	}
	rec := auditRecord{Time: time.Now().UTC(), Instance: h.id, Event: "session", Session: s.clientKey,
		Endpoint: endpoint(s.scope), Method: what, Decision: "deny", Reason: why}
	rec.setPrincipal(s.who)
	a.record(rec)
}

// auditCall records a routed call as it ends.
func (h *Hub) auditCall(t *target, c caller, method string, start time.Time, err error) {
	a := h.cfg.Audit
	if a == nil {
		return
	}
	rec := auditRecord{Time: time.Now().UTC(), Instance: h.id, Event: "call", Method: method, Server: t.server,
		Tool: t.item, Decision: "allow", Code: int64(jsonrpc.CodeOf(err)),
		DurationMs: round3(float64(time.Since(start)) / 1e6)}
	if err != nil {
		rec.Reason = "the call failed"
	}
	if method != mcp.MethodToolsCall && method != mcp.MethodPromptsGet {
		rec.URI, _ = jsonrpc.StringMember(t.params(), "uri")
	}
	switch cl := c.(type) {
	case *sessionCall:
		rec.setPrincipal(cl.s.who)
		rec.Session, rec.Endpoint = cl.s.clientKey, endpoint(cl.s.scope)
	case *inputCall:
		rec.Principal = string(cl.whose)
	}
	a.record(rec)
}

// auditRefused records a call the hub refused without routing it.
func (h *Hub) auditRefused(s *session, req *jsonrpc.Request, err error) {
	a := h.cfg.Audit
	if a == nil {
		return
	}
	rec := auditRecord{Time: time.Now().UTC(), Instance: h.id, Event: "call", Method: req.Method, Session: s.clientKey,
		Endpoint: endpoint(s.scope), Decision: "deny", Code: int64(jsonrpc.CodeOf(err))}
	rec.setPrincipal(s.who)
	switch req.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		rec.Tool, _ = jsonrpc.StringMember(req.Params, "name")
		rec.Tool = cut(rec.Tool, maxCallMessage)
	default:
		rec.URI, _ = jsonrpc.StringMember(req.Params, "uri")
		rec.URI = cut(rec.URI, maxCallMessage)
	}
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		rec.Reason = cut(e.Message, maxCallMessage)
	}
	a.record(rec)
}

var _ io.Closer = (*AuditLog)(nil)
