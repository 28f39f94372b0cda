package hub

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The messages between instances (cluster.go says what they do).

// Envelope kinds.
const (
	envHeartbeat    = "hb"   // registry: I am alive at this version
	envSnapshot     = "snap" // registry: my replicas
	envSnapPart     = "snpt" // registry: a part of a snapshot too large for one message
	envBye          = "bye"  // registry: I am leaving
	envHello        = "hi"   // registry: I (re)joined; everyone please send a snapshot
	envSync         = "sync" // inbox: please publish your snapshot
	envCall         = "call" // inbox: forward this request to your replica
	envSub          = "sub"  // inbox: keep this resource subscribed for me (or not)
	envResult       = "res"  // inbox: the answer to a call or sub
	envCancel       = "cxl"  // inbox: the caller gave up on a call
	envNotify       = "ntf"  // inbox: a notification about a call (progress, a log)
	envClientNotify = "cntf" // inbox: a notification for one of your clients, about no call (routing_elicitation.go)
	envSReq         = "sreq" // inbox: a server's request for the client of a call
	envSRes         = "sres" // inbox: the answer to a sreq
	envSCancel      = "scxl" // inbox: the server gave up on a sreq
	envHTTP         = "http" // inbox: serve this HTTP request of a session of yours (cluster_http.go)
	envHTTPRes      = "hres" // inbox: a part of the response to an http
	envResume       = "rsm"  // inbox: a modern client's retry of a call of yours that asked for input (routing_input.go)
	envTask         = "task" // inbox: tasks/update or tasks/cancel of a task whose call you hold (cluster_tasks.go)
)

// envelope is every message between instances.
type envelope struct {
	Kind string `json:"k"`
	From string `json:"f"`

	Version  uint64    `json:"v,omitempty"`
	Clients  int       `json:"n,omitempty"`
	Deaf     bool      `json:"d,omitempty"` // of a heartbeat: the sender is alive but not subscribed now
	Snapshot *snapshot `json:"s,omitempty"`
	Part     int       `json:"pt,omitempty"` // of a snapshot in parts: this one's index, and how many
	Parts    int       `json:"pts,omitempty"`
	Chunk    []byte    `json:"ch,omitempty"` // this part of the snapshot's JSON

	Call     uint64           `json:"c,omitempty"` // the sender's number for a call, sub or sreq
	Of       uint64           `json:"o,omitempty"` // for a sreq: the call it serves
	Client   string           `json:"cl,omitempty"`
	Owner    identity         `json:"ow,omitempty"` // of a resume or a task: the principal asking; of a call: its client's, when it negotiated tasks
	Replica  string           `json:"r,omitempty"`
	Server   string           `json:"sv,omitempty"` // the replica's server name, for errors
	Method   string           `json:"m,omitempty"`
	Params   json.RawMessage  `json:"p,omitempty"`
	Caps     *clientCaps      `json:"cap,omitempty"`
	LogLevel mcp.LoggingLevel `json:"ll,omitempty"` // of a call: the client's, for a modern server
	Trace    string           `json:"tc,omitempty"` // of a call, sreq or resume: its trace context (tracing.Pack), when traced
	Result   json.RawMessage  `json:"res,omitempty"`
	Error    *wireError       `json:"err,omitempty"`
	URI      string           `json:"u,omitempty"`
	Unsub    bool             `json:"x,omitempty"`
	Timeout  bool             `json:"to,omitempty"` // of a cancel: the call timed out (the server is told so)
	Body     string           `json:"b,omitempty"`  // on the wire: which of Params and Result follows the header
	HTTP     *httpPart        `json:"h,omitempty"`

	// Rename, of a call, is a tool's name in Params (a slice of them) that
	// RenameTo replaces as they are written (cluster.sendCallRenamed): the
	// params are copied once, into the envelope. It does not travel.
	Rename   []byte `json:"-"`
	RenameTo string `json:"-"`
}

// On the wire an envelope is its JSON header, and when it carries params or
// a result (usually most of its bytes), a newline and those, raw:
// encoding/json would re-scan them twice on the way out and twice on the way
// in, where this copies them once and validates them once. A header never
// holds a newline, which encoding/json always escapes.
const (
	bodyParams = "p"
	bodyResult = "res"
)

// encode returns the envelope's wire form.
func (env *envelope) encode() ([]byte, error) {
	head := *env
	var body []byte
	switch {
	case len(env.Params) > 0 && len(env.Result) > 0: // never sent; both stay in the header
	case len(env.Params) > 0:
		head.Body, head.Params, body = bodyParams, nil, env.Params
	case len(env.Result) > 0:
		head.Body, head.Result, body = bodyResult, nil, env.Result
	}
	b, err := head.appendHead(make([]byte, 0, env.sizeHint()))
	if err != nil || body == nil {
		return b, err
	}
	b = append(b, '\n')
	if env.Rename != nil && head.Body == bodyParams {
		if b, ok := jsonrpc.AppendSpliceString(b, body, env.Rename, env.RenameTo); ok {
			return b, nil
		}
		return nil, errors.New("envelope: the name to rename is not within the params")
	}
	return append(b, body...), nil
}

// sizeHint is a close upper estimate of the wire form's size, snapshots
// and HTTP parts aside: one allocation for the usual envelope.
func (env *envelope) sizeHint() int {
	n := 192 + len(env.From) + len(env.Client) + len(env.Owner) + len(env.Replica) + len(env.Server) + len(env.Method) + len(env.URI) + len(env.LogLevel) + len(env.Trace) +
		len(env.Params) + len(env.Result) + 4*len(env.Chunk)/3 + len(env.RenameTo)
	if env.Error != nil {
		n += len(env.Error.Message) + len(env.Error.Data)
	}
	return n
}

// decodeEnvelope reads an envelope's wire form. The params or result it
// returns share payload's memory.
func decodeEnvelope(payload []byte) (*envelope, bool) {
	head, body, hasBody := bytes.Cut(payload, []byte{'\n'})
	env := new(envelope)
	if !env.decodeHead(head) || env.From == "" {
		return nil, false
	}
	switch {
	case !hasBody && env.Body == "":
		return env, true
	case !hasBody || !jsonrpc.Valid(body):
		return nil, false
	case env.Body == bodyParams:
		env.Params = body
	case env.Body == bodyResult:
		env.Result = body
	default:
		return nil, false
	}
	return env, true
}

// The header is JSON as encoding/json writes the envelope (the field tags
// above, omitempty), written and read by hand: a call crosses two
// instances as four envelopes, and reflection over the struct cost more
// than the rest of their handling. The rare members that are objects of
// their own (a snapshot, an HTTP part) still go through encoding/json.

// appendHead appends the envelope's JSON to b. Raw members (params, a
// result, an error's data) are compacted, as encoding/json does, so that
// the header never holds a newline.
func (env *envelope) appendHead(b []byte) ([]byte, error) {
	b = append(b, `{"k":`...)
	b = jsonrpc.AppendString(b, env.Kind)
	b = append(b, `,"f":`...)
	b = jsonrpc.AppendString(b, env.From)
	b = appendUint(b, `,"v":`, env.Version)
	b = appendInt(b, `,"n":`, env.Clients)
	if env.Deaf {
		b = append(b, `,"d":true`...)
	}
	if env.Timeout {
		b = append(b, `,"to":true`...)
	}
	var err error
	if env.Snapshot != nil {
		if b, err = appendMarshal(b, `,"s":`, env.Snapshot); err != nil {
			return nil, err
		}
	}
	b = appendInt(b, `,"pt":`, env.Part)
	b = appendInt(b, `,"pts":`, env.Parts)
	if len(env.Chunk) > 0 {
		b = append(b, `,"ch":"`...)
		b = base64.StdEncoding.AppendEncode(b, env.Chunk)
		b = append(b, '"')
	}
	b = appendUint(b, `,"c":`, env.Call)
	b = appendUint(b, `,"o":`, env.Of)
	b = appendStr(b, `,"cl":`, env.Client)
	b = appendStr(b, `,"ow":`, string(env.Owner))
	b = appendStr(b, `,"r":`, env.Replica)
	b = appendStr(b, `,"sv":`, env.Server)
	b = appendStr(b, `,"m":`, env.Method)
	if b, err = appendRaw(b, `,"p":`, env.Params); err != nil {
		return nil, err
	}
	if env.Caps != nil {
		b = append(b, `,"cap":{`...)
		n := len(b)
		for _, f := range [...]struct {
			on   bool
			name string
		}{{env.Caps.Sampling, `"s":true`}, {env.Caps.SamplingTools, `"st":true`}, {env.Caps.ElicitForm, `"ef":true`},
			{env.Caps.ElicitURL, `"eu":true`}, {env.Caps.Roots, `"r":true`}, {env.Caps.Tasks, `"t":true`}} {
			if f.on {
				if len(b) > n {
					b = append(b, ',')
				}
				b = append(b, f.name...)
			}
		}
		b = append(b, '}')
	}
	b = appendStr(b, `,"ll":`, string(env.LogLevel))
	b = appendStr(b, `,"tc":`, env.Trace)
	if b, err = appendRaw(b, `,"res":`, env.Result); err != nil {
		return nil, err
	}
	if e := env.Error; e != nil {
		b = append(b, `,"err":{"code":`...)
		b = strconv.AppendInt(b, int64(e.Code), 10)
		b = append(b, `,"message":`...)
		b = jsonrpc.AppendString(b, e.Message)
		if b, err = appendRaw(b, `,"data":`, e.Data); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	b = appendStr(b, `,"u":`, env.URI)
	if env.Unsub {
		b = append(b, `,"x":true`...)
	}
	b = appendStr(b, `,"b":`, env.Body)
	if env.HTTP != nil {
		if b, err = appendMarshal(b, `,"h":`, env.HTTP); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendUint(b []byte, name string, v uint64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendUint(append(b, name...), v, 10)
}

func appendInt(b []byte, name string, v int) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, name...), int64(v), 10)
}

func appendStr(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return jsonrpc.AppendString(append(b, name...), v)
}

func appendRaw(b []byte, name string, v json.RawMessage) ([]byte, error) {
	if len(v) == 0 {
		return b, nil
	}
	buf := bytes.NewBuffer(append(b, name...))
	if err := json.Compact(buf, v); err != nil {
		return nil, fmt.Errorf("envelope member %s: %w", name[1:], err)
	}
	return buf.Bytes(), nil
}

func appendMarshal(b []byte, name string, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(append(b, name...), raw...), nil
}

// decodeHead reads the header as encoding/json would into the envelope,
// for the names this hub writes (exactly: encoding/json would also take
// them in other cases). A member of the wrong type makes it invalid.
func (env *envelope) decodeHead(head []byte) bool {
	if !jsonrpc.Valid(head) {
		return false
	}
	head = bytes.TrimSpace(head)
	if len(head) == 0 || head[0] != '{' {
		return false
	}
	ok := true
	for name, v := range jsonrpc.Members(head) {
		null := string(v) == "null" // encoding/json leaves the field as it was
		switch string(name) {
		case "k":
			ok = null || decodeKind(v, &env.Kind)
		case "f":
			ok = null || decodeInterned(v, &env.From)
		case "v":
			ok = null || decodeUint(v, &env.Version)
		case "n":
			ok = null || decodeInt(v, &env.Clients)
		case "d":
			ok = null || decodeBool(v, &env.Deaf)
		case "to":
			ok = null || decodeBool(v, &env.Timeout)
		case "s":
			ok = unmarshalMember(v, &env.Snapshot)
		case "pt":
			ok = null || decodeInt(v, &env.Part)
		case "pts":
			ok = null || decodeInt(v, &env.Parts)
		case "ch":
			ok = unmarshalMember(v, &env.Chunk)
		case "c":
			ok = null || decodeUint(v, &env.Call)
		case "o":
			ok = null || decodeUint(v, &env.Of)
		case "cl":
			ok = null || decodeInterned(v, &env.Client)
		case "ow":
			var owner string
			ok = null || decodeStr(v, &owner)
			if ok && !null {
				env.Owner = identity(owner)
			}
		case "r":
			ok = null || decodeInterned(v, &env.Replica)
		case "sv":
			ok = null || decodeInterned(v, &env.Server)
		case "m":
			ok = null || decodeInterned(v, &env.Method)
		case "p":
			env.Params = rawMember(v)
		case "cap":
			ok = decodeCaps(v, &env.Caps)
		case "ll":
			var level string
			ok = null || decodeInterned(v, &level)
			if ok && !null {
				env.LogLevel = mcp.LoggingLevel(level)
			}
		case "tc":
			ok = null || decodeStr(v, &env.Trace)
		case "res":
			env.Result = rawMember(v)
		case "err":
			ok = unmarshalMember(v, &env.Error)
		case "u":
			ok = null || decodeStr(v, &env.URI)
		case "x":
			ok = null || decodeBool(v, &env.Unsub)
		case "b":
			ok = null || decodeBody(v, &env.Body)
		case "h":
			ok = unmarshalMember(v, &env.HTTP)
		}
		if !ok {
			return false
		}
	}
	return true
}

// decodeKind reads a kind without allocating for the kinds there are.
func decodeKind(v []byte, kind *string) bool {
	for _, k := range kinds {
		if len(v) == len(k)+2 && string(v[1:len(v)-1]) == k && v[0] == '"' {
			*kind = k
			return true
		}
	}
	return decodeStr(v, kind)
}

var kinds = [...]string{envCall, envResult, envNotify, envCancel, envHeartbeat, envSReq, envSRes, envSCancel,
	envSub, envSync, envHTTP, envHTTPRes, envSnapshot, envSnapPart, envBye, envHello, envResume, envTask}

// decodeBody reads which member follows the header without allocating for
// the two there are.
func decodeBody(v []byte, s *string) bool {
	switch string(v) {
	case `"` + bodyParams + `"`:
		*s = bodyParams
	case `"` + bodyResult + `"`:
		*s = bodyResult
	default:
		return decodeStr(v, s)
	}
	return true
}

// decodeInterned reads a string that envelopes repeat (an instance's or a
// replica's id, a server's name, a method, a client's key) through
// interned.
func decodeInterned(v []byte, s *string) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	inner := v[1 : len(v)-1]
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return decodeStr(v, s) // escapes or more than ASCII: the long way
		}
	}
	*s = interned.get(inner)
	return true
}

// interned holds the strings envelopes repeat, so that reading one
// allocates none of them again. It is bounded: when full, it starts over.
var interned = internTable{m: map[string]string{}}

// maxInterned bounds the strings interned at once.
const maxInterned = 16384

type internTable struct {
	mu sync.RWMutex
	m  map[string]string
}

func (t *internTable) get(b []byte) string {
	t.mu.RLock()
	s, ok := t.m[string(b)]
	t.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	t.mu.Lock()
	if len(t.m) >= maxInterned {
		clear(t.m)
	}
	t.m[s] = s
	t.mu.Unlock()
	return s
}

func decodeStr(v []byte, s *string) bool {
	u, ok := jsonrpc.Unquote(v)
	if ok {
		*s = u
	}
	return ok
}

func decodeUint(v []byte, n *uint64) bool {
	u, err := strconv.ParseUint(string(v), 10, 64)
	if err == nil {
		*n = u
	}
	return err == nil
}

func decodeInt(v []byte, n *int) bool {
	i, err := strconv.ParseInt(string(v), 10, strconv.IntSize)
	if err == nil {
		*n = int(i)
	}
	return err == nil
}

func decodeBool(v []byte, b *bool) bool {
	switch string(v) {
	case "true":
		*b = true
	case "false":
		*b = false
	default:
		return false
	}
	return true
}

// rawMember is a raw member as encoding/json keeps a json.RawMessage: the
// literal null too.
func rawMember(v []byte) json.RawMessage {
	return json.RawMessage(v)
}

// decodeCaps reads a client's capabilities by hand: they travel with
// every call.
func decodeCaps(v []byte, caps **clientCaps) bool {
	if string(v) == "null" {
		*caps = nil
		return true
	}
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	var c clientCaps
	if *caps != nil {
		c = **caps
	}
	for name, f := range jsonrpc.Members(v) {
		var p *bool
		switch string(name) {
		case "s":
			p = &c.Sampling
		case "st":
			p = &c.SamplingTools
		case "ef":
			p = &c.ElicitForm
		case "eu":
			p = &c.ElicitURL
		case "r":
			p = &c.Roots
		case "t":
			p = &c.Tasks
		default:
			continue
		}
		if string(f) != "null" && !decodeBool(f, p) {
			return false
		}
	}
	*caps = c.shared()
	return true
}

// unmarshalMember decodes a member that is an object of its own (or the
// base64 of a chunk) with encoding/json.
func unmarshalMember(v []byte, into any) bool {
	return json.Unmarshal(v, into) == nil
}

// wireError is a JSON-RPC error object in an envelope.
type wireError struct {
	Code    jsonrpc.Code    `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func toWire(err error) *wireError {
	e := jsonrpc.ErrorOf(err)
	return &wireError{Code: e.Code, Message: e.Message, Data: e.Data}
}

func (w *wireError) err() error {
	return &jsonrpc.Error{Code: w.Code, Message: w.Message, Data: w.Data}
}

// snapshot is what one instance offers.
type snapshot struct {
	Addr      string        `json:"addr,omitempty"`
	StartedAt time.Time     `json:"startedAt"`
	Replicas  []replicaSnap `json:"replicas"`
	Departed  []departure   `json:"departed,omitempty"`
	// Reserved are the places this instance keeps for servers that left
	// (registry_departures.go), for instances that did not see them leave.
	Reserved []*reservation `json:"reserved,omitempty"`
}

type replicaSnap struct {
	ID              string                      `json:"id"`
	Name            string                      `json:"name"`
	ServerInfo      mcp.Implementation          `json:"serverInfo"`
	ProtocolVersion string                      `json:"protocolVersion"`
	ConnectedAt     time.Time                   `json:"connectedAt"`
	Since           time.Time                   `json:"since"`
	Owner           string                      `json:"owner"`
	Capabilities    json.RawMessage             `json:"capabilities,omitempty"`
	Instructions    string                      `json:"instructions,omitempty"`
	Leased          bool                        `json:"leased,omitempty"`
	Lists           [numKinds][]json.RawMessage `json:"lists"`
}

// outcome returns what an answer envelope carries.
func (env *envelope) outcome() (json.RawMessage, error) {
	if env.Error != nil {
		return nil, env.Error.err()
	}
	return env.Result, nil
}
