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
