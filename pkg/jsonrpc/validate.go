package jsonrpc

import "bytes"

// Valid reports whether b is exactly one valid JSON value, as json.Valid
// does, in one pass that crosses strings in large steps (see swar.go).
// Arrays and objects nested deeper than 4095 levels are reported invalid.
func Valid(b []byte) bool {
	ok, _ := validate(b, maxDepthCap, nil)
	return ok
}

// topMembers is where validate notes the members of a top-level object, so
// that decoding a message does not scan its params or result a second time.
type topMembers struct {
	n   int // members seen; beyond len(m) they were not kept
	m   [8]struct{ key, val []byte }
	key []byte // the key of the member being scanned
	at  int    // where its value starts
	// inParams says that the member being scanned may be params;
	// paramsMeta, that a member of params (an object) may be _meta. Both
	// are told from the key as written: a key with an escape may spell
	// either, so it counts as both. A message whose paramsMeta is false
	// has no _meta in its params (Request.ParamsWithoutMeta).
	inParams, paramsMeta bool
}

func (t *topMembers) add(b []byte, end int) {
	if t.n < len(t.m) {
		t.m[t.n].key, t.m[t.n].val = t.key, b[t.at:end]
	}
	t.n++
}

// complete reports whether every member was kept.
func (t *topMembers) complete() bool { return t.n <= len(t.m) }

// validate reports whether b is exactly one valid JSON value (RFC 8259), in
// one pass and without allocating, and whether arrays and objects in it nest
// deeper than maxDepth (0 or less: no limit). It accepts what json.Valid
// accepts; a fuzz test holds the two to the same answers. When top is not
// nil and b is an object, its members are noted there as they are scanned.
func validate(b []byte, maxDepth int, top *topMembers) (valid, tooDeep bool) {
	var objects [(maxDepthCap + 1) / 64]uint64 // bit d: the container at depth d is an object
	depth := 0
	i := skipSpace(b, 0)

	for {
		// A value is expected at b[i].
		if i >= len(b) {
			return false, false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			depth++
			if maxDepth > 0 && depth > maxDepth {
				return false, true
			}
			if depth > maxDepthCap {
				return false, true
			}
			if c == '{' {
				objects[depth/64] |= 1 << (depth % 64)
			} else {
				objects[depth/64] &^= 1 << (depth % 64)
			}
			i = skipSpace(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				depth--
				i++
				break // an empty container is a complete value
			}
			if c == '{' {
				var ok bool
				if i, ok = scanMember(b, i, depth, top); !ok {
					return false, false
				}
			}
			continue // the first element's value
		case c == '"':
			var ok bool
			if i, ok = scanString(b, i); !ok {
				return false, false
			}
		case c == '-' || c >= '0' && c <= '9':
			var ok bool
			if i, ok = scanNumber(b, i); !ok {
				return false, false
			}
		case c == 't':
			if !hasLiteral(b, i, "true") {
				return false, false
			}
			i += 4
		case c == 'f':
			if !hasLiteral(b, i, "false") {
				return false, false
			}
			i += 5
		case c == 'n':
			if !hasLiteral(b, i, "null") {
				return false, false
			}
			i += 4
		default:
			return false, false
		}

		// A value ended: close containers until one continues.
		for {
			if depth == 1 && top != nil && objects[0]&2 != 0 {
				top.add(b, i)
			}
			i = skipSpace(b, i)
			if depth == 0 {
				return i == len(b), false
			}
			if i >= len(b) {
				return false, false
			}
			isObject := objects[depth/64]&(1<<(depth%64)) != 0
			c := b[i]
			if c == ',' {
				i = skipSpace(b, i+1)
				if isObject {
					var ok bool
					if i, ok = scanMember(b, i, depth, top); !ok {
						return false, false
					}
				}
				break
			}
			if isObject && c == '}' || !isObject && c == ']' {
				depth--
				i++
				continue
			}
			return false, false
		}
	}
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// scanMember scans `"key" :` and the space after it, up to a member's value,
// noting the key in top for a member of the top-level object (depth 1).
func scanMember(b []byte, i, depth int, top *topMembers) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	end, ok := scanString(b, i)
	if !ok {
		return end, false
	}
	key := b[i:end]
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	i = skipSpace(b, i+1)
	switch {
	case top == nil:
	case depth == 1:
		top.key, top.at = key, i
		top.inParams = mayBe(key, `"params"`)
	case depth == 2 && top.inParams && mayBe(key, `"_meta"`):
		top.paramsMeta = true
	}
	return i, true
}

// mayBe reports whether key, a member's key as written, may name the member
// name (quoted): it does, or it holds an escape, which might spell it.
func mayBe(key []byte, name string) bool {
	return string(key) == name || bytes.IndexByte(key, '\\') >= 0
}

// scanString scans the string starting at b[i] and returns the index past it.
func scanString(b []byte, i int) (int, bool) {
	if end := plainString(b, i+1); end > 0 {
		return end, true
	}
	for i = plainRun(b, i+1); i < len(b); i = plainRun(b, i+1) {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i < 5 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return i, false
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(b []byte, i int) bool { return i < len(b) && b[i] >= '0' && b[i] <= '9' }

// scanNumber scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case !isDigit(b, i):
		return i, false
	case b[i] == '0':
		i++
	default:
		for isDigit(b, i) {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !isDigit(b, i) {
			return i, false
		}
		for isDigit(b, i) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !isDigit(b, i) {
			return i, false
		}
		for isDigit(b, i) {
			i++
		}
	}
	return i, true
}
