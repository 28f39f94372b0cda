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

	s.inboxChan() <- posted{body: body, msgs: decoded.Messages, batch: true}
	same := jsonrpc.Decoder{Limits: h.opts.Limits}
	f, err := c.ReadFrame(ctx, &same)
	require.NoError(t, err)
	assert.Same(t, &decoded.Messages[0], &f.Messages[0], "the handler's messages, not decoded again")

	s.inboxChan() <- posted{body: body, msgs: decoded.Messages, batch: true}
	stricter := jsonrpc.Decoder{Limits: jsonrpc.Limits{MaxBytes: h.opts.Limits.MaxBytes, MaxBatch: 2}}
	f, err = c.ReadFrame(ctx, &stricter)
	require.NoError(t, err)
	assert.Empty(t, f.Messages, "the peer's limits judge the body")
	require.Len(t, f.Replies, 1)
	assert.Equal(t, jsonrpc.CodeInvalidRequest, f.Replies[0].Error.Code)
}

// BenchmarkRoute routes what a server sends during a call to the call's
// stream: a progress report (found by its token) and a request naming the
// call in _meta (whose hint is cut out).
func BenchmarkRoute(b *testing.B) {
	h := NewStreamableHandler(&StreamableOptions{ReplayEvents: 1 << 30, ReplayBytes: 1 << 40})
	s := newStreamSession(h, "s", Version20251125)
	call := &jsonrpc.Request{ID: jsonrpc.Int64ID(7), Method: MethodToolsCall, Params: []byte(`{"name":"x","_meta":{"progressToken":"t7"}}`)}
	if _, _, err := s.openPOSTStream([]*jsonrpc.Request{call}); err != nil {
		b.Fatal(err)
	}
	progress := []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t7","progress":1,"total":2,"message":"half way there"}}`)
	related := []byte(`{"jsonrpc":"2.0","id":"s1","method":"elicitation/create","params":{"message":"Which one?","requestedSchema":{"type":"object","properties":{"n":{"type":"integer"}}},"_meta":{"switchboard/relatedRequest":7}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.route(progress); err != nil {
			b.Fatal(err)
		}
		if err := s.route(related); err != nil {
			b.Fatal(err)
		}
		s.mu.Lock()
		st := s.calls[jsonrpc.Int64ID(7)]
		s.dropEventsLocked(st) // keep the window from growing
		s.log = s.log[:0]
		s.mu.Unlock()
	}
}
