package jsonrpc_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

func TestEncode_roundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  jsonrpc.Message
		wire string
	}{
		{"call", &jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: "tools/call", Params: json.RawMessage(`{"name":"add"}`)},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}`},
		{"call without params", &jsonrpc.Request{ID: jsonrpc.StringID("a"), Method: "ping"},
			`{"jsonrpc":"2.0","id":"a","method":"ping"}`},
		{"notification", &jsonrpc.Request{Method: "notifications/initialized"},
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"null id", &jsonrpc.Request{ID: jsonrpc.NullID(), Method: "x", Params: json.RawMessage(`[]`)},
			`{"jsonrpc":"2.0","id":null,"method":"x","params":[]}`},
		{"big integer id", &jsonrpc.Response{ID: mustID(t, `9007199254740993`), Result: json.RawMessage(`1`)},
			`{"jsonrpc":"2.0","id":9007199254740993,"result":1}`},
		{"negative id", &jsonrpc.Response{ID: jsonrpc.Int64ID(-7), Result: json.RawMessage(`"x"`)},
			`{"jsonrpc":"2.0","id":-7,"result":"x"}`},
		{"zero id", &jsonrpc.Response{ID: jsonrpc.Int64ID(0), Result: json.RawMessage(`{}`)},
			`{"jsonrpc":"2.0","id":0,"result":{}}`},
		{"empty string id", &jsonrpc.Response{ID: jsonrpc.StringID(""), Result: json.RawMessage(`null`)},
			`{"jsonrpc":"2.0","id":"","result":null}`},
		{"escaped string id", &jsonrpc.Response{ID: jsonrpc.StringID("a\"b\\c\n\u0001é"), Result: json.RawMessage(`[]`)},
			`{"jsonrpc":"2.0","id":"a\"b\\c\n\u0001é","result":[]}`},
		{"error with data", &jsonrpc.Response{ID: jsonrpc.Int64ID(2), Error: &jsonrpc.Error{Code: -32602, Message: "bad \"x\"", Data: json.RawMessage(`{"field":"x"}`)}},
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad \"x\"","data":{"field":"x"}}}`},
		{"error without data", &jsonrpc.Response{ID: jsonrpc.NullID(), Error: &jsonrpc.Error{Code: -32700, Message: "Parse error"}},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wire := string(jsonrpc.Encode(tt.msg))
			assert.Equal(t, tt.wire, wire)
			assert.True(t, json.Valid([]byte(wire)))
			back, err := jsonrpc.DecodeMessage([]byte(wire))
			require.NoError(t, err)
			if r, ok := back.(*jsonrpc.Request); ok {
				back = &jsonrpc.Request{ID: r.ID, Method: r.Method, Params: r.Params} // without what the decoder noted of its params
			}
			assert.Equal(t, tt.msg, back)
		})
	}
}

func TestEncode_nilResultIsNull(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `{"jsonrpc":"2.0","id":1,"result":null}`, string(jsonrpc.Encode(&jsonrpc.Response{ID: jsonrpc.Int64ID(1)})))
}

func TestAppendString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", "quote\"back\\slash", "\x00\x1f\t\r\n", "é中🙂", "bad \xff utf8", "<html>&"} {
		got := jsonrpc.AppendString(nil, s)
		require.True(t, json.Valid(got), "%q -> %s", s, got)
		var back string
		require.NoError(t, json.Unmarshal(got, &back))
		assert.Equal(t, strings.ToValidUTF8(s, "\uFFFD"), back)
	}
}

func TestEncodeBatch(t *testing.T) {
	t.Parallel()
	b := jsonrpc.EncodeBatch([]jsonrpc.Message{
		&jsonrpc.Response{ID: jsonrpc.Int64ID(1), Result: json.RawMessage(`1`)},
		&jsonrpc.Request{Method: "n"},
	})
	assert.Equal(t, `[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","method":"n"}]`, string(b))
	f := jsonrpc.Decode(b)
	assert.True(t, f.Batch)
	assert.Len(t, f.Messages, 2)
}

func TestEncode_allocations(t *testing.T) {
	req := &jsonrpc.Request{ID: jsonrpc.Int64ID(42), Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)}
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() { buf = req.AppendJSON(buf[:0]) })
	assert.Zero(t, allocs, "appending into a buffer with room must not allocate")
}

func mustID(t *testing.T, raw string) jsonrpc.ID {
	t.Helper()
	var id jsonrpc.ID
	require.NoError(t, json.Unmarshal([]byte(raw), &id))
	return id
}
