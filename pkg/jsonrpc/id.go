package jsonrpc

import (
	"encoding/json"
	"errors"
	"strconv"
)

type idKind uint8

const (
	idAbsent idKind = iota
	idNull
	idString
	idNumber
)

// ID is a request id: a string, a number or null, kept exactly as it was sent.
// Numbers keep their literal text, so integers beyond 2^53 survive a round
// trip. The zero ID is "absent", the id of a notification. IDs are comparable
// and can key a map; a string "1" and a number 1 are different IDs.
type ID struct {
	kind idKind
	s    string // the string value, or the number's literal text
}

// StringID returns an ID holding the string s.
func StringID(s string) ID { return ID{kind: idString, s: s} }

// Int64ID returns an ID holding the integer n.
func Int64ID(n int64) ID { return ID{kind: idNumber, s: strconv.FormatInt(n, 10)} }

// NullID returns the null ID, used in error responses when a request's id
// could not be read.
func NullID() ID { return ID{kind: idNull} }

// IsValid reports whether the ID is present (a string, a number or null).
func (id ID) IsValid() bool { return id.kind != idAbsent }

// IsNull reports whether the ID is the JSON null.
func (id ID) IsNull() bool { return id.kind == idNull }

// IsString reports whether the ID is a string.
func (id ID) IsString() bool { return id.kind == idString }

// IsNumber reports whether the ID is a number.
func (id ID) IsNumber() bool { return id.kind == idNumber }

// Int64 returns the ID as an integer when it is a number that fits in one.
func (id ID) Int64() (int64, bool) {
	if id.kind != idNumber {
		return 0, false
	}
	n, err := strconv.ParseInt(id.s, 10, 64)
	return n, err == nil
}

// String returns the ID as JSON text: a quoted string, a number, "null", or ""
// when absent. It is meant for logs.
func (id ID) String() string {
	if id.kind == idAbsent {
		return ""
	}
	return string(id.AppendJSON(nil))
}

// AppendJSON appends the ID's JSON encoding to b (null when absent).
func (id ID) AppendJSON(b []byte) []byte {
	switch id.kind {
	case idString:
		return AppendString(b, id.s)
	case idNumber:
		return append(b, id.s...)
	default:
		return append(b, "null"...)
	}
}

// MarshalJSON implements [json.Marshaler].
func (id ID) MarshalJSON() ([]byte, error) { return id.AppendJSON(nil), nil }

// UnmarshalJSON implements [json.Unmarshaler]: it accepts a string, a number
// or null.
func (id *ID) UnmarshalJSON(data []byte) error {
	v, ok := parseID(trimSpace(data))
	if !ok || !json.Valid(data) {
		return errors.New("jsonrpc: id must be a string, a number or null")
	}
	*id = v
	return nil
}

// parseID reads an id from a JSON value that has already been validated.
func parseID(v []byte) (ID, bool) {
	if len(v) == 0 {
		return ID{}, false
	}
	switch c := v[0]; {
	case c == '"':
		s, ok := unquote(v)
		if !ok {
			return ID{}, false
		}
		return StringID(s), true
	case c == '-' || (c >= '0' && c <= '9'):
		return ID{kind: idNumber, s: string(v)}, true
	case string(v) == "null":
		return NullID(), true
	}
	return ID{}, false
}
