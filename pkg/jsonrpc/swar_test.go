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
		in      string
		control bool
		want    int
	}{
		{long + `"`, true, len(long) + 1},
		{long + `",`, false, len(long) + 1},
		{long + `\"x"`, true, 0},       // escaped: a closer look
		{long + "\x01" + `"`, true, 0}, // a control character
		{long + "\x01" + `"`, false, len(long) + 2},
		{`short"`, true, 0}, // ends within a word
		{long, true, 0},     // never ends
	} {
		if got := plainString([]byte(tt.in), 0, tt.control); got != tt.want {
			t.Errorf("plainString(%q, %v) = %d, want %d", tt.in, tt.control, got, tt.want)
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
