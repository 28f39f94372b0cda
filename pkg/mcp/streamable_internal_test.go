package mcp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// TestStreamConn_readFrameUnderThePeersLimits: a session's conn hands its
// peer the messages the handler decoded only when the peer decodes under
// the same limits; under others the peer's own decoder judges the body
// (here, a batch over the peer's smaller limit is refused).
func TestStreamConn_readFrameUnderThePeersLimits(t *testing.T) {
	t.Parallel()
	h := NewStreamableHandler(&StreamableOptions{Limits: jsonrpc.Limits{MaxBatch: 10}})
	body := []byte(`[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","method":"c"}]`)
	decoded := h.opts.Limits.Decode(body)
	require.Len(t, decoded.Messages, 3)
	require.Empty(t, decoded.Replies)
	s := newStreamSession(h, "s", "")
	c := &streamConn{s: s}
	ctx := context.Background()

	s.inbox <- posted{body: body, msgs: decoded.Messages, batch: true}
	same := jsonrpc.Decoder{Limits: h.opts.Limits}
	f, err := c.ReadFrame(ctx, &same)
	require.NoError(t, err)
	assert.Same(t, &decoded.Messages[0], &f.Messages[0], "the handler's messages, not decoded again")

	s.inbox <- posted{body: body, msgs: decoded.Messages, batch: true}
	stricter := jsonrpc.Decoder{Limits: jsonrpc.Limits{MaxBytes: h.opts.Limits.MaxBytes, MaxBatch: 2}}
	f, err = c.ReadFrame(ctx, &stricter)
	require.NoError(t, err)
	assert.Empty(t, f.Messages, "the peer's limits judge the body")
	require.Len(t, f.Replies, 1)
	assert.Equal(t, jsonrpc.CodeInvalidRequest, f.Replies[0].Error.Code)
}
