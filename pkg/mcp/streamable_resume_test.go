package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// A client that holds an event id of a stream which ends before its answer
// comes back for the rest with GET and Last-Event-ID (the TypeScript SDK's
// transport does so after the server's retry delay), and again after every
// such GET that ends without an answer. These tests check that no stream
// invites that once nothing more can come on it, and that a resumption gets
// its own stream's messages or nothing: never the session's GET stream.

// holdingServer is testHTTPServer with "hold": one progress report, then
// the call runs until cancelled.
func holdingServer() *mcp.Server {
	s := testHTTPServer()
	s.AddTool(&mcp.Tool{Name: "hold", Description: "reports once, then waits for cancellation"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if err := req.Progress(ctx, 1, 2, "started"); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return s
}

// sseLine is one line of an SSE body, or the end of the body.
type sseLine struct {
	text string
	end  bool
}

// sseLines reads a response's body line by line, comments included, each
// on a channel; the last is the end of the body.
func sseLines(t *testing.T, resp *http.Response) <-chan sseLine {
	t.Helper()
	ch := make(chan sseLine, 64)
	done := make(chan struct{})
	t.Cleanup(func() {
		resp.Body.Close()
		<-done
	})
	go func() {
		defer close(done)
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			ch <- sseLine{text: sc.Text()}
		}
		ch <- sseLine{end: true}
	}()
	return ch
}

// nextLine waits for a line matching ok, failing when the body ends first.
func nextLine(t *testing.T, lines <-chan sseLine, ok func(string) bool) string {
	t.Helper()
	for {
		l := recv(t, lines)
		require.False(t, l.end, "the stream ended")
		if ok(l.text) {
			return l.text
		}
	}
}

func TestStreamableHandler_cancelledStreamInvitesNoResumption(t *testing.T) {
	t.Run("a stream whose client has no event id of it ends without one", func(t *testing.T) {
		hs := serveHTTP(t, holdingServer(), nil)
		c := newRaw(t, hs)
		c.initialize()
		ss := recv(t, hs.sessions)
		out := make(chan *http.Response, 1)
		go func() { out <- c.post(`{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"block"}}`) }()
		require.Eventually(t, func() bool { return ss.Peer().Pending() == 1 }, wait, time.Millisecond)
		require.Equal(t, http.StatusAccepted, c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b1"}}`).StatusCode)
		resp := recv(t, out)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		for ev := range sseStream(t, resp) {
			assert.Empty(t, ev.id, "no event id, not even a priming one: nothing to come back for")
		}
	})

	t.Run("a primed stream is held open until its client leaves, and not resumed", func(t *testing.T) {
		hs := serveHTTP(t, holdingServer(), &mcp.StreamableOptions{KeepAlive: 10 * time.Millisecond})
		c := newRaw(t, hs)
		c.initialize()
		resp := c.post(`{"jsonrpc":"2.0","id":"h1","method":"tools/call","params":{"name":"hold","_meta":{"progressToken":"p"}}}`)
		require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		lines := sseLines(t, resp)
		id := "" // the progress report's event id: the client holds it
		nextLine(t, lines, func(l string) bool {
			if strings.HasPrefix(l, "id: ") {
				id = l[4:]
			}
			return strings.Contains(l, mcp.NotificationProgress)
		})
		require.Equal(t, http.StatusAccepted, c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h1"}}`).StatusCode)
		for range 2 {
			nextLine(t, lines, func(l string) bool { return l == ": keepalive" })
		}
		resumed := c.do(http.MethodGet, "", mcp.HeaderLastEventID, id)
		assert.Equal(t, http.StatusNoContent, resumed.StatusCode, "nothing more will come on a cancelled stream")
	})

	t.Run("an answered stream replays its answer once, then gets 204", func(t *testing.T) {
		hs := serveHTTP(t, holdingServer(), nil)
		c := newRaw(t, hs)
		c.initialize()
		resp := c.post(`{"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"q"}}}`)
		var ids []string
		for ev := range sseStream(t, resp) {
			ids = append(ids, ev.id)
		}
		require.Len(t, ids, 5, "priming, three reports, the answer")

		again := c.do(http.MethodGet, "", mcp.HeaderLastEventID, ids[3])
		require.Equal(t, http.StatusOK, again.StatusCode)
		msgs := readAll(t, again)
		require.Len(t, msgs, 1, "what the client missed: the answer")
		assert.Equal(t, `"a1"`, memberOf(t, msgs[0], "id"))

		for _, id := range []string{ids[4], ids[4], ids[0][:strings.IndexByte(ids[0], '.')] + ".999.1"} {
			resp := c.do(http.MethodGet, "", mcp.HeaderLastEventID, id)
			assert.Equal(t, http.StatusNoContent, resp.StatusCode, "nothing to resume after %s", id)
		}
	})
}

func TestStreamableHandler_resumptionNeverTakesTheGETStream(t *testing.T) {
	s := holdingServer()
	hs := serveHTTP(t, s, nil)
	c := newRaw(t, hs)
	c.initialize()
	get := c.do(http.MethodGet, "")
	require.Equal(t, http.StatusOK, get.StatusCode)
	events := sseStream(t, get)
	prime, _ := nextEvent(t, events)
	require.NotEmpty(t, prime.id)

	// Event ids of this session naming a POST stream answered and read to
	// its end, the initialize POST's (answered as JSON, forgotten), and a
	// stream never opened.
	var last string
	for ev := range sseStream(t, c.post(`{"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":"progress","_meta":{"progressToken":1}}}`)) {
		last = ev.id
	}
	nonce := last[:strings.IndexByte(last, '.')]
	for _, id := range []string{last, nonce + ".1.0", nonce + ".7.3"} {
		resp := c.do(http.MethodGet, "", mcp.HeaderLastEventID, id)
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, "a resumption of %s gets nothing of the GET stream", id)
	}
	other := c.do(http.MethodGet, "", mcp.HeaderLastEventID, "someoneelse.0.1")
	assert.Equal(t, http.StatusConflict, other.StatusCode, "an id of another session resumes nothing: a second GET stream")

	s.Log(testCtx(t), mcp.LevelInfo, "t", "still mine")
	ev, ok := nextEvent(t, events)
	require.True(t, ok, "the client's own GET stream was not taken from it")
	assert.Contains(t, ev.data, `"still mine"`)
}

// TestStreamableClientConn_cancelEndsItsPOST checks that the client conn
// leaves the POST of a request it cancels: a server holds such a stream
// open (the answer will not come, and ending it would invite a resumption),
// so a client that kept reading it would hold a connection per cancelled
// call for the life of its session.
func TestStreamableClientConn_cancelEndsItsPOST(t *testing.T) {
	hs := serveHTTP(t, holdingServer(), nil)
	left := make(chan struct{}, 1)
	inner := hs.Config.Handler
	hs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
		if bytes.Contains(body, []byte(`"hold"`)) {
			left <- struct{}{}
		}
	})
	c := connectHTTP(t, hs, nil)
	ctx, cancel := context.WithCancel(testCtx(t))
	reported := make(chan struct{})
	var once sync.Once
	out := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "hold", nil, &mcp.CallOptions{Progress: func(*mcp.ProgressParams) {
			once.Do(func() { close(reported) })
		}})
		out <- err
	}()
	recv(t, reported) // the stream is primed: the server holds it once cancelled
	cancel()
	assert.ErrorIs(t, recv(t, out), context.Canceled)
	recv(t, left)
	_, err := c.CallTool(testCtx(t), "echo", nil, nil)
	assert.NoError(t, err, "the session goes on")
}
