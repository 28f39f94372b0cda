package mcp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unsafe"

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

// TestStreamSession_peerStartedAfterOpen: an owner that starts its peer
// after Open returned (in a goroutine of its own) still gets the POST that
// opened the session: it waited in the inbox, and the peer's binding hands
// it over. (A peer fed directly reads no inbox: the initialize was lost and
// its POST never answered.)
func TestStreamSession_peerStartedAfterOpen(t *testing.T) {
	t.Parallel()
	opened := make(chan *StreamSession, 1)
	h := NewStreamableHandler(&StreamableOptions{Open: func(r *http.Request, s *StreamSession) error {
		opened <- s
		return nil
	}})
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answer := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answer <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	var s *StreamSession
	select {
	case s = <-opened:
	case <-ctx.Done():
		t.Fatal("the session was never opened")
	}
	require.Eventually(t, func() bool { return len(s.inboxChan()) == 1 }, 5*time.Second, time.Millisecond, "the initialize waits in the inbox")
	NewServer(Implementation{Name: "late", Version: "1"}, nil).Serve(s.Context(), s.Conn())
	select {
	case got := <-answer:
		assert.Contains(t, got, `"serverInfo":{"name":"late"`)
	case <-ctx.Done():
		t.Fatal("the POST that opened the session was never answered")
	}
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

// boundSessions serves a handler with opts whose sessions each get a peer
// bound as they open (as the hub's do), serving a Server named name; it
// returns the handler's URL and the sessions as they open.
func boundSessions(t *testing.T, name string, opts StreamableOptions) (string, <-chan *StreamSession) {
	opened := make(chan *StreamSession, 1)
	opts.Open = func(r *http.Request, s *StreamSession) error {
		NewServer(Implementation{Name: name, Version: "1"}, nil).Serve(s.Context(), s.Conn())
		opened <- s
		return nil
	}
	h := NewStreamableHandler(&opts)
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, opened
}

// rawSend sends one request of a 2025-11-25 client to url (a session's
// when session is set, resuming after lastEventID when it is set), and
// returns the response's status and body.
func rawSend(t *testing.T, url, method, session, body, lastEventID string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(HeaderSessionID, session)
		req.Header.Set(HeaderProtocolVersion, "2025-11-25")
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// rawInitialize is a 2025-11-25 client's initialize.
const rawInitialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestStreamSession_peerBoundInOpenMakesNoInbox: a session whose peer is
// bound as it opens (as the hub's are) is served through the peer's Feed,
// and never makes the inbox that only an owner reading the conn needs:
// its 64 slots were once most of what an idle session kept, made when the
// binding looked for POSTs waiting there.
func TestStreamSession_peerBoundInOpenMakesNoInbox(t *testing.T) {
	t.Parallel()
	url, opened := boundSessions(t, "bound", StreamableOptions{})
	post := func(session, body string) string {
		status, got := rawSend(t, url, http.MethodPost, session, body, "")
		require.Less(t, status, 300, "%s", got)
		return got
	}
	assert.Contains(t, post("", rawInitialize), `"serverInfo":{"name":"bound"`)
	s := <-opened
	post(s.ID(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	assert.Contains(t, post(s.ID(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`), `"result":{}`, "the session is served after the binding")
	assert.False(t, s.inboxMade.Load(), "no inbox made for a session served through its Feed")
	s.mu.Lock()
	general, done := s.general, s.done
	s.mu.Unlock()
	assert.Nil(t, general, "no GET stream made for a session that never opened one, nor was sent anything for it")
	assert.Nil(t, done, "no Done channel made for a session whose owner never asked for it")
}

// TestStreamSession_doneMadeWhenAsked: a session's Done channel, made when
// first asked for, is closed when the session ends, whether it was asked
// for before or after.
func TestStreamSession_doneMadeWhenAsked(t *testing.T) {
	t.Parallel()
	h := NewStreamableHandler(&StreamableOptions{})
	before := newStreamSession(h, "", Version20251125)
	early := before.Done()
	select {
	case <-early:
		t.Fatal("Done closed before the session ended")
	default:
	}
	before.end(errIdle)
	assert.Equal(t, early, before.Done(), "one Done channel")
	after := newStreamSession(h, "", Version20251125)
	after.end(errIdle)
	for _, done := range []<-chan struct{}{early, after.Done()} {
		select {
		case <-done:
		default:
			t.Fatal("Done not closed once the session ended")
		}
	}
}

// TestStreamSession_quietThenIdle: the idle timer's first firing quietens
// a session (its map of requests dropped, as its peer's are) without
// ending it: a stream whose events are retained stays resumable, and the
// session serves requests after as before; the next firing, once
// IdleTimeout has passed, ends it.
func TestStreamSession_quietThenIdle(t *testing.T) {
	t.Parallel()
	url, opened := boundSessions(t, "quiet", StreamableOptions{ResponseMode: ResponseSSE})
	firstEventID := func(sse string) string {
		for line := range strings.Lines(sse) {
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
				return id
			}
		}
		t.Fatalf("no event id in %q", sse)
		return ""
	}
	var s *StreamSession
	idle := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.active == 0
	}

	_, got := rawSend(t, url, http.MethodPost, "", rawInitialize, "")
	require.Contains(t, got, `"serverInfo":{"name":"quiet"`)
	priming := firstEventID(got)
	s = <-opened
	rawSend(t, url, http.MethodPost, s.ID(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "")
	require.Eventually(t, idle, 5*time.Second, time.Millisecond)

	s.expire() // the timer's first firing
	s.mu.Lock()
	calls, retained, ended := s.calls, len(s.streams), s.err
	s.mu.Unlock()
	assert.Nil(t, calls, "the map of requests dropped")
	assert.Equal(t, 1, retained, "the initialize's stream kept for resumption")
	require.NoError(t, ended, "quietened, not ended")

	status, got := rawSend(t, url, http.MethodGet, s.ID(), "", priming)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, got, `"serverInfo":{"name":"quiet"`, "the initialize's stream resumed after its priming event")
	status, got = rawSend(t, url, http.MethodPost, s.ID(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, got, `"id":1,"result":{}`, "served after as before")

	require.Eventually(t, idle, 5*time.Second, time.Millisecond)
	s.expire() // quietened again: the timer is armed afresh after each request
	s.expire() // IdleTimeout later
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the session did not end once idle")
	}
}

// TestStreamSession_tokenCallLocked: a progress report finds its request by
// its token however the token is written, as progressKey keys it: a plain
// string (looked up without making a key), one written with escapes or
// beyond ASCII, a number; and nothing for what is not a token.
func TestStreamSession_tokenCallLocked(t *testing.T) {
	t.Parallel()
	s := newStreamSession(NewStreamableHandler(&StreamableOptions{}), "", Version20251125)
	s.tokens = map[string]jsonrpc.ID{}
	for _, tok := range []string{`"abc"`, `"é"`, `"a\"b"`, `7`} {
		key, ok := progressKey([]byte(tok))
		require.True(t, ok, tok)
		s.tokens[key] = jsonrpc.StringID(tok)
	}
	for raw, want := range map[string]string{
		`"abc"`:      `"abc"`,
		`"a\u0062c"`: `"abc"`,
		`"\u00e9"`:   `"é"`,
		`"é"`:        `"é"`,
		`"a\"b"`:     `"a\"b"`,
		`7`:          `7`,
		` 7 `:        `7`,
		`"7"`:        "",
		`"ab"`:       "",
		`null`:       "",
		`{"a":1}`:    "",
		``:           "",
	} {
		id, ok := s.tokenCallLocked([]byte(raw))
		if want == "" {
			assert.False(t, ok, "%s finds no request", raw)
			continue
		}
		if assert.True(t, ok, "%s finds its request", raw) {
			assert.Equal(t, jsonrpc.StringID(want), id, raw)
		}
	}
}

// TestStreamSession_fitsItsSizeClass keeps a StreamSession within the
// allocator's 320-byte size class: every Streamable HTTP session holds one
// while it is idle, and a field more moves it to the 352-byte class.
func TestStreamSession_fitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(StreamSession{}), uintptr(320))
}
