package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// Tasks the hub holds, for servers that do not speak the extension. A
// tools/call of a client that negotiated it, to such a server, is an
// ordinary call at first (a heldCall, the call's caller at the replica, in
// front of the client's own). If no answer came after TaskAfter, the hub
// makes it a task: it writes the task's record (cluster_tasks.go), answers
// the client's request with the task (a CreateTaskResult), and keeps the
// call going at the server, on the server's instance, for as long as the
// task's TTL. From then on the heldCall is the call's caller: the server's
// progress becomes the task's statusMessage, its requests for the client
// (sampling, elicitation, roots) become the task's inputRequests, answered
// by tasks/update, and its answer becomes the task's result (or its error,
// failed). tasks/cancel cancels the call at the server. Every change is
// written to the record, one write at a time, the latest state winning.
//
// Not held: calls of replicas leased to one client at a time (the lease
// ends with the call's answer, and the task would outlive it), and calls
// on an instance that drains.

// heldState is where a heldCall stands.
type heldState uint8

const (
	heldCalling heldState = iota // an ordinary call, so far
	heldMaking                   // becoming a task: its record is being written
	heldRunning                  // a task the hub holds
	heldEnded                    // answered, as a call, or as a task
)

// heldCall is a tools/call that may become, or became, a task the hub
// holds.
type heldCall struct {
	ts       *tasks
	inner    caller // the call's own caller: the client, until the call is a task
	ownerID  identity
	server   string
	instance string
	replica  string
	after    time.Duration
	params   json.RawMessage // as sent: with a progress token, so that progress can become the status
	// wantsProgress: the client's request asked for progress reports,
	// which reach it until the call is a task.
	wantsProgress bool
	wake          chan struct{} // the record changed: its writer writes it
	// turn makes the record's writes one at a time, each of the latest
	// state (flush), so that a write never overtakes a later state's. It
	// is held across the write's round trip to the broker, which is why it
	// is a channel and not a mutex: waiting for it honours the caller's
	// context.
	turn chan struct{}

	mu      sync.Mutex
	state   heldState
	done    func(json.RawMessage, error) // answers the client's request, until the call is a task
	abort   func(error)                  // ends the call at the server
	timer   *time.Timer                  // TaskAfter, then the task's TTL
	early   *askAnswer                   // the call's answer, come while its task was being made
	rec     *taskRecord                  // the task, once made, as this instance writes it
	asks    []*heldAsk                   // the server's requests waiting for the client's input, in order
	nextKey int
	dirty   bool // rec changed since it was last written
	// progress is the last progress report in words: the status of the
	// task the call becomes.
	progress string
}

// heldAsk is a server's request that waits for a tasks/update.
type heldAsk struct {
	key    string
	method string
	params json.RawMessage
	done   func(json.RawMessage, error)
}

var _ caller = (*heldCall)(nil)

// taskAfter is how long a call to server runs before it becomes a task
// the hub holds; 0 for never.
func (h *Hub) taskAfter(server string) time.Duration {
	d, ok := h.cfg.TaskAfterFor[server]
	if !ok {
		d = h.cfg.TaskAfter
	}
	return max(d, 0)
}

// holds reports whether the hub may make tasks of calls to the server
// whose capabilities are caps: it does not speak the extension, and
// TaskAfter is on for it.
func (h *Hub) holds(server string, caps json.RawMessage) bool {
	return h.taskAfter(server) > 0 && !declaresTasks(caps)
}

// hold returns a call that may become a task the hub holds, in the place
// of the one given (its caller, params and done), or nil for a call that
// cannot: not a tools/call, its client did not negotiate the extension,
// or its server speaks it, or TaskAfter is off for it.
func (ts *tasks) hold(rp *replica, c caller, method string, params json.RawMessage, done func(json.RawMessage, error)) *heldCall {
	h := ts.h
	if method != mcp.MethodToolsCall || !c.caps().Tasks || h.draining.Load() {
		return nil
	}
	ri := rp.currentInfo()
	if ri == nil || ri.Leased || !h.holds(ri.Name, ri.Capabilities) {
		return nil
	}
	hc := &heldCall{ts: ts, inner: c, ownerID: c.owner(), server: ri.Name, instance: h.id, replica: ri.ID,
		after: h.taskAfter(ri.Name), done: done, wake: make(chan struct{}, 1), turn: make(chan struct{}, 1)}
	hc.params, hc.wantsProgress = withProgressToken(params)
	return hc
}

// withProgressToken returns params with a progress token, and whether
// they had one: the server reports progress only when asked, and a task's
// status shows it.
func withProgressToken(params json.RawMessage) (json.RawMessage, bool) {
	if progressToken(params) != nil {
		return params, true
	}
	if len(params) == 0 || params[0] != '{' {
		return params, false
	}
	meta, ok := jsonrpc.Member(params, "_meta")
	if !ok || len(meta) == 0 || meta[0] != '{' {
		meta = []byte(`{}`)
	}
	meta, err := jsonrpc.SetMember(meta, mcp.MetaProgressToken, []byte(`"task"`))
	if err != nil {
		return params, false
	}
	out, err := jsonrpc.SetMember(params, "_meta", meta)
	if err != nil {
		return params, false
	}
	return out, false
}

// sent arms the call's TaskAfter, once it is on its way; abort ends it at
// the server.
func (hc *heldCall) sent(abort func(error)) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	hc.abort = abort
	if hc.state == heldCalling {
		hc.timer = time.AfterFunc(hc.after, hc.promote)
	}
}

// promote makes the call a task, unless it was answered meanwhile.
func (hc *heldCall) promote() {
	hc.mu.Lock()
	if hc.state != heldCalling {
		hc.mu.Unlock()
		return
	}
	hc.state = heldMaking
	hc.mu.Unlock()
	if !hc.ts.h.goOwned(hc.makeTask) {
		hc.unmake()
	}
}

// makeTask writes the task's record and answers the client's request with
// the task. A call that cannot be made a task (its owner has as many as it
// may, or the broker fails) goes on as an ordinary call.
func (hc *heldCall) makeTask() {
	ts := hc.ts
	if !ts.admit(hc.ownerID) {
		ts.h.log.Debug("a long call stays a call: its client has as many tasks as it may", "server", hc.server, "max", ts.h.cfg.MaxTasks)
		hc.unmake()
		return
	}
	hc.mu.Lock()
	rec := hc.newRecord()
	hc.mu.Unlock()
	if err := ts.create(ts.h.ctx, rec, hc); err != nil {
		ts.unadmit(hc.ownerID)
		ts.h.log.Warn("a long call stays a call: its task could not be recorded", "server", hc.server, "err", err)
		hc.unmake()
		return
	}
	hc.mu.Lock()
	if early := hc.early; early != nil {
		// Answered while its task was being made: answered as a call, and
		// the task was never given out.
		hc.mu.Unlock()
		ts.discard(rec)
		hc.mu.Lock()
		hc.answerLocked(early.raw, early.err)
		return
	}
	hc.state, hc.rec = heldRunning, rec
	done := hc.done
	hc.done = nil
	abort := hc.abort
	hc.timer = time.AfterFunc(time.Until(rec.Expires), func() { abort(errTaskExpired) })
	// The task as it is given out; from now on the server's messages
	// change it under the lock.
	created := encodeJSON(&mcp.CreateTaskResult{ResultType: mcp.ResultTask, Task: rec.Task.Task})
	hc.mu.Unlock()
	if !ts.h.goOwned(hc.writer) {
		hc.shutDown()
	}
	ts.h.log.Debug("a long call became a task", "server", hc.server, "task", rec.ID)
	done(created, nil)
}

// unmake leaves the call an ordinary one, answered as such if its answer
// came meanwhile.
func (hc *heldCall) unmake() {
	hc.mu.Lock()
	if early := hc.early; early != nil {
		hc.answerLocked(early.raw, early.err)
		return
	}
	hc.state = heldCalling
	hc.mu.Unlock()
}

// answerLocked ends the call as an ordinary one, answering its client's
// request once the lock, which it releases, is released.
func (hc *heldCall) answerLocked(raw json.RawMessage, err error) {
	hc.state = heldEnded
	if hc.timer != nil {
		hc.timer.Stop()
	}
	done := hc.done
	hc.done = nil
	hc.mu.Unlock()
	done(raw, err)
}

// stopLocked ends the task's call, no longer the hub's to hold, and
// returns the server's requests still waiting, to be failed (failAsks)
// once the lock is released.
func (hc *heldCall) stopLocked() []*heldAsk {
	hc.state = heldEnded
	hc.timer.Stop()
	asks := hc.asks
	hc.asks = nil
	return asks
}

// newRecord is the record of the task the call becomes: working, on this
// instance, its status the server's last progress report if it made one.
func (hc *heldCall) newRecord() *taskRecord {
	cfg := &hc.ts.h.cfg
	now := time.Now()
	ttl := cfg.TaskTTL.Milliseconds()
	id := newTaskID()
	status := hc.progress
	if status == "" {
		status = "The call runs at the server; the hub holds it."
	}
	return &taskRecord{ID: id, Owner: hc.ownerID, Server: hc.server, Instance: hc.instance, Replica: hc.replica,
		Expires: now.Add(cfg.TaskTTL),
		Task: &mcp.DetailedTask{Task: mcp.Task{TaskID: id, Status: mcp.TaskWorking, StatusMessage: status,
			CreatedAt: taskTime(now), LastUpdatedAt: taskTime(now), TTLMs: &ttl,
			PollIntervalMs: cfg.TaskPollInterval.Milliseconds()}}}
}

// errTaskExpired ends a call whose task outlived its TTL.
var errTaskExpired = errors.New("the task outlived its ttlMs")

// finish takes the call's answer from the server: the client's, while it
// is a call; the task's result, once it is one.
func (hc *heldCall) finish(raw json.RawMessage, err error) {
	hc.mu.Lock()
	switch hc.state {
	case heldCalling:
		hc.answerLocked(raw, err)
	case heldMaking:
		hc.early = &askAnswer{raw: raw, err: err}
		hc.mu.Unlock()
	case heldRunning:
		asks := hc.stopLocked()
		hc.resultLocked(raw, err)
		hc.changedLocked()
		hc.mu.Unlock()
		failAsks(asks)
	default:
		hc.mu.Unlock()
	}
}

// resultLocked ends the task with the call's answer: completed with its
// result (a tool's error too), or failed with its JSON-RPC error. A result
// beyond what its owner may keep fails it.
func (hc *heldCall) resultLocked(raw json.RawMessage, err error) {
	t := hc.rec.Task
	switch {
	case errors.Is(err, errTaskExpired):
		endTask(t, mcp.TaskFailed, err.Error(), &mcp.TaskError{Code: mcp.CodeRequestTimeout, Message: "The task outlived its ttlMs: the call was cancelled"}, nil)
	case err != nil:
		e := jsonrpc.ErrorOf(hc.ts.h.upstreamError(hc.server, err))
		endTask(t, mcp.TaskFailed, e.Message, &mcp.TaskError{Code: e.Code, Message: e.Message, Data: e.Data}, nil)
	default:
		result := bytes.Clone(mcp.Decorate(raw, -1, ""))
		if !hc.ts.keepBytes(hc.rec.ID, hc.ownerID, len(result)) {
			e := errTaskResultTooLarge(len(result), hc.ts.h.cfg.MaxTaskBytes)
			endTask(t, mcp.TaskFailed, e.Message, &mcp.TaskError{Code: e.Code, Message: e.Message, Data: e.Data}, nil)
			return
		}
		endTask(t, mcp.TaskCompleted, "", nil, result)
	}
}

// cancelTask is tasks/cancel: the task is cancelled, and so is the call at
// the server.
func (hc *heldCall) cancelTask() {
	hc.mu.Lock()
	if hc.state != heldRunning {
		hc.mu.Unlock()
		return
	}
	asks := hc.stopLocked()
	endTask(hc.rec.Task, mcp.TaskCancelled, "Cancelled by the client", nil, nil)
	hc.changedLocked()
	abort := hc.abort
	hc.mu.Unlock()
	failAsks(asks)
	abort(context.Canceled) // the server hears notifications/cancelled
}

// answer is tasks/update: the responses of outstanding input requests go
// to the server's requests; others are ignored, as the extension says.
func (hc *heldCall) answer(responses map[string]json.RawMessage) {
	hc.mu.Lock()
	if hc.state != heldRunning {
		hc.mu.Unlock()
		return
	}
	var answered []settledHeld
	kept := hc.asks[:0]
	for _, a := range hc.asks {
		if raw, ok := responses[a.key]; ok {
			answered = append(answered, settledHeld{a, raw})
			continue
		}
		kept = append(kept, a)
	}
	clear(hc.asks[len(kept):])
	hc.asks = kept
	if len(answered) > 0 {
		hc.statusLocked()
		hc.changedLocked()
	}
	hc.mu.Unlock()
	for _, s := range answered {
		s.a.done(s.raw, nil)
	}
}

type settledHeld struct {
	a   *heldAsk
	raw json.RawMessage
}

// failAsks tells the server that its requests of an ended task go
// unanswered.
func failAsks(asks []*heldAsk) {
	for _, a := range asks {
		a.done(nil, errCallEnded)
	}
}

// statusLocked puts the task in input_required while the server waits for
// input, else working.
func (hc *heldCall) statusLocked() {
	t := hc.rec.Task
	if len(hc.asks) == 0 {
		t.Status, t.InputRequests = mcp.TaskWorking, nil
	} else {
		t.Status = mcp.TaskInputRequired
		t.InputRequests = make(map[string]mcp.InputRequest, len(hc.asks))
		for _, a := range hc.asks {
			t.InputRequests[a.key] = mcp.InputRequest{Method: a.method, Params: a.params}
		}
	}
	t.LastUpdatedAt = taskTime(time.Now())
}

// changedLocked marks the record changed and wakes its writer.
func (hc *heldCall) changedLocked() {
	hc.dirty = true
	select {
	case hc.wake <- struct{}{}:
	default:
	}
}

// writer writes the task's record whenever it changed, until the task
// ended and its last state is written. A write the broker refused is tried
// again a second later, until it takes it: a task that ended is never left
// working in its record.
func (hc *heldCall) writer() {
	h := hc.ts.h
	for {
		select {
		case <-hc.wake:
		case <-h.ctx.Done():
			return
		}
		for {
			ended, err := hc.flush(h.ctx)
			if ended {
				return
			}
			if err == nil {
				break
			}
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-h.ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// flush writes the record if it changed since its last write, and
// reports whether the task ended and its last state is written, or why the
// write failed (the record stays to be written).
func (hc *heldCall) flush(ctx context.Context) (bool, error) {
	ts := hc.ts
	select {
	case hc.turn <- struct{}{}:
		defer func() { <-hc.turn }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	hc.mu.Lock()
	if !hc.dirty {
		ended := hc.state == heldEnded
		hc.mu.Unlock()
		return ended, nil
	}
	hc.dirty = false
	rec := cloneRecord(hc.rec)
	hc.mu.Unlock()
	err := ts.putHeld(ctx, rec)
	switch {
	case errors.Is(err, errEndedElsewhere):
		hc.endedElsewhere()
		return true, nil
	case err != nil:
		hc.mu.Lock()
		hc.dirty = true
		hc.mu.Unlock()
		ts.h.log.Warn("writing a task's record failed", "task", rec.ID, "err", err)
		return false, err
	}
	ts.announce(rec.ID)
	if rec.Task.Status.Terminal() {
		ts.heldEnded(rec)
		return true, nil
	}
	return false, nil
}

// snapshot returns a copy of the task's record as it stands, nil before
// the call is a task.
func (hc *heldCall) snapshot() *taskRecord {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.rec == nil {
		return nil
	}
	return cloneRecord(hc.rec)
}

// rewrite has the record written again (the broker came back).
func (hc *heldCall) rewrite() {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if hc.rec != nil {
		hc.changedLocked()
	}
}

// endedElsewhere gives the call up: another instance failed its task,
// taking this one for gone.
func (hc *heldCall) endedElsewhere() {
	hc.mu.Lock()
	asks := hc.stopLocked()
	rec := cloneRecord(hc.rec)
	abort := hc.abort
	hc.mu.Unlock()
	// What the Store says stands; the copy kept here says it too.
	endTask(rec.Task, mcp.TaskFailed, errHolderGone.Message, errHolderGone, nil)
	failAsks(asks)
	hc.ts.heldEnded(rec)
	abort(context.Canceled)
}

// shutDown fails the task as this instance shuts down, with a clear error,
// writing its record at once.
func (hc *heldCall) shutDown() {
	hc.mu.Lock()
	if hc.state != heldRunning {
		hc.mu.Unlock()
		return
	}
	asks := hc.stopLocked()
	endTask(hc.rec.Task, mcp.TaskFailed, errHolderShutDown.Message, errHolderShutDown, nil)
	hc.dirty = true
	rec := cloneRecord(hc.rec)
	hc.mu.Unlock()
	failAsks(asks)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := hc.flush(ctx); err == nil {
		// Told by hand: the hub's goroutines are no longer to be had.
		_ = hc.ts.h.broker.Publish(ctx, topicTasks, []byte(rec.ID))
	}
	hc.ts.heldEnded(rec)
}

// errHolderShutDown is how a hub-held task ends whose instance shuts down.
var errHolderShutDown = &mcp.TaskError{Code: mcp.CodeConnectionClosed,
	Message: "the hub instance that held this task's call shut down before the call ended"}

// cloneRecord copies a record and its task, deeply enough to be written
// while the original changes.
func cloneRecord(r *taskRecord) *taskRecord {
	c := *r
	if r.Task != nil {
		t := *r.Task
		if r.Task.InputRequests != nil {
			t.InputRequests = make(map[string]mcp.InputRequest, len(r.Task.InputRequests))
			for k, v := range r.Task.InputRequests {
				t.InputRequests[k] = v
			}
		}
		c.Task = &t
	}
	return &c
}

// The heldCall as the call's caller: until the call is a task, what the
// server sends goes to the client's own caller; then it goes to the task.

func (hc *heldCall) notify(method string, params json.RawMessage) {
	hc.mu.Lock()
	switch hc.state {
	case heldCalling, heldMaking:
		if method == mcp.NotificationProgress {
			if msg := progressMessage(params); msg != "" {
				hc.progress = msg
			}
		}
		hc.mu.Unlock()
		if method == mcp.NotificationProgress && !hc.wantsProgress {
			return
		}
		hc.inner.notify(method, params)
		return
	case heldRunning:
		// A task has no logs (the extension sends none): progress only.
		if method == mcp.NotificationProgress && hc.rec.Task.Status == mcp.TaskWorking {
			if msg := progressMessage(params); msg != "" {
				hc.rec.Task.StatusMessage = msg
				hc.rec.Task.LastUpdatedAt = taskTime(time.Now())
				hc.changedLocked()
			}
		}
	}
	hc.mu.Unlock()
}

// progressMessage says a progress report in words: its message, else how
// far it got.
func progressMessage(params json.RawMessage) string {
	var p struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if p.Message != "" {
		return p.Message
	}
	if p.Total > 0 {
		return fmt.Sprintf("%g of %g", p.Progress, p.Total)
	}
	return fmt.Sprintf("%g", p.Progress)
}

func (hc *heldCall) request(ctx context.Context, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	hc.mu.Lock()
	switch hc.state {
	case heldCalling, heldMaking:
		hc.mu.Unlock()
		return hc.inner.request(ctx, method, params, done)
	case heldEnded:
		hc.mu.Unlock()
		done(nil, errCallEnded)
		return noAbort
	}
	short, ok := inputKinds[method]
	switch {
	case !ok && method == mcp.MethodPing:
		hc.mu.Unlock()
		done(json.RawMessage(`{}`), nil)
		return noAbort
	case !ok:
		hc.mu.Unlock()
		done(nil, errNotAnswered(method))
		return noAbort
	case len(hc.asks) >= clientMaxAsks:
		hc.mu.Unlock()
		done(nil, errTooManyAsks(clientMaxAsks))
		return noAbort
	}
	// Keys are the task's, never used twice in its life, as the extension
	// wants: a counter.
	hc.nextKey++
	a := &heldAsk{key: short + "-" + strconv.Itoa(hc.nextKey), method: method, params: bytes.Clone(params), done: done}
	hc.asks = append(hc.asks, a)
	hc.statusLocked()
	hc.changedLocked()
	hc.mu.Unlock()
	return func(cause error) {
		hc.mu.Lock()
		waiting := false
		for i, b := range hc.asks {
			if b == a {
				hc.asks = append(hc.asks[:i], hc.asks[i+1:]...)
				waiting = true
				break
			}
		}
		if waiting && hc.state == heldRunning {
			hc.statusLocked()
			hc.changedLocked()
		}
		hc.mu.Unlock()
		if waiting {
			done(nil, cause)
		}
	}
}

func (hc *heldCall) caps() clientCaps           { return hc.inner.caps() }
func (hc *heldCall) client() string             { return hc.inner.client() }
func (hc *heldCall) logLevel() mcp.LoggingLevel { return hc.inner.logLevel() }
func (hc *heldCall) owner() identity            { return hc.ownerID }
