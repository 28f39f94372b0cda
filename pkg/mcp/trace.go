package mcp

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// W3C Trace Context and Baggage in MCP. A message carries its trace
// context in params._meta under the W3C names, unprefixed (SEP-414, and
// OpenTelemetry's semantic conventions for MCP): that way it travels with
// the message over every transport, where an HTTP header would only
// describe the POST that carried it. This package only moves the values;
// it reads nothing of them (internal/tracing does, in the hub).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
	MetaBaggage     = "baggage"
)

// traceKeys are the trace context's keys, in _meta and (canonicalised) in
// HTTP headers.
var traceKeys = [...]string{MetaTraceparent, MetaTracestate, MetaBaggage}

// withTraceHeaders returns params with the trace context of a POST's
// headers in _meta: traceparent, tracestate and baggage, when the headers
// hold a traceparent and _meta holds none of its own (the message's own
// context wins over its POST's). params that are not an object, or whose
// _meta is not one, come back as they are; so do params when the headers
// hold no traceparent (or one that is not even UTF-8), without a copy.
func withTraceHeaders(params json.RawMessage, h http.Header) json.RawMessage {
	if tp := h.Get(MetaTraceparent); tp == "" || !utf8.ValidString(tp) {
		return params
	}
	obj := params
	if len(obj) == 0 || string(obj) == "null" {
		obj = json.RawMessage(`{}`)
	}
	if obj[0] != '{' {
		return params
	}
	meta, ok := jsonrpc.Member(obj, "_meta")
	switch {
	case !ok:
		meta = []byte(`{}`)
	case len(meta) == 0 || meta[0] != '{':
		return params
	}
	if _, ok := jsonrpc.Member(meta, MetaTraceparent); ok {
		return params
	}
	for _, k := range traceKeys {
		v := h.Get(k)
		if v == "" || !utf8.ValidString(v) {
			continue // W3C's values are ASCII: this one is malformed, and dropped
		}
		m, err := jsonrpc.SetMember(meta, k, jsonrpc.AppendString(nil, v))
		if err != nil {
			return params
		}
		meta = m
	}
	out, err := jsonrpc.SetMember(obj, "_meta", meta)
	if err != nil {
		return params
	}
	return out
}

// withTraceHeadersAll puts the trace context of a POST's headers into each
// request it carries (withTraceHeaders).
func withTraceHeadersAll(msgs []jsonrpc.Message, h http.Header) {
	if h.Get(MetaTraceparent) == "" {
		return
	}
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok {
			req.Params = withTraceHeaders(req.Params, h)
		}
	}
}

// setTraceHeaders sets the trace context headers of a POST from the
// _meta of the one request it carries (nil: none), when that holds a
// traceparent: a server that reads only headers continues the trace too.
func setTraceHeaders(h http.Header, req *jsonrpc.Request) {
	if req == nil {
		return
	}
	meta, ok := jsonrpc.Member(req.Params, "_meta")
	if !ok {
		return
	}
	if _, ok := jsonrpc.Member(meta, MetaTraceparent); !ok {
		return
	}
	for _, k := range traceKeys {
		if v, ok := jsonrpc.StringMember(meta, k); ok && plainHeaderValue(v) {
			h.Set(k, v)
		}
	}
}
