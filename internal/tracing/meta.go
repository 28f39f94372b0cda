package tracing

import (
	"bytes"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// The keys of W3C trace context and baggage, as HTTP headers name them and
// as MCP's params._meta carries them (unprefixed: SEP-414 reserves these
// three names, where every other _meta key is DNS-prefixed).
const (
	keyTraceparent = "traceparent"
	keyTracestate  = "tracestate"
	keyBaggage     = "baggage"
)

// fields is the trace context of one message as text: the three W3C keys.
// It is the propagators' carrier for _meta, the envelope and (through
// propagation.HeaderCarrier) nothing else.
type fields struct {
	traceparent, tracestate, baggage string
}

// Get implements propagation.TextMapCarrier.
func (f *fields) Get(key string) string {
	switch key {
	case keyTraceparent:
		return f.traceparent
	case keyTracestate:
		return f.tracestate
	case keyBaggage:
		return f.baggage
	}
	return ""
}

// Set implements propagation.TextMapCarrier; other keys are not kept.
func (f *fields) Set(key, value string) {
	switch key {
	case keyTraceparent:
		f.traceparent = value
	case keyTracestate:
		f.tracestate = value
	case keyBaggage:
		f.baggage = value
	}
}

// Keys implements propagation.TextMapCarrier.
func (f *fields) Keys() []string {
	return []string{keyTraceparent, keyTracestate, keyBaggage}
}

func (f *fields) empty() bool { return *f == fields{} }

// isTraceKey reports whether name is one of the three keys this package
// owns in _meta.
func isTraceKey(name []byte) bool {
	switch string(name) {
	case keyTraceparent, keyTracestate, keyBaggage:
		return true
	}
	return false
}

// metaFields reads the trace keys of params._meta from raw params, in one
// pass over _meta and without decoding anything else. A key that is not a
// JSON string is taken as absent.
func metaFields(params []byte) fields {
	var f fields
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok {
		return f
	}
	for name, v := range jsonrpc.Members(meta) {
		if !isTraceKey(name) {
			continue
		}
		if s, ok := jsonrpc.Unquote(v); ok {
			f.Set(string(name), s)
		}
	}
	return f
}

// withMetaFields returns params with f written into params._meta: the three
// trace keys of _meta are replaced by those f holds (a key f lacks is
// removed, so that a stale tracestate never rides with a new traceparent),
// every other member of _meta and of params is kept as it was. _meta is
// created when absent, and params too when empty or null. Params that are
// not an object, or whose _meta is not one, come back unchanged: the trace
// context is dropped rather than anything the sender wrote.
func withMetaFields(params []byte, f fields) []byte {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return params
	}
	old, had := jsonrpc.Member(trimmed, "_meta")
	meta := make([]byte, 0, len(old)+160)
	meta = append(meta, '{')
	if had {
		if t := bytes.TrimSpace(old); len(t) == 0 || t[0] != '{' {
			return params
		}
		for name, v := range jsonrpc.Members(old) {
			if isTraceKey(name) {
				continue
			}
			meta = appendMember(meta, string(name), v)
		}
	}
	meta = appendStringMember(meta, keyTraceparent, f.traceparent)
	meta = appendStringMember(meta, keyTracestate, f.tracestate)
	meta = appendStringMember(meta, keyBaggage, f.baggage)
	meta = append(meta, '}')
	out, err := jsonrpc.SetMember(trimmed, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}

// appendMember appends "name":value to the members of an object being
// written (whose '{' is already in b).
func appendMember(b []byte, name string, value []byte) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = jsonrpc.AppendString(b, name)
	b = append(b, ':')
	return append(b, value...)
}

// appendStringMember is appendMember for a string value; an empty one is
// left out.
func appendStringMember(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = jsonrpc.AppendString(b, name)
	b = append(b, ':')
	return jsonrpc.AppendString(b, value)
}
