package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Object is a JSON object decoded one level deep. Its members stay raw, so a
// message can be edited and passed on without losing members the hub does
// not know: routing decodes only what it needs.
type Object map[string]json.RawMessage

// ParseObject decodes raw params or a raw result. Absent params (nil) give an
// empty object; anything but an object is invalid params.
func ParseObject(raw json.RawMessage) (Object, error) {
	o := Object{}
	if len(raw) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params must be a JSON object")
	}
	return o, nil
}

// String returns a member that is a string.
func (o Object) String(key string) (string, bool) {
	raw, ok := o[key]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// RequireString returns a member that must be a non-empty string, or an
// invalid-params error naming it.
func (o Object) RequireString(key string) (string, error) {
	s, ok := o.String(key)
	if !ok || s == "" {
		return "", jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%q must be a non-empty string", key)
	}
	return s, nil
}

// Set sets a member to v encoded as JSON.
func (o Object) Set(key string, v any) {
	raw, err := jsonrpc.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("mcp: encoding %q: %v", key, err)) // only values the hub builds reach here
	}
	o[key] = raw
}

// Meta returns the _meta object (empty when absent or not an object).
func (o Object) Meta() Object {
	m, err := ParseObject(o["_meta"])
	if err != nil {
		return Object{}
	}
	return m
}

// MetaValue returns one member of _meta.
func (o Object) MetaValue(key string) (json.RawMessage, bool) {
	v, ok := o.Meta()[key]
	return v, ok
}

// SetMeta sets one member of _meta, keeping the others.
func (o Object) SetMeta(key string, v any) {
	m := o.Meta()
	m.Set(key, v)
	o.Set("_meta", m)
}

// DeleteMeta removes one member of _meta, and _meta when it becomes empty.
func (o Object) DeleteMeta(key string) {
	m := o.Meta()
	if _, ok := m[key]; !ok {
		return
	}
	delete(m, key)
	if len(m) == 0 {
		delete(o, "_meta")
		return
	}
	o.Set("_meta", m)
}

// Raw encodes the object.
func (o Object) Raw() json.RawMessage {
	raw, _ := json.Marshal(map[string]json.RawMessage(o))
	return raw
}

// WithoutMeta returns params without the members of its _meta that drop
// picks, and _meta itself when nothing is left in it; everything else in
// its order, each value byte for byte (no decoding: a router strips its own
// hints this way). It returns params itself when nothing is dropped. One
// pass over params writes the copy, in one allocation (a _meta found,
// edited and set again took three passes and three).
func WithoutMeta(params []byte, drop func(name []byte) bool) []byte {
	if !bytes.Contains(params, []byte(`_meta"`)) && !bytes.Contains(params, []byte(`\u`)) {
		return params // no _meta (an escape might spell one: those are walked)
	}
	out := make([]byte, 1, len(params)+1)
	out[0] = '{'
	dropped := false
	for name, v := range jsonrpc.Members(params) {
		mark := len(out)
		out = appendName(out, name)
		if string(name) != "_meta" || len(v) == 0 || v[0] != '{' {
			out = append(out, v...)
			continue
		}
		out = append(out, '{')
		kept := false
		for mname, mv := range jsonrpc.Members(v) {
			if drop(mname) {
				dropped = true
				continue
			}
			out = append(appendName(out, mname), mv...)
			kept = true
		}
		if !kept {
			out = out[:mark] // nothing left in _meta: it goes too
			continue
		}
		out = append(out, '}')
	}
	if !dropped {
		return params
	}
	return append(out, '}')
}

// appendName appends a member's name and colon to an object being written,
// after a comma unless it is the first member (no value ends with '{').
func appendName(b, name []byte) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = jsonrpc.AppendString(b, string(name))
	return append(b, ':')
}
