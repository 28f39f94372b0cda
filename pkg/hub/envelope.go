package hub

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The messages between instances (cluster.go says what they do).

// Envelope kinds.
const (
	kindHeartbeat = "hb"   // registry: I am alive at this version
	kindSnapshot  = "snap" // registry: my replicas
	kindSnapPart  = "snpt" // registry: a part of a snapshot too large for one message
	kindBye       = "bye"  // registry: I am leaving
	kindHello     = "hi"   // registry: I (re)joined; everyone please send a snapshot
	kindSync      = "sync" // inbox: please publish your snapshot
	kindCall      = "call" // inbox: forward this request to your replica
	kindSub       = "sub"  // inbox: keep this resource subscribed for me (or not)
	kindResult    = "res"  // inbox: the answer to a call or sub
	kindCancel    = "cxl"  // inbox: the caller gave up on a call
	kindNotify    = "ntf"  // inbox: a notification about a call (progress, a log)
	kindSReq      = "sreq" // inbox: a server's request for the client of a call
	kindSRes      = "sres" // inbox: the answer to a sreq
	kindSCancel   = "scxl" // inbox: the server gave up on a sreq
	kindHTTP      = "http" // inbox: serve this HTTP request of a session of yours (http_relay.go)
	kindHTTPRes   = "hres" // inbox: a part of the response to an http
	kindResume    = "rsm"  // inbox: a modern client's retry of a call of yours that asked for input (input.go)
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
	Replica  string           `json:"r,omitempty"`
	Server   string           `json:"sv,omitempty"` // the replica's server name, for errors
	Method   string           `json:"m,omitempty"`
	Params   json.RawMessage  `json:"p,omitempty"`
	Caps     *clientCaps      `json:"cap,omitempty"`
	LogLevel mcp.LoggingLevel `json:"ll,omitempty"` // of a call: the client's, for a modern server
	Result   json.RawMessage  `json:"res,omitempty"`
	Error    *wireError       `json:"err,omitempty"`
	URI      string           `json:"u,omitempty"`
	Unsub    bool             `json:"x,omitempty"`
	Body     string           `json:"b,omitempty"` // on the wire: which of Params and Result follows the header
	HTTP     *httpPart        `json:"h,omitempty"`
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
	b, err := json.Marshal(&head)
	if err != nil || body == nil {
		return b, err
	}
	out := make([]byte, 0, len(b)+1+len(body))
	out = append(append(b, '\n'), body...)
	return out, nil
}

// decodeEnvelope reads an envelope's wire form. The params or result it
// returns share payload's memory.
func decodeEnvelope(payload []byte) (*envelope, bool) {
	head, body, hasBody := bytes.Cut(payload, []byte{'\n'})
	env := new(envelope)
	if json.Unmarshal(head, env) != nil || env.From == "" {
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
	// (departures.go), for instances that did not see them leave.
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
	Lists           [numKinds][]json.RawMessage `json:"lists"`
}

// outcome returns what an answer envelope carries.
func (env *envelope) outcome() (json.RawMessage, error) {
	if env.Error != nil {
		return nil, env.Error.err()
	}
	return env.Result, nil
}
