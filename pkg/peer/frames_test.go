package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// TestFrameBuffer_classes: frames of 1 KiB and less come from the
// allocator at their size; larger ones from the pools, in buffers of the
// power of two at or above their size, up to the read limit; and only
// buffers of those sizes are taken back.
func TestFrameBuffer_classes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, want int }{
		{100, 100}, {1024, 1024}, {1025, 2048}, {2048, 2048}, {2049, 4096}, {16<<10 + 80, 32 << 10},
		{DefaultReadLimit, DefaultReadLimit}, {DefaultReadLimit + 1, DefaultReadLimit + 1},
	} {
		b := frameBuffer(tc.n, true)
		assert.Zero(t, len(b))
		assert.Equal(t, tc.want, cap(b), "a frame of %d bytes", tc.n)
		recycleFrame(b)
	}
	assert.Equal(t, 5000, cap(frameBuffer(5000, false)), "not pooled: the allocator's")
	recycleFrame(make([]byte, 0, 5000)) // not a pool's size: left to the collector
	b := frameBuffer(3000, true)
	b = append(b, bytes.Repeat([]byte("x"), 5000)...) // outgrew its buffer
	recycleFrame(b)
}

// TestPeer_pooledFramesOverWebSocket: calls and answers of 16 KiB, 64 at a
// time each way, arrive whole while their buffers are reused, and a frame
// shared with other peers (SendEncoded) is never taken back.
func TestPeer_pooledFramesOverWebSocket(t *testing.T) {
	t.Parallel()
	a, b := wsPairInternal(t)
	noteParams := `{"text":"` + strings.Repeat("s", 8<<10) + `"}`
	shared := (&jsonrpc.Request{Method: "note", Params: json.RawMessage(noteParams)}).Encode()
	sharedCopy := bytes.Clone(shared)
	notes := make(chan []byte, 128)
	server := New(a, &Options{MaxConcurrent: 64, MaxPending: 1024, Handler: HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		return req.Params, nil
	})})
	server.Start(context.Background())
	client := New(b, &Options{Handler: HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		notes <- bytes.Clone(req.Params)
		return nil, nil
	})})
	client.Start(context.Background())
	require.True(t, server.recycles && client.recycles, "a WebSocket forgets the frames it wrote")
	t.Cleanup(func() {
		client.CloseWith(CloseNormal, "")
		server.CloseWith(CloseNormal, "")
		_ = client.Wait()
		_ = server.Wait()
	})

	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 8 {
				fill := strings.Repeat(string(rune('a'+(i+j)%26)), 16<<10)
				params := json.RawMessage(fmt.Sprintf(`{"call":%d,"round":%d,"text":%q}`, i, j, fill))
				var got json.RawMessage
				if !assert.NoError(t, client.Call(context.Background(), "echo", params, &got)) {
					return
				}
				assert.True(t, bytes.Equal(params, got), "call %d round %d came back whole", i, j)
				if j == 0 {
					assert.NoError(t, server.SendEncoded(shared))
				}
			}
		})
	}
	wg.Wait()
	for range 64 {
		assert.Equal(t, noteParams, string(receiveNote(t, notes)))
	}
	assert.Equal(t, sharedCopy, shared, "a shared frame is never reused")
}

func receiveNote(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
		return nil
	}
}

// wsAccepting starts a server on loopback that accepts WebSockets, and
// returns its ws:// URL and the conns it accepts.
func wsAccepting(t *testing.T) (string, <-chan *WebSocket) {
	t.Helper()
	accepted := make(chan *WebSocket, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := Accept(w, r, nil); err == nil {
			accepted <- c
		}
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), accepted
}

// wsPairInternal returns the two ends of a WebSocket over loopback: the
// accepted one and the dialled one.
func wsPairInternal(t *testing.T) (*WebSocket, *WebSocket) {
	t.Helper()
	url, accepted := wsAccepting(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := Dial(ctx, url, nil)
	require.NoError(t, err)
	select {
	case server := <-accepted:
		return server, client
	case <-ctx.Done():
		t.Fatal("the server never accepted")
		return nil, nil
	}
}
