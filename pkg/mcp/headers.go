package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// HTTP headers that mirror a request of 2026-07-28 (SEP-2243) beside
// MCP-Protocol-Version, Mcp-Method and Mcp-Name: a tool's input schema may
// mark a parameter with "x-mcp-header": "<Name>", and a call's argument for
// it then travels in Mcp-Param-<Name> too, so that a proxy can route on it
// without reading the body.
const (
	HeaderParamPrefix = "Mcp-Param-"
	// SchemaHeaderKey is the keyword of a property's schema that names its
	// header.
	SchemaHeaderKey = "x-mcp-header"
)

// The form of a header value in base64 (SEP-2243's "sentinel"): the
// markers are case-sensitive.
const (
	base64Open  = "=?base64?"
	base64Close = "?="
)

// Bounds of the search for x-mcp-header in an input schema: properties
// deeper than maxHeaderDepth, and annotations beyond maxParamHeaders, are
// not looked at (a schema is the server's, but the hub reads every
// server's).
const (
	maxHeaderDepth  = 16
	maxParamHeaders = 64
)

// EncodeHeaderValue returns s as an MCP header value: as it is when it is
// printable ASCII with no space or tab at either end, else (and when it
// looks like the base64 form itself) "=?base64?" + the standard, padded
// base64 of s + "?=".
func EncodeHeaderValue(s string) string {
	if plainHeaderValue(s) && !isBase64Form(s) {
		return s
	}
	return base64Open + base64.StdEncoding.EncodeToString([]byte(s)) + base64Close
}

// plainHeaderValue reports whether s can be sent as it is: not empty,
// printable ASCII (space inside), no whitespace at either end.
func plainHeaderValue(s string) bool {
	if s == "" || s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func isBase64Form(v string) bool {
	return len(v) >= len(base64Open)+len(base64Close) && strings.HasPrefix(v, base64Open) && strings.HasSuffix(v, base64Close)
}

// DecodeHeaderValue returns what an MCP header value says, without the
// whitespace around it (RFC 9110 leaves it out of the value): the base64
// form decoded strictly (the standard alphabet, padded, and UTF-8), any
// other value as it is (a value with only one of the markers is literal).
// A value with bytes other than printable ASCII, space and tab, or a
// base64 form that does not decode, is an error (-32020).
func DecodeHeaderValue(v string) (string, *jsonrpc.Error) {
	for i := 0; i < len(v); i++ {
		if b := v[i]; (b < 0x20 && b != '\t') || b > 0x7e {
			return "", ErrHeaderMismatch("a header value holds the byte 0x%02x: only printable ASCII may be sent as it is (encode the rest as =?base64?...?=)", b)
		}
	}
	v = strings.Trim(v, " \t")
	if !isBase64Form(v) {
		return v, nil
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(v[len(base64Open) : len(v)-len(base64Close)])
	if err != nil {
		return "", ErrHeaderMismatch("a header value's base64 does not decode (standard alphabet, padded): %v", err)
	}
	if !utf8.Valid(raw) {
		return "", ErrHeaderMismatch("a header value's base64 decodes to bytes that are not UTF-8")
	}
	return string(raw), nil
}

// paramHeader is one x-mcp-header annotation of an input schema.
type paramHeader struct {
	name string   // Mcp-Param-<name>
	path []string // the property names from the schema's root to the parameter
}

// paramHeaders returns the x-mcp-header annotations of an input schema, in
// its order, at any depth of nested object properties. An annotation whose
// value is not an HTTP token (RFC 9110's tchar) cannot name a header, and
// is skipped: a client must not call such a tool over HTTP.
func paramHeaders(schema json.RawMessage) []paramHeader {
	if !bytes.Contains(schema, []byte(SchemaHeaderKey)) && !bytes.Contains(schema, []byte(`\u`)) {
		return nil // most schemas: no annotation (an escape might spell one)
	}
	var out []paramHeader
	var walk func(schema []byte, path []string)
	walk = func(schema []byte, path []string) {
		props, ok := jsonrpc.Member(schema, "properties")
		if !ok || len(path) >= maxHeaderDepth {
			return
		}
		for key, prop := range jsonrpc.Members(props) {
			if len(out) >= maxParamHeaders {
				return
			}
			p := append(path[:len(path):len(path)], string(key))
			if raw, ok := jsonrpc.Member(prop, SchemaHeaderKey); ok {
				if name, ok := jsonrpc.Unquote(raw); ok && isToken(name) {
					out = append(out, paramHeader{name: name, path: p})
				}
			}
			walk(prop, p)
		}
	}
	walk(schema, nil)
	return out
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// argument returns the value at path in a call's arguments, and whether it
// is there and not null (the two cases SEP-2243 sends no header for).
func argument(arguments []byte, path []string) ([]byte, bool) {
	v := arguments
	for _, key := range path {
		var ok bool
		if v, ok = jsonrpc.Member(v, key); !ok {
			return nil, false
		}
	}
	v = bytes.TrimSpace(v)
	return v, len(v) > 0 && string(v) != "null"
}

// headerText is an argument as SEP-2243 mirrors it: a string as it is, a
// boolean as true or false, a number in decimal; false for anything else
// (an object or array cannot be mirrored).
func headerText(value []byte) (string, bool) {
	switch {
	case len(value) == 0:
		return "", false
	case value[0] == '"':
		return jsonrpc.Unquote(value)
	case string(value) == "true" || string(value) == "false":
		return string(value), true
	case value[0] == '-' || ('0' <= value[0] && value[0] <= '9'):
		return string(value), true
	}
	return "", false
}

// sameArgument reports whether a decoded header value says what the body's
// argument does. Numbers compare as numbers (1.0 and 1 agree), within a
// relative 1e-9, as SEP-2243 advises: a client may print them otherwise.
func sameArgument(header string, value []byte) bool {
	text, ok := headerText(value)
	if !ok {
		return false
	}
	if value[0] != '-' && (value[0] < '0' || value[0] > '9') {
		return header == text
	}
	a, err1 := strconv.ParseFloat(header, 64)
	b, err2 := strconv.ParseFloat(text, 64)
	if err1 != nil || err2 != nil || math.IsNaN(a) || math.IsInf(a, 0) {
		return false
	}
	return a == b || math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b))
}

// CheckParamHeaders checks the Mcp-Param-<Name> headers of a tools/call of
// 2026-07-28 against the tool's input schema and the call's arguments, as
// SEP-2243 has a server do: for every parameter the schema marks with
// x-mcp-header, an argument that is there (and not null) needs its header,
// saying the same (decoded, see DecodeHeaderValue), given once; an argument
// that is not there takes no header. It returns nil, or the -32020 error to
// answer (with HTTP 400). Headers no annotation names are not looked at.
func CheckParamHeaders(h http.Header, inputSchema, arguments json.RawMessage) *jsonrpc.Error {
	for _, p := range paramHeaders(inputSchema) {
		name := HeaderParamPrefix + p.name
		values := h.Values(name)
		value, present := argument(arguments, p.path)
		where := strings.Join(p.path, ".")
		switch {
		case len(values) > 1:
			return ErrHeaderMismatch("the %s header is given %d times: give it once", name, len(values))
		case !present && len(values) == 1:
			return ErrHeaderMismatch("the %s header is sent, but the argument %q is not", name, where)
		case !present:
			continue
		case len(values) == 0:
			return ErrHeaderMismatch("missing %s header: the argument %q is sent, and the tool's schema mirrors it there", name, where)
		}
		got, err := DecodeHeaderValue(values[0])
		if err != nil {
			err.Message = name + ": " + err.Message
			return err
		}
		if !sameArgument(got, value) {
			return ErrHeaderMismatch("the %s header says %q, the argument %q another value", name, got, where)
		}
	}
	return nil
}

// SetParamHeaders sets on h the Mcp-Param-<Name> headers of a tools/call
// of 2026-07-28 whose tool has inputSchema: one for each argument the
// schema marks with x-mcp-header that is there and can be mirrored (a
// string, number or boolean), encoded as SEP-2243 says (EncodeHeaderValue).
func SetParamHeaders(h http.Header, inputSchema, arguments json.RawMessage) {
	for _, p := range paramHeaders(inputSchema) {
		value, present := argument(arguments, p.path)
		if !present {
			continue
		}
		if text, ok := headerText(value); ok {
			h.Set(HeaderParamPrefix+p.name, EncodeHeaderValue(text))
		}
	}
}
