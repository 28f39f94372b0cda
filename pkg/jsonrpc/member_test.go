package jsonrpc_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

func TestMember(t *testing.T) {
	t.Parallel()
	obj := []byte(` {"name":"demo__add","arguments":{"name":"inner"},"_meta":{"progressToken":7},"s\u0074r":"x"} `)
	v, ok := jsonrpc.Member(obj, "arguments")
	require.True(t, ok)
	assert.Equal(t, `{"name":"inner"}`, string(v))
	name, ok := jsonrpc.StringMember(obj, "name")
	assert.True(t, ok)
	assert.Equal(t, "demo__add", name, "a nested member of the same name is not the top-level one")
	s, ok := jsonrpc.StringMember(obj, "str")
	assert.True(t, ok, "escaped keys are found by their value")
	assert.Equal(t, "x", s)
	_, ok = jsonrpc.Member(obj, "nope")
	assert.False(t, ok)
	_, ok = jsonrpc.StringMember(obj, "_meta")
	assert.False(t, ok, "not a string")
	for _, bad := range []string{``, `[]`, `"x"`, `{`, `{"a"`, `{"a":`} {
		_, ok := jsonrpc.Member([]byte(bad), "a")
		assert.False(t, ok, bad)
	}
}

func TestMembers(t *testing.T) {
	t.Parallel()
	obj := []byte(` {"name":"demo__add","arguments":{"name":"inner"},"s\u0074r":"x"} `)
	var got []string
	for name, value := range jsonrpc.Members(obj) {
		got = append(got, string(name)+"="+string(value))
	}
	assert.Equal(t, []string{`name="demo__add"`, `arguments={"name":"inner"}`, `str="x"`}, got, "in order, names unescaped")
	got = got[:0]
	for name := range jsonrpc.Members(obj) {
		got = append(got, string(name))
		break
	}
	assert.Equal(t, []string{"name"}, got, "stops when the loop does")
	for _, bad := range []string{``, `[]`, `"x"`} {
		for range jsonrpc.Members([]byte(bad)) {
			t.Errorf("%q: a member yielded", bad)
		}
	}
}

func TestSplice(t *testing.T) {
	t.Parallel()
	obj := []byte(` {"name":"demo__add","arguments":{"name":"inner"}} `)
	old, _ := jsonrpc.Member(obj, "name")
	got, ok := jsonrpc.Splice(obj, old, []byte(`"add"`))
	require.True(t, ok)
	assert.Equal(t, ` {"name":"add","arguments":{"name":"inner"}} `, string(got))
	assert.Equal(t, `"demo__add"`, string(old), "obj is left as it was")
	for _, bad := range [][]byte{nil, []byte(`"demo__add"`), obj[len(obj)-1:][:0]} {
		_, ok := jsonrpc.Splice(obj, bad, []byte(`1`))
		assert.False(t, ok, "not a member of obj: %q", bad)
	}
	_, ok = jsonrpc.Splice(obj[:5], old, []byte(`1`))
	assert.False(t, ok, "beyond obj")

	got, ok = jsonrpc.SpliceString(obj, old, "a\"dd\n")
	require.True(t, ok)
	assert.Equal(t, ` {"name":"a\"dd\n","arguments":{"name":"inner"}} `, string(got), "s is quoted")
	_, ok = jsonrpc.SpliceString(obj, []byte(`"demo__add"`), "add")
	assert.False(t, ok, "not a member of obj")
}

// TestRequest_AppendJSONRenamed: a request encoded with a member of its
// params renamed is the request with SpliceString's params, byte for byte,
// written into the caller's buffer; old outside the params appends nothing.
func TestRequest_AppendJSONRenamed(t *testing.T) {
	t.Parallel()
	params := []byte(`{"name":"demo__add","arguments":{"name":"inner","x":"é\n"}}`)
	old, _ := jsonrpc.Member(params, "name")
	spliced, ok := jsonrpc.SpliceString(params, old, "a\"dd")
	require.True(t, ok)
	for _, id := range []jsonrpc.ID{jsonrpc.Int64ID(7), jsonrpc.StringID("s7"), {}} {
		r := &jsonrpc.Request{ID: id, Method: "tools/call", Params: params}
		got, ok := r.AppendJSONRenamed([]byte("prefix:"), old, "a\"dd")
		require.True(t, ok)
		want := (&jsonrpc.Request{ID: id, Method: "tools/call", Params: spliced}).AppendJSON([]byte("prefix:"))
		assert.Equal(t, string(want), string(got))
	}
	r := &jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: "m", Params: params}
	got, ok := r.AppendJSONRenamed([]byte("prefix:"), []byte(`"demo__add"`), "add")
	assert.False(t, ok, "not a slice of the params")
	assert.Equal(t, "prefix:", string(got))
}

// The hub renames every tools/call with SpliceString: one allocation.
func TestSpliceString_allocations(t *testing.T) {
	obj := []byte(`{"name":"demo__add","arguments":{}}`)
	old, _ := jsonrpc.Member(obj, "name")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { jsonrpc.SpliceString(obj, old, "add") }))
}

func TestUnquote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{`"plain"`: "plain", ` "\u00e9\n" `: "é\n", `""`: "", `"é"`: "é"} {
		s, ok := jsonrpc.Unquote([]byte(in))
		assert.True(t, ok, in)
		assert.Equal(t, want, s, in)
	}
	for _, bad := range []string{``, `"`, `"a`, `a"`, `"a"b"`, "\"\t\"", `null`, `1`, `"\x"`} {
		_, ok := jsonrpc.Unquote([]byte(bad))
		assert.False(t, ok, bad)
	}
}

func TestSetMember(t *testing.T) {
	t.Parallel()
	tests := []struct{ obj, key, value, want string }{
		{`{"name":"demo__add","arguments":{"a":1}}`, "name", `"add"`, `{"name":"add","arguments":{"a":1}}`},
		{` { "x" : 1 , "name" : "n" } `, "name", `"m"`, `{ "x" : 1 , "name" : "m" }`},
		{`{"a":1}`, "b", `[2]`, `{"a":1,"b":[2]}`},
		{`{}`, "b", `true`, `{"b":true}`},
		{`{ }`, "b", `null`, `{"b":null}`},
		{`{"a":1,"a":2}`, "a", `3`, `{"a":3,"a":3}`},
		{`{"_meta":{"progressToken":"t"},"name":"x"}`, "_meta", `{"progressToken":"sb-1"}`, `{"_meta":{"progressToken":"sb-1"},"name":"x"}`},
	}
	for _, tt := range tests {
		got, err := jsonrpc.SetMember([]byte(tt.obj), tt.key, []byte(tt.value))
		require.NoError(t, err, tt.obj)
		assert.Equal(t, tt.want, string(got), tt.obj)
		assert.True(t, json.Valid(got))
	}
	_, err := jsonrpc.SetMember([]byte(`[1]`), "a", []byte(`1`))
	assert.Error(t, err)
}

// FuzzSetMember: editing a member of any valid object yields valid JSON in
// which the member has the new value and the others are untouched.
func FuzzSetMember(f *testing.F) {
	f.Add([]byte(`{"name":"a","arguments":{"x":[1,{"name":2}]}}`), "name")
	f.Add([]byte(`{}`), "k")
	f.Add([]byte(`{"\u006e":1}`), "n")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		var before map[string]json.RawMessage
		if json.Unmarshal(obj, &before) != nil || before == nil || !utf8.ValidString(key) {
			return
		}
		got, err := jsonrpc.SetMember(obj, key, []byte(`{"set":true}`))
		if err != nil {
			t.Fatalf("SetMember(%s): %v", obj, err)
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("SetMember(%s) = %s: %v", obj, got, err)
		}
		if string(after[key]) != `{"set":true}` {
			t.Fatalf("SetMember(%s, %q) = %s", obj, key, got)
		}
		if len(after) != len(before) && len(after) != len(before)+1 {
			t.Fatalf("members changed: %s -> %s", obj, got)
		}
		if v, ok := jsonrpc.Member(got, key); !ok || string(v) != `{"set":true}` {
			t.Fatalf("Member after SetMember: %s %v", v, ok)
		}
		// Splicing the one member of that name is the same edit.
		var old []byte
		n := 0
		for name, v := range jsonrpc.Members(obj) {
			if string(name) == key {
				old, n = v, n+1
			}
		}
		if n == 1 {
			spliced, ok := jsonrpc.Splice(obj, old, []byte(`{"set":true}`))
			if !ok || string(spliced) != string(got) {
				t.Fatalf("Splice(%s, %s) = %s, %v; SetMember gave %s", obj, old, spliced, ok, got)
			}
			// And splicing a string in, the key itself as the value.
			quoted := jsonrpc.AppendString(nil, key)
			want, err := jsonrpc.SetMember(obj, key, quoted)
			if err != nil {
				t.Fatal(err)
			}
			if spliced, ok := jsonrpc.SpliceString(obj, old, key); !ok || string(spliced) != string(want) {
				t.Fatalf("SpliceString(%s, %s, %q) = %s, %v; SetMember gave %s", obj, old, key, spliced, ok, want)
			}
			// And a request whose params are renamed as it is encoded.
			framed, ok := (&jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: "m", Params: obj}).AppendJSONRenamed(nil, old, key)
			wantFrame := (&jsonrpc.Request{ID: jsonrpc.Int64ID(1), Method: "m", Params: want}).AppendJSON(nil)
			if !ok || string(framed) != string(wantFrame) {
				t.Fatalf("AppendJSONRenamed(%s, %s, %q) = %s, %v; want %s", obj, old, key, framed, ok, wantFrame)
			}
		}
	})
}

// FuzzWithoutMembers: dropping members of any valid object yields valid
// JSON with every other member as it was, in its order, and none dropped.
func FuzzWithoutMembers(f *testing.F) {
	f.Add([]byte(`{"_meta":{"a":1},"name":"x","arguments":{"_meta":2}}`), "_meta")
	f.Add([]byte(`{}`), "k")
	f.Add([]byte(`{"\u006e":1,"n":2,"m":[]}`), "n")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		var before map[string]json.RawMessage
		if json.Unmarshal(obj, &before) != nil || before == nil {
			return
		}
		got, dropped := jsonrpc.WithoutMembers(obj, func(name []byte) bool { return string(name) == key })
		var after map[string]json.RawMessage
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("WithoutMembers(%s) = %s: %v", obj, got, err)
		}
		if _, had := before[key]; had != dropped {
			t.Fatalf("WithoutMembers(%s, %q) dropped %v", obj, key, dropped)
		}
		var kept [][2]string
		for name, v := range jsonrpc.Members(obj) {
			if !utf8.Valid(name) {
				return // written back as U+FFFD, as encoding/json reads it
			}
			if string(name) != key {
				kept = append(kept, [2]string{string(name), string(v)})
			}
		}
		i := 0
		for name, v := range jsonrpc.Members(got) {
			if i >= len(kept) || string(name) != kept[i][0] || string(v) != kept[i][1] {
				t.Fatalf("WithoutMembers(%s, %q) = %s: member %d changed", obj, key, got, i)
			}
			i++
		}
		if i != len(kept) {
			t.Fatalf("WithoutMembers(%s, %q) = %s: %d members, want %d", obj, key, got, i, len(kept))
		}
	})
}
