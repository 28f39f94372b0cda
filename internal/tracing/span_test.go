package tracing

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// isToolError finds isError true wherever the result's members put it,
// spelled plainly or with escapes, and nothing in a result without it.
func TestIsToolError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		result string
		want   bool
	}{
		{`{"content":[{"type":"text","text":"hi"}]}`, false},
		{`{"content":[],"isError":true}`, true},
		{`{"isError":false,"content":[]}`, false},
		{`{"content":[{"type":"text","text":"isError"}]}`, false},
		{`{"structuredContent":{"isError":true}}`, false},
		{`{"is\u0045rror":true}`, true},
		{``, false},
	} {
		assert.Equal(t, tc.want, isToolError([]byte(tc.result)), tc.result)
	}
}
