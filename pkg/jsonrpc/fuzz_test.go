package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// FuzzDecode checks that Decode never panics, that everything it accepts
// re-encodes to valid JSON, and that decode -> encode -> decode is stable.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}`,
		`{"jsonrpc":"2.0","method":"update","params":{"a":[1,{"b":null}]}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"hi"}]}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":[1]}}`,
		`[{"jsonrpc":"2.0","method":"a","id":1},{"jsonrpc":"2.0","method":"b"},1,[]]`,
		`[]`, `{`, `"\ud800"`, `{"jsonrpc":"2.0","method":"\u0000","id":1e400}`,
		`{"jsonrpc":"2.0","method":"x","id":1,"id":2}`,
		`{"jsonrpc":"2.0","method":"x","id":1,"params":{"a":{"_meta":1},"_meta":{"progressToken":"t"}}}`,
		`{"jsonrpc":"2.0","method":"x","id":1,"params":{"_m\u0065ta":{}},"p\u0061rams":{}}`,
		`{"jsonrpc":"2.0","method":"x","p\u0061rams":{"_meta":{}}}`,
	} {
		f.Add([]byte(s))
	}
	lim := jsonrpc.Limits{MaxBytes: 1 << 16, MaxBatch: 16, MaxDepth: 32}
	f.Fuzz(func(t *testing.T, data []byte) {
		first := lim.Decode(data)
		for _, r := range first.Replies {
			if r.Error == nil {
				t.Fatalf("a reply without an error: %+v", r)
			}
		}
		if len(first.Messages) == 0 {
			return
		}
		// Params said to hold no _meta hold none.
		for _, m := range first.Messages {
			if r, ok := m.(*jsonrpc.Request); ok && r.ParamsWithoutMeta() {
				if _, found := jsonrpc.Member(r.Params, "_meta"); found {
					t.Fatalf("params said to hold no _meta hold one: %s", r.Params)
				}
			}
		}
		enc := jsonrpc.EncodeBatch(first.Messages)
		second := lim.Decode(enc)
		if len(second.Replies) != 0 {
			t.Fatalf("re-encoded messages were rejected: %s -> %s", enc, second.Replies[0].Error.Message)
		}
		if len(second.Messages) != len(first.Messages) {
			t.Fatalf("message count changed: %d -> %d", len(first.Messages), len(second.Messages))
		}
		again := jsonrpc.EncodeBatch(second.Messages)
		if !bytes.Equal(enc, again) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, again)
		}
		// A result that encodes itself is written as the response holding it.
		for _, m := range first.Messages {
			if r, ok := m.(*jsonrpc.Response); ok && r.Error == nil {
				got, err := jsonrpc.AppendResult([]byte("x"), r.ID, rawAppender(r.Result))
				if want := r.AppendJSON([]byte("x")); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("AppendResult = %s, %v; want %s", got, err, want)
				}
			}
		}
	})
}

// rawAppender is raw JSON that encodes itself, as a jsonrpc.Appender.
type rawAppender json.RawMessage

func (r rawAppender) AppendJSON(b []byte) ([]byte, error) { return append(b, r...), nil }

// FuzzValidate holds the codec's one-pass validator to the same answers as
// encoding/json's: any JSON one accepts, the other does (except nesting
// beyond 4095 levels, which the codec always refuses).
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, ` -0.5e+10 `, `"\ud800"`, `[1,]`,
		`{"a" 1}`, `01`, `1.`, `-`, `tru`, `nulll`, `"\x"`, `[[[[]]]]`, `{"a":{"b":{}}}`, "\"\t\"",
		// Strings longer than a word take the fast path, unless they hold an
		// escape or a control character.
		`{"text":"abcdefghijklmnopqrstuvwxyz0123456789"}`, `["abcdefghijklmnop\"qrstuvwxyz"]`,
		"[\"abcdefghijklmnopqrstuvwxyz0123456789\x01abcdefghij\"]", `"abcdefghijklmnopqrstuvwxyz0123456789`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := json.Valid(data)
		got := jsonrpc.Valid(data)
		if got != want && !(want && bytes.Count(data, []byte("[")) > 4000) {
			t.Fatalf("validate(%q) = %v, json.Valid = %v", data, got, want)
		}
	})
}

// FuzzMember: Member, SetMember and Members never panic, whatever the input,
// and Unquote agrees with encoding/json.
func FuzzMember(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":"x"}`), "a")
	f.Add([]byte(`{"a"`), "a")
	f.Add([]byte(`{"a":`), "a")
	f.Add([]byte(`{"a" 1}`), "a")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		jsonrpc.Member(obj, key)
		jsonrpc.StringMember(obj, key)
		jsonrpc.SetMember(obj, key, []byte(`1`))
		for range jsonrpc.Members(obj) {
		}
		s, ok := jsonrpc.Unquote(obj)
		isString := json.Valid(obj) && bytes.TrimSpace(obj)[0] == '"'
		if ok != isString {
			t.Fatalf("Unquote(%q) ok = %v", obj, ok)
		}
		var want string
		if ok && (json.Unmarshal(obj, &want) != nil || s != want) {
			t.Fatalf("Unquote(%q) = %q, encoding/json says %q", obj, s, want)
		}
		// AppendUnquoted appends what Unquote returns, or nothing.
		if got, gotOK := jsonrpc.AppendUnquoted([]byte("x"), obj); gotOK != ok || string(got) != "x"+s {
			t.Fatalf("AppendUnquoted(%q) = %q, %v; Unquote says %q, %v", obj, got, gotOK, s, ok)
		}
	})
}
