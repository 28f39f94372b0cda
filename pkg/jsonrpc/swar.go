package jsonrpc

import (
	"bytes"
	"encoding/binary"
)

// Strings are most of the bytes of MCP traffic (tool arguments, resource
// text), so the scanners take them in large steps. A string longer than a
// word is first tried whole: the vectorised bytes.IndexByte finds its
// closing quote and any backslash before it, and a control character is
// looked for 32 bytes at a time (plainString). Strings with escapes, and
// short ones, are walked a word at a time: a word with no quote, no
// backslash and no control character cannot end or escape the string
// (plainRun). The word tests only need to flag every word that holds such a
// byte; a word flagged by mistake just goes the slow, byte-wise way.
// Walks of JSON validated already (skipString) need no such look inside a
// string: its end is the first quote after an even run of backslashes.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasLess flags a word holding a byte below n (n <= 128).
func hasLess(x, n uint64) uint64 { return (x - ones*n) &^ x & highs }

// hasByte flags a word holding the byte c.
func hasByte(x, c uint64) uint64 { return hasLess(x^(ones*c), 1) }

// special flags a word holding a quote, a backslash or a control character.
func special(x uint64) uint64 { return hasLess(x, 0x20) | hasByte(x, '"') | hasByte(x, '\\') }

// plainRun returns the index of the first byte at or after i that may end or
// escape a string (or is a control character), skipping whole words.
func plainRun(b []byte, i int) int {
	for i+8 <= len(b) {
		if special(binary.LittleEndian.Uint64(b[i:])) != 0 {
			break
		}
		i += 8
	}
	return i
}

// plainString returns the end of the string whose contents start at b[i]
// (the index past its closing quote) when nothing in it is escaped and it
// holds no control character, so that it needs no closer look; otherwise 0.
// Strings that end within a word go the word-wise way at once.
func plainString(b []byte, i int) int {
	if i+8 > len(b) || special(binary.LittleEndian.Uint64(b[i:])) != 0 {
		return 0
	}
	q := bytes.IndexByte(b[i:], '"')
	if q < 0 {
		return 0
	}
	s := b[i : i+q]
	if bytes.IndexByte(s, '\\') >= 0 || hasControl(s) {
		return 0
	}
	return i + q + 1
}

// hasControl reports whether s holds a byte below 0x20.
func hasControl(s []byte) bool {
	i := 0
	for ; i+32 <= len(s); i += 32 {
		w := s[i : i+32 : i+32]
		if hasLess(binary.LittleEndian.Uint64(w), 0x20)|hasLess(binary.LittleEndian.Uint64(w[8:]), 0x20)|
			hasLess(binary.LittleEndian.Uint64(w[16:]), 0x20)|hasLess(binary.LittleEndian.Uint64(w[24:]), 0x20) != 0 {
			return true
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return true
		}
	}
	return false
}
