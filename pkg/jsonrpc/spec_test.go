package jsonrpc_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// serve is the smallest server the examples of the specification need: it
// decodes a frame, answers each call from a table of methods and encodes the
// reply the way a peer would ("" when nothing is owed).
func serve(t *testing.T, frame string) string {
	t.Helper()
	methods := map[string]func(params json.RawMessage) any{
		"subtract": func(p json.RawMessage) any {
			var pos []int
			if json.Unmarshal(p, &pos) == nil {
				return pos[0] - pos[1]
			}
			var named struct{ Minuend, Subtrahend int }
			require.NoError(t, json.Unmarshal(p, &named))
			return named.Minuend - named.Subtrahend
		},
		"sum": func(p json.RawMessage) any {
			var xs []int
			require.NoError(t, json.Unmarshal(p, &xs))
			s := 0
			for _, x := range xs {
				s += x
			}
			return s
		},
		"get_data":     func(json.RawMessage) any { return []any{"hello", 5} },
		"update":       func(json.RawMessage) any { return nil },
		"notify_hello": func(json.RawMessage) any { return nil },
		"notify_sum":   func(json.RawMessage) any { return nil },
	}
	f := jsonrpc.Decode([]byte(frame))
	var out []jsonrpc.Message
	for _, m := range f.Messages {
		req, ok := m.(*jsonrpc.Request)
		require.True(t, ok, "the examples send only requests")
		fn, found := methods[req.Method]
		if req.IsNotification() {
			continue
		}
		if !found {
			out = append(out, jsonrpc.NewErrorResponse(req.ID, jsonrpc.ErrMethodNotFound))
			continue
		}
		resp, err := jsonrpc.NewResult(req.ID, fn(req.Params))
		require.NoError(t, err)
		out = append(out, resp)
	}
	for _, r := range f.Replies {
		out = append(out, r)
	}
	switch {
	case len(out) == 0:
		return ""
	case f.Batch:
		return string(jsonrpc.EncodeBatch(out))
	}
	require.Len(t, out, 1)
	return string(jsonrpc.Encode(out[0]))
}

// canon makes two replies comparable: error messages are cut to the
// specification's wording (ours add a detail after a colon) and the responses
// of a batch are sorted, since they may come in any order.
func canon(t *testing.T, s string) string {
	t.Helper()
	if s == "" {
		return ""
	}
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v), "reply is not JSON: %s", s)
	cut := func(r any) any {
		if m, ok := r.(map[string]any); ok {
			if e, ok := m["error"].(map[string]any); ok {
				msg, _ := e["message"].(string)
				e["message"], _, _ = strings.Cut(msg, ":")
			}
		}
		return r
	}
	if arr, ok := v.([]any); ok {
		keys := make([]string, len(arr))
		for i, r := range arr {
			b, _ := json.Marshal(cut(r))
			keys[i] = string(b)
		}
		sort.Strings(keys)
		return "[" + strings.Join(keys, ",") + "]"
	}
	b, _ := json.Marshal(cut(v))
	return string(b)
}

// TestSpecExamples runs every example of section 7 of the JSON-RPC 2.0
// specification.
func TestSpecExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"positional parameters", `{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}`,
			`{"jsonrpc": "2.0", "result": 19, "id": 1}`},
		{"positional parameters 2", `{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}`,
			`{"jsonrpc": "2.0", "result": -19, "id": 2}`},
		{"named parameters", `{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, "id": 3}`,
			`{"jsonrpc": "2.0", "result": 19, "id": 3}`},
		{"named parameters 2", `{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, "id": 4}`,
			`{"jsonrpc": "2.0", "result": 19, "id": 4}`},
		{"notification", `{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}`, ``},
		{"notification 2", `{"jsonrpc": "2.0", "method": "foobar"}`, ``},
		{"non-existent method", `{"jsonrpc": "2.0", "method": "foobar", "id": "1"}`,
			`{"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "1"}`},
		{"invalid JSON", `{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]`,
			`{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}`},
		{"invalid Request object", `{"jsonrpc": "2.0", "method": 1, "params": "bar"}`,
			`{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}`},
		{"batch, invalid JSON", `[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method"
]`, `{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}, "id": null}`},
		{"empty array", `[]`,
			`{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}`},
		{"invalid batch, not empty", `[1]`,
			`[{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}]`},
		{"invalid batch", `[1,2,3]`, `[
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null}
]`},
		{"batch", `[
  {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
  {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
  {"foo": "boo"},
  {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
  {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
]`, `[
  {"jsonrpc": "2.0", "result": 7, "id": "1"},
  {"jsonrpc": "2.0", "result": 19, "id": "2"},
  {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request"}, "id": null},
  {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": "5"},
  {"jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
]`},
		{"batch, all notifications", `[
  {"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},
  {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}
]`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, canon(t, tt.want), canon(t, serve(t, tt.in)))
		})
	}
}
