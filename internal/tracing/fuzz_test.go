package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

var metaSeeds = []string{
	``, `null`, `{}`, `[]`, `7`, `"x"`,
	`{"name":"echo","arguments":{"text":"hi"}}`,
	`{"_meta":{"traceparent":"` + testTraceparent + `","tracestate":"a=b","baggage":"k=v"}}`,
	`{"_meta":{"progressToken":1,"traceparent":"bad","x":[{}]},"_meta":{"y":2}}`,
	`{"_meta":7}`, `{"_meta":null}`, `{"_meta":{"traceparent":7}}`,
	`{"a":{"_meta":{"traceparent":"` + testTraceparent + `"}}}`,
	`{"_meta":{"trace\u0070arent":"` + testTraceparent + `"}}`,
	` { "_meta" : { } , "b" : "\"}" } `,
	`{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p"}}`,
	`{"_meta":{"note":"baggage"},"arguments":{"_meta":{}}}`,
}

// FuzzExtractMeta holds metaFields (one pass over _meta, nothing else
// decoded) to encoding/json's reading of the same params, and ExtractMeta to
// never failing: whatever it is given, a context comes back, valid only for
// a well-formed traceparent.
func FuzzExtractMeta(f *testing.F) {
	for _, s := range metaSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		got := metaFields(params)
		ctx := on().ExtractMeta(context.Background(), params)
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && got.traceparent[3:35] != sc.TraceID().String() {
			t.Fatalf("trace id %s from traceparent %q", sc.TraceID(), got.traceparent)
		}
		// Through maps, where the last of duplicate keys wins, as it does
		// for the codec's helpers.
		var p map[string]json.RawMessage
		var meta map[string]any
		if !json.Valid(params) || json.Unmarshal(params, &p) != nil {
			return
		}
		if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
			return
		}
		var want fields
		for k, v := range meta {
			if s, ok := v.(string); ok {
				want.Set(k, s)
			}
		}
		if got != want {
			t.Fatalf("metaFields(%s) = %+v, encoding/json reads %+v", params, got, want)
		}
	})
}

// FuzzInjectMeta checks that InjectMeta never breaks params: valid params
// stay valid, every member but the trace keys of _meta is kept, the trace
// keys are the context's, and params it cannot write into come back as they
// were.
func FuzzInjectMeta(f *testing.F) {
	for _, s := range metaSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		tr := on()
		ctx := remoteParent(context.Background())
		out := tr.InjectMeta(ctx, params)
		if !json.Valid(params) && len(bytes.TrimSpace(params)) > 0 {
			return // the hub only passes params that decoded
		}
		if !json.Valid(out) {
			t.Fatalf("InjectMeta(%q) = %q: not JSON", params, out)
		}
		in, inObj := object(params)
		got, gotObj := object(out)
		if !inObj {
			if !bytes.Equal(out, params) {
				t.Fatalf("params that are not an object were changed: %q -> %q", params, out)
			}
			return
		}
		if !gotObj {
			t.Fatalf("InjectMeta(%q) = %q: not an object", params, out)
		}
		inMeta, hadMeta := in["_meta"]
		if hadMeta {
			if _, ok := inMeta.(map[string]any); !ok {
				if !bytes.Equal(out, params) {
					t.Fatalf("params whose _meta is not an object were changed: %q -> %q", params, out)
				}
				return
			}
		}
		gotMeta, _ := got["_meta"].(map[string]any)
		delete(in, "_meta")
		delete(got, "_meta")
		if !reflect.DeepEqual(in, got) {
			t.Fatalf("members beside _meta changed: %q -> %q", params, out)
		}
		want := map[string]any{}
		if m, ok := inMeta.(map[string]any); ok {
			maps.Copy(want, m)
		}
		delete(want, keyTraceparent)
		delete(want, keyTracestate)
		delete(want, keyBaggage)
		want[keyTraceparent] = testTraceparent
		if !reflect.DeepEqual(want, gotMeta) {
			t.Fatalf("_meta: %q -> %q, want %v", params, out, want)
		}
		if sc := trace.SpanContextFromContext(tr.ExtractMeta(context.Background(), out)); sc.TraceID().String() != testTraceID {
			t.Fatalf("the written context does not read back: %q", out)
		}
	})
}

// remoteParent returns ctx with the span context of testTraceparent alone
// (no tracestate, no baggage).
func remoteParent(ctx context.Context) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, trace.SpanContextFromContext(
		extractMeta(context.Background(), []byte(`{"_meta":{"traceparent":"`+testTraceparent+`"}}`))))
}

// object decodes b as a JSON object; empty or null params count as the empty
// object (InjectMeta creates params for them).
func object(b []byte) (map[string]any, bool) {
	if t := bytes.TrimSpace(b); len(t) == 0 || string(t) == "null" {
		return map[string]any{}, true
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// FuzzUnpack checks that Unpack never fails on what arrives from another
// instance, and that what it accepts packs back to the same trace context.
func FuzzUnpack(f *testing.F) {
	for _, s := range []string{
		"", testTraceparent, testTraceparent + "\nrojo=1\nk=v", testTraceparent + "\n\nk=v",
		"00-" + testTraceID + "-" + testSpanID + "-01\n\n\n", "\n\n", "01-" + testTraceID + "-" + testSpanID + "-01-extra",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr := on()
		ctx := tr.Unpack(context.Background(), s)
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() {
			return
		}
		again := trace.SpanContextFromContext(tr.Unpack(context.Background(), tr.Pack(ctx)))
		if !sc.Equal(again) {
			t.Fatalf("Unpack(%q) = %v, packed and unpacked again %v", s, sc, again)
		}
	})
}
