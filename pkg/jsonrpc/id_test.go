package jsonrpc_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

func TestID_keepsItsForm(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`0`, `-1`, `18446744073709551616`, `1.5`, `1e3`, `""`, `"1"`, `"\u00e9"`, `null`} {
		var id jsonrpc.ID
		require.NoError(t, json.Unmarshal([]byte(raw), &id), raw)
		out, err := json.Marshal(id)
		require.NoError(t, err)
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(raw), &a))
		require.NoError(t, json.Unmarshal(out, &b))
		assert.Equal(t, a, b, raw)
		if id.IsNumber() {
			assert.Equal(t, raw, string(out), "a number keeps its literal text")
		}
	}
}

// Text is an id as a log or a span records it: a string's value, a number's
// literal text, nothing for null or absent.
func TestID_text(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{`7`: "7", `-12345`: "-12345", `18446744073709551616`: "18446744073709551616",
		`1.5`: "1.5", `"a\"b"`: `a"b`, `"\u00e9"`: "é", `""`: "", `null`: ""} {
		var id jsonrpc.ID
		require.NoError(t, json.Unmarshal([]byte(raw), &id), raw)
		assert.Equal(t, want, id.Text(), raw)
	}
	assert.Equal(t, "", jsonrpc.ID{}.Text())
	assert.Equal(t, "123456", jsonrpc.Int64ID(123456).Text())
}

func TestID_mapKey(t *testing.T) {
	t.Parallel()
	m := map[jsonrpc.ID]int{}
	m[jsonrpc.Int64ID(1)] = 1
	m[jsonrpc.StringID("1")] = 2
	m[jsonrpc.NullID()] = 3
	m[jsonrpc.ID{}] = 4
	assert.Len(t, m, 4, "string 1, number 1, null and absent are four different keys")
	assert.Equal(t, 1, m[jsonrpc.Int64ID(1)])
	assert.Equal(t, 2, m[jsonrpc.StringID("1")])

	var fromWire jsonrpc.ID
	require.NoError(t, json.Unmarshal([]byte(`1`), &fromWire))
	assert.Equal(t, 1, m[fromWire])
}

func TestID_rejects(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`true`, `{}`, `[]`, `"x`} {
		var id jsonrpc.ID
		assert.Error(t, id.UnmarshalJSON([]byte(raw)), raw)
	}
	n, ok := jsonrpc.Int64ID(-42).Int64()
	assert.True(t, ok)
	assert.Equal(t, int64(-42), n)
	_, ok = jsonrpc.StringID("1").Int64()
	assert.False(t, ok)
	assert.False(t, jsonrpc.ID{}.IsValid())
	assert.Equal(t, "", jsonrpc.ID{}.String())
}
