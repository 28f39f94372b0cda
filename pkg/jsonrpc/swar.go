package jsonrpc

import "encoding/binary"

// Strings are most of the bytes of MCP traffic (tool arguments, resource
// text), so the scanners skip their plain bytes eight at a time: a word
// with no quote, no backslash and no control character cannot end or
// escape the string. The tests only need to flag every word that holds
// such a byte; a word flagged by mistake just goes the slow, byte-wise way.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasLess flags a word holding a byte below n (n <= 128).
func hasLess(x, n uint64) uint64 { return (x - ones*n) &^ x & highs }

// hasByte flags a word holding the byte c.
func hasByte(x, c uint64) uint64 { return hasLess(x^(ones*c), 1) }

// plainRun returns the index of the first byte at or after i that may end or
// escape a string (or is a control character), skipping whole words.
func plainRun(b []byte, i int) int {
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		if hasLess(x, 0x20)|hasByte(x, '"')|hasByte(x, '\\') != 0 {
			break
		}
		i += 8
	}
	return i
}
