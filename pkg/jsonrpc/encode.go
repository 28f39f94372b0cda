package jsonrpc

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the request's compact JSON encoding to b.
func (r *Request) AppendJSON(b []byte) []byte {
	b = r.appendHead(b)
	if len(r.Params) > 0 {
		b = append(b, `,"params":`...)
		b = append(b, r.Params...)
	}
	return append(b, '}')
}

// AppendJSONRenamed appends the request's encoding as AppendJSON does, with
// old, a slice of its params (a member's value), replaced by the JSON string
// s as they are written: the params are copied once, into the encoding,
// where splicing them first (SpliceString) copied them twice. It reports
// false, appending nothing, when old does not lie within the params.
func (r *Request) AppendJSONRenamed(b []byte, old []byte, s string) ([]byte, bool) {
	if _, ok := offset(r.Params, old); !ok {
		return b, false
	}
	b = append(r.appendHead(b), `,"params":`...)
	b, _ = AppendSpliceString(b, r.Params, old, s)
	return append(b, '}'), true
}

// appendHead appends the request's encoding up to its params: its opening
// brace, version, id and method.
func (r *Request) appendHead(b []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0",`...)
	if r.ID.IsValid() {
		b = append(b, `"id":`...)
		b = r.ID.AppendJSON(b)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	return AppendString(b, r.Method)
}

// AppendJSON appends the response's compact JSON encoding to b.
func (r *Response) AppendJSON(b []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = r.ID.AppendJSON(b)
	if r.Error != nil {
		b = append(b, `,"error":`...)
		b = r.Error.AppendJSON(b)
	} else {
		b = append(b, `,"result":`...)
		if len(r.Result) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, r.Result...)
		}
	}
	return append(b, '}')
}

// AppendResult appends the encoding of the response to id whose result is
// a's, as Response.AppendJSON would encode NewResult's, with a encoded
// straight into b: a large result is then written once, into the frame,
// where NewResult first encodes it into a buffer of its own. On an error
// of a's, b is returned as it was.
func AppendResult(b []byte, id ID, a Appender) ([]byte, error) {
	start := len(b)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = id.AppendJSON(b)
	b = append(b, `,"result":`...)
	n := len(b)
	b, err := a.AppendJSON(b)
	if err != nil {
		return b[:start], err
	}
	if len(b) == n {
		b = append(b, "null"...)
	}
	return append(b, '}'), nil
}

// AppendJSON appends the error object's compact JSON encoding to b.
func (e *Error) AppendJSON(b []byte) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b = AppendString(b, e.Message)
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, e.Data...)
	}
	return append(b, '}')
}

// Encode returns the compact JSON encoding of one message.
func Encode(m Message) []byte {
	switch m := m.(type) {
	case *Request:
		return m.Encode()
	case *Response:
		return m.Encode()
	}
	return m.AppendJSON(nil)
}

// Encode returns the request's compact JSON encoding in a buffer of the right
// size: one allocation.
func (r *Request) Encode() []byte { return r.AppendJSON(make([]byte, 0, r.sizeHint())) }

// Encode returns the response's compact JSON encoding in a buffer of the
// right size: one allocation.
func (r *Response) Encode() []byte { return r.AppendJSON(make([]byte, 0, r.sizeHint())) }

// envelope covers {"jsonrpc":"2.0","id":...,"method":"",...} and an integer id.
const envelope = 64

// SizeHint is a close upper estimate of the encoded size (escapes aside):
// a buffer of it takes AppendJSON without growing, as a rule.
func (r *Request) SizeHint() int { return r.sizeHint() }

// SizeHint is a close upper estimate of the encoded size (escapes aside):
// a buffer of it takes AppendJSON without growing, as a rule.
func (r *Response) SizeHint() int { return r.sizeHint() }

// sizeHint is a close upper estimate of the encoded size (escapes aside).
func (r *Request) sizeHint() int { return envelope + len(r.ID.s) + len(r.Method) + len(r.Params) }

func (r *Response) sizeHint() int {
	n := envelope + len(r.ID.s) + len(r.Result)
	if r.Error != nil {
		n += 32 + len(r.Error.Message) + len(r.Error.Data)
	}
	return n
}

// EncodeBatch returns the JSON array of the messages' encodings.
func EncodeBatch(ms []Message) []byte {
	n := 2
	for _, m := range ms {
		switch m := m.(type) {
		case *Request:
			n += m.sizeHint() + 1
		case *Response:
			n += m.sizeHint() + 1
		}
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = m.AppendJSON(b)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string to b. Invalid UTF-8 becomes U+FFFD,
// so the output is always valid JSON in valid UTF-8.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
