package hub

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// sampleEnvelopes hold every member of an envelope, each kind of value and
// strings that need escaping.
func sampleEnvelopes() []*envelope {
	at := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	return []*envelope{
		{Kind: envCall, From: "a", Call: 7, Client: "c<1>", Replica: "r/1", Server: "s", Method: "tools/call",
			Params: json.RawMessage(`{"name":"x"}`), Caps: &clientCaps{Sampling: true, ElicitURL: true, Roots: true}},
		{Kind: envCall, From: "a", Call: 8, Caps: &clientCaps{}, Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nk=v\nb=\"1\""},
		{Kind: envCall, From: "a", Call: 10, Caps: &clientCaps{ElicitForm: true, Tasks: true}, Owner: "oauth:https://i alice"},
		{Kind: envTask, From: "a", Call: 11, Owner: "token:bob", Method: "tasks/cancel", Params: json.RawMessage(`{"taskId":"x"}`)},
		{Kind: envResult, From: "b", Call: 7, Error: &wireError{Code: -32602, Message: "bad \"x\"\n\u2028", Data: json.RawMessage(`{"uri":"a"}`)}},
		{Kind: envResult, From: "b", Call: 9, Error: &wireError{Code: -32000, Message: "gone"}},
		{Kind: envHeartbeat, From: "c", Version: 1<<64 - 1, Clients: 12},
		{Kind: envSnapshot, From: "d", Version: 2, Snapshot: &snapshot{Addr: "x:1", StartedAt: at,
			Replicas: []replicaSnap{{ID: "d/1", Name: "n", ConnectedAt: at, Lists: [numKinds][]json.RawMessage{{json.RawMessage(`{"name":"t"}`)}}}}}},
		{Kind: envSnapPart, From: "e", Version: 3, Part: 1, Parts: 4, Chunk: []byte("\x00\xffchunk\n")},
		{Kind: envSReq, From: "f", Call: 3, Of: 2, Method: "sampling/createMessage", URI: "file:///ü", Unsub: true},
		{Kind: envResume, From: "f", Call: 6, Owner: "token:al\"ice\u2028", Method: "tools/call", Params: json.RawMessage(`{"requestState":"sb1.x"}`)},
		{Kind: envHTTP, From: "g", Call: 4, HTTP: &httpPart{Method: "POST", URL: "/mcp", Header: http.Header{"A": {"b"}}, Body: []byte("{}"), End: true}},
		{Kind: envNotify, From: "h", Call: 5, Method: "notifications/progress", Params: json.RawMessage(`{"a": [1, 2]}`), Result: json.RawMessage(`{}`)},
		{Kind: "future", From: "i"},
	}
}

// TestEnvelope_headAsEncodingJSON: the hand-written header is what
// encoding/json makes of the envelope and reads back, both ways, so that
// instances of either kind understand each other.
func TestEnvelope_headAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, env := range sampleEnvelopes() {
		ours, err := env.appendHead(nil)
		require.NoError(t, err)
		theirs, err := json.Marshal(env)
		require.NoError(t, err)
		assert.JSONEq(t, string(theirs), string(ours), "%s", ours)
		assert.NotContains(t, string(ours), "\n")

		var byJSON envelope
		require.NoError(t, json.Unmarshal(ours, &byJSON), "%s", ours)
		var byHand envelope
		require.True(t, byHand.decodeHead(theirs), "%s", theirs)
		assert.Equal(t, byJSON, byHand)
		want := *env
		var compact bytes.Buffer
		for _, raw := range []*json.RawMessage{&want.Params, &want.Result} {
			if len(*raw) > 0 {
				compact.Reset()
				require.NoError(t, json.Compact(&compact, *raw))
				*raw = bytes.Clone(compact.Bytes())
			}
		}
		assert.Equal(t, want, byHand)
	}
}

// TestEnvelope_everyMemberTravels: each member of the envelope, set alone,
// comes back through the hand-written header as through encoding/json: a
// member added to the struct and forgotten in appendHead or decodeHead
// fails here.
func TestEnvelope_everyMemberTravels(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[envelope]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Tag.Get("json") == "-" {
			continue // how the envelope is written, not what travels (Rename)
		}
		t.Run(f.Name, func(t *testing.T) {
			env := envelope{Kind: "k", From: "f"}
			v := reflect.ValueOf(&env).Elem().Field(i)
			switch {
			case f.Type == reflect.TypeFor[json.RawMessage]():
				v.SetBytes([]byte(`{"a":[1,"\n"]}`))
			case f.Type.Kind() == reflect.String:
				v.SetString("x \"y\"\n<z>")
			case f.Type.Kind() == reflect.Uint64:
				v.SetUint(1<<63 + 7)
			case f.Type.Kind() == reflect.Int:
				v.SetInt(-3)
			case f.Type.Kind() == reflect.Bool:
				v.SetBool(true)
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint8:
				v.SetBytes([]byte("\x00chunk"))
			case f.Type.Kind() == reflect.Pointer:
				v.Set(reflect.New(f.Type.Elem()))
			default:
				t.Fatalf("a member of type %v: give TestEnvelope_everyMemberTravels a value for it", f.Type)
			}
			head, err := env.appendHead(nil)
			require.NoError(t, err)
			var byJSON, byHand envelope
			require.NoError(t, json.Unmarshal(head, &byJSON), "%s", head)
			theirs, err := json.Marshal(&env)
			require.NoError(t, err)
			require.True(t, byHand.decodeHead(theirs), "%s", theirs)
			assert.Equal(t, byJSON, byHand, "%s", head)
			assert.False(t, reflect.ValueOf(byHand).Field(i).IsZero(), "%s is lost on the way: %s", f.Name, head)
		})
	}
}

// TestEnvelope_badHeads: members of the wrong type, or a header that is
// not an object, make the envelope invalid, as they do for encoding/json.
func TestEnvelope_badHeads(t *testing.T) {
	t.Parallel()
	for _, head := range []string{
		`{"k":"call","f":"a","c":-1}`,
		`{"k":"call","f":"a","c":1.5}`,
		`{"k":"call","f":"a","n":"2"}`,
		`{"k":1,"f":"a"}`,
		`{"k":"call","f":"a","x":"yes"}`,
		`{"k":"call","f":"a","cap":[]}`,
		`{"k":"call","f":"a","cap":{"s":1}}`,
		`{"k":"call","f":"a","err":"x"}`,
		`{"k":"call","f":"a","ch":"not base64!"}`,
		`{"k":"call","f":"a"`,
		`["k","call"]`,
		`{"k":"call","f":null}`,
	} {
		var byJSON envelope
		jsonOK := json.Unmarshal([]byte(head), &byJSON) == nil && byJSON.From != ""
		_, ok := decodeEnvelope([]byte(head))
		assert.False(t, ok, head)
		assert.False(t, jsonOK, "encoding/json refuses %s too", head)
	}
}

// FuzzEnvelope: whatever decodeEnvelope accepts encodes again, to a header
// without a newline, and decodes to what it encoded.
func FuzzEnvelope(f *testing.F) {
	for _, env := range sampleEnvelopes() {
		b, err := env.encode()
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"k":"call","f":"a","cap":{"s":true,"s":null},"cap":{"r":true}}`))
	f.Add([]byte("{\"k\":\"res\",\"f\":\"b\",\"b\":\"res\"}\n[1,2]"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		env, ok := decodeEnvelope(payload)
		if !ok {
			return
		}
		once, err := env.encode()
		if err != nil {
			return // a raw member encoding/json would refuse too
		}
		head, _, _ := bytes.Cut(once, []byte{'\n'})
		if !json.Valid(head) {
			t.Fatalf("invalid header %q from %q", head, payload)
		}
		again, ok := decodeEnvelope(once)
		if !ok {
			t.Fatalf("%q does not decode; it came from %q", once, payload)
		}
		twice, err := again.encode()
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("encoding is not stable: %q then %q (%v)", once, twice, err)
		}
	})
}

// BenchmarkEnvelope encodes and decodes the two envelopes of a call
// between instances: the call and its result.
func BenchmarkEnvelope(b *testing.B) {
	call := &envelope{Kind: envCall, From: "0b7c2f1e-6f1d-4a9e-9c57-1d2f3e4a5b6c", Call: 123456, Client: "0b7c2f1e/17",
		Replica: "9a8b7c6d-1e2f-3a4b-5c6d-7e8f9a0b1c2d/3", Server: "bench", Method: "tools/call",
		Params: json.RawMessage(`{"name":"echo","arguments":{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`),
		Caps:   &clientCaps{Sampling: true}}
	res := &envelope{Kind: envResult, From: "9a8b7c6d-1e2f-3a4b-5c6d-7e8f9a0b1c2d", Call: 123456,
		Result: json.RawMessage(`{"content":[],"structuredContent":{"text":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`)}
	b.ReportAllocs()
	for b.Loop() {
		for _, env := range []*envelope{call, res} {
			wire, err := env.encode()
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := decodeEnvelope(wire); !ok {
				b.Fatal("does not decode")
			}
		}
	}
}

// Every combination of capabilities has its shared copy, and decoding an
// envelope gives the shared copy of what it carried.
func TestClientCaps_shared(t *testing.T) {
	t.Parallel()
	seen := map[*clientCaps]bool{}
	for i := range 32 {
		c := clientCaps{Sampling: i&1 != 0, SamplingTools: i&2 != 0, ElicitForm: i&4 != 0, ElicitURL: i&8 != 0, Roots: i&16 != 0}
		p := c.shared()
		require.Equal(t, c, *p)
		assert.False(t, seen[p], "%+v shares a copy with another combination", c)
		seen[p] = true

		head, err := (&envelope{Kind: envCall, From: "a", Caps: &c}).appendHead(nil)
		require.NoError(t, err)
		var got envelope
		require.True(t, got.decodeHead(head), "%s", head)
		assert.Same(t, p, got.Caps, "%s", head)
	}
}

// TestEnvelope_renameAsWritten: a call's tool name is replaced as its
// params are written, which travel renamed and the sender's untouched; a
// name that is not within the params fails the encoding.
func TestEnvelope_renameAsWritten(t *testing.T) {
	t.Parallel()
	params := json.RawMessage(`{"name":"demo__add","arguments":{"x":"demo__add"}}`)
	old, _ := jsonrpc.Member(params, "name")
	env := &envelope{Kind: envCall, From: "a", Call: 7, Method: "tools/call", Params: params, Rename: old, RenameTo: "add"}
	b, err := env.encode()
	require.NoError(t, err)
	got, ok := decodeEnvelope(b)
	require.True(t, ok, "%s", b)
	assert.Equal(t, `{"name":"add","arguments":{"x":"demo__add"}}`, string(got.Params))
	assert.Nil(t, got.Rename, "a rename does not travel")
	assert.Equal(t, `{"name":"demo__add","arguments":{"x":"demo__add"}}`, string(params))

	env.Rename = []byte(`"demo__add"`)
	_, err = env.encode()
	assert.Error(t, err)
}
