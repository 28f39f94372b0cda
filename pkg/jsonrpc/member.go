package jsonrpc

import (
	"errors"
	"iter"
)

// These helpers read and edit one member of a JSON object without decoding
// the rest, so that a router can rename a tool or swap a progress token and
// pass everything else on byte for byte. They expect valid JSON (as Decode
// leaves params and results); on anything else they report the member
// missing, or an error, and never panic.

// Member returns the raw value of a top-level member of the object obj.
func Member(obj []byte, key string) ([]byte, bool) {
	obj = trimSpace(obj)
	if len(obj) == 0 || obj[0] != '{' {
		return nil, false
	}
	var found []byte
	ok := false
	for it := (objectIter{data: obj}); ; {
		k, v, more := it.next()
		if !more {
			break
		}
		if string(keyName(k)) == key {
			found, ok = v, true // the last one wins, as in encoding/json
		}
	}
	return found, ok
}

// Members yields the top-level members of the object obj in order, each
// name unescaped and each value raw, in one pass: reading several members of
// a large object costs one scan of it, not one per member. The name is only
// valid during its iteration (switch on string(name), which does not
// allocate). Nothing is yielded when obj is not an object.
func Members(obj []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		obj := trimSpace(obj)
		if len(obj) == 0 || obj[0] != '{' {
			return
		}
		for it := (objectIter{data: obj}); ; {
			k, v, more := it.next()
			if !more || !yield(keyName(k), v) {
				return
			}
		}
	}
}

// StringMember returns a top-level member that is a JSON string.
func StringMember(obj []byte, key string) (string, bool) {
	v, ok := Member(obj, key)
	if !ok {
		return "", false
	}
	return unquote(v)
}

// Unquote returns the value of v, a raw member value (as Members yields
// it), when v is a JSON string.
func Unquote(v []byte) (string, bool) { return unquote(trimSpace(v)) }

// AppendUnquoted appends to b the value of v, a raw member value, when v is
// a JSON string, as Unquote returns it: a string of plain ASCII is appended
// as it is, without a string made of it. It reports false, appending
// nothing, when v is not a JSON string.
func AppendUnquoted(b, v []byte) ([]byte, bool) {
	v = trimSpace(v)
	if !quoted(v) {
		return b, false
	}
	if inner, ok := plainInner(v); ok {
		return append(b, inner...), true
	}
	s, ok := unescape(v)
	if !ok {
		return b, false
	}
	return append(b, s...), true
}

// Splice returns a copy of obj with value in place of old, which must be a
// member value of obj as Member or Members returned it (a slice of obj
// itself, not a copy): an object read in one pass is then edited without a
// second. It reports false when old does not lie within obj.
func Splice(obj, old, value []byte) ([]byte, bool) {
	off, ok := offset(obj, old)
	if !ok {
		return nil, false
	}
	out := make([]byte, 0, len(obj)-len(old)+len(value))
	out = append(out, obj[:off]...)
	out = append(out, value...)
	return append(out, obj[off+len(old):]...), true
}

// SpliceString is Splice with the JSON string s as the new value, written
// straight into the copy (one allocation where quoting s first takes two).
func SpliceString(obj, old []byte, s string) ([]byte, bool) {
	if _, ok := offset(obj, old); !ok {
		return nil, false
	}
	return AppendSpliceString(make([]byte, 0, len(obj)-len(old)+len(s)+2), obj, old, s)
}

// AppendSpliceString appends obj to b with old, a slice of obj, replaced by
// the JSON string s: SpliceString into a buffer of the caller's, such as
// the encoding of the message obj is part of (Request.AppendJSONRenamed).
// It reports false, appending nothing, when old does not lie within obj.
func AppendSpliceString(b, obj, old []byte, s string) ([]byte, bool) {
	off, ok := offset(obj, old)
	if !ok {
		return b, false
	}
	b = append(b, obj[:off]...)
	b = AppendString(b, s)
	return append(b, obj[off+len(old):]...), true
}

// Within reports whether old is a non-empty slice of obj: what Splice and
// SpliceString replace.
func Within(obj, old []byte) bool {
	_, ok := offset(obj, old)
	return ok
}

// offset returns where old starts in obj, if it is a non-empty slice of it.
func offset(obj, old []byte) (int, bool) {
	off := cap(obj) - cap(old)
	if len(old) == 0 || off < 0 || off+len(old) > len(obj) || &obj[off] != &old[0] {
		return 0, false
	}
	return off, true
}

var errNotObject = errors.New("jsonrpc: not a JSON object")

// SetMember returns a copy of obj with the member key set to value (valid
// JSON), replacing every occurrence or, when there is none, adding it last.
func SetMember(obj []byte, key string, value []byte) ([]byte, error) {
	obj = trimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, errNotObject
	}
	out := make([]byte, 0, len(obj)+len(key)+len(value)+4)
	last := 0 // obj[last:] is still to copy
	replaced := false
	for it := (objectIter{data: obj}); ; {
		k, v, more := it.next()
		if !more {
			break
		}
		if string(keyName(k)) != key {
			continue
		}
		start := it.i - len(v) // v ends where the iterator stopped
		out = append(out, obj[last:start]...)
		out = append(out, value...)
		last = it.i
		replaced = true
	}
	if replaced {
		return append(out, obj[last:]...), nil
	}
	body := trimSpace(obj[1 : len(obj)-1])
	out = append(out, '{')
	out = append(out, body...)
	if len(body) > 0 {
		out = append(out, ',')
	}
	out = AppendString(out, key)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, '}'), nil
}

// WithoutMembers returns a copy of the object obj without the top-level
// members whose names drop picks (each name unescaped, as Members yields
// it), every other member's value byte for byte and in its order, and
// whether it dropped any. Nothing is dropped from what is not an object,
// which comes back as {}.
func WithoutMembers(obj []byte, drop func(name []byte) bool) ([]byte, bool) {
	out := make([]byte, 1, len(obj)+1)
	out[0] = '{'
	dropped := false
	for name, v := range Members(obj) {
		if drop(name) {
			dropped = true
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = AppendString(out, string(name))
		out = append(out, ':')
		out = append(out, v...)
	}
	return append(out, '}'), dropped
}
