package mcp_test

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

func mustParse(t *testing.T, raw string) mcp.Object {
	t.Helper()
	o, err := mcp.ParseObject(json.RawMessage(raw))
	require.NoError(t, err, "parsing %s", raw)
	return o
}

func TestParseObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     json.RawMessage
		want    map[string]string // member -> raw text, kept byte for byte
		wantErr bool
	}{
		{name: "absent", raw: nil, want: map[string]string{}},
		{name: "empty raw", raw: json.RawMessage{}, want: map[string]string{}},
		{name: "empty object", raw: json.RawMessage(`{}`), want: map[string]string{}},
		{
			name: "members stay raw",
			raw:  json.RawMessage(`{"a":1,"b":"x","c":{ "d" : [1, 2] },"e":null}`),
			want: map[string]string{"a": `1`, "b": `"x"`, "c": `{ "d" : [1, 2] }`, "e": `null`},
		},
		{name: "surrounding whitespace", raw: json.RawMessage(" \n\t{\"a\" : true} \n"), want: map[string]string{"a": `true`}},
		{name: "duplicate key keeps the last", raw: json.RawMessage(`{"a":1,"a":2}`), want: map[string]string{"a": `2`}},
		{name: "escaped key", raw: json.RawMessage(`{"\u0061b":1}`), want: map[string]string{"ab": `1`}},
		{name: "null", raw: json.RawMessage(`null`), wantErr: true},
		{name: "array", raw: json.RawMessage(`[{"a":1}]`), wantErr: true},
		{name: "string", raw: json.RawMessage(`"{}"`), wantErr: true},
		{name: "number", raw: json.RawMessage(`1`), wantErr: true},
		{name: "boolean", raw: json.RawMessage(`true`), wantErr: true},
		{name: "blank", raw: json.RawMessage(` `), wantErr: true},
		{name: "truncated", raw: json.RawMessage(`{"a":`), wantErr: true},
		{name: "two objects", raw: json.RawMessage(`{} {}`), wantErr: true},
		{name: "single quotes", raw: json.RawMessage(`{'a':1}`), wantErr: true},
		{name: "trailing comma", raw: json.RawMessage(`{"a":1,}`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := mcp.ParseObject(tt.raw)
			if tt.wantErr {
				require.Error(t, err)
				assert.ErrorIs(t, err, jsonrpc.ErrInvalidParams)
				assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err))
				assert.Nil(t, o)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, o, "a parsed object is never nil, so it can be edited")
			got := map[string]string{}
			for k, v := range o {
				got[k] = string(v)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestObject_String(t *testing.T) {
	t.Parallel()
	o := mustParse(t, `{"s":"hello","empty":"","esc":"a\u0062\n","n":1,"b":false,"obj":{},"arr":["x"],"null":null}`)
	tests := []struct {
		key    string
		want   string
		wantOK bool
	}{
		{"s", "hello", true},
		{"empty", "", true},
		{"esc", "ab\n", true},
		{"missing", "", false},
		{"n", "", false},
		{"b", "", false},
		{"obj", "", false},
		{"arr", "", false},
		// A null member is not a string. (Bug: String reports ("", true)
		// because json.Unmarshal leaves a string untouched on null.)
		{"null", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			got, ok := o.String(tt.key)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantOK, ok, "String(%q) ok", tt.key)
		})
	}
}

func TestObject_RequireString(t *testing.T) {
	t.Parallel()
	o := mustParse(t, `{"name":"echo","empty":"","n":3,"null":null,"obj":{"name":"x"}}`)
	s, err := o.RequireString("name")
	require.NoError(t, err)
	assert.Equal(t, "echo", s)

	for _, key := range []string{"missing", "empty", "n", "null", "obj"} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			s, err := o.RequireString(key)
			require.Error(t, err)
			assert.Empty(t, s)
			assert.ErrorIs(t, err, jsonrpc.ErrInvalidParams)
			assert.Contains(t, err.Error(), `"`+key+`"`, "the error names the member")
		})
	}
}

func TestObject_Set(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value any
		want  string // the object's encoding after Set("k", value)
	}{
		{"string", "v", `{"a":1,"k":"v"}`},
		{"number", 2.5, `{"a":1,"k":2.5}`},
		{"struct", mcp.Implementation{Name: "n", Version: "1"}, `{"a":1,"k":{"name":"n","version":"1"}}`},
		{"raw message passes as is", json.RawMessage(`{"x":[1,2]}`), `{"a":1,"k":{"x":[1,2]}}`},
		{"replaces", map[string]int{"z": 0}, `{"a":1,"k":{"z":0}}`},
		{"nil is null", nil, `{"a":1,"k":null}`},
		{"typed nil is null", (*mcp.Tool)(nil), `{"a":1,"k":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := mustParse(t, `{"a":1,"k":"old"}`)
			o.Set("k", tt.value)
			assert.JSONEq(t, tt.want, string(o.Raw()))
		})
	}

	t.Run("unencodable value panics", func(t *testing.T) {
		t.Parallel()
		o := mcp.Object{}
		assert.Panics(t, func() { o.Set("k", make(chan int)) })
	})
}

func TestObject_Meta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want map[string]string
	}{
		{"absent", `{"a":1}`, map[string]string{}},
		{"empty", `{"_meta":{}}`, map[string]string{}},
		{"not an object", `{"_meta":5}`, map[string]string{}},
		{"null", `{"_meta":null}`, map[string]string{}},
		{"array", `{"_meta":[{"k":1}]}`, map[string]string{}},
		{
			"members",
			`{"_meta":{"progressToken":"t1","switchboard/relatedRequest":7,"vendor/x":{"y":[1]}}}`,
			map[string]string{"progressToken": `"t1"`, mcp.MetaRelatedRequest: `7`, "vendor/x": `{"y":[1]}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := mustParse(t, tt.raw)
			m := o.Meta()
			require.NotNil(t, m)
			got := map[string]string{}
			for k, v := range m {
				got[k] = string(v)
			}
			assert.Equal(t, tt.want, got)
			for k, v := range tt.want {
				raw, ok := o.MetaValue(k)
				assert.True(t, ok, "MetaValue(%q)", k)
				assert.Equal(t, v, string(raw))
			}
			_, ok := o.MetaValue("nope")
			assert.False(t, ok)
		})
	}
}

func TestObject_SetMeta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		raw   string
		key   string
		value any
		want  string
	}{
		{"creates _meta", `{"a":1}`, "k", "v", `{"a":1,"_meta":{"k":"v"}}`},
		{
			"keeps unknown members",
			`{"uri":"x","_meta":{"progressToken":"t","vendor/x":{"deep":[1,{"z":null}]}},"extra":[true]}`,
			mcp.MetaServer, "github",
			`{"uri":"x","_meta":{"progressToken":"t","vendor/x":{"deep":[1,{"z":null}]},"switchboard/server":"github"},"extra":[true]}`,
		},
		{"replaces the same key", `{"_meta":{"k":1,"o":2}}`, "k", 3, `{"_meta":{"k":3,"o":2}}`},
		{"replaces a _meta that is not an object", `{"_meta":"junk","a":1}`, "k", true, `{"_meta":{"k":true},"a":1}`},
		{"id value", `{}`, mcp.MetaRelatedRequest, jsonrpc.StringID("r-1"), `{"_meta":{"switchboard/relatedRequest":"r-1"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := mustParse(t, tt.raw)
			o.SetMeta(tt.key, tt.value)
			assert.JSONEq(t, tt.want, string(o.Raw()))
		})
	}
}

func TestObject_DeleteMeta(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		key  string
		want string
	}{
		{"keeps the others", `{"a":1,"_meta":{"k":1,"vendor/x":{"y":2}}}`, "k", `{"a":1,"_meta":{"vendor/x":{"y":2}}}`},
		{"drops an emptied _meta", `{"a":1,"_meta":{"k":1}}`, "k", `{"a":1}`},
		{"absent key leaves all", `{"a":1,"_meta":{"o":1}}`, "k", `{"a":1,"_meta":{"o":1}}`},
		{"absent _meta", `{"a":1}`, "k", `{"a":1}`},
		{"empty _meta is left as is", `{"_meta":{}}`, "k", `{"_meta":{}}`},
		{"a _meta that is not an object is left as is", `{"_meta":5}`, "k", `{"_meta":5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := mustParse(t, tt.raw)
			o.DeleteMeta(tt.key)
			assert.JSONEq(t, tt.want, string(o.Raw()))
		})
	}
}

func TestObject_Raw(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"empty", `{}`, `{}`},
		{"compacts members and sorts keys", `{ "b" : [ 1 , 2 ], "a" : { "x" : "y" } }`, `{"a":{"x":"y"},"b":[1,2]}`},
		{"keeps escapes valid", `{"s":"\u003c\"\\"}`, `{"s":"\u003c\"\\"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := mustParse(t, tt.raw)
			raw := o.Raw()
			assert.Equal(t, tt.want, string(raw))
			again, err := mcp.ParseObject(raw)
			require.NoError(t, err)
			assert.Equal(t, slices.Sorted(maps.Keys(o)), slices.Sorted(maps.Keys(again)))
		})
	}
	assert.Equal(t, `{}`, string(mcp.Object{}.Raw()))
}
