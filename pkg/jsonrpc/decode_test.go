package jsonrpc_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// reply encodes what a peer owes for a frame's invalid parts.
func reply(f jsonrpc.Frame) string {
	if len(f.Replies) == 0 {
		return ""
	}
	if f.Batch {
		ms := make([]jsonrpc.Message, len(f.Replies))
		for i, r := range f.Replies {
			ms[i] = r
		}
		return string(jsonrpc.EncodeBatch(ms))
	}
	return string(jsonrpc.Encode(f.Replies[0]))
}

// TestDecode_malformed is a table of raw malformed frames and the exact reply
// each one is owed.
func TestDecode_malformed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{``, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of JSON input"}}`},
		{`   `, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of JSON input"}}`},
		{`{`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: unexpected end of JSON input"}}`},
		{`{"jsonrpc":"2.0","method":"x","id":1}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character '}' after top-level value"}}`},
		{`nul `, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: invalid character ' ' in literal null (expecting 'l')"}}`},
		{`null`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"}}`},
		{`"x"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"}}`},
		{`42`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"}}`},
		{`{}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: missing \"jsonrpc\":\"2.0\""}}`},
		{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}`},
		{`[ ]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: empty batch"}}`},
		{`[[]]`, `[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"}}]`},
		// The version must be exactly the string "2.0".
		{`{"method":"x","id":1}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: missing \"jsonrpc\":\"2.0\""}}`},
		{`{"jsonrpc":"1.0","method":"x","id":1}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be exactly \"2.0\""}}`},
		{`{"jsonrpc":2.0,"method":"x","id":"a"}`, `{"jsonrpc":"2.0","id":"a","error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be exactly \"2.0\""}}`},
		{`{"jsonrpc":"2.0 ","method":"x","id":1}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: \"jsonrpc\" must be exactly \"2.0\""}}`},
		// Method and params.
		{`{"jsonrpc":"2.0","method":null,"id":7}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: \"method\" must be a string"}}`},
		{`{"jsonrpc":"2.0","method":["x"],"id":7}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: \"method\" must be a string"}}`},
		{`{"jsonrpc":"2.0","method":"x","params":"bar","id":7}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: \"params\" must be an object or an array"}}`},
		{`{"jsonrpc":"2.0","method":"x","params":null,"id":7}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: \"params\" must be an object or an array"}}`},
		{`{"jsonrpc":"2.0","method":"x","params":3}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"params\" must be an object or an array"}}`},
		{`{"jsonrpc":"2.0","method":"x","result":1,"id":7}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: a request cannot carry \"result\" or \"error\""}}`},
		// Ids that cannot be read are answered with null.
		{`{"jsonrpc":"2.0","method":"x","id":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"id\" must be a string, a number or null"}}`},
		{`{"jsonrpc":"2.0","method":"x","id":true}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"id\" must be a string, a number or null"}}`},
		{`{"jsonrpc":"2.0","method":"x","id":[1]}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"id\" must be a string, a number or null"}}`},
		// Duplicate members.
		{`{"jsonrpc":"2.0","method":"x","method":"y","id":1}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: duplicate member \"method\""}}`},
		{`{"jsonrpc":"2.0","method":"x","id":1,"\u0069d":2}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: duplicate member \"\\u0069d\""}}`},
		// Malformed responses are answered with a null id, never their own.
		{`{"jsonrpc":"2.0","id":5}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message needs \"method\", \"result\" or \"error\""}}`},
		{`{"jsonrpc":"2.0","id":5,"result":1,"error":{"code":1,"message":"m"}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a response cannot carry both \"result\" and \"error\""}}`},
		{`{"jsonrpc":"2.0","result":1}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a response needs an \"id\""}}`},
		{`{"jsonrpc":"2.0","id":5,"error":"boom"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"error\" must be an object with an integer \"code\" and a string \"message\""}}`},
		{`{"jsonrpc":"2.0","id":5,"error":{"code":1.5,"message":"m"}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"error\" must be an object with an integer \"code\" and a string \"message\""}}`},
		{`{"jsonrpc":"2.0","id":5,"error":{"code":1}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: \"error\" must be an object with an integer \"code\" and a string \"message\""}}`},
		{`{"jsonrpc":"2.0","id":5,"result":1,"params":[]}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a response cannot carry \"params\""}}`},
		// Each invalid element of a batch gets its own reply; valid ones none here.
		{`[{"jsonrpc":"2.0","method":"n"},1,{"jsonrpc":"2.0","method":"x","id":"z","params":1}]`,
			`[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: a message must be a JSON object"}},{"jsonrpc":"2.0","id":"z","error":{"code":-32600,"message":"Invalid Request: \"params\" must be an object or an array"}}]`},
		// Valid input owes nothing.
		{`{"jsonrpc":"2.0","method":"x"}`, ``},
		{`{"jsonrpc":"2.0","id":1,"result":null}`, ``},
		{`[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","method":"y"}]`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, reply(jsonrpc.Decode([]byte(tt.in))))
		})
	}
}

func TestDecode_limits(t *testing.T) {
	t.Parallel()
	lim := jsonrpc.Limits{MaxBytes: 200, MaxBatch: 3, MaxDepth: 5}
	one := `{"jsonrpc":"2.0","method":"n"}`
	tests := []struct {
		name, in, want string
	}{
		{"too many bytes", `{"jsonrpc":"2.0","method":"x","params":["` + strings.Repeat("a", 200) + `"]}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message of 244 bytes exceeds the limit of 200"}}`},
		{"batch too long", "[" + strings.Repeat(one+",", 3) + one + "]",
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batch exceeds the limit of 3 messages"}}`},
		{"too deep", `{"jsonrpc":"2.0","method":"x","params":[[[[[1]]]]]}`,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: nesting exceeds the limit of 5 levels"}}`},
		{"brackets in strings do not count", `{"jsonrpc":"2.0","method":"x","params":[[[["[[[[\"{{{{"]]]]}`, ``},
		{"batch at the limit", "[" + strings.Repeat(one+",", 2) + one + "]", ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, reply(lim.Decode([]byte(tt.in))))
		})
	}

	t.Run("100k-deep nesting with default limits", func(t *testing.T) {
		t.Parallel()
		deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
		f := jsonrpc.Decode([]byte(deep))
		require.Len(t, f.Replies, 1)
		assert.Equal(t, jsonrpc.CodeInvalidRequest, f.Replies[0].Error.Code)
		assert.Contains(t, f.Replies[0].Error.Message, "nesting")
	})
}

func TestDecode_messages(t *testing.T) {
	t.Parallel()
	f := jsonrpc.Decode([]byte(`[
		{"jsonrpc":"2.0","method":"call","params":{"a":1},"id":18446744073709551617},
		{"jsonrpc":"2.0","method":"note","params":[]},
		{"jsonrpc":"2.0","id":"","result":{"x":[1,2]}},
		{"jsonrpc":"2.0","id":-3,"error":{"code":-32601,"message":"nope","data":{"k":"v"}}},
		{"jsonrpc":"2.0","method":"unicode \u00e9","id":null,"extra":"ignored"}
	]`))
	require.Empty(t, f.Replies)
	require.True(t, f.Batch)
	require.Len(t, f.Messages, 5)

	call := f.Messages[0].(*jsonrpc.Request)
	assert.Equal(t, "call", call.Method)
	assert.True(t, call.IsCall())
	assert.Equal(t, "18446744073709551617", call.ID.String())
	assert.JSONEq(t, `{"a":1}`, string(call.Params))

	note := f.Messages[1].(*jsonrpc.Request)
	assert.True(t, note.IsNotification())
	assert.Equal(t, "[]", string(note.Params))

	res := f.Messages[2].(*jsonrpc.Response)
	assert.Equal(t, jsonrpc.StringID(""), res.ID)
	assert.Nil(t, res.Error)
	assert.JSONEq(t, `{"x":[1,2]}`, string(res.Result))

	errResp := f.Messages[3].(*jsonrpc.Response)
	assert.Equal(t, jsonrpc.Int64ID(-3), errResp.ID)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, errResp.Error.Code)
	assert.Equal(t, "nope", errResp.Error.Message)
	assert.JSONEq(t, `{"k":"v"}`, string(errResp.Error.Data))

	null := f.Messages[4].(*jsonrpc.Request)
	assert.Equal(t, "unicode é", null.Method)
	assert.True(t, null.ID.IsNull())
	assert.True(t, null.IsCall(), "a null id is a call, not a notification")
}

func TestDecodeMessage(t *testing.T) {
	t.Parallel()
	m, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"result":true}`))
	require.NoError(t, err)
	assert.Equal(t, &jsonrpc.Response{ID: jsonrpc.Int64ID(1), Result: json.RawMessage("true")}, m)

	_, err = jsonrpc.DecodeMessage([]byte(`[{"jsonrpc":"2.0","method":"x"}]`))
	assert.ErrorIs(t, err, jsonrpc.ErrInvalidRequest)
	_, err = jsonrpc.DecodeMessage([]byte(`{`))
	assert.ErrorIs(t, err, jsonrpc.ErrParse)
}

func TestDecoder_reusesAndInterns(t *testing.T) {
	var d jsonrpc.Decoder
	first := d.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`))
	req1 := first.Messages[0].(*jsonrpc.Request)
	second := d.Decode([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call"}`))
	req2 := second.Messages[0].(*jsonrpc.Request)
	assert.Equal(t, jsonrpc.Int64ID(1), req1.ID, "messages outlive the next Decode")
	assert.Equal(t, "tools/call", req2.Method)

	escaped := d.Decode([]byte(`{"jsonrpc":"2.0","method":"tools\/call"}`))
	assert.Equal(t, "tools/call", escaped.Messages[0].(*jsonrpc.Request).Method)

	frame := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"a":1}}`)
	allocs := testing.AllocsPerRun(100, func() { d.Decode(frame) })
	assert.LessOrEqual(t, allocs, 1.0, "a repeated call decodes with one allocation, the request itself")
}

// TestRequest_paramsWithoutMeta: the decoder says params hold no _meta only
// when no key of theirs is, or may spell, _meta, and only for the params it
// made.
func TestRequest_paramsWithoutMeta(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, in string
		want     bool
	}{
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"x","arguments":{"t":"_meta"}}}`, true},
		{"_meta deeper", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":{"_meta":{}}}}`, true},
		{"_meta beside params", `{"jsonrpc":"2.0","id":1,"method":"m","_meta":{},"x":{"_meta":1},"params":{"a":1}}`, true},
		{"params an array", `{"jsonrpc":"2.0","id":1,"method":"m","params":[{"_meta":{}}]}`, true},
		{"_meta", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"x","_meta":{"progressToken":1}}}`, false},
		{"_meta first", `{"params":{"_meta":{}},"jsonrpc":"2.0","id":1,"method":"m"}`, false},
		{"_meta spaced", `{"jsonrpc":"2.0","id":1,"method":"m","params":{ "a":1 , "_meta" : {} }}`, false},
		{"_meta escaped", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_m\u0065ta":{}}}`, false},
		{"any escaped key", `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a\/b":1}}`, false},
		{"params escaped", `{"jsonrpc":"2.0","id":1,"method":"m","p\u0061rams":{"_meta":{}}}`, false},
		{"many members", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{}}}`, false},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"m"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := jsonrpc.DecodeMessage([]byte(tt.in))
			require.NoError(t, err)
			req := m.(*jsonrpc.Request)
			assert.Equal(t, tt.want, req.ParamsWithoutMeta())
			if tt.want {
				_, found := jsonrpc.Member(req.Params, "_meta")
				require.False(t, found)
			}
		})
	}

	// Only the params the decoder made, and not a batch's.
	m, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"b":2}}`))
	require.NoError(t, err)
	req := m.(*jsonrpc.Request)
	require.True(t, req.ParamsWithoutMeta())
	copied := *req
	assert.True(t, copied.ParamsWithoutMeta(), "a copy has the same params")
	copied.Params = json.RawMessage(`{"_meta":{}}`)
	assert.False(t, copied.ParamsWithoutMeta(), "params replaced")
	copied.Params = req.Params[:len(req.Params)-1]
	assert.False(t, copied.ParamsWithoutMeta(), "params cut short")
	assert.False(t, (&jsonrpc.Request{Method: "m", Params: json.RawMessage(`{}`)}).ParamsWithoutMeta(), "a request made in code")
	f := jsonrpc.Decode([]byte(`[{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}]`))
	require.Len(t, f.Messages, 1)
	assert.False(t, f.Messages[0].(*jsonrpc.Request).ParamsWithoutMeta(), "a batch's")
}
