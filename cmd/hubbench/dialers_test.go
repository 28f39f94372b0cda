package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCallParams_exactSize(t *testing.T) {
	t.Parallel()
	for _, size := range []int{100, 16 << 10} {
		p := callParams(size)
		args := p[len(`{"name":"`+echoTool+`","arguments":`) : len(p)-1]
		assert.Len(t, args, size)
		assert.Contains(t, string(callFrame(p)), `"method":"tools/call"`)
	}
}
