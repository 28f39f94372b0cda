package hub

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The call log: the last calls of the cluster's clients, for operators
// (switchboard://calls), with their arguments for admins
// (switchboard://calls?arguments=1). Entries are made only while someone
// watches it, here or on another instance: one allocation per call then,
// none otherwise. Each instance keeps its own in a ring without a lock,
// sends the new ones with its summary each interval, and keeps the other
// instances' latest. Under load it logs at most callLogPerTick calls an
// interval, and callLogErrorsPerTick failed ones beyond: the log shows 200
// calls, so that more than that per second is lost work (and costs calls/s);
// the calls left out are counted (skipped).
const (
	callLogPerTick       = 100
	callLogErrorsPerTick = 100

	callRing        = 256  // entries each instance keeps of its own, and of the others'
	callDocMax      = 200  // entries in switchboard://calls
	maxCallMessage  = 200  // bytes of an error message kept
	maxCallArgument = 1024 // bytes of arguments kept
)

// callEntry is one call in the call log.
type callEntry struct {
	At         time.Time `json:"at"`
	Instance   string    `json:"instance"`
	Client     string    `json:"client"`             // its clientInfo.name
	ClientID   string    `json:"clientId,omitempty"` // "<instance>/<session>"
	Token      string    `json:"token,omitempty"`    // the name of its token
	Server     string    `json:"server,omitempty"`   // "" when the hub refused it
	Method     string    `json:"method"`
	Name       string    `json:"name,omitempty"` // the tool or prompt, by the server's name for it
	DurationMs float64   `json:"durationMs"`
	// Outcome is "ok", "error" (Code and Message say which), "cancelled"
	// (by its client) or "tool error" (a result with isError).
	Outcome   string `json:"outcome"`
	Code      int64  `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	Arguments string `json:"arguments,omitempty"` // JSON, cut at maxCallArgument bytes; in the arguments view only
	seq       uint64
	from      *session // this instance's caller, whose names fill the entry when it is shown

	// TraceID is the call's trace (32 hex digits) when tracing is on and
	// sampled it; TraceURL its page in the tracing UI (Config.TracingUI).
	TraceID  string `json:"traceId,omitempty"`
	TraceURL string `json:"traceUrl,omitempty"`
}

// shown returns the entry as documents show it: a copy, with its client's
// names, and its arguments only with args.
func (e *callEntry) shown(args bool) *callEntry {
	c := *e
	if s := e.from; s != nil {
		if c.Client == "" {
			c.Client = s.clientName()
		}
		c.ClientID, c.Token, c.from = s.key(), s.who.name, nil
	}
	if !args {
		c.Arguments = ""
	}
	return &c
}

// callLog holds this instance's entries in a ring written without a lock,
// and the other instances' latest.
type callLog struct {
	next atomic.Uint64 // sequence number of the last entry made
	ring [callRing]atomic.Pointer[callEntry]

	left, errorsLeft atomic.Int64 // what this interval may still log
	skipped          atomic.Int64 // calls not logged for those bounds, since the instance started

	mu        sync.Mutex // guards what follows; a leaf
	published uint64     // our entries up to this one went out with a summary
	told      uint64     // our entries up to this one were told to subscribers
	remote    []*callEntry
}

// refill gives a new interval its bounds.
func (l *callLog) refill() {
	l.left.Store(callLogPerTick)
	l.errorsLeft.Store(callLogErrorsPerTick)
}

// admit reports whether a call may be logged in this interval, and counts
// it as skipped otherwise.
func (l *callLog) admit(failed bool) bool {
	if l.left.Add(-1) >= 0 || failed && l.errorsLeft.Add(-1) >= 0 {
		return true
	}
	l.skipped.Add(1)
	return false
}

// add puts an entry in the ring.
func (l *callLog) add(e *callEntry) {
	n := l.next.Add(1)
	e.seq = n
	l.ring[n%callRing].Store(e)
}

// since returns our entries after sequence number from, oldest first, at
// most limit (the newest).
func (l *callLog) since(from uint64, limit int) []*callEntry {
	last := l.next.Load()
	first := max(from+1, last-min(last, uint64(limit))+1)
	out := make([]*callEntry, 0, last-min(last, first-1))
	for n := first; n <= last; n++ {
		if e := l.ring[n%callRing].Load(); e != nil && e.seq == n {
			out = append(out, e)
		}
	}
	return out
}

// unpublished returns our entries made since the last call, at most
// limit, as shown (with arguments, which only an instance watching them
// records).
func (l *callLog) unpublished(limit int) []*callEntry {
	l.mu.Lock()
	from := l.published
	l.published = l.next.Load()
	l.mu.Unlock()
	entries := l.since(from, limit)
	for i, e := range entries {
		entries[i] = e.shown(true)
	}
	return entries
}

// addRemote keeps entries another instance sent; it reports whether there
// were any.
func (l *callLog) addRemote(entries []*callEntry) bool {
	if len(entries) == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.remote = append(l.remote, entries...)
	if n := len(l.remote) - callRing; n > 0 {
		l.remote = append([]*callEntry(nil), l.remote[n:]...)
	}
	return true
}

// changed reports whether this instance made entries since it last said
// so (the others' are told as they come).
func (l *callLog) changed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next.Load()
	ch := n != l.told
	l.told = n
	return ch
}

// entries returns the cluster's last entries, oldest first.
func (l *callLog) entries() []*callEntry {
	out := l.since(0, callRing)
	l.mu.Lock()
	out = append(out, l.remote...)
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	if len(out) > callDocMax {
		out = out[len(out)-callDocMax:]
	}
	return out
}

// logCall makes the entry of a routed call that started at start and took
// d, traced as traceID: one allocation; the client's names are read when it
// is shown.
func (st *stats) logCall(want uint32, traceID string, t *target, c caller, method string, start time.Time, d time.Duration, raw json.RawMessage, err error, o int) {
	if !st.log.admit(o >= outcomeFirstCode) {
		return
	}
	e := &callEntry{At: start.Add(d).UTC(), Instance: st.hub.id, Server: t.server, Method: method, Name: t.item,
		DurationMs: round3(float64(d) / 1e6), TraceID: traceID}
	switch cl := c.(type) {
	case *sessionCall:
		e.from = cl.s
		if cl.meta != nil && cl.meta.ClientInfo != nil {
			e.Client = cl.meta.ClientInfo.Name // a modern request names its client itself
		}
	case *inputCall:
		e.ClientID = cl.client()
		cl.mu.Lock()
		if cl.meta != nil && cl.meta.ClientInfo != nil {
			e.Client = cl.meta.ClientInfo.Name
		}
		cl.mu.Unlock()
	}
	e.outcome(o, err)
	if o == outcomeOK && method == mcp.MethodToolsCall && bytes.Contains(raw, []byte(`"isError"`)) {
		if v, ok := jsonrpc.Member(raw, "isError"); ok && string(v) == "true" {
			e.Outcome = "tool error"
		}
	}
	if want&watchArgs != 0 {
		e.Arguments = callArguments(method, t.params())
	}
	st.log.add(e)
}

// logRefused makes the entry of a call the hub refused.
func (st *stats) logRefused(traceID string, s *session, req *jsonrpc.Request, err error, o int) {
	if !st.log.admit(o >= outcomeFirstCode) {
		return
	}
	e := &callEntry{At: time.Now().UTC(), Instance: st.hub.id, Method: req.Method, from: s, TraceID: traceID}
	if meta, ok := jsonrpc.Member(req.Params, "_meta"); ok {
		if info, ok := jsonrpc.Member(meta, mcp.MetaClientInfo); ok {
			name, _ := jsonrpc.StringMember(info, "name") // a modern request names its client itself
			e.Client = cut(name, maxCallMessage)
		}
	}
	if req.Method == mcp.MethodToolsCall || req.Method == mcp.MethodPromptsGet {
		e.Name, _ = jsonrpc.StringMember(req.Params, "name")
		e.Name = cut(e.Name, maxCallMessage)
	}
	e.outcome(o, err)
	st.log.add(e)
}

// outcome fills the entry's outcome from the call's.
func (e *callEntry) outcome(o int, err error) {
	switch o {
	case outcomeOK:
		e.Outcome = "ok"
	case outcomeCancelled:
		e.Outcome = "cancelled"
	default:
		e.Outcome = "error"
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			e.Code, e.Message = int64(rpcErr.Code), cut(rpcErr.Message, maxCallMessage)
		} else {
			e.Code = int64(jsonrpc.CodeOf(err))
		}
	}
}

// callArguments returns what the call log shows of a call's params: a tool's
// or prompt's arguments, the rest of another method's params.
func callArguments(method string, params json.RawMessage) string {
	if method == mcp.MethodToolsCall || method == mcp.MethodPromptsGet {
		args, ok := jsonrpc.Member(params, "arguments")
		if !ok {
			return ""
		}
		params = args
	}
	return cut(string(params), maxCallArgument)
}

// cut shortens s to at most n bytes, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// callsDoc is the content of switchboard://calls.
type callsDoc struct {
	Instance  string       `json:"instance"`
	Arguments bool         `json:"arguments"` // whether entries carry their arguments
	Calls     []*callEntry `json:"calls"`     // oldest first
	// Skipped counts the calls the instances did not log, beyond
	// callLogPerTick (and callLogErrorsPerTick failed ones) an interval.
	Skipped int64 `json:"skipped"`
}

// callsJSON returns the call log; with args, with the arguments of the
// calls made while someone watched them.
func (st *stats) callsJSON(args bool) ([]byte, error) {
	entries := st.log.entries()
	doc := callsDoc{Instance: st.hub.id, Arguments: args, Calls: make([]*callEntry, 0, len(entries)), Skipped: st.log.skipped.Load()}
	for _, sum := range st.remoteSummaries(time.Now()) {
		doc.Skipped += sum.Counts.CallsSkipped
	}
	for _, e := range entries {
		e = e.shown(args)
		e.TraceURL = st.hub.traceLink(e.TraceID)
		doc.Calls = append(doc.Calls, e)
	}
	return json.Marshal(doc)
}
