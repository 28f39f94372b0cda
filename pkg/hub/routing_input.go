package hub

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Translation between eras, a session-based server and a modern client: a
// server serving a modern client's call may ask the client for input the
// way it always has, by a request of its own (sampling/createMessage,
// elicitation/create, roots/list). A modern client takes no requests: the
// hub answers the client's call with an InputRequiredResult holding the
// server's requests as input requests, keeps the server's requests (and
// its call) waiting, and when the client sends the call again with
// inputResponses and the requestState, answers the server's requests with
// them; the call's final answer, or the next input requests, answer that
// retry. The server never knows.
//
// An inputCall is one such call, on the instance of the client's first
// request: it is the call's caller (routing.go), whoever asks next. It
// belongs to the principal that made it: a retry continues it only for
// that principal, checked here, where the call is (a retry that reached
// another instance says whose it is), and once it passed the checks of any
// call (routeCall); another principal's retry is refused as for a call
// that does not exist (-32602), and the call goes on waiting for its
// owner. Its requestState names this instance, the call and the round,
// with a MAC of this instance's, so that a retry reaching another instance
// is sent here (cluster_calls.go, envResume) and a forged, altered or reused
// state is refused (-32602). The call's timeout runs from its first
// request, over every round: a retry that does not come in time ends the
// call, the server's requests fail and the server is told the call is
// cancelled.

// stateVersion prefixes the hub's requestStates; anything else is a
// server's own, passed to it as it is.
const stateVersion = "sb1."

// inputs holds this instance's calls that wait for a modern client's input.
type inputs struct {
	h   *Hub
	key []byte // MACs this instance's requestStates

	next atomic.Uint64 // numbers the calls

	mu    sync.Mutex
	calls map[string]*inputCall // the calls that asked for input, which a retry may continue
}

func newInputs(h *Hub) *inputs {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &inputs{h: h, key: key, calls: map[string]*inputCall{}}
}

// inputState is what a requestState of the hub's says.
type inputState struct {
	instance string
	call     string
	round    int
	raw      string
}

// stateOf reads the hub's requestState from a retry's params; ok is false
// for a request without one, or with a server's own.
func (in *inputs) stateOf(params json.RawMessage) (inputState, bool) {
	raw, ok := jsonrpc.StringMember(params, "requestState")
	return parseState(raw, ok)
}

// callParams reads what routeModern needs of a call's params, in one pass:
// its subject (as callName reads it) and the hub's requestState, when it
// is a retry (as stateOf reads it).
func callParams(req *jsonrpc.Request) (name string, st inputState, retry bool) {
	key := subjectKey(req.Method)
	var subject, state []byte
	for k, v := range jsonrpc.Members(req.Params) {
		switch string(k) {
		case key:
			subject = v
		case "requestState":
			state = v
		}
	}
	name, _ = jsonrpc.Unquote(subject)
	raw, ok := jsonrpc.Unquote(state)
	st, retry = parseState(raw, ok)
	return name, st, retry
}

// parseState reads the hub's requestState raw, a string when ok.
func parseState(raw string, ok bool) (inputState, bool) {
	if !ok || !strings.HasPrefix(raw, stateVersion) {
		return inputState{}, false
	}
	st := inputState{raw: raw}
	payload, _, _ := strings.Cut(strings.TrimPrefix(raw, stateVersion), ".")
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return st, true // ours by its look, but broken: refused by resume
	}
	parts := strings.Split(string(b), "\n")
	if len(parts) == 3 {
		st.instance, st.call = parts[0], parts[1]
		st.round, _ = strconv.Atoi(parts[2])
	}
	return st, true
}

// state returns the requestState of a call's round.
func (in *inputs) state(call string, round int) string {
	payload := []byte(in.h.id + "\n" + call + "\n" + strconv.Itoa(round))
	return stateVersion + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(in.mac(payload))
}

func (in *inputs) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, in.key)
	m.Write(payload)
	return m.Sum(nil)[:16]
}

// verify reports whether a requestState is one this instance made.
func (in *inputs) verify(st inputState) bool {
	payload, sig, ok := strings.Cut(strings.TrimPrefix(st.raw, stateVersion), ".")
	if !ok {
		return false
	}
	p, err1 := base64.RawURLEncoding.DecodeString(payload)
	s, err2 := base64.RawURLEncoding.DecodeString(sig)
	return err1 == nil && err2 == nil && hmac.Equal(s, in.mac(p))
}

// inputWaiter is a client's request that the call's next outcome answers:
// its first request, then each retry.
type inputWaiter struct {
	c     caller // where notifications about the call go meanwhile
	meta  *mcp.RequestMeta
	token json.RawMessage // its progress token: the call's progress goes to it under this one
	send  func(json.RawMessage, error)
}

// hasToken reports whether the progress report params carries token, and
// no other: the first request's own, which the replica restored (no copy
// to set it again).
func hasToken(params, token json.RawMessage) bool {
	t, ok := jsonrpc.Member(params, mcp.MetaProgressToken)
	return ok && bytes.Equal(t, token) && soleMember(params, mcp.MetaProgressToken)
}

// progressToken returns a request's _meta.progressToken, or nil.
func progressToken(params json.RawMessage) json.RawMessage {
	if !mayHaveMeta(params) {
		return nil
	}
	meta, _ := jsonrpc.Member(params, "_meta")
	t, _ := jsonrpc.Member(meta, mcp.MetaProgressToken)
	return t
}

// inputAsk is a server's request waiting for the client's input. It is
// in its call's asks until it is settled, and answered (done) once, after
// its call's lock is released: answering writes to the server.
type inputAsk struct {
	key    string
	method string
	params json.RawMessage
	done   func(json.RawMessage, error)
}

type askAnswer struct {
	raw json.RawMessage
	err error
}

// settledAsk is a server's request whose answer is decided, to be sent
// once the call's lock is released (unlock).
type settledAsk struct {
	a *inputAsk
	askAnswer
}

// inputCall is a modern client's call that its server may ask input for.
type inputCall struct {
	in     *inputs
	num    uint64   // its number on this instance
	whose  identity // the principal whose call it is: only its retries continue it
	method string
	name   string // the tool's or prompt's name, or the URI: a retry must repeat it
	server string
	trace  context.Context // its first request's trace: the parent of its rounds' spans

	// first is the waiter of its first request, which firstCall serves
	// (one allocation with the call's).
	first     inputWaiter
	firstCall sessionCall
	// inFlight is the flight it is forwarded in (one allocation with the
	// call's too); flight points to it once the call is started.
	inFlight flight

	mu       sync.Mutex
	id       string       // its key in inputs.calls, once it asked for input: "" before
	cur      *inputWaiter // the request waiting for what comes next; nil between rounds
	meta     *mcp.RequestMeta
	round    int          // InputRequiredResults given so far
	asks     []*inputAsk  // the server's requests not yet answered, in order (at most clientMaxAsks)
	settled  []settledAsk // answers decided under mu, sent by unlock
	nextKey  int
	final    *askAnswer  // the call's answer, kept for a retry to come
	ended    bool        // the answer went out, or never will: the call is forgotten
	flight   *flight     // ends the call upstream, once it is forwarded
	gaveUp   error       // a cancellation that came before the call was started
	deadline *time.Timer // ends a kept answer no retry came for

	span tracing.Span // the round waiting for its retry, when traced (guarded by mu)
}

var _ caller = (*inputCall)(nil)

// start makes owner's modern call about to be forwarded; first is its
// request, answered with the call's answer or its first input requests;
// ctx carries its trace.
// name is its subject (callParams); first.meta is the request's own. The
// call is registered for retries once it asks for input (askLocked): most
// calls never do, and a retry needs the requestState only that makes.
func (in *inputs) start(ctx context.Context, owner identity, server string, req *jsonrpc.Request, name string, first sessionCall, send func(json.RawMessage, error)) (*inputCall, *inputWaiter) {
	ic := &inputCall{in: in, num: in.next.Add(1), whose: owner, method: req.Method, name: name, server: server, trace: ctx, meta: first.meta,
		firstCall: first}
	ic.first = inputWaiter{c: &ic.firstCall, meta: first.meta, token: first.meta.ProgressToken, send: send}
	ic.cur = &ic.first
	return ic, &ic.first
}

// registerLocked makes the call one a retry can find, once; the caller
// holds ic.mu.
func (ic *inputCall) registerLocked() {
	if ic.id != "" {
		return
	}
	ic.id = strconv.FormatUint(ic.num, 10)
	ic.in.mu.Lock()
	ic.in.calls[ic.id] = ic
	ic.in.mu.Unlock()
}

// callName returns what names a call's subject: the tool or prompt, or the
// resource.
func callName(req *jsonrpc.Request) string {
	s, _ := jsonrpc.StringMember(req.Params, subjectKey(req.Method))
	return s
}

// subjectKey is the member of a call's params that names its subject.
func subjectKey(method string) string {
	if method == mcp.MethodResourcesRead {
		return "uri"
	}
	return "name"
}

// started records how to end the call upstream: its flight (held rather
// than its cancel, a method value that would be an allocation a call).
func (ic *inputCall) started(f *flight) {
	ic.mu.Lock()
	ic.flight = f
	cause := ic.gaveUp
	ic.mu.Unlock()
	if cause != nil {
		f.cancel(cause)
	}
}

// unlock releases ic.mu, then answers the server's requests settled
// meanwhile: an answer may be written to a socket, which no lock is held
// across.
func (ic *inputCall) unlock() {
	settled := ic.settled
	ic.settled = nil
	ic.mu.Unlock()
	for _, s := range settled {
		s.a.done(s.raw, s.err)
	}
}

// endLocked forgets the call once; it reports false if it had ended
// already. The caller holds ic.mu, and releases it with unlock: the
// server's requests still waiting fail.
func (ic *inputCall) endLocked() bool {
	if ic.ended {
		return false
	}
	ic.ended = true
	if ic.deadline != nil {
		ic.deadline.Stop()
	}
	ic.span.End() // a round no retry came for
	for _, a := range ic.asks {
		ic.settled = append(ic.settled, settledAsk{a, askAnswer{err: errCallEnded}})
	}
	ic.asks = nil
	if ic.id != "" {
		ic.in.mu.Lock()
		delete(ic.in.calls, ic.id)
		ic.in.mu.Unlock()
	}
	return true
}

// abortLocked ends the call and cancels it upstream with cause.
func (ic *inputCall) abortLocked(cause error) {
	if !ic.endLocked() {
		return
	}
	f := ic.flight
	if f == nil {
		ic.gaveUp = cause
		return
	}
	ic.in.h.goOwned(func() { f.cancel(cause) })
}

// finish takes the call's answer from its server: to the request waiting,
// or kept for the retry to come.
func (ic *inputCall) finish(raw json.RawMessage, err error) {
	ic.mu.Lock()
	if ic.ended {
		ic.mu.Unlock()
		return
	}
	w := ic.cur
	if w == nil {
		switch {
		case ic.final != nil: // a refusal already decided stands
		case err != nil:
			// It failed (timed out, say) with no one waiting: it ends now,
			// and a retry is told its state no longer holds.
			ic.endLocked()
			ic.unlock()
			return
		default:
			ic.final = &askAnswer{raw: raw}
		}
		// Kept for the retry to come, for a while.
		ic.deadline = time.AfterFunc(ic.in.h.cfg.CallTimeout, ic.expire)
		ic.mu.Unlock()
		return
	}
	ic.cur = nil
	ic.endLocked()
	ic.unlock()
	w.send(raw, err)
}

// giveUp ends the call when the request waiting, w, is cancelled by its
// client (or its connection closes).
func (ic *inputCall) giveUp(w *inputWaiter) {
	ic.mu.Lock()
	defer ic.unlock()
	if ic.cur != w {
		return // answered already: the call lives on, for the retry
	}
	ic.cur = nil
	ic.abortLocked(context.Canceled)
}

// expire forgets a call whose answer waited for a retry that did not come.
func (ic *inputCall) expire() {
	ic.mu.Lock()
	defer ic.unlock()
	if ic.cur != nil || ic.ended {
		return
	}
	ic.in.h.log.Debug("a client did not come back for the answer of a call that asked for input", "server", ic.server, "method", ic.method)
	ic.abortLocked(context.DeadlineExceeded)
}

// askLocked answers the waiting request with every server request not yet
// answered, as input requests, and waits for the retry.
func (ic *inputCall) askLocked() func() {
	reqs := make(map[string]mcp.InputRequest, len(ic.asks))
	for _, a := range ic.asks {
		reqs[a.key] = mcp.InputRequest{Method: a.method, Params: a.params}
	}
	ic.registerLocked()
	ic.round++
	ic.span.End()
	_, ic.span = ic.in.h.traceRound(context.Background(), ic.trace, ic.method, ic.server, ic.round)
	res, err := jsonrpc.Marshal(&mcp.InputRequiredResult{ResultType: mcp.ResultInputRequired, InputRequests: reqs,
		RequestState: ic.in.state(ic.id, ic.round)})
	w := ic.cur
	ic.cur = nil
	return func() { w.send(res, err) }
}

// notify passes a notification about the call (progress, a log) to the
// request waiting now, progress under that request's own token (none: it
// wants none); between rounds no one can take it.
func (ic *inputCall) notify(method string, params json.RawMessage) {
	ic.mu.Lock()
	w := ic.cur
	ic.mu.Unlock()
	if w == nil {
		return
	}
	if method == mcp.NotificationProgress {
		if w.token == nil {
			return
		}
		if !hasToken(params, w.token) {
			p, err := jsonrpc.SetMember(params, mcp.MetaProgressToken, w.token)
			if err != nil {
				return
			}
			params = p
		}
	}
	w.c.notify(method, params)
}

// request takes a server's request for the client: it becomes an input
// request of the answer to the client's request waiting now (or of the
// answer to its next retry), and done gets the client's input when a retry
// brings it.
func (ic *inputCall) request(_ context.Context, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	short, ok := inputKinds[method]
	if !ok {
		if method == mcp.MethodPing {
			done(json.RawMessage(`{}`), nil)
		} else {
			done(nil, errNotAnswered(method))
		}
		return noAbort
	}
	obj, err := mcp.ParseObject(params)
	if err != nil {
		done(nil, err)
		return noAbort
	}
	ic.mu.Lock()
	if ic.ended {
		ic.mu.Unlock()
		done(nil, errCallEnded)
		return noAbort
	}
	if err := parseModernCaps(ic.meta).check(method, obj); err != nil {
		// The client did not declare what the server needs: its call fails
		// with the revision's error (now, or at its retry), and the server
		// hears why.
		refusal := mcp.ErrMissingCapability(inputKinds[method])
		w := ic.cur
		ic.cur = nil
		if w == nil {
			ic.final = &askAnswer{err: refusal}
			ic.cancelLocked()
		} else {
			ic.abortLocked(context.Canceled)
		}
		ic.unlock()
		if w != nil {
			w.send(nil, refusal)
		}
		done(nil, err)
		return noAbort
	}
	if len(ic.asks) >= clientMaxAsks {
		ic.mu.Unlock()
		done(nil, errTooManyAsks(clientMaxAsks))
		return noAbort
	}
	ic.nextKey++
	a := &inputAsk{key: short + "-" + strconv.Itoa(ic.nextKey), method: method, params: obj.Raw(), done: done}
	ic.asks = append(ic.asks, a)
	var send func()
	if ic.cur != nil {
		send = ic.askLocked()
	}
	ic.mu.Unlock()
	if send != nil {
		send()
	}
	return func(cause error) {
		ic.mu.Lock()
		waiting := ic.dropAskLocked(a)
		ic.mu.Unlock()
		if waiting {
			done(nil, cause)
		}
	}
}

// cancelLocked cancels the call upstream without ending it: its answer is
// kept for the retry to come (which gets ic.final).
func (ic *inputCall) cancelLocked() {
	if f := ic.flight; f != nil {
		ic.in.h.goOwned(func() { f.cancel(context.Canceled) })
	}
}

// dropAskLocked takes a out of the requests waiting; it reports false if
// it was settled already.
func (ic *inputCall) dropAskLocked(a *inputAsk) bool {
	for i, b := range ic.asks {
		if b == a {
			ic.asks = append(ic.asks[:i], ic.asks[i+1:]...)
			return true
		}
	}
	return false
}

// inputKinds are the server requests that can be input requests, with the
// word their keys start with.
var inputKinds = map[string]string{
	mcp.MethodSamplingCreateMessage: "sampling",
	mcp.MethodElicitationCreate:     "elicitation",
	mcp.MethodRootsList:             "roots",
}

// caps says what the routing of a server's request may assume of the
// client: it may be asked for sampling and elicitation (request decides,
// from what the client declared, whether it fails the call with -32021),
// and for roots only if it declared them (else the hub answers with the
// server's own).
func (ic *inputCall) caps() clientCaps {
	ic.mu.Lock()
	declared := parseModernCaps(ic.meta)
	ic.mu.Unlock()
	return clientCaps{Sampling: true, SamplingTools: true, ElicitForm: true, ElicitURL: true, Roots: declared.Roots, Tasks: declared.Tasks}
}

func (ic *inputCall) client() string {
	return "input:" + ic.in.h.id + "/" + strconv.FormatUint(ic.num, 10)
}
func (ic *inputCall) owner() identity { return ic.whose }

func (ic *inputCall) logLevel() mcp.LoggingLevel {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.meta == nil {
		return ""
	}
	return ic.meta.LogLevel
}

// parseModernCaps reads the capabilities a modern request declared.
func parseModernCaps(m *mcp.RequestMeta) clientCaps {
	if m == nil {
		return clientCaps{}
	}
	c := parseClientCaps(m.RawCapabilities)
	c.Tasks = m.Capabilities.HasExtension(mcp.ExtensionTasks) // an extension of this revision only
	return c
}

// resume takes a modern client's retry of a call that asked for input to
// that call, here or on the instance its requestState names, where it goes
// on only for the principal that made it (resumeWith). send answers the
// retry with what comes next. It returns how to give up on the retry, or
// nil when it was refused (send has answered).
func (in *inputs) resume(ctx context.Context, s *session, st inputState, req *jsonrpc.Request, m *mcp.RequestMeta, send func(json.RawMessage, error)) (giveUp func()) {
	h := in.h
	sc := &sessionCall{s: s, id: req.ID, meta: m}
	if st.instance == h.id {
		w := &inputWaiter{c: sc, meta: m, token: m.ProgressToken, send: send}
		if err := in.resumeWith(st, s.owner, req.Method, req.Params, w); err != nil {
			send(nil, err)
			return nil
		}
		return func() { in.giveUp(st.call, w) }
	}
	abort, err := h.cluster.resume(ctx, st.instance, s.owner, req.Method, req.Params, sc, send)
	if err != nil {
		send(nil, err)
		return nil
	}
	return func() { abort(context.Canceled) }
}

// giveUp ends a call whose retry w was cancelled by its client.
func (in *inputs) giveUp(call string, w *inputWaiter) {
	in.mu.Lock()
	ic := in.calls[call]
	in.mu.Unlock()
	if ic != nil {
		ic.giveUp(w)
	}
}

// resumeWith hands owner's retry to its call on this instance: the
// client's input goes to the server's requests, and w waits for what comes
// next. An error refuses the retry, and leaves the call as it was.
func (in *inputs) resumeWith(st inputState, owner identity, method string, params json.RawMessage, w *inputWaiter) error {
	if !in.verify(st) {
		return errBadState("it failed its integrity check")
	}
	in.mu.Lock()
	ic := in.calls[st.call]
	in.mu.Unlock()
	if ic == nil || ic.whose != owner {
		// Another principal's call is, to this one, no call at all.
		return errBadState("the call it continues has ended or timed out; send the request again without it")
	}
	if method != ic.method || callName(&jsonrpc.Request{Method: method, Params: params}) != ic.name {
		return errBadState("it continues another request")
	}
	responses, err := inputResponses(params)
	if err != nil {
		return err
	}
	ic.mu.Lock()
	if ic.ended || ic.cur != nil || st.round != ic.round {
		ic.mu.Unlock()
		return errBadState("it was used already")
	}
	if ic.deadline != nil {
		ic.deadline.Stop()
	}
	ic.span.End() // the round's retry came
	ic.span = tracing.Span{}
	ic.cur, ic.meta = w, w.meta
	kept := ic.asks[:0]
	for _, a := range ic.asks {
		if raw, ok := responses[a.key]; ok {
			ic.settled = append(ic.settled, settledAsk{a, askAnswer{raw: raw}})
			continue
		}
		kept = append(kept, a)
	}
	clear(ic.asks[len(kept):])
	ic.asks = kept
	var send func()
	switch {
	case ic.final != nil:
		ic.cur = nil
		final := ic.final
		ic.endLocked()
		send = func() { w.send(final.raw, final.err) }
	case len(ic.asks) > 0:
		// Input the server asked for is missing from the retry, or the
		// server asked for more meanwhile: ask again.
		send = ic.askLocked()
	}
	ic.unlock()
	if send != nil {
		send()
	}
	return nil
}

// inputResponses reads a retry's inputResponses: an object of objects.
func inputResponses(params json.RawMessage) (map[string]json.RawMessage, error) {
	raw, ok := jsonrpc.Member(params, "inputResponses")
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(raw, &out) != nil {
		return nil, errInputResponses("")
	}
	for k, v := range out {
		if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '{' {
			return nil, errInputResponses(k)
		}
	}
	return out, nil
}

// Translation between eras, the other way: a server of the stateless
// revision answers a session-based client's call with input requests. The
// hub asks the client each of them as a request of the server's own would
// be asked (routed to the client, naming its call), and sends the call
// again with the answers and the server's requestState (routing.go's
// attempt). The client sees one ordinary answer.

// maxInputRounds bounds the rounds of input one call may ask for.
const maxInputRounds = 10

// mustAnswerInput reports whether an answer is input requests that the hub
// must answer itself: a modern server's, to a client that takes requests.
func (h *Hub) mustAnswerInput(ri *replicaInfo, c caller, method string, raw json.RawMessage) bool {
	if ri.ProtocolVersion != mcp.ModernVersion || !mcp.MayRequireInput(method) {
		return false
	}
	if _, modern := c.(*inputCall); modern {
		return false // a modern client takes them as they are
	}
	return mcp.ResultTypeOf(raw) == mcp.ResultInputRequired
}

// answerInput asks the client for what a server's InputRequiredResult asks,
// and returns the params of the call's next attempt: the call's own, with
// the answers and the server's requestState.
func (h *Hub) answerInput(ctx context.Context, c caller, raw json.RawMessage, params json.RawMessage) (json.RawMessage, error) {
	var irr mcp.InputRequiredResult
	if err := json.Unmarshal(raw, &irr); err != nil {
		return nil, errBadInputRequests("its input_required result did not decode")
	}
	o, err := mcp.ParseObject(params)
	if err != nil {
		return nil, err
	}
	responses, err := mcp.AnswerInputs(ctx, irr.InputRequests, func(ctx context.Context, ir mcp.InputRequest) (json.RawMessage, error) {
		return h.askClient(ctx, c, ir)
	})
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return nil, cause
		}
		return nil, err
	}
	o.Set("inputResponses", responses)
	if irr.RequestState != "" {
		o.Set("requestState", irr.RequestState)
	} else {
		delete(o, "requestState")
	}
	return o.Raw(), nil
}

// askClient asks the client of a call one of a server's input requests.
func (h *Hub) askClient(ctx context.Context, c caller, ir mcp.InputRequest) (json.RawMessage, error) {
	if _, ok := inputKinds[ir.Method]; !ok {
		return nil, errBadInputRequests(fmt.Sprintf("it asked for input by %q, which is not an input request", ir.Method))
	}
	params, err := mcp.ParseObject(ir.Params)
	if err != nil {
		return nil, err
	}
	if err := c.caps().check(ir.Method, params); err != nil {
		if ir.Method == mcp.MethodRootsList {
			return json.RawMessage(`{"roots":[]}`), nil // a client without roots has none to give
		}
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	res, err := await(ctx, func(done func(json.RawMessage, error)) func(error) {
		return c.request(ctx, ir.Method, params.Raw(), done)
	})
	if err != nil {
		return nil, h.downstreamError(err)
	}
	return res, nil
}
