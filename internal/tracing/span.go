package tracing

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Kind is what a span stands for in the hub: it sets the span's
// OpenTelemetry kind, its name, and where its parent comes from.
type Kind uint8

// The spans the hub makes. Received, Sent and Hop follow OpenTelemetry's MCP
// semantic conventions (server and client spans named "{method} {target}");
// the others are the hub's own steps inside a call, named by the step and
// the method.
const (
	// Received is a request or notification a peer sent to the hub: a
	// client's request, or a server's request back to its client (sampling,
	// elicitation, roots). Span kind SERVER. Its parent is the trace context
	// of Op.Params' _meta when that is valid, linked to the context ctx
	// already held (an HTTP request's headers); else ctx's.
	Received Kind = iota
	// Sent is a request the hub sends: a call forwarded to a server, or a
	// server's request passed on to a client. Span kind CLIENT; InjectMeta
	// with the context Start returns writes it into the request's _meta.
	Sent
	// Route is the routing decision: which server, replica or instance
	// serves a call. Span kind INTERNAL.
	Route
	// CrossOut is a call leaving for another instance through the broker
	// (Op.Instance names it); Pack gives the context for the envelope.
	// Span kind CLIENT.
	CrossOut
	// CrossIn is a call from another instance, started from the context
	// Unpack read from its envelope. Span kind SERVER.
	CrossIn
	// InputRound is one input-request round of the translation between
	// eras (Op.Round counts them from 1). Span kind INTERNAL.
	InputRound
	// Publish is one update published to subscribers (one span per update,
	// never one per delivery). It starts a trace of its own, linked to the
	// trace context of Op.Params' _meta when the sender gave one. Span kind
	// PRODUCER.
	Publish
	// Hop is hub connect's hop to its child process or upstream hub. Span
	// kind CLIENT; InjectMeta or InjectHeaders carries it on.
	Hop
	numKinds
)

// kinds is the table Start reads: a Kind's span kind and the prefix of its
// name ("" for the conventions' "{method} {target}").
var kinds = [numKinds]struct {
	span   trace.SpanKind
	prefix string
	target bool // the name ends with the tool or prompt name
}{
	Received:   {trace.SpanKindServer, "", true},
	Sent:       {trace.SpanKindClient, "", true},
	Route:      {trace.SpanKindInternal, "route ", false},
	CrossOut:   {trace.SpanKindClient, "send ", true},
	CrossIn:    {trace.SpanKindServer, "receive ", true},
	InputRound: {trace.SpanKindInternal, "input round ", false},
	Publish:    {trace.SpanKindProducer, "publish ", false},
	Hop:        {trace.SpanKindClient, "", true},
}

// Network is the transport a message came or went by, recorded as
// network.protocol.name and network.transport.
type Network uint8

// The hub's transports.
const (
	NetworkUnknown   Network = iota
	NetworkWebSocket         // websocket over tcp
	NetworkHTTP              // Streamable HTTP: http over tcp
	NetworkStdio             // a child's standard input and output: pipe
	NetworkBroker            // the broker between instances: redis over tcp
)

// Op describes the MCP message a span is about. Every field is optional
// but Method; only what the caller already has is passed, and nothing of
// it is read while tracing is off. Arguments, results and tokens are never
// recorded.
type Op struct {
	// Method is the JSON-RPC method: mcp.method.name.
	Method string
	// ID is the request's id: jsonrpc.request.id (none for a notification).
	ID jsonrpc.ID
	// Params are the message's raw params. The tool or prompt name
	// (gen_ai.tool.name, gen_ai.prompt.name) or resource URI
	// (mcp.resource.uri) is read from them for the methods that carry one,
	// and for Received and Publish the trace context of their _meta.
	Params []byte
	// Session is the MCP session id: mcp.session.id.
	Session string
	// Client is the hub's id of the client connection (a WebSocket has no
	// MCP session id): switchboard.client.id.
	Client string
	// Protocol is the MCP protocol version: mcp.protocol.version.
	Protocol string
	// Network is the transport: network.protocol.name, network.transport.
	Network Network
	// Server is the name of the MCP server in the hub: switchboard.server.name.
	Server string
	// Replica is the server connection that serves the call:
	// switchboard.replica.id.
	Replica string
	// Instance is the other instance of a crossing or routing decision:
	// switchboard.instance.peer.
	Instance string
	// Round is the number of an InputRound: switchboard.input.round.
	Round int
}

// Attribute names beyond those of the semantic conventions (semconv.go).
const (
	attrServerName   = attribute.Key("switchboard.server.name")
	attrClientID     = attribute.Key("switchboard.client.id")
	attrReplicaID    = attribute.Key("switchboard.replica.id")
	attrInstancePeer = attribute.Key("switchboard.instance.peer")
	attrInputRound   = attribute.Key("switchboard.input.round")
)

// maxTarget bounds every string recorded from a message (a name, a URI, an
// id, an error message): they come from peers, and a span name is no place
// for a megabyte.
const maxTarget = 256

// Span is a span the hub started, or nothing when tracing is off or the
// trace is not sampled: its methods are then free. The zero Span is such a
// nothing. A Span is ended once, by End or EndWith, by the goroutine that
// holds it.
type Span struct {
	s *span // nil when nothing is recorded
}

// Start starts a span of kind k about op, a child of ctx's span (for
// Received, of op's _meta when it holds a valid traceparent), and returns
// the context carrying it with the Span. With tracing off it returns ctx
// and the zero Span, having read nothing of op: an atomic load is all it
// costs.
func (t *Tracing) Start(ctx context.Context, k Kind, op Op) (context.Context, Span) {
	if !t.Enabled() {
		return ctx, Span{}
	}
	return t.start(ctx, k, op)
}

func (t *Tracing) start(ctx context.Context, k Kind, op Op) (context.Context, Span) {
	if k >= numKinds || t.queue == nil {
		return ctx, Span{}
	}
	kd := kinds[k]
	var links []trace.Link
	switch k {
	case Received:
		ambient := trace.SpanContextFromContext(ctx)
		if mctx := extractMeta(ctx, op.Params); trace.SpanContextFromContext(mctx).IsValid() {
			ctx = mctx
			if ambient.IsValid() && !ambient.Equal(trace.SpanContextFromContext(mctx)) {
				links = []trace.Link{{SpanContext: ambient}}
			}
		}
	case Publish:
		if sc := trace.SpanContextFromContext(extractMeta(context.Background(), op.Params)); sc.IsValid() {
			links = []trace.Link{{SpanContext: sc}}
		}
	}
	op.Method = clean(op.Method) // a peer's, for a method the hub refuses
	ctx, s := t.begin(ctx, kd.span, op.Method, k == Publish, links)
	if s == nil {
		return ctx, Span{} // not sampled: nothing of op is read
	}
	// The span keeps op, less its params, and the one string it reads of
	// them: its attributes are made from these when it is exported, off
	// the call path (eachAttribute).
	op.Params, s.subject = nil, op.subject()
	s.op, s.k, s.prefix = op, k, kd.prefix
	if kd.target && (op.Method == "tools/call" || op.Method == "prompts/get") {
		s.target = s.subject // the conventions' "{method} {target}"
	}
	return ctx, Span{s: s}
}

// subject reads what op's method is about from its params: the tool or
// prompt name, or the resource URI; "" for other methods.
func (op Op) subject() string {
	switch op.Method {
	case "tools/call", "prompts/get":
		return member(op.Params, "name")
	case "resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated":
		return member(op.Params, "uri")
	}
	return ""
}

// eachAttribute calls fn with each of the span's attributes, in the names of
// the semantic conventions (semconv.go) and the hub's own; strings from
// peers cleaned (clean).
func (s *span) eachAttribute(fn func(attribute.KeyValue)) {
	op := &s.op
	str := func(k attribute.Key, v string) {
		if v != "" {
			fn(k.String(clean(v)))
		}
	}
	fn(attrMCPMethod.String(op.Method))
	switch op.Method {
	case "tools/call":
		if s.subject != "" {
			fn(attrToolName.String(s.subject))
			fn(attrOperation.String("execute_tool"))
		}
	case "prompts/get":
		str(attrPromptName, s.subject)
	default:
		str(attrResourceURI, s.subject)
	}
	if op.ID.IsValid() && !op.ID.IsNull() {
		str(attrRequestID, op.ID.Text()) // a string unquoted, a number's literal text
	}
	str(attrSessionID, op.Session)
	str(attrClientID, op.Client)
	str(attrMCPProtocol, op.Protocol)
	for _, kv := range op.Network.attributes() {
		fn(kv)
	}
	str(attrServerName, op.Server)
	str(attrReplicaID, op.Replica)
	str(attrInstancePeer, op.Instance)
	if s.k == InputRound {
		fn(attrInputRound.Int(op.Round))
	}
	if s.errType != "" {
		fn(attrErrorType.String(s.errType))
		if s.errType != toolErrorType {
			fn(attrStatusCode.String(s.errType))
		}
	}
	for _, kv := range s.extra {
		fn(kv)
	}
}

// member returns a string member of params, cleaned.
func member(params []byte, key string) string {
	s, _ := jsonrpc.StringMember(params, key)
	return clean(s)
}

// clean makes a string from a peer fit for a span: at most maxTarget bytes,
// cut between characters, and valid UTF-8. OTLP's protobuf encoding refuses
// anything else, and would drop the whole batch the span is in.
func clean(s string) string {
	if len(s) > maxTarget {
		cut := maxTarget
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}

var networks = [...][]attribute.KeyValue{
	NetworkUnknown:   nil,
	NetworkWebSocket: {attrNetProtocol.String("websocket"), attrNetTransport.String("tcp")},
	NetworkHTTP:      {attrNetProtocol.String("http"), attrNetTransport.String("tcp")},
	NetworkStdio:     {attrNetTransport.String("pipe")},
	NetworkBroker:    {attrNetProtocol.String("redis"), attrNetTransport.String("tcp")},
}

func (n Network) attributes() []attribute.KeyValue {
	if int(n) >= len(networks) {
		return nil
	}
	return networks[n]
}

// Recording reports whether the span records anything: false with tracing
// off or for a call the sampler left out. Work done only for a span's sake
// can be skipped when it is false.
func (s Span) Recording() bool { return s.s != nil && s.s.IsRecording() }

// TraceID returns the span's trace id (32 hex digits) when it is sampled,
// that is when the trace will be found in the backend; else "". The call
// log shows it.
func (s Span) TraceID() string {
	if s.s == nil {
		return ""
	}
	return s.traceID()
}

func (s Span) traceID() string {
	return sampledID(s.s.sc)
}

// TraceID returns the trace id of the span ctx carries when it is sampled,
// else "" (and "" with tracing off, at the cost of an atomic load): what
// the call log shows, and the exemplars of the hub's histograms hold.
func (t *Tracing) TraceID(ctx context.Context) string {
	if !t.Enabled() || ctx == nil {
		return ""
	}
	return sampledID(trace.SpanContextFromContext(ctx))
}

func sampledID(sc trace.SpanContext) string {
	if !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// Describe lets fn fill in what the span's Op lacked, when the span
// records: what costs something to find (a lock to take) is then found for
// recorded spans only. Params are not read after Start.
func (s Span) Describe(fn func(op *Op)) {
	if s.s != nil {
		fn(&s.s.op)
	}
}

// Fail records that the operation failed with err: error.type and
// rpc.response.status_code are its JSON-RPC code (jsonrpc.ErrorOf's: an
// error without a code counts as an internal error, and its text is not
// recorded), and the span's status is an error with the JSON-RPC message.
func (s Span) Fail(err error) {
	if s.s != nil && err != nil {
		s.fail(err)
	}
}

func (s Span) fail(err error) {
	e := jsonrpc.ErrorOf(err)
	s.s.errType = strconv.FormatInt(int64(e.Code), 10)
	s.s.SetStatus(codes.Error, clean(e.Message))
}

// ToolError records a tool result with isError set: error.type is
// "tool_error", as the conventions say, and the status an error.
func (s Span) ToolError() {
	if s.s != nil {
		s.toolError()
	}
}

func (s Span) toolError() {
	s.s.errType = toolErrorType
	s.s.SetStatus(codes.Error, toolErrorType)
}

// toolErrorType is error.type of a tool result with isError, as the
// conventions say.
const toolErrorType = "tool_error"

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// EndWith ends the span with the outcome of its request: Fail with err when
// it is not nil, else ToolError when result (raw JSON) is a tool result
// with isError true.
func (s Span) EndWith(result []byte, err error) {
	if s.s != nil {
		s.endWith(result, err)
	}
}

func (s Span) endWith(result []byte, err error) {
	switch {
	case err != nil:
		s.fail(err)
	case isToolError(result):
		s.toolError()
	}
	s.s.End()
}

// isToolError reports whether result is a tool result with isError true. A
// search for the name rules out most results (an escape might spell it:
// those are walked anyway) without walking them member by member, as each
// of a call's spans would.
func isToolError(result []byte) bool {
	if !bytes.Contains(result, []byte("isError")) && !bytes.Contains(result, []byte(`\u`)) {
		return false
	}
	v, ok := jsonrpc.Member(result, "isError")
	return ok && string(v) == "true"
}
