package jsonrpc

import "testing"

func TestPlainRun(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
	}{
		{`abcdefghijklmnop"`, 16}, {`abcdefgh\ijklmnop`, 8}, {"abcdefghijk\x01lmnop", 8},
		{`éééééééééé"`, 16}, {`short"`, 0}, {`abcdefgh`, 8}, {`"abcdefghijklmnop`, 0},
	} {
		if got := plainRun([]byte(tt.in), 0); got != tt.want {
			t.Errorf("plainRun(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestPlainString(t *testing.T) {
	long := "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"
	for _, tt := range []struct {
		in   string
		want int
	}{
		{long + `"`, len(long) + 1},
		{long + `",`, len(long) + 1},
		{long + `\"x"`, 0},       // escaped: a closer look
		{long + "\x01" + `"`, 0}, // a control character
		{`short"`, 0},            // ends within a word
		{long, 0},                // never ends
	} {
		if got := plainString([]byte(tt.in), 0); got != tt.want {
			t.Errorf("plainString(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	for i := range 70 {
		s := []byte(long + long)[:i]
		for j := range s {
			s[j] = 0x1f
			if !hasControl(s) {
				t.Fatalf("hasControl misses byte %d of %d", j, i)
			}
			s[j] = 'a'
		}
		if hasControl(s) {
			t.Fatalf("hasControl flags %q", s)
		}
	}
}

// skipStringByBytes is skipString as the escapes are read, byte by byte: a
// backslash escapes the byte after it, an unescaped quote ends the string.
func skipStringByBytes(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

func TestSkipString(t *testing.T) {
	long := "abcdefghijklmnopqrstuvwxyz0123456789"
	for _, tt := range []struct {
		in   string
		want int
	}{
		{`""`, 2}, {`"a"`, 3}, {`"` + long + `",1`, len(long) + 2},
		{`"\""`, 4}, {`"\\"`, 4}, {`"\\\""`, 6}, {`"\\\\"x"`, 6},
		{`"a\"b\\"c"`, 8}, {`"` + long + `\"` + long + `"`, 2*len(long) + 4},
		{`"`, 1}, {`"abc`, 4}, {`"ab\"`, 5}, {`"ab\`, 4}, {"\"a\x01b\"", 5},
	} {
		if got := skipString([]byte(tt.in), 0); got != tt.want {
			t.Errorf("skipString(%q) = %d, want %d", tt.in, got, tt.want)
		}
		if got := skipStringByBytes([]byte(tt.in), 0); got != tt.want {
			t.Errorf("skipStringByBytes(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
