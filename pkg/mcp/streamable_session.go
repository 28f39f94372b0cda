package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Why a session ended, as its conn's Read reports it.
var (
	errDeleted       = &peer.CloseError{Code: peer.CloseNormal, Reason: "session deleted by the client"}
	errIdle          = &peer.CloseError{Code: peer.CloseGoingAway, Reason: "session idle"}
	errGoingAway     = &peer.CloseError{Code: peer.CloseGoingAway, Reason: "going away"}
	errRefused       = &peer.CloseError{Code: peer.ClosePolicyViolation, Reason: "session refused"}
	errStatelessDone = &peer.CloseError{Code: peer.CloseNormal, Reason: "request served"}
)

// StreamSession is one Streamable HTTP session: its conn carries the
// client's messages to the owner's peer and the peer's messages to the
// client's POST and GET streams.
type StreamSession struct {
	h *StreamableHandler
	// idHeader is {id} (ID): set on every response without allocating
	// (net/http copies what it sends), and the one place the id is kept.
	idHeader [1]string
	nonce    string      // tells this session's event ids from another's
	version  string      // the protocol version the client asked for
	header   http.Header // a stateless session's: its request's headers
	// stateless is set before the session is shared, then only read;
	// byOwner and quietened are guarded by mu (below). They sit together
	// since every idle session holds its StreamSession: it fits the
	// allocator's 320-byte class.
	stateless bool
	byOwner   bool // the owner closed the conn
	// quietened: idle has fired once, after quietAfter, and is armed
	// again for the rest of IdleTimeout (see expire).
	quietened bool
	// ended is set (under mu) as the session ends, for the POSTs that
	// check without waiting.
	ended atomic.Bool

	conn streamConn
	feed atomic.Pointer[peer.Feed] // the owner's peer's, once bound: POSTs are handed to it directly
	// bound is where feed points: set once, by Bind, before feed is.
	bound peer.Feed

	// inbox holds the POSTs for an owner that reads the conn (one that does
	// not bind a peer to it), made when first needed: a session served
	// through a Feed has none. inboxMade is set once it is made, before
	// anything is put in it, so that a binding which finds it unset knows
	// there is nothing to hand over without making one (see hand).
	inboxOnce sync.Once
	inboxMade atomic.Bool
	inbox     chan posted

	// mu guards everything below.
	mu sync.Mutex
	// done is closed when the session ends; made when first asked for
	// (doneChan): the hub's sessions, served through a Feed, never wait on
	// it, and every idle session would keep one.
	done chan struct{}
	// ctx and cancel are made by Context, when an owner asks for them
	// (the hub does not).
	ctx      context.Context
	cancel   context.CancelFunc
	data     any
	err      error // why the session ended; nil while it lives
	general  *stream
	streams  map[int64]*stream // the POST streams, by number (the general one is 0); none for a stateless request's
	nextNum  int64
	calls    map[jsonrpc.ID]*stream // the client's requests in flight, by id
	tokens   map[string]jsonrpc.ID  // progress tokens of those requests
	log      []*streamEvent         // retained events, oldest first (some dropped)
	logCount int                    // events in log not dropped
	logBytes int
	active   int // requests of this session being served
	idle     *time.Timer
	held     []*stream // cancelled streams held open for their clients, oldest first

	// one is a stateless request's stream, which keeps no maps of calls
	// and tokens: its one request is in its owed while in flight, and
	// everything of the session goes on it (see callLocked).
	one *stream
}

// maxHeldStreams bounds the cancelled streams a session holds open (see
// cancelled): beyond, the oldest is ended, and its client's one resumption
// of it gets 204.
const maxHeldStreams = 16

// stream is one SSE stream of a session: the GET stream (number 0) or the
// stream of one POST that carried requests.
type stream struct {
	num      int64
	post     bool
	owed     []owedAnswer  // answers still to come, in no particular order
	owedOne  [1]owedAnswer // owed's room for a POST of one request
	mode     streamMode
	jsonBody []byte         // the answer, in JSON mode
	jsonErr  []byte         // its error member (a slice of jsonBody), nil for a result
	events   []*streamEvent // retained, in order
	chunk    *eventChunk    // where its first events live
	nextSeq  int64          // the next event's sequence number (0 is the priming event)
	sent     int64          // the last sequence number handed to a writer
	writer   attachment     // the HTTP response serving it, or nil
	finished bool           // every answer is in: no event follows
	closeReq bool           // CloseStream asked the writer to end the response
	orphaned bool           // a POST whose client left before any byte of its answer
	// cancelled: every request on it was cancelled, so no answer will
	// come (the client is owed none); resumable: an event id of it reached
	// its client, which may come back with it. A cancelled stream that is
	// resumable is held open until its client leaves (see cancelled).
	cancelled bool
	resumable bool
	// errorAsJSON: SSE always, but an error answer before anything else
	// goes as JSON with the status of its code (a stateless request).
	errorAsJSON bool
}

type streamMode int

const (
	modePending streamMode = iota // auto mode, nothing sent yet
	modeJSON                      // the answer goes as one JSON body
	modeSSE
)

// owedAnswer is a request of a POST whose answer is still to come, with
// its progress token's key ("" for none).
type owedAnswer struct {
	id  jsonrpc.ID
	key string
}

// attachment is an HTTP response serving a stream: a send on it wakes the
// response to write what is new, or to see that it was detached.
type attachment chan struct{}

// attachments keeps the attachments of responses that ended: one per POST
// otherwise. Once pump has detached its response, no stream holds the
// attachment (the stream's writer is another's, or none), so nothing can
// wake it any more: what a wake left in it is drained, and it is free.
var attachments = sync.Pool{New: func() any { return make(attachment, 1) }}

func newAttachment() attachment { return attachments.Get().(attachment) }

func releaseAttachment(att attachment) {
	select {
	case <-att:
	default:
	}
	attachments.Put(att)
}

type streamEvent struct {
	st      *stream
	seq     int64
	data    []byte
	dropped bool // no longer retained (evicted, or its stream completed)
}

// eventChunk holds a stream's first events and their list, in one
// allocation made with its first event: a POST answered as SSE usually
// carries a progress report or two and its answer.
type eventChunk struct {
	evs  [2]streamEvent
	ptrs [2]*streamEvent
	used int
}

func newStreamSession(h *StreamableHandler, id, version string) *StreamSession {
	s := &StreamSession{
		h:        h,
		idHeader: [1]string{id},
		version:  version,
	}
	if id != "" {
		// (A copy: the slice would keep all of randomID's 32 bytes.) A
		// stateless request's stream has no event ids (see eventID).
		s.nonce = strings.Clone(randomID()[:8])
	}
	s.conn.s = s
	s.nextNum = 1
	return s
}

// ID returns the session id ("" for a stateless request's session).
func (s *StreamSession) ID() string { return s.idHeader[0] }

// ProtocolVersion returns the protocol version the client asked for in
// initialize (or, for a stateless request, in its _meta).
func (s *StreamSession) ProtocolVersion() string { return s.version }

// Conn returns the session's connection, on which the owner runs its peer.
// Its Read returns the client's messages, each POST body as one frame; its
// Write routes a message to the right stream and never blocks; its Close
// ends the session. Once the session ends otherwise (DELETE, idle, the
// handler's Close), Read fails with a *peer.CloseError saying why.
func (s *StreamSession) Conn() peer.Conn { return &s.conn }

// Context returns a context that ends with the session and carries it (see
// StreamSessionFromContext).
func (s *StreamSession) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.WithValue(context.Background(), streamSessionKey{}, s))
		if s.err != nil {
			s.cancel() // it ended before anyone asked
		}
	}
	return s.ctx
}

// Header returns the HTTP headers of a stateless session's one request
// (nil for a session opened with initialize), for what only the owner can
// check: the Mcp-Param-* headers of a tools/call against the tool's schema
// (CheckParamHeaders).
func (s *StreamSession) Header() http.Header { return s.header }

// Done is closed when the session ends.
func (s *StreamSession) Done() <-chan struct{} { return s.doneChan() }

// doneChan returns done, made on first use (closed already if the session
// has ended).
func (s *StreamSession) doneChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{})
		if s.err != nil {
			close(s.done)
		}
	}
	return s.done
}

// SetData keeps v with the session, for the owner.
func (s *StreamSession) SetData(v any) {
	s.mu.Lock()
	s.data = v
	s.mu.Unlock()
}

// Data returns what SetData kept.
func (s *StreamSession) Data() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data
}

// Close ends the session, as its conn's Close does.
func (s *StreamSession) Close() error { return s.conn.Close(peer.CloseNormal, "") }

// CloseStream ends the HTTP response of the POST stream carrying the
// request id while the request goes on: the client resumes the stream with
// Last-Event-ID (a GET) and gets what it missed, the answer included. This
// is the 2025-11-25 way to let a long request outlive a connection (SSE
// polling). It reports false when no such request is in flight, or when
// the client is too old to resume (it got no priming event).
func (s *StreamSession) CloseStream(id jsonrpc.ID) bool {
	if !s.primes("") {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.callLocked(id)
	if st == nil || st.orphaned {
		return false
	}
	if st.mode == modePending {
		st.mode = modeSSE // its client needs an event id to come back with
	}
	if st.writer != nil {
		st.closeReq = true
		st.wakeLocked()
	}
	return true
}

// primes reports whether the client reads priming events (an id with empty
// data): 2025-11-25 and later. Older clients try to parse the empty data,
// and a stateless request's stream cannot be resumed: it has no event ids.
func (s *StreamSession) primes(header string) bool {
	return !s.stateless && max(s.version, header) >= Version20251125
}

// end ends the session once, for err.
func (s *StreamSession) end(err error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = err
	s.ended.Store(true)
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	// Every attached response sees the session ended (pump): the GET
	// stream's, the POST streams' (a stateless request's is found by its
	// call alone: it is in no map of streams).
	if s.general != nil {
		s.general.wakeLocked()
	}
	for _, st := range s.streams {
		st.wakeLocked()
	}
	for _, st := range s.calls {
		st.wakeLocked()
	}
	if s.one != nil && len(s.one.owed) > 0 {
		s.one.wakeLocked()
	}
	feed, readErr, cancel, done := s.feed.Load(), s.readErrLocked(), s.cancel, s.done
	s.mu.Unlock()
	if done != nil { // else one made later is closed as it is made
		close(done)
	}
	if cancel != nil {
		cancel()
	}
	if feed != nil {
		feed.End(readErr) // the owner's peer ends as on a failed read
	}
	if s.ID() != "" {
		s.h.forget(s)
		s.h.log.Debug("streamable HTTP session ended", "session", s.ID(), "reason", err)
	}
}

// begin counts a request being served; false when the session has ended.
func (s *StreamSession) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false
	}
	s.active++
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	return true
}

// finish uncounts a request; the last one starts the idle timer, which
// first quietens the session (see quieten), then ends it after IdleTimeout.
func (s *StreamSession) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.active != 0 || s.err != nil || s.stateless {
		return
	}
	d, timeout := quietAfter, s.h.opts.IdleTimeout
	s.quietened = false
	if timeout > 0 && timeout <= d {
		d, s.quietened = timeout, true // ended before it would be quietened
	}
	s.idle = time.AfterFunc(d, s.expire)
}

// quietAfter is how long a session has no request in progress before it
// drops what it and its peer keep only for requests (see quieten): long
// enough that a client calling now and then does not make them again for
// every call, short enough that thousands of idle sessions soon hold less.
const quietAfter = time.Second

func (s *StreamSession) expire() {
	s.mu.Lock()
	if s.active > 0 || s.err != nil {
		s.mu.Unlock()
		return
	}
	if !s.quietened {
		s.quietened = true
		if s.idle != nil && s.h.opts.IdleTimeout > 0 {
			s.idle.Reset(s.h.opts.IdleTimeout - quietAfter)
		}
		s.quietenLocked()
		feed := s.feed.Load()
		s.mu.Unlock()
		if feed != nil {
			feed.Quiet()
		}
		return
	}
	s.mu.Unlock()
	s.end(errIdle)
}

// generalLocked returns the GET stream, made on first use: most sessions
// never open one, nor are sent anything unrelated to their requests.
func (s *StreamSession) generalLocked() *stream {
	if s.general == nil {
		s.general = &stream{num: 0, nextSeq: 1, mode: modeSSE}
	}
	return s.general
}

// quietenLocked drops the maps of requests and streams while they are
// empty; they are made again by the next POST.
func (s *StreamSession) quietenLocked() {
	if len(s.calls) == 0 {
		s.calls = nil
	}
	if len(s.streams) == 0 {
		s.streams = nil
	}
	if len(s.tokens) == 0 {
		s.tokens = nil
	}
}

// posted is a POST body on its way to the owner's peer, with the messages
// the handler decoded from it under its Limits.
type posted struct {
	body  []byte
	msgs  []jsonrpc.Message
	batch bool
}

// hand gives a POST's messages to the owner's peer: on this goroutine,
// through the peer's Feed, once the peer is bound to the conn (it then
// routes the POST's calls from here, and no reader of its own needs waking);
// else through the inbox its read loop reads.
func (s *StreamSession) hand(ctx context.Context, p posted) error {
	f := s.feed.Load()
	if f == nil {
		if err := s.push(ctx, p); err != nil {
			return err
		}
		// A peer bound meanwhile reads no inbox: whichever of this
		// handler and Bind looks last hands it what waits there.
		if f := s.feed.Load(); f != nil {
			s.handInbox(f)
		}
		return nil
	}
	if s.ended.Load() {
		return net.ErrClosed
	}
	if !f.Frame(p.body, jsonrpc.Frame{Messages: p.msgs, Batch: p.batch}, s.h.opts.Limits) {
		return net.ErrClosed
	}
	return nil
}

// handInbox gives f the POSTs that reached the inbox before f was bound
// (an owner that starts its peer after Open returned). A session whose
// inbox was never made has none to hand, and is not given one: its 64
// slots were most of what an idle session kept.
func (s *StreamSession) handInbox(f *peer.Feed) {
	if !s.inboxMade.Load() {
		return
	}
	in := s.inboxChan()
	for {
		select {
		case p := <-in:
			f.Frame(p.body, jsonrpc.Frame{Messages: p.msgs, Batch: p.batch}, s.h.opts.Limits)
		default:
			return
		}
	}
}

// inboxChan returns the inbox, made on first use.
func (s *StreamSession) inboxChan() chan posted {
	s.inboxOnce.Do(func() {
		n := sessionInbox
		if s.stateless || s.ID() == "" {
			n = 1 // one request
		}
		s.inbox = make(chan posted, n)
		s.inboxMade.Store(true)
	})
	return s.inbox
}

// push hands a POST body to the owner's read loop.
func (s *StreamSession) push(ctx context.Context, p posted) error {
	select {
	case s.inboxChan() <- p:
		return nil
	case <-s.doneChan():
		return net.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// progressKey returns a map key for a progress token (a string or a
// number).
func progressKey(raw []byte) (string, bool) {
	var kb [64]byte
	k, ok := appendProgressKey(kb[:0], raw)
	return string(k), ok
}

// appendProgressKey appends progressKey's key for raw to b.
func appendProgressKey(b, raw []byte) ([]byte, bool) {
	if k, ok := jsonrpc.AppendUnquoted(append(b, "s:"...), raw); ok {
		return k, true
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" || t[0] == '{' || t[0] == '[' {
		return b, false
	}
	return append(append(b, "n:"...), t...), true
}

// tokenCallLocked returns the request whose progress token is raw. Its key
// is made on the stack: the map lookup of a converted byte slice allocates
// nothing.
func (s *StreamSession) tokenCallLocked(raw []byte) (jsonrpc.ID, bool) {
	var kb [64]byte
	k, ok := appendProgressKey(kb[:0], raw)
	if !ok {
		return jsonrpc.ID{}, false
	}
	id, ok := s.tokens[string(k)]
	return id, ok
}

// servePOST serves a POST of a session: it records the requests it carries,
// hands the body to the peer and answers with 202, one JSON body or an SSE
// stream.
func (s *StreamSession) servePOST(w http.ResponseWriter, r *http.Request, body []byte, msgs []jsonrpc.Message, batch bool) {
	in := posted{body: body, msgs: msgs, batch: batch}
	if s.ID() != "" {
		w.Header()[HeaderSessionID] = s.idHeader[:]
	}
	var one [1]*jsonrpc.Request // a POST of one request needs no slice of its own
	calls := one[:0]
	for _, m := range msgs {
		req, ok := m.(*jsonrpc.Request)
		switch {
		case !ok:
		case req.IsCall():
			calls = append(calls, req)
		case req.Method == NotificationCancelled:
			// A cancelled request gets no answer: its stream must not wait
			// for one.
			var p CancelledParams
			if json.Unmarshal(req.Params, &p) == nil {
				s.cancelled(p.RequestID)
			}
		}
	}
	if len(calls) == 0 {
		if err := s.hand(r.Context(), in); err != nil {
			if errors.Is(err, net.ErrClosed) {
				writeHTTPError(w, http.StatusNotFound, 0, "session ended")
			}
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}

	st, att, err := s.openPOSTStream(calls)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, 0, err.Error())
		return
	}
	if err := s.hand(r.Context(), in); err != nil {
		// The peer never got the requests: no answer will come.
		s.mu.Lock()
		for len(st.owed) > 0 {
			s.answeredLocked(st, st.owed[0].id)
		}
		st.writer = nil
		st.orphaned = true
		s.forgetStreamLocked(st, true)
		s.mu.Unlock()
		if errors.Is(err, net.ErrClosed) {
			writeHTTPError(w, http.StatusNotFound, 0, "session ended")
		}
		return
	}
	s.pump(w, r, st, att)
}

// openPOSTStream registers a stream for a POST's requests.
func (s *StreamSession) openPOSTStream(calls []*jsonrpc.Request) (*stream, attachment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range calls {
		if s.callLocked(c.ID) != nil {
			return nil, nil, fmt.Errorf("request id %s is already in flight", c.ID)
		}
	}
	st := &stream{num: s.nextNum, post: true, nextSeq: 1}
	st.owed = st.owedOne[:0]
	s.nextNum++
	switch {
	case s.h.opts.ResponseMode == ResponseSSE && s.stateless:
		st.errorAsJSON = true
	case s.h.opts.ResponseMode == ResponseSSE:
		st.mode = modeSSE
	}
	if s.stateless {
		// Its one request needs no map to be found by (callLocked).
		for _, c := range calls {
			st.owe(c.ID, "")
		}
		s.one = st
	}
	for _, c := range calls {
		if s.stateless {
			break
		}
		key := ""
		if raw, ok := metaMember(c.Params, MetaProgressToken); ok {
			if k, ok := progressKey(raw); ok {
				key = k
				if s.tokens == nil {
					s.tokens = map[string]jsonrpc.ID{} // made for the first call with a progress token
				}
				s.tokens[k] = c.ID
			}
		}
		st.owe(c.ID, key)
		if s.calls == nil {
			s.calls = make(map[jsonrpc.ID]*stream, len(calls))
		}
		s.calls[c.ID] = st
	}
	att := newAttachment()
	st.writer = att
	if !s.stateless { // nothing resumes a stateless request's stream (it has no event ids): no map to find it in
		if s.streams == nil {
			s.streams = map[int64]*stream{}
		}
		s.streams[st.num] = st
	}
	return st, att, nil
}

// callLocked returns the stream of the client's request id in flight, or
// nil.
func (s *StreamSession) callLocked(id jsonrpc.ID) *stream {
	if st := s.one; st != nil {
		if slices.ContainsFunc(st.owed, func(o owedAnswer) bool { return o.id == id }) {
			return st
		}
		return nil
	}
	return s.calls[id]
}

// cancelled stops waiting for the answer to a request the client cancelled.
// Once every request of its POST is cancelled, the stream must end without
// an answer, and without inviting a resumption: a client (the TypeScript
// SDK's, for one) that holds an event id of a stream that ended before its
// answer comes back for the rest, and one that is then told nothing comes
// back again and again. So a stream whose client has none of its event ids
// ends at once, without a priming event; one whose client has is held open
// (keep-alives only) until its client closes it or the session ends, as the
// SDKs' own servers hold a cancelled request's stream. A resumption of it
// gets 204 (attachGET).
func (s *StreamSession) cancelled(id jsonrpc.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.callLocked(id)
	if st == nil {
		return
	}
	s.answeredLocked(st, id)
	if len(st.owed) > 0 {
		return
	}
	st.cancelled = true
	if st.resumable && st.writer != nil {
		s.holdLocked(st)
		return
	}
	st.finished = true
	if st.mode == modePending {
		st.mode = modeSSE // nothing to send as JSON: an empty stream
	}
	st.wakeLocked()
	s.forgetStreamLocked(st, true)
}

// holdLocked counts a cancelled stream held open, ending the oldest beyond
// maxHeldStreams: a client that cancels call after call must not hold a
// connection of the hub's for each.
func (s *StreamSession) holdLocked(st *stream) {
	s.held = append(s.held, st)
	if len(s.held) <= maxHeldStreams {
		return
	}
	old := s.held[0]
	s.held = slices.Delete(s.held, 0, 1)
	if old.writer != nil {
		old.closeReq = true
		old.wakeLocked()
	}
}

func (s *StreamSession) answeredLocked(st *stream, id jsonrpc.ID) {
	i := slices.IndexFunc(st.owed, func(o owedAnswer) bool { return o.id == id })
	if i < 0 {
		return
	}
	key := st.owed[i].key
	st.owed = slices.Delete(st.owed, i, i+1)
	delete(s.calls, id)
	if key != "" && s.tokens[key] == id {
		delete(s.tokens, key)
	}
}

// attachGET attaches a GET to the stream its Last-Event-ID names, or to the
// session's GET stream when it has none, or one this session did not give.
//
// It returns no stream, and no error, for a Last-Event-ID naming a POST
// stream with nothing more to send: cancelled, answered and replayed up to
// that id, or no longer known. serveStream answers such a GET 204, the one
// answer after which SSE clients (EventSource, the TypeScript SDK's
// transport) do not come back. A stream that ended at once would have them
// resume it again and again, and the session's GET stream in its place
// would hand a resumption another stream's messages and take that stream
// from the client's own GET.
//
// A GET that resumes nothing while the GET stream is open is refused (409),
// as the SDKs do. A resumption takes its stream over from a response still
// attached to it: a client resumes because its connection dropped, and the
// server may not have noticed yet; refusing it would make the client wait
// for a timeout to learn what it already knows.
func (s *StreamSession) attachGET(lastEventID string) (*stream, attachment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, from := s.generalLocked(), int64(-1)
	if nonce, num, seq, ok := parseEventID(lastEventID); ok && nonce == s.nonce {
		t := s.streams[num]
		if num == 0 {
			t = st
		}
		if t == nil || t.post && t.over(seq) {
			return nil, nil, nil
		}
		st, from = t, min(seq, t.nextSeq-1)
	} else if st.writer != nil {
		return nil, nil, errors.New("a GET stream is already open for this session")
	}
	if old := st.writer; old != nil {
		st.writer = nil
		select { // the old response ends at its next turn
		case old <- struct{}{}:
		default:
		}
	}
	if from >= 0 {
		st.sent = from
	}
	att := newAttachment()
	st.writer = att
	return st, att, nil
}

// over reports whether a POST stream has nothing more for a client that has
// its events up to seq.
func (st *stream) over(seq int64) bool {
	return st.cancelled || st.orphaned || st.finished && seq >= st.nextSeq-1
}

// serveStream serves a GET stream, or answers 204 when there is nothing
// more to resume (attachGET).
func (s *StreamSession) serveStream(w http.ResponseWriter, r *http.Request, st *stream, att attachment) {
	if s.ID() != "" {
		w.Header()[HeaderSessionID] = s.idHeader[:]
	}
	if st == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.pump(w, r, st, att)
}

// owe records that the answer to id is to come on st; a batch that
// repeats an id owes one answer, under the last one's token key.
func (st *stream) owe(id jsonrpc.ID, key string) {
	for i := range st.owed {
		if st.owed[i].id == id {
			st.owed[i].key = key
			return
		}
	}
	st.owed = append(st.owed, owedAnswer{id: id, key: key})
}

func (st *stream) wakeLocked() {
	if st.writer != nil {
		select {
		case st.writer <- struct{}{}:
		default:
		}
	}
}

// detach releases a stream from its writer.
func (s *StreamSession) detach(st *stream, att attachment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.writer == att {
		st.writer = nil
		if st.mode == modePending {
			// Nothing was sent, so the client has no event id to resume
			// with: what would have gone to this stream goes nowhere.
			st.orphaned = true
			s.dropEventsLocked(st)
		}
		s.forgetStreamLocked(st, false)
	}
}

// patiencePool keeps the timers of streams (a pending POST's patience, then
// a stream's keep-alives), one per call otherwise. A stopped timer sends
// nothing stale after Reset (Go 1.23 and later).
var patiencePool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// eventBufs keeps the buffers SSE events are written from: net/http copies
// what it is given, so a buffer is free again once written.
var eventBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledEventBuf is the largest event buffer kept for reuse: one of a
// large answer goes back to the allocator.
const maxPooledEventBuf = 16 << 10

// The values of an SSE response's headers, set without allocating a value
// slice per response (net/http copies what it sends).
var (
	sseContentType  = []string{"text/event-stream"}
	sseCacheControl = []string{"no-cache, no-transform"}
	sseNoBuffering  = []string{"no"}
)

// pump writes a stream to its HTTP response until the stream is finished
// and written, the client leaves, the session ends, or CloseStream asks.
func (s *StreamSession) pump(w http.ResponseWriter, r *http.Request, st *stream, att attachment) {
	defer func() {
		s.detach(st, att)
		releaseAttachment(att)
	}()
	// The deadlines set below are the connection's, and stay on it once
	// the handler returns: they guard net/http's last write of the
	// response (what is still buffered, and an SSE stream's last chunk),
	// and net/http clears them itself once the response is finished, before
	// it reads the next request of a kept-alive connection (an HTTP/2
	// stream's deadline ends with the stream).
	wr := deadlineWriter{w: w}
	started := false
	primes := s.primes(r.Header.Get(HeaderProtocolVersion))
	var keepAlive <-chan time.Time
	var bufp *[]byte // the events' buffer, from eventBufs once needed
	var buf []byte
	// timer is how long a pending POST waits silent, then the interval of
	// a stream's keep-alives.
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
			patiencePool.Put(timer)
		}
		if bufp != nil && cap(buf) <= maxPooledEventBuf {
			*bufp = buf[:0]
			eventBufs.Put(bufp)
		}
	}()
	for {
		s.mu.Lock()
		if st.writer != att {
			s.mu.Unlock()
			return
		}
		if st.mode == modePending {
			ended := s.err != nil
			s.mu.Unlock()
			if ended {
				writeHTTPError(w, http.StatusNotFound, 0, "session ended")
				return
			}
			var impatient <-chan time.Time
			if ka := s.h.opts.KeepAlive; ka > 0 {
				if timer == nil {
					timer = patiencePool.Get().(*time.Timer)
					timer.Reset(ka)
				}
				impatient = timer.C
			}
			// The session's end wakes att too (end): one channel fewer to
			// wait on for every call.
			select {
			case <-att:
			case <-r.Context().Done():
				return
			case <-impatient:
				// A long wait with not one byte sent looks dead to a proxy:
				// the answer comes as SSE, with keep-alives meanwhile.
				s.mu.Lock()
				if st.mode == modePending {
					st.mode = modeSSE
				}
				s.mu.Unlock()
			}
			continue
		}
		if st.mode == modeJSON {
			body, errObj := st.jsonBody, st.jsonErr
			st.jsonBody, st.jsonErr = nil, nil
			s.forgetStreamLocked(st, true)
			s.mu.Unlock()
			w.Header()["Content-Type"] = jsonContentType
			if len(body) > bufferedBody {
				wr.deadline(s.h.opts.WriteTimeout)
			}
			status := http.StatusOK
			if s.stateless {
				status = answerStatus(errObj)
			}
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		if bufp == nil {
			bufp = eventBufs.Get().(*[]byte)
			buf = *bufp
		}
		buf = buf[:0]
		if !started && primes && !st.cancelled {
			// A cancelled stream is not primed: it ends before anything,
			// and its client must have no event id to come back with.
			retry := s.h.opts.Retry
			buf = s.appendEvent(buf, st.num, st.sent, nil, max(retry, 0))
		}
		for _, ev := range st.events {
			if ev.seq > st.sent {
				buf = s.appendEvent(buf, st.num, ev.seq, ev.data, 0)
				st.sent = ev.seq
			}
		}
		if len(buf) > 0 && !s.stateless {
			st.resumable = true
		}
		complete := st.finished
		closeReq := st.closeReq
		st.closeReq = false
		ended := s.err != nil
		if closeReq {
			st.writer = nil
			s.forgetStreamLocked(st, false) // a held stream ends here
		}
		s.mu.Unlock()

		// One deadline for this turn's header, write and flush, when
		// there is something to send: the flush sends it. A turn that ends
		// the response sets it even with nothing to send, for net/http's
		// last chunk.
		last := complete || closeReq || ended
		if !started || len(buf) > 0 || last {
			wr.deadline(s.h.opts.WriteTimeout)
		}
		if !started {
			h := w.Header()
			h["Content-Type"] = sseContentType
			h["Cache-Control"] = sseCacheControl
			h["X-Accel-Buffering"] = sseNoBuffering
			w.WriteHeader(http.StatusOK) // buffered: the Flush below sends it
			started = true
			if ka := s.h.opts.KeepAlive; ka > 0 {
				if timer == nil {
					timer = patiencePool.Get().(*time.Timer)
				}
				timer.Reset(ka) // a pending POST's patience is over
				keepAlive = timer.C
			}
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
		// A complete stream ends its response. Its events stay in the
		// window: a write that succeeded may still have gone into a
		// connection that was dying, and the client may come back for them.
		// What this turn wrote is not flushed: net/http writes it with the
		// response's last chunk once the handler returns, in one write
		// system call where a flush would make two, under the deadline
		// just set.
		if last {
			return
		}
		if err := wr.ctl().Flush(); err != nil {
			return
		}
		select {
		case <-att: // or the session ended (end)
		case <-r.Context().Done():
			return
		case <-keepAlive:
			timer.Reset(s.h.opts.KeepAlive)
			wr.deadline(s.h.opts.WriteTimeout)
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return
			}
			if err := wr.ctl().Flush(); err != nil {
				return
			}
		}
	}
}

// bufferedBody is the largest answer net/http holds in its buffer until the
// handler returns (it then sets Content-Length and writes it): writing it
// touches no socket, and no write deadline, a turn of the runtime's timers,
// is set for it. A larger one's deadline guards net/http's last write too.
const bufferedBody = 2048

// deadlineWriter sets a response's write deadlines. Its ResponseController
// is made when first needed (a small JSON answer needs none). The
// deadlines are not cleared: see pump.
type deadlineWriter struct {
	w   http.ResponseWriter
	rc  http.ResponseController // a value: made without an allocation of its own
	has bool                    // rc is made
}

func (d *deadlineWriter) ctl() *http.ResponseController {
	if !d.has {
		d.rc, d.has = *http.NewResponseController(d.w), true
	}
	return &d.rc
}

func (d *deadlineWriter) deadline(after time.Duration) {
	_ = d.ctl().SetWriteDeadline(time.Now().Add(after))
}

// forgetStreamLocked drops a finished POST stream once nothing can resume
// it: when the window has evicted its events, or at once with drop (its
// client can never resume it); a cancelled one once no response serves it
// (a resumption of it gets 204, and its events are dropped at once).
func (s *StreamSession) forgetStreamLocked(st *stream, drop bool) {
	if !st.post || !st.finished && !st.orphaned && !st.cancelled {
		return
	}
	if drop || st.cancelled {
		s.dropEventsLocked(st)
	}
	if len(st.events) == 0 && st.writer == nil {
		delete(s.streams, st.num)
		if i := slices.Index(s.held, st); i >= 0 {
			s.held = slices.Delete(s.held, i, i+1)
		}
	}
}

func (s *StreamSession) dropEventsLocked(st *stream) {
	for _, ev := range st.events {
		if !ev.dropped {
			ev.dropped = true
			s.logCount--
			s.logBytes -= len(ev.data)
		}
	}
	st.events = nil
}

// eventID names event seq of stream num: "<nonce>.<num>.<seq>", unique in
// the session, and telling on a resumption which stream to resume; "" (no
// id) on a stateless request's stream, which cannot be resumed.
func (s *StreamSession) eventID(num, seq int64) string {
	if s.stateless {
		return ""
	}
	return string(s.appendEventID(nil, num, seq))
}

func (s *StreamSession) appendEventID(b []byte, num, seq int64) []byte {
	b = append(b, s.nonce...)
	b = append(b, '.')
	b = strconv.AppendInt(b, num, 10)
	b = append(b, '.')
	return strconv.AppendInt(b, seq, 10)
}

// appendEvent appends event seq of stream num to b, as appendSSEEvent
// would with its eventID, without making the id a string first.
func (s *StreamSession) appendEvent(b []byte, num, seq int64, data []byte, retry time.Duration) []byte {
	if !s.stateless {
		b = append(b, "id: "...)
		b = s.appendEventID(b, num, seq)
		b = append(b, '\n')
	}
	return appendSSEEvent(b, "", data, retry)
}

// parseEventID reads an event id that eventID wrote.
func parseEventID(id string) (nonce string, num, seq int64, ok bool) {
	nonce, rest, ok1 := strings.Cut(id, ".")
	ns, ss, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || nonce == "" {
		return "", 0, 0, false
	}
	n, err1 := strconv.ParseInt(ns, 10, 64)
	q, err2 := strconv.ParseInt(ss, 10, 64)
	if err1 != nil || err2 != nil || n < 0 || q < 0 {
		return "", 0, 0, false
	}
	return nonce, n, q, true
}

// route sends one frame of the owner's to the stream it belongs on. The
// owner's peer writes valid JSON-RPC, so a single message is routed by its
// members alone (id, method, params; then a progress token or a related
// request in params), read in one pass each, without decoding it: only a
// batch is decoded. A related request's hint is cut out of the frame as
// bytes.
func (s *StreamSession) route(frame []byte) error {
	if t := bytes.TrimLeft(frame, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return s.routeBatch(frame)
	}
	var idRaw, method, params, errObj []byte
	response := false
	for name, v := range jsonrpc.Members(frame) {
		switch string(name) {
		case "id":
			idRaw = v
		case "method":
			method = v
		case "params":
			params = v
		case "result":
			response = true
		case "error":
			response, errObj = true, v
		}
	}
	switch {
	case response && method == nil:
		var id jsonrpc.ID
		if idRaw == nil || id.UnmarshalJSON(idRaw) != nil {
			break
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err != nil {
			return net.ErrClosed
		}
		st := s.callLocked(id)
		if st == nil {
			// Cancelled, or its stream is gone: nobody waits for it.
			s.h.log.Debug("streamable HTTP: dropping an answer to no request in flight", "session", s.ID(), "id", id.String())
			return nil
		}
		s.answeredLocked(st, id)
		s.deliverLocked(st, frame, true, errObj)
		return nil
	case method != nil && !response:
		progress := isJSONString(method, NotificationProgress)
		progressToken, related := routeHints(params, progress)
		if related != nil {
			// The hint is for this transport and means nothing to the
			// client: cut out of the frame, which is otherwise as written.
			stripped, ok := jsonrpc.Splice(frame, params, WithoutMeta(params, isRelatedHint))
			if !ok {
				break
			}
			frame = stripped
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err != nil {
			return net.ErrClosed
		}
		var st *stream
		switch {
		case s.stateless:
			// One request, one stream: everything goes on it while the
			// request is in flight.
			if s.one != nil && len(s.one.owed) > 0 {
				st = s.one
			}
		case progress:
			if id, ok := s.tokenCallLocked(progressToken); ok {
				st = s.calls[id]
			}
		case related != nil:
			var id jsonrpc.ID
			if id.UnmarshalJSON(related) == nil {
				st = s.calls[id]
			}
		}
		if st == nil || st.orphaned {
			// Unrelated, or related to a POST whose client left before
			// anything was sent to it (it has no event id to resume with):
			// the GET stream.
			st = s.generalLocked()
		}
		s.deliverLocked(st, frame, false, nil)
		return nil
	}
	s.h.log.Debug("streamable HTTP: dropping an invalid outgoing frame", "session", s.ID())
	return nil
}

// isJSONString reports whether the JSON value v is the string want.
func isJSONString(v []byte, want string) bool {
	if len(v) == len(want)+2 && v[0] == '"' && string(v[1:len(v)-1]) == want && strings.IndexByte(want, '\\') < 0 {
		return true // as written: no escape in it (a backslash in want is one, and means something else)
	}
	got, ok := jsonrpc.Unquote(v)
	return ok && bytes.IndexByte(v, '\\') >= 0 && got == want
}

// routeBatch sends the answers to a batch, as one array, to the batch's
// stream.
func (s *StreamSession) routeBatch(frame []byte) error {
	f := jsonrpc.Decode(frame)
	if len(f.Messages) == 0 {
		s.h.log.Debug("streamable HTTP: dropping an invalid outgoing frame", "session", s.ID())
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return net.ErrClosed
	}
	var st *stream
	for _, m := range f.Messages {
		if resp, ok := m.(*jsonrpc.Response); ok && st == nil {
			st = s.callLocked(resp.ID)
		}
	}
	if st == nil {
		s.h.log.Debug("streamable HTTP: dropping answers to no request in flight", "session", s.ID())
		return nil
	}
	for _, m := range f.Messages {
		if resp, ok := m.(*jsonrpc.Response); ok && s.callLocked(resp.ID) == st {
			s.answeredLocked(st, resp.ID)
		}
	}
	s.deliverLocked(st, frame, true, nil) // a batch's answers are an array: never one error
	return nil
}

// answerStatus returns the HTTP status of a stateless request's JSON
// answer, given its error member as route read it: its error's
// (HTTPStatusOf), or 200 for none.
func answerStatus(errObj []byte) int {
	if errObj == nil {
		return http.StatusOK
	}
	code, ok := jsonrpc.Member(errObj, "code")
	if !ok {
		return http.StatusOK
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(code)))
	if err != nil {
		return http.StatusOK
	}
	return HTTPStatusOf(jsonrpc.Code(n))
}

// routeHints reads what routing needs of an outgoing message's params, in
// one pass over them: a progress report's token, or the request another
// message names in _meta (MetaRelatedRequest).
func routeHints(params []byte, progress bool) (token, related []byte) {
	for name, v := range jsonrpc.Members(params) {
		switch {
		case progress && string(name) == MetaProgressToken:
			token = v
		case !progress && string(name) == "_meta":
			related, _ = jsonrpc.Member(v, MetaRelatedRequest)
		}
	}
	return token, related
}

// isRelatedHint picks the routing hint out of a _meta (WithoutMeta).
func isRelatedHint(name []byte) bool { return string(name) == MetaRelatedRequest }

// deliverLocked puts frame on st: as the JSON answer when it is the only
// thing the stream carries, else as an SSE event.
// errObj is an answer's error member, as route read it (nil for a result).
func (s *StreamSession) deliverLocked(st *stream, frame []byte, answer bool, errObj []byte) {
	last := st.post && answer && len(st.owed) == 0
	switch {
	case st.orphaned:
		if last {
			st.finished = true
			s.forgetStreamLocked(st, true)
		}
		return
	case st.mode == modePending && last && (!st.errorAsJSON || errObj != nil):
		st.mode = modeJSON
		st.jsonBody, st.jsonErr = frame, errObj
		st.finished = true
		st.wakeLocked()
		return
	case st.mode == modePending:
		st.mode = modeSSE
	}
	s.appendLocked(st, frame)
	if last {
		st.finished = true
	}
	st.wakeLocked()
}

// newEvent returns room for the stream's next event: in its chunk while
// the chunk has some, which also holds the list of events until it grows
// beyond it.
func (st *stream) newEvent() *streamEvent {
	if st.chunk == nil {
		st.chunk = &eventChunk{}
		st.events = st.chunk.ptrs[:0]
	}
	if c := st.chunk; c.used < len(c.evs) {
		c.used++
		return &c.evs[c.used-1]
	}
	return &streamEvent{}
}

// appendLocked adds an event to a stream and to the session's window,
// evicting the oldest events beyond it.
func (s *StreamSession) appendLocked(st *stream, frame []byte) {
	ev := st.newEvent()
	*ev = streamEvent{st: st, seq: st.nextSeq, data: frame}
	st.nextSeq++
	st.events = append(st.events, ev)
	s.log = append(s.log, ev)
	s.logCount++
	s.logBytes += len(frame)
	o := &s.h.opts
	for len(s.log) > 0 && (s.logCount > o.ReplayEvents || s.logBytes > o.ReplayBytes || s.log[0].dropped) {
		old := s.log[0]
		s.log[0] = nil
		s.log = s.log[1:]
		if old.dropped {
			continue
		}
		old.dropped = true
		s.logCount--
		s.logBytes -= len(old.data)
		ost := old.st
		if len(ost.events) > 0 && ost.events[0] == old {
			ost.events[0] = nil
			ost.events = ost.events[1:]
		}
		if old.seq > ost.sent {
			s.h.log.Warn("streamable HTTP: an event left the replay window before it was sent",
				"stream", ost.num, "window_events", o.ReplayEvents, "window_bytes", o.ReplayBytes)
		}
		s.forgetStreamLocked(ost, false)
	}
	if len(s.log) > 2*s.logCount+16 {
		kept := s.log[:0]
		for _, e := range s.log {
			if !e.dropped {
				kept = append(kept, e)
			}
		}
		clear(s.log[len(kept):])
		s.log = kept
	}
}

// streamConn is a session's peer.Conn.
type streamConn struct{ s *StreamSession }

var (
	_ peer.Conn        = (*streamConn)(nil)
	_ peer.FrameReader = (*streamConn)(nil)
	_ peer.DirectConn  = (*streamConn)(nil)
)

// Bind makes the session hand its POSTs to f on the handlers' goroutines,
// and tell f when it ends.
func (c *streamConn) Bind(f peer.Feed) {
	s := c.s
	s.mu.Lock()
	s.bound = f
	s.feed.Store(&s.bound)
	ended, readErr := s.err != nil, s.readErrLocked()
	s.mu.Unlock()
	if ended {
		f.End(readErr)
		return
	}
	s.handInbox(&f)
}

// readErrLocked is why Read fails once the session has ended: the owner
// closed it (net.ErrClosed), or why it ended.
func (s *StreamSession) readErrLocked() error {
	if s.byOwner {
		return net.ErrClosed
	}
	return s.err
}

// WriteDirect routes one frame to its stream, keeping it: routing only
// takes the session's lock.
func (c *streamConn) WriteDirect(frame []byte) error { return c.s.route(frame) }

// Read returns the next POST body.
func (c *streamConn) Read(ctx context.Context) ([]byte, error) {
	p, err := c.next(ctx)
	return p.body, err
}

// ReadFrame returns the next POST body's messages as the handler decoded
// them, when dec's limits are the handler's, and decodes the body with dec
// otherwise.
func (c *streamConn) ReadFrame(ctx context.Context, dec *jsonrpc.Decoder) (jsonrpc.Frame, error) {
	p, err := c.next(ctx)
	if err != nil {
		return jsonrpc.Frame{}, err
	}
	if p.msgs == nil || dec.Limits != c.s.h.opts.Limits {
		return dec.Decode(p.body), nil
	}
	return jsonrpc.Frame{Messages: p.msgs, Batch: p.batch}, nil
}

// next returns the next POST.
func (c *streamConn) next(ctx context.Context) (posted, error) {
	s := c.s
	select {
	case p := <-s.inboxChan():
		return p, nil
	case <-s.doneChan():
		s.mu.Lock()
		defer s.mu.Unlock()
		return posted{}, s.readErrLocked()
	case <-ctx.Done():
		return posted{}, ctx.Err()
	}
}

// Write routes one frame to its stream.
func (c *streamConn) Write(_ context.Context, frame []byte) error {
	return c.s.route(append([]byte(nil), frame...))
}

// Close ends the session.
func (c *streamConn) Close(code peer.CloseCode, reason string) error {
	s := c.s
	s.mu.Lock()
	ended := s.err != nil
	if !ended {
		s.byOwner = true
	}
	s.mu.Unlock()
	if !ended { // a session that ended already (a stateless one, served) has its reason
		s.end(&peer.CloseError{Code: code, Reason: reason})
	}
	return nil
}
