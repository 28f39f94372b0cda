package jsonrpc

import "errors"

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

// StringMember returns a top-level member that is a JSON string.
func StringMember(obj []byte, key string) (string, bool) {
	v, ok := Member(obj, key)
	if !ok {
		return "", false
	}
	return unquote(v)
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
