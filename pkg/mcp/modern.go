package mcp

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// The 2026-07-28 revision ("modern" here) has no session: every request
// describes itself in params._meta (its protocol version, the client's
// capabilities, who the client is, the log level it wants), every result
// says what it is (resultType), lists and reads say how long they may be
// cached, and a server that needs input from the client (sampling,
// elicitation, roots) answers with an InputRequiredResult that the client
// fulfils and retries. subscriptions/listen replaces resources/subscribe and
// the list_changed notifications of a session.

// ModernVersion is the stateless revision.
const ModernVersion = "2026-07-28"

// AllVersions lists every revision the hub speaks: the session-based ones,
// oldest first, then the stateless one. server/discover answers it.
var AllVersions = append(slices.Clone(SupportedVersions), ModernVersion)

// IsModernVersion reports whether v names the stateless revision or one
// after it: versions compare as strings, as the official SDKs compare them,
// so a later date, or anything sorting after the digits (such as
// "v999.0.0"), is not session-based. Whether it is supported is another
// question (CheckModernVersion).
func IsModernVersion(v string) bool { return v >= ModernVersion }

// Methods and notifications of the stateless revision.
const (
	MethodServerDiscover                  = "server/discover"
	MethodSubscriptionsListen             = "subscriptions/listen"
	NotificationSubscriptionsAcknowledged = "notifications/subscriptions/acknowledged"
)

// Keys of a modern request's, result's or notification's _meta.
const (
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Result types.
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
)

// Cache scopes of a cacheable result: public ones may be shared across
// authorization contexts, private ones may not.
const (
	CachePublic  = "public"
	CachePrivate = "private"
)

// Error codes of the stateless revision.
const (
	CodeHeaderMismatch             jsonrpc.Code = -32020
	CodeMissingClientCapability    jsonrpc.Code = -32021
	CodeUnsupportedProtocolVersion jsonrpc.Code = -32022
)

// RequestMeta is what a modern request says of itself in params._meta.
type RequestMeta struct {
	ProtocolVersion string
	// Capabilities are the client's capabilities for this request only.
	Capabilities ClientCapabilities
	// RawCapabilities is the capabilities object as sent.
	RawCapabilities json.RawMessage
	ClientInfo      *Implementation // nil when not sent (it is optional)
	// LogLevel is the least severe log level the client wants for this
	// request; "" for none: then no notifications/message is sent.
	LogLevel LoggingLevel
	// ProgressToken is _meta's progressToken as sent (nil for none), read
	// in the same pass as the rest.
	ProgressToken json.RawMessage
}

// IsModernRequest reports whether params carry
// _meta["io.modelcontextprotocol/protocolVersion"]: a request of the
// stateless revision, which needs no session.
func IsModernRequest(params json.RawMessage) bool {
	_, ok := metaMember(params, MetaProtocolVersion)
	return ok
}

// ParseRequestMeta reads a modern request's _meta. Missing or malformed
// members are invalid params (-32602), as the revision asks; the version is
// read but not judged (see CheckModernVersion).
func ParseRequestMeta(params json.RawMessage) (*RequestMeta, error) {
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta is required in protocol version %s", ModernVersion)
	}
	// Its members read in one pass; of a name given twice the last counts,
	// as in encoding/json.
	var version, caps, info, level, token []byte
	for name, v := range jsonrpc.Members(meta) {
		switch string(name) {
		case MetaProgressToken:
			token = v
		case MetaProtocolVersion:
			version = v
		case MetaClientCapabilities:
			caps = v
		case MetaClientInfo:
			info = v
		case MetaLogLevel:
			level = v
		}
	}
	m := &RequestMeta{ProgressToken: token}
	v, ok := unquoteVersion(version)
	if !ok || v == "" {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be a protocol version", MetaProtocolVersion)
	}
	m.ProtocolVersion = v
	if len(caps) == 0 || caps[0] != '{' || !isEmptyObject(caps) && json.Unmarshal(caps, &m.Capabilities) != nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be an object", MetaClientCapabilities)
	}
	m.RawCapabilities = caps
	if info != nil && string(info) != "null" {
		m.ClientInfo = &Implementation{}
		if json.Unmarshal(info, m.ClientInfo) != nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be an Implementation", MetaClientInfo)
		}
	}
	if level != nil && string(level) != "null" {
		l, ok := jsonrpc.Unquote(level)
		if !ok || LoggingLevel(l).Severity() < 0 {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params._meta[%q] must be a logging level", MetaLogLevel)
		}
		m.LogLevel = LoggingLevel(l)
	}
	return m, nil
}

// unquoteVersion returns the protocol version v, a raw JSON value, states:
// the one nearly every request states without a copy of it.
func unquoteVersion(v []byte) (string, bool) {
	if string(v) == `"`+ModernVersion+`"` {
		return ModernVersion, true
	}
	return jsonrpc.Unquote(v)
}

// isEmptyObject reports whether obj, an object, has no members: a client
// that declares no capabilities needs no decoding of them.
func isEmptyObject(obj []byte) bool {
	obj = bytes.TrimSpace(obj)
	return len(obj) >= 2 && obj[0] == '{' && obj[len(obj)-1] == '}' && len(bytes.TrimSpace(obj[1:len(obj)-1])) == 0
}

// Admits reports whether the request wants a log message of level: only
// when it set a log level, and at that level or above.
func (m *RequestMeta) Admits(level LoggingLevel) bool {
	return m.LogLevel != "" && level.Severity() >= m.LogLevel.Severity()
}

// CheckModernVersion answers a modern request whose version this package
// does not speak with -32022, naming the versions it does.
func CheckModernVersion(v string) error {
	if v == ModernVersion {
		return nil
	}
	return ErrUnsupportedVersion(v)
}

// ErrUnsupportedVersion is -32022 for a request of version requested.
func ErrUnsupportedVersion(requested string) *jsonrpc.Error {
	return (&jsonrpc.Error{Code: CodeUnsupportedProtocolVersion, Message: "Unsupported protocol version: " + requested}).
		WithData(map[string]any{"requested": requested, "supported": AllVersions})
}

// ErrHeaderMismatch is -32020: an HTTP header disagrees with the body.
func ErrHeaderMismatch(format string, args ...any) *jsonrpc.Error {
	return jsonrpc.NewError(CodeHeaderMismatch, format, args...)
}

// ErrMissingCapability is -32021: serving the request needs a capability
// of the client's (e.g. "sampling") that the request did not declare.
func ErrMissingCapability(capability string) *jsonrpc.Error {
	return (&jsonrpc.Error{Code: CodeMissingClientCapability,
		Message: "Missing required client capability: " + capability}).
		WithData(map[string]any{"requiredCapabilities": map[string]any{capability: map[string]any{}}})
}

// HTTPStatusOf returns the HTTP status that a modern request's error answer
// goes with, on the Streamable HTTP transport: 404 for an unknown method,
// 400 for a request the server will not serve as sent, 200 otherwise (the
// error is the answer).
func HTTPStatusOf(code jsonrpc.Code) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return 404
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams,
		CodeHeaderMismatch, CodeMissingClientCapability, CodeUnsupportedProtocolVersion:
		return 400
	}
	return 200
}

// DiscoverResult answers server/discover.
type DiscoverResult struct {
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      ServerCapabilities `json:"capabilities"`
	Instructions      string             `json:"instructions,omitempty"`
	ResultType        string             `json:"resultType"`
	TTLMs             int64              `json:"ttlMs"`
	CacheScope        string             `json:"cacheScope"`
	Meta              Meta               `json:"_meta,omitempty"`
}

// SubscriptionFilter says which notifications a subscriptions/listen
// stream wants.
type SubscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs are the tasks whose notifications/tasks the stream wants
	// (the tasks extension), of a request that declared it. A Server
	// acknowledges none: clients poll tasks/get.
	TaskIDs []string `json:"taskIds,omitempty"`
}

// ListenParams open a subscriptions/listen stream.
type ListenParams struct {
	Notifications *SubscriptionFilter `json:"notifications"`
	Meta          Meta                `json:"_meta,omitempty"`
}

// InputRequest is one request of a server's for its client, carried in an
// InputRequiredResult: sampling/createMessage, elicitation/create or
// roots/list with its params.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// InputRequiredResult answers tools/call, prompts/get or resources/read of a
// modern client when the server needs input first: the client fulfils
// InputRequests and sends the request again with InputResponses (by the
// same keys) and RequestState.
type InputRequiredResult struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	RequestState  string                  `json:"requestState,omitempty"`
	Meta          Meta                    `json:"_meta,omitempty"`
}

// MayRequireInput reports whether a method's answer may be an
// InputRequiredResult.
func MayRequireInput(method string) bool {
	return method == MethodToolsCall || method == MethodPromptsGet || method == MethodResourcesRead
}

// ResultTypeOf returns a result's resultType ("complete" when absent, as
// the revision says of results from earlier ones).
func ResultTypeOf(result json.RawMessage) string {
	if t, ok := jsonrpc.StringMember(result, "resultType"); ok {
		return t
	}
	return ResultComplete
}

// Decorate returns a modern answer's result with what the revision asks of
// every result: resultType ("complete" unless it has one), and for
// cacheable results (ttl >= 0) ttlMs and cacheScope unless it has them. A
// result that is not an object is returned as it is.
func Decorate(result json.RawMessage, ttl int64, scope string) json.RawMessage {
	if len(result) == 0 {
		result = json.RawMessage(`{}`)
	}
	// One pass reads what is there; what is missing is added in one copy.
	var hasType, hasTTL, hasScope bool
	resultType := ResultComplete
	for key, v := range jsonrpc.Members(result) {
		switch string(key) {
		case "resultType":
			hasType = true
			resultType = ResultComplete // as ResultTypeOf reads it: the last one, when a string
			if t, ok := jsonrpc.Unquote(v); ok {
				resultType = t
			}
		case "ttlMs":
			hasTTL = true
		case "cacheScope":
			hasScope = true
		}
	}
	var add [3]member
	n := 0
	if !hasType {
		add[n] = member{"resultType", []byte(`"` + ResultComplete + `"`)}
		n++
	}
	if ttl >= 0 && resultType == ResultComplete {
		if !hasTTL {
			add[n] = member{"ttlMs", strconv.AppendInt(nil, ttl, 10)}
			n++
		}
		if !hasScope {
			add[n] = member{"cacheScope", jsonrpc.AppendString(nil, scope)}
			n++
		}
	}
	return appendMembers(result, add[:n])
}

// member is a name and a raw value, for appendMembers.
type member struct {
	name  string
	value []byte
}

// appendMembers returns a copy of the object obj with ms added last (none
// of them is in it), or obj itself when there is nothing to add or it is
// not an object.
func appendMembers(orig []byte, ms []member) []byte {
	obj := bytes.TrimSpace(orig)
	if len(ms) == 0 || len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return orig
	}
	body := bytes.TrimSpace(obj[1 : len(obj)-1])
	size := len(obj)
	for _, m := range ms {
		size += len(m.name) + len(m.value) + 4
	}
	out := make([]byte, 0, size)
	out = append(out, '{')
	out = append(out, body...)
	for i, m := range ms {
		if i > 0 || len(body) > 0 {
			out = append(out, ',')
		}
		out = jsonrpc.AppendString(out, m.name)
		out = append(out, ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}

// IsCacheable reports whether a method's result carries ttlMs and
// cacheScope in the stateless revision.
func IsCacheable(method string) bool {
	switch method {
	case MethodServerDiscover, MethodToolsList, MethodPromptsList, MethodResourcesList,
		MethodResourcesTemplatesList, MethodResourcesRead:
		return true
	}
	return false
}
