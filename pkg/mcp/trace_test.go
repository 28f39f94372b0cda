package mcp

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func traceHeader(tp, ts, bg string) http.Header {
	h := http.Header{}
	for k, v := range map[string]string{MetaTraceparent: tp, MetaTracestate: ts, MetaBaggage: bg} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

// A POST's trace headers go into _meta of a request without a traceparent
// of its own; everything else is kept as it was sent.
func TestWithTraceHeaders(t *testing.T) {
	full := traceHeader(testTraceparent, "a=b", "k=v")
	for _, tc := range []struct {
		name   string
		params string
		h      http.Header
		want   string // "" for params unchanged
	}{
		{"no params", ``, full, `{"_meta":{"traceparent":"` + testTraceparent + `","tracestate":"a=b","baggage":"k=v"}}`},
		{"null params", `null`, traceHeader(testTraceparent, "", ""), `{"_meta":{"traceparent":"` + testTraceparent + `"}}`},
		{"no _meta", `{"name":"t","arguments":{"x":1}}`, traceHeader(testTraceparent, "", ""),
			`{"name":"t","arguments":{"x":1},"_meta":{"traceparent":"` + testTraceparent + `"}}`},
		{"other _meta kept", `{"_meta":{"progressToken":7}}`, traceHeader(testTraceparent, "", "k=v"),
			`{"_meta":{"progressToken":7,"traceparent":"` + testTraceparent + `","baggage":"k=v"}}`},
		{"its own traceparent wins", `{"_meta":{"traceparent":"00-1-2-01"}}`, full, ""},
		{"a malformed one of its own too", `{"_meta":{"traceparent":7}}`, full, ""},
		{"no traceparent header", `{"name":"t"}`, traceHeader("", "a=b", "k=v"), ""},
		{"no headers", `{"name":"t"}`, http.Header{}, ""},
		{"params an array", `[1]`, full, ""},
		{"_meta not an object", `{"_meta":"x"}`, full, ""},
		{"a header value with quotes", `{}`, traceHeader(`00-"x`, "", ""), `{"_meta":{"traceparent":"00-\"x"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withTraceHeaders(json.RawMessage(tc.params), tc.h)
			if tc.want == "" {
				assert.Equal(t, tc.params, string(got))
				return
			}
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

// A POST of the Streamable HTTP client carries the trace context of its
// one request's _meta as headers too; anything that cannot be a header
// value is left out.
func TestSetTraceHeaders(t *testing.T) {
	req := &jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: MethodToolsCall,
		Params: json.RawMessage(`{"_meta":{"traceparent":"` + testTraceparent + `","tracestate":"a=b","baggage":"k=v\nX-Evil: 1"}}`)}
	h := http.Header{}
	setTraceHeaders(h, req)
	assert.Equal(t, http.Header{"Traceparent": {testTraceparent}, "Tracestate": {"a=b"}}, h)

	h = http.Header{}
	setTraceHeaders(h, &jsonrpc.Request{Method: MethodToolsCall, Params: json.RawMessage(`{"_meta":{"tracestate":"a=b"}}`)})
	setTraceHeaders(h, nil)
	assert.Empty(t, h, "no traceparent, no headers")
}

// FuzzTraceHeaders: withTraceHeaders never panics; what it changes is only
// the trace keys of _meta of an object without a traceparent, and what it
// returns from valid JSON is valid JSON.
func FuzzTraceHeaders(f *testing.F) {
	for _, seed := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"_meta":{}}`, `{"_meta":null}`, `{"_meta":5}`,
		`{"_meta":{"traceparent":"x"}}`, `{"_meta":{"progressToken":1},"_meta":{"x":2}}`,
		`{"name":"t","arguments":{"_meta":{"traceparent":"y"}}}`, `{"_meta":{"trace\u0070arent":"z"}}`, `{"a":`,
	} {
		f.Add([]byte(seed), testTraceparent, "a=b")
	}
	f.Fuzz(func(t *testing.T, params []byte, tp, ts string) {
		h := traceHeader(tp, ts, "")
		got := withTraceHeaders(params, h)
		if string(got) == string(params) {
			return
		}
		require.NotEmpty(t, h.Get(MetaTraceparent), "changed without a traceparent header")
		if jsonrpc.Valid(params) || len(params) == 0 {
			require.True(t, jsonrpc.Valid(got), "%s -> %s", params, got)
		}
		var before, after map[string]json.RawMessage
		if json.Unmarshal(params, &before) != nil || json.Unmarshal(got, &after) != nil {
			return
		}
		for k, v := range before {
			if k != "_meta" {
				assert.JSONEq(t, string(v), string(after[k]), "member %s kept", k)
			}
		}
		var meta map[string]any
		require.NoError(t, json.Unmarshal(after["_meta"], &meta))
		assert.Equal(t, h.Get(MetaTraceparent), meta[MetaTraceparent])
	})
}
