package hub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Tasks, the extension io.modelcontextprotocol/tasks (SEP-2663), across the
// cluster. A client that negotiated the extension may be answered a
// tools/call with a task in two ways: its server speaks the extension and
// made the task (the handle passes through, routing_tasks.go), or the call
// ran past TaskAfter at a server without it and the hub holds the call
// (routing_heldtasks.go). Either way the client is given an id of the
// hub's own, 128 random bits that name nothing internal, bound to the
// principal that made the call and recorded in the broker's Store before
// the handle leaves the hub: tasks/get, tasks/update and tasks/cancel
// (session_tasks.go) work on any instance at once, and to another
// principal the id names no task.
//
// A record says whose the task is and where it lives: the server, the
// replica (passing through, also the server's own id for it), and for a
// hub-held task its state as tasks/get tells it, written only by the
// instance that holds the call; tasks/update and tasks/cancel go to that
// instance (envTask). When that instance is gone (it left the cluster, or
// it is this one, restarted), whoever reads one of its tasks still running
// fails it: within the heartbeat window, a task is never working for ever.
// The records this instance wrote stay in its memory until they expire
// (which also counts each principal's tasks and kept bytes), and are
// written again when the broker comes back, so that a Redis that restarted
// empty gets them back.

const (
	topicTasks    = "tasks" // a hub-held task's record changed: its id
	taskKeyPrefix = "task/"
	// taskIDBytes is the randomness of a task id.
	taskIDBytes = 16
	// maxTaskHandleTTL bounds how long the hub keeps the handle of a
	// task a server made, whatever its ttlMs (null is for ever).
	maxTaskHandleTTL = 24 * time.Hour
	// taskStoreTimeout bounds one read or write of a record.
	taskStoreTimeout = 5 * time.Second
	// maxLocalTasks bounds the records one instance keeps, whoever's they
	// are (MaxTasks bounds each principal's): past it no task is made here.
	maxLocalTasks = 100_000
)

// taskRecord is the hub's record of a task handle it gave a client, as the
// Store keeps it.
type taskRecord struct {
	ID    string   `json:"id"`
	Owner identity `json:"owner"`
	// Server is the server's name; Instance and Replica where the task
	// lives: for a hub-held task the instance holding its call.
	Server   string `json:"server"`
	Instance string `json:"instance"`
	Replica  string `json:"replica"`
	// Upstream is the server's own id for a task it made; "" for a task
	// the hub holds.
	Upstream string `json:"upstream,omitempty"`
	// Task is a hub-held task as tasks/get tells it.
	Task    *mcp.DetailedTask `json:"task,omitempty"`
	Expires time.Time         `json:"expires"`
}

// held reports whether the hub holds the task's call.
func (r *taskRecord) held() bool { return r.Upstream == "" }

// decodeTaskRecord reads a record from the Store: anything that does not
// decode, or names no task, is none.
func decodeTaskRecord(raw []byte) (*taskRecord, error) {
	var rec taskRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, err
	}
	switch {
	case !validTaskID(rec.ID), rec.Expires.IsZero(), rec.Server == "", rec.Instance == "":
		return nil, errors.New("not a task record")
	case rec.held() && (rec.Task == nil || rec.Task.TaskID != rec.ID):
		return nil, errors.New("a hub-held task's record without its state")
	}
	return &rec, nil
}

// newTaskID returns a task id: taskIDBytes random bytes, base64url.
func newTaskID() string {
	b := make([]byte, taskIDBytes)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validTaskID reports whether id could be one of the hub's: anything else
// names no task, without a look in the Store.
func validTaskID(id string) bool {
	if len(id) != base64.RawURLEncoding.EncodedLen(taskIDBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// tasks is this instance's side of the tasks extension.
type tasks struct {
	h     *Hub
	store pubsub.Store
	owns  *pubsub.Memory // the store, when the broker has none of its own
	sub   pubsub.Subscription

	mu       sync.Mutex
	local    map[string]*localTask              // the records this instance wrote, until they expire
	use      map[identity]*taskUse              // by principal: the tasks and kept bytes counted here
	watchers map[string]map[*listener]*session  // listen streams by the task ids they follow (session_tasks.go)
	pollers  map[string]context.CancelCauseFunc // tasks of servers polled for those streams, by id
	closing  bool                               // Close began: no task is made
	swept    time.Time                          // when expired records were last forgotten
}

// localTask is a record this instance wrote, kept until it expires.
type localTask struct {
	rec   *taskRecord // as last written
	held  *heldCall   // the call of a hub-held task, while it runs
	place bool        // it takes one of its owner's MaxTasks places
	bytes int         // its result, counted against its owner's MaxTaskBytes
}

// taskUse is what one principal's tasks take on this instance.
type taskUse struct{ tasks, bytes int }

func newTasks(h *Hub) *tasks {
	ts := &tasks{h: h, local: map[string]*localTask{}, use: map[identity]*taskUse{},
		watchers: map[string]map[*listener]*session{}, pollers: map[string]context.CancelCauseFunc{}}
	b := h.broker
	if mb, ok := b.(*meteredBroker); ok {
		b = mb.Broker
	}
	if s, ok := b.(pubsub.Store); ok {
		ts.store = s
	} else {
		h.log.Warn("the broker keeps no values: task records stay on this instance")
		ts.owns = pubsub.NewMemory()
		ts.store = ts.owns
	}
	return ts
}

// start follows the changes of hub-held tasks that this instance's
// clients listen to.
func (ts *tasks) start(ctx context.Context) error {
	sub, err := ts.h.broker.Subscribe(ctx, topicTasks, func(_ context.Context, _ string, payload []byte) {
		ts.changed(string(payload))
	})
	if err != nil {
		return err
	}
	ts.sub = sub
	return nil
}

// get returns the record of a task id, or -32602 for none: unknown,
// malformed, expired or unreadable alike.
func (ts *tasks) get(ctx context.Context, id string) (*taskRecord, error) {
	if !validTaskID(id) {
		return nil, mcp.ErrTaskNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, taskStoreTimeout)
	defer cancel()
	raw, err := ts.store.Get(ctx, taskKeyPrefix+id)
	switch {
	case errors.Is(err, pubsub.ErrNotFound):
		return nil, mcp.ErrTaskNotFound
	case err != nil:
		return nil, errTaskStore(err)
	}
	rec, err := decodeTaskRecord(raw)
	if err != nil {
		ts.h.log.Warn("a task record does not decode", "task", id, "err", err)
		return nil, mcp.ErrTaskNotFound
	}
	if !time.Now().Before(rec.Expires) {
		return nil, mcp.ErrTaskNotFound
	}
	return rec, nil
}

// lookup returns the record of a task the session's principal may use:
// its own, of its endpoint's server; to anyone else the id names no task.
func (ts *tasks) lookup(ctx context.Context, s *session, id string) (*taskRecord, error) {
	rec, err := ts.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Owner != s.owner || !ts.onEndpoint(s, rec.Server) {
		return nil, mcp.ErrTaskNotFound
	}
	return rec, nil
}

// onEndpoint reports whether a task of server belongs on the session's
// endpoint: /mcp has every server's, a virtual server's endpoint its
// members', a server's own endpoint that server's.
func (ts *tasks) onEndpoint(s *session, server string) bool {
	if s.scope == "" {
		return true
	}
	if vl := ts.h.reg.view().virtualOf(s.scope); vl != nil {
		return slices.Contains(vl.vs.Members(), server)
	}
	return server == s.scope
}

// errTaskTaken: a new record's id is in use (never, with 128 random bits).
var errTaskTaken = errors.New("task id taken")

// errTaskUnchanged leaves a record as it is (update's fn).
var errTaskUnchanged = errors.New("task record unchanged")

// create writes a new record: the handle may leave the hub once it
// returns. It is kept here too, until it expires.
func (ts *tasks) create(ctx context.Context, rec *taskRecord, held *heldCall) error {
	err := ts.put(ctx, rec, func(cur []byte) error {
		if cur != nil {
			return errTaskTaken
		}
		return nil
	})
	if err != nil {
		return err
	}
	ts.mu.Lock()
	ts.local[rec.ID] = &localTask{rec: cloneRecord(rec), held: held, place: true}
	ts.mu.Unlock()
	return nil
}

// put writes rec for the rest of its life, unless decide, given what the
// Store holds (nil for nothing), says otherwise: errTaskUnchanged leaves
// it as it is (no error), any other error is returned. An expired record
// is not written.
func (ts *tasks) put(ctx context.Context, rec *taskRecord, decide func(cur []byte) error) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, taskStoreTimeout)
	defer cancel()
	err = ts.store.Update(ctx, taskKeyPrefix+rec.ID, func(cur []byte) ([]byte, time.Duration, error) {
		ttl := time.Until(rec.Expires)
		if ttl < time.Millisecond {
			return nil, 0, errTaskUnchanged
		}
		if err := decide(cur); err != nil {
			return nil, 0, err
		}
		return raw, ttl, nil
	})
	if errors.Is(err, errTaskUnchanged) {
		return nil
	}
	return err
}

// update changes the record of id with fn (errTaskUnchanged: leave it) and
// returns it as it is now. A record that expired is none.
func (ts *tasks) update(ctx context.Context, id string, fn func(*taskRecord) error) (*taskRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, taskStoreTimeout)
	defer cancel()
	var out *taskRecord
	err := ts.store.Update(ctx, taskKeyPrefix+id, func(cur []byte) ([]byte, time.Duration, error) {
		out = nil
		if cur == nil {
			return nil, 0, mcp.ErrTaskNotFound
		}
		rec, err := decodeTaskRecord(cur)
		if err != nil {
			return nil, 0, mcp.ErrTaskNotFound
		}
		ttl := time.Until(rec.Expires)
		if ttl < time.Millisecond {
			return nil, 0, mcp.ErrTaskNotFound
		}
		if err := fn(rec); err != nil {
			out = rec
			return nil, 0, err
		}
		raw, err := json.Marshal(rec)
		if err != nil {
			return nil, 0, err
		}
		out = rec
		return raw, ttl, nil
	})
	switch {
	case errors.Is(err, errTaskUnchanged):
		return out, nil
	case err == nil:
		return out, nil
	case errors.Is(err, mcp.ErrTaskNotFound):
		return nil, mcp.ErrTaskNotFound
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return out, err
	}
	return nil, errTaskStore(err)
}

// errEndedElsewhere: another instance ended a hub-held task this one
// holds, taking it for gone; what the record says stands.
var errEndedElsewhere = errors.New("the task was ended by another instance")

// putHeld writes the record of a hub-held task this instance holds,
// whether or not the Store has it (a Redis that restarted may not), unless
// the Store says it ended and this copy does not: errEndedElsewhere.
func (ts *tasks) putHeld(ctx context.Context, rec *taskRecord) error {
	return ts.put(ctx, rec, func(cur []byte) error {
		if cur != nil && !rec.Task.Status.Terminal() {
			if old, err := decodeTaskRecord(cur); err == nil && old.Task != nil && old.Task.Status.Terminal() {
				return errEndedElsewhere
			}
		}
		return nil
	})
}

// discard withdraws a task that was never given out.
func (ts *tasks) discard(rec *taskRecord) {
	ctx, cancel := context.WithTimeout(ts.h.ctx, taskStoreTimeout)
	defer cancel()
	_ = ts.store.Update(ctx, taskKeyPrefix+rec.ID, func([]byte) ([]byte, time.Duration, error) { return nil, 0, nil })
	ts.mu.Lock()
	defer ts.mu.Unlock()
	lt := ts.local[rec.ID]
	delete(ts.local, rec.ID)
	if u := ts.use[rec.Owner]; u != nil && lt != nil {
		if lt.place {
			u.tasks--
		}
		u.bytes -= lt.bytes
		ts.forgetUseLocked(rec.Owner, u)
	}
}

// announce tells every instance that a hub-held task's record changed,
// for the listen streams that follow it.
func (ts *tasks) announce(id string) {
	h := ts.h
	h.goOwned(func() {
		ctx, cancel := context.WithTimeout(h.ctx, time.Second)
		defer cancel()
		_ = h.broker.Publish(ctx, topicTasks, []byte(id))
	})
}

// admit takes one of owner's MaxTasks places on this instance; false when
// it has none left.
func (ts *tasks) admit(owner identity) bool {
	now := time.Now()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closing {
		return false
	}
	ts.sweepLocked(now)
	u := ts.useLocked(owner)
	if u.tasks >= ts.h.cfg.MaxTasks || len(ts.local) >= maxLocalTasks {
		return false
	}
	u.tasks++
	return true
}

// unadmit gives back a place admit took for a task never made.
func (ts *tasks) unadmit(owner identity) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if u := ts.use[owner]; u != nil {
		u.tasks--
		ts.forgetUseLocked(owner, u)
	}
}

// keepBytes takes n of owner's MaxTaskBytes for the result of task id,
// until the task expires; false when they do not fit.
func (ts *tasks) keepBytes(id string, owner identity, n int) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	u := ts.useLocked(owner)
	if u.bytes+n > ts.h.cfg.MaxTaskBytes {
		return false
	}
	u.bytes += n
	if lt := ts.local[id]; lt != nil {
		lt.bytes += n
	}
	return true
}

// heldEnded records that a hub-held task's call ended: its place is given
// back (its result's bytes stay counted until it expires).
func (ts *tasks) heldEnded(rec *taskRecord) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	lt := ts.local[rec.ID]
	if lt == nil {
		return
	}
	lt.held, lt.rec = nil, rec
	if lt.place {
		lt.place = false
		if u := ts.use[rec.Owner]; u != nil {
			u.tasks--
		}
	}
}

func (ts *tasks) useLocked(owner identity) *taskUse {
	u := ts.use[owner]
	if u == nil {
		u = &taskUse{}
		ts.use[owner] = u
	}
	return u
}

func (ts *tasks) forgetUseLocked(owner identity, u *taskUse) {
	if u.tasks <= 0 && u.bytes <= 0 {
		delete(ts.use, owner)
	}
}

// sweepLocked forgets the records that expired, and what they took, at
// most once a second: a record is looked at once a second, not once per
// task made.
func (ts *tasks) sweepLocked(now time.Time) {
	if now.Sub(ts.swept) < time.Second {
		return
	}
	ts.swept = now
	for id, lt := range ts.local {
		if lt.held != nil || now.Before(lt.rec.Expires) {
			continue
		}
		delete(ts.local, id)
		if u := ts.use[lt.rec.Owner]; u != nil {
			if lt.place {
				u.tasks--
			}
			u.bytes -= lt.bytes
			ts.forgetUseLocked(lt.rec.Owner, u)
		}
	}
}

// counts returns how many hub-held tasks' calls this instance holds, and
// how many records it keeps (for /metrics).
func (ts *tasks) counts() (held, kept int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, lt := range ts.local {
		if lt.held != nil {
			held++
		}
	}
	return held, len(ts.local)
}

// localHeld returns the call of a hub-held task this instance holds.
func (ts *tasks) localHeld(id string) *heldCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if lt := ts.local[id]; lt != nil {
		return lt.held
	}
	return nil
}

// localState returns a copy of the record of a task this instance wrote,
// as it stands here: a held task's from its call; nil for none.
func (ts *tasks) localState(id string) *taskRecord {
	ts.mu.Lock()
	lt := ts.local[id]
	if lt == nil {
		ts.mu.Unlock()
		return nil
	}
	hc, rec := lt.held, cloneRecord(lt.rec)
	ts.mu.Unlock()
	if hc == nil {
		return rec
	}
	return hc.snapshot() // outside tasks.mu: the order is heldCall.mu -> tasks.mu
}

// holderGone reports whether the instance holding a hub-held task's call
// is gone: this one when it does not hold it (it restarted, keeping its
// id), or one this instance does not hear, once it has been in the cluster
// long enough to have heard every live one. One dropped for its silence
// lately may be heard again: its tasks wait for it, as its calls do.
func (ts *tasks) holderGone(rec *taskRecord) bool {
	if rec.Instance == ts.h.id {
		return ts.localHeld(rec.ID) == nil
	}
	return ts.h.cluster.settled() && !ts.h.cluster.mayHear(rec.Instance)
}

// errHolderGone is how a hub-held task ends whose instance is gone.
var errHolderGone = &mcp.TaskError{Code: mcp.CodeConnectionClosed,
	Message: "the hub instance that held this task's call is gone; the call's outcome is unknown"}

// settle returns a hub-held task's record as a client is to see it: one
// still running whose holder is gone is failed first. On the holder
// itself, an ended task whose last state the Store has not taken yet (its
// writer tries again) is told as it ended.
func (ts *tasks) settle(ctx context.Context, rec *taskRecord) *taskRecord {
	if !rec.held() || rec.Task.Status.Terminal() {
		return rec
	}
	if rec.Instance == ts.h.id {
		if mine := ts.localState(rec.ID); mine != nil && mine.Task != nil && mine.Task.Status.Terminal() {
			return mine
		}
	}
	if !ts.holderGone(rec) {
		return rec
	}
	out, err := ts.update(ctx, rec.ID, func(r *taskRecord) error {
		if r.Task == nil || r.Task.Status.Terminal() || r.Instance != rec.Instance {
			return errTaskUnchanged
		}
		endTask(r.Task, mcp.TaskFailed, errHolderGone.Message, errHolderGone, nil)
		return nil
	})
	if err != nil || out == nil {
		// Not written (the Store failed): the client still sees it failed.
		c := *rec
		t := *rec.Task
		c.Task = &t
		endTask(c.Task, mcp.TaskFailed, errHolderGone.Message, errHolderGone, nil)
		return &c
	}
	ts.h.log.Info("a task's holder is gone: the task failed", "task", rec.ID, "holder", shortID(rec.Instance))
	ts.announce(rec.ID)
	return out
}

// endTask puts a task in a terminal status, with what it carries.
func endTask(t *mcp.DetailedTask, status mcp.TaskStatus, message string, err *mcp.TaskError, result json.RawMessage) {
	t.Status, t.StatusMessage, t.Error, t.Result = status, message, err, result
	t.InputRequests = nil
	t.LastUpdatedAt = taskTime(time.Now())
}

// taskTime formats t as the extension's ISO 8601 times.
func taskTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// heldOp sends tasks/update or tasks/cancel of a hub-held task to the
// instance holding its call, in the name of owner; a task whose holder is
// gone is failed instead, and the request acknowledged like one for a task
// that ended.
func (ts *tasks) heldOp(ctx context.Context, rec *taskRecord, owner identity, method string, params json.RawMessage) error {
	h := ts.h
	if rec.Instance == h.id || ts.holderGone(rec) {
		if _, err := ts.serveOp(ctx, owner, method, params); err != nil {
			return err
		}
		ts.settle(ctx, rec)
		return nil
	}
	_, err := h.cluster.request(ctx, rec.Instance, &envelope{Kind: envTask, Method: method, Params: params, Owner: owner})
	return err
}

// serveOp carries out tasks/update or tasks/cancel of a hub-held task this
// instance holds (or held): for owner only. Its new state is written
// before it is acknowledged, so that the next tasks/get, anywhere, sees it.
// A task whose call ended takes neither: the request is acknowledged, as
// the extension says.
func (ts *tasks) serveOp(ctx context.Context, owner identity, method string, params json.RawMessage) (json.RawMessage, error) {
	id, _ := jsonrpc.StringMember(params, "taskId")
	ts.mu.Lock()
	lt := ts.local[id]
	var hc *heldCall
	if lt != nil && lt.rec.Owner == owner {
		hc = lt.held
	}
	ts.mu.Unlock()
	if lt != nil && lt.rec.Owner != owner {
		return nil, mcp.ErrTaskNotFound
	}
	if hc != nil {
		switch method {
		case mcp.MethodTasksCancel:
			hc.cancelTask()
		case mcp.MethodTasksUpdate:
			responses, err := inputResponses(params)
			if err != nil {
				return nil, err
			}
			hc.answer(responses)
		}
		// Not written now (the broker failed): the task's writer tries
		// again, and the acknowledgement stands, as the extension allows.
		_, _ = hc.flush(ctx)
	}
	return json.RawMessage(`{}`), nil
}

// brokerBack writes again the records this instance keeps, after the
// broker came back: a Redis that restarted empty gets them back. A
// hub-held task's record is this instance's to write; one that someone
// else ended meanwhile (its holder seemed gone) stays ended, and its call
// is given up.
func (ts *tasks) brokerBack() {
	h := ts.h
	ts.mu.Lock()
	ts.sweepLocked(time.Now())
	var held []*heldCall
	var handles []*taskRecord
	for _, lt := range ts.local {
		if lt.held != nil {
			held = append(held, lt.held)
		} else {
			handles = append(handles, lt.rec)
		}
	}
	ts.mu.Unlock()
	for _, hc := range held {
		hc.rewrite()
	}
	for _, rec := range handles {
		if err := ts.putAgain(rec); err != nil {
			h.log.Warn("writing a task record again failed", "task", rec.ID, "err", err)
		}
	}
}

// putAgain writes again a record this instance wrote and keeps: a handle
// of a server's task where the Store has none; an ended hub-held task's
// last state over whatever the Store has.
func (ts *tasks) putAgain(rec *taskRecord) error {
	if rec.held() {
		return ts.putHeld(ts.h.ctx, rec)
	}
	return ts.put(ts.h.ctx, rec, func(cur []byte) error {
		if cur != nil {
			return errTaskUnchanged
		}
		return nil
	})
}

// instanceGone fails, for the listen streams of this instance that follow
// them, the tasks whose holder left.
func (ts *tasks) instanceGone(instance string) {
	ts.mu.Lock()
	ids := make([]string, 0, len(ts.watchers))
	for id := range ts.watchers {
		ids = append(ids, id)
	}
	ts.mu.Unlock()
	for _, id := range ids {
		ts.changed(id)
	}
}

// close ends the hub-held tasks this instance holds, failed with a clear
// error (the instance shuts down), before its connections close, and stops
// following changes.
func (ts *tasks) close() {
	ts.mu.Lock()
	ts.closing = true
	var held []*heldCall
	for _, lt := range ts.local {
		if lt.held != nil {
			held = append(held, lt.held)
		}
	}
	ts.mu.Unlock()
	var wg sync.WaitGroup
	for _, hc := range held {
		wg.Go(hc.shutDown)
	}
	wg.Wait()
}

// stop releases what start took, once the hub's goroutines are done.
func (ts *tasks) stop() {
	if ts.sub != nil {
		ts.sub.Close()
	}
	if ts.owns != nil {
		ts.owns.Close()
	}
}
