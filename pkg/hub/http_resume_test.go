package hub

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// sseEvent is one SSE event as a raw client reads it.
type sseEvent struct{ id, data string }

// readEvent reads the next SSE event of a stream.
func readEvent(t *testing.T, r *bufio.Reader) sseEvent {
	t.Helper()
	ev, err := nextEvent(r)
	require.NoError(t, err, "the stream ended before the event did")
	return sseEvent{id: ev.id, data: ev.data}
}

// stream sends one request of a raw session to url and returns the
// response, whose body the caller reads and closes.
func (rh *rawHTTP) stream(ctx context.Context, method, url, body string, header ...string) *http.Response {
	rh.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(rh.t, err)
	req.Header = rh.header.Clone()
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := scrapeClient.Do(req)
	require.NoError(rh.t, err)
	require.Equal(rh.t, http.StatusOK, resp.StatusCode)
	require.Equal(rh.t, "text/event-stream", resp.Header.Get("Content-Type"))
	return resp
}

// TestHTTP_resumesADroppedStream: a client whose SSE stream of a call drops
// before the answer gets it by GET with the Last-Event-ID it saw, through
// the hub, on the instance that owns the session or through another one.
// (The conformance suite's server-sse-polling scenario cannot check this
// through the hub: its server closes the stream, and a server behind the
// hub has no way to close a client's stream at the hub.)
func TestHTTP_resumesADroppedStream(t *testing.T) {
	t.Parallel()
	a, b, _, _ := startPair(t, Config{HTTPResponses: mcp.ResponseSSE})
	started, release := make(chan struct{}, 1), make(chan struct{}, 1)
	gate := mcp.NewServer(mcp.Implementation{Name: "gate", Version: "1"}, nil)
	gate.AddTool(&mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-release:
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("released")}}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	a.runServer(gate, "gate")
	b.waitServer("gate", 1)

	for i, resumeOn := range []*testHub{a, b} {
		name := map[int]string{0: "on the owner", 1: "through another instance"}[i]
		t.Run(name, func(t *testing.T) {
			ctx := ctxFor(t)
			s := openRawHTTP(t, a.srv.URL+"/mcp", nil)
			resp := s.stream(ctx, http.MethodPost, s.url, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"gate__wait"}}`)
			prime := readEvent(t, bufio.NewReader(resp.Body))
			require.NotEmpty(t, prime.id, "the stream starts with a priming event that has an id")
			assert.Empty(t, prime.data)
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the call never reached the server")
			}
			resp.Body.Close() // the stream drops before the answer
			release <- struct{}{}

			resumed := s.stream(ctx, http.MethodGet, resumeOn.srv.URL+"/mcp", "", mcp.HeaderLastEventID, prime.id)
			defer resumed.Body.Close()
			r := bufio.NewReader(resumed.Body)
			for {
				ev := readEvent(t, r)
				if strings.Contains(ev.data, `"id":7`) {
					assert.Contains(t, ev.data, "released", "the call's answer, after the Last-Event-ID")
					break
				}
			}
		})
	}
}
