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
	n    int64  // a number in canonical integer form, with s empty
	s    string // the string value, or any other number's literal text
}

// StringID returns an ID holding the string s.
func StringID(s string) ID { return ID{kind: idString, s: s} }

// Int64ID returns an ID holding the integer n.
func Int64ID(n int64) ID { return ID{kind: idNumber, n: n} }

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
	if id.kind != idNumber || id.s != "" {
		return 0, false
	}
	return id.n, true
}

// Text returns the ID as plain text: a string's value (unquoted), a
// number's literal; "" when absent or null. It costs no allocation but for
// an integer beyond 99.
func (id ID) Text() string {
	switch {
	case id.kind == idString || id.kind == idNumber && id.s != "":
		return id.s
	case id.kind == idNumber:
		return strconv.FormatInt(id.n, 10)
	}
	return ""
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
		if id.s == "" {
			return strconv.AppendInt(b, id.n, 10)
		}
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
		if n, ok := canonicalInt(v); ok {
			return ID{kind: idNumber, n: n}, true
		}
		return ID{kind: idNumber, s: string(v)}, true
	case string(v) == "null":
		return NullID(), true
	}
	return ID{}, false
}

// canonicalInt parses a number written the way strconv.FormatInt writes it
// (no leading zero, no "-0", no fraction or exponent) that fits in an int64.
// Only such numbers are held as integers, so that every ID has one form and
// IDs compare equal exactly when their text is equal.
func canonicalInt(v []byte) (int64, bool) {
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(v) > 1) {
		return 0, false // 18 digits always fit; longer ones keep their text
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if v[0] == '-' {
		n = -n
	}
	return n, true
}
