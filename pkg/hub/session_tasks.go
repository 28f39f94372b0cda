package hub

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The methods of the tasks extension, as clients see them (requests of
// 2026-07-28 that declare the extension; -32021 from any other, -32601 in
// a session): tasks/get, tasks/update and tasks/cancel of a task the
// client's principal was given, on any instance (cluster_tasks.go). A
// server's task is asked of its server, under the server's own id; a task
// the hub holds is read from its record, and updated or cancelled by the
// instance that holds its call. To anyone else a task id names no task
// (-32602, the same answer as for an id that never was).
//
// subscriptions/listen streams may follow tasks (notifications.taskIds):
// each gets notifications/tasks carrying the task as tasks/get would tell
// it, at once and whenever it changes: a hub-held task when its holder
// writes it (the broker's "tasks" topic), a server's task as the hub polls
// it at its pollIntervalMs while someone here follows it.

// taskOf reads a task request and finds the task it names.
func (s *session) taskOf(ctx context.Context, req *jsonrpc.Request) (*taskRecord, *mcp.RequestMeta, error) {
	m := modernMetaFrom(ctx)
	switch {
	case m == nil:
		return nil, nil, errMethodNotFound(req.Method) // a session's: its revision has no such method
	case !m.Capabilities.HasExtension(mcp.ExtensionTasks):
		return nil, nil, mcp.ErrMissingExtension(mcp.ExtensionTasks)
	}
	id, ok := jsonrpc.StringMember(req.Params, "taskId")
	if !ok || id == "" {
		return nil, nil, errNotString("taskId")
	}
	rec, err := s.hub.tasks.lookup(ctx, s, id)
	return rec, m, err
}

// getTask answers tasks/get.
func (s *session) getTask(ctx context.Context, req *jsonrpc.Request) (any, error) {
	rec, m, err := s.taskOf(ctx, req)
	if err != nil {
		return nil, err
	}
	if !rec.held() {
		return s.serverTask(ctx, rec, req, m)
	}
	rec = s.hub.tasks.settle(ctx, rec)
	return &mcp.GetTaskResult{ResultType: mcp.ResultComplete, DetailedTask: *rec.Task}, nil
}

// changeTask answers tasks/update and tasks/cancel: a server's task is
// changed at its server, a hub-held one by the instance holding its call.
func (s *session) changeTask(ctx context.Context, req *jsonrpc.Request) (any, error) {
	rec, m, err := s.taskOf(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Method == mcp.MethodTasksUpdate {
		if _, err := inputResponses(req.Params); err != nil {
			return nil, err
		}
	}
	if !rec.held() {
		return s.serverTask(ctx, rec, req, m)
	}
	if err := s.hub.tasks.heldOp(ctx, rec, s.owner, req.Method, req.Params); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// serverTask passes a task request on to the server whose task it is,
// under the server's id for it, and its answer back under the hub's.
func (s *session) serverTask(ctx context.Context, rec *taskRecord, req *jsonrpc.Request, m *mcp.RequestMeta) (any, error) {
	h := s.hub
	ri := h.taskReplica(rec)
	if ri == nil {
		return nil, errServerGone(rec.Server)
	}
	params, err := jsonrpc.SetMember(req.Params, "taskId", jsonrpc.AppendString(nil, rec.Upstream))
	if err != nil {
		return nil, errParamsNotObject
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	raw, err := await(ctx, func(done func(json.RawMessage, error)) func(error) {
		return h.sendOne(ctx, ri, rec.Server, &sessionCall{s: s, id: req.ID, meta: m}, req.Method, params, done)
	})
	if err != nil {
		return nil, h.upstreamError(rec.Server, err)
	}
	if req.Method == mcp.MethodTasksGet {
		if raw, err = jsonrpc.SetMember(raw, "taskId", jsonrpc.AppendString(nil, rec.ID)); err != nil {
			return nil, errBadTask("its tasks/get answer is not an object")
		}
	}
	return raw, nil
}

// offersTasks reports whether the hub declares the extension on an
// endpoint: on /mcp and a virtual server's always (it routes every
// server's tasks, and holds long calls); on a server's own, when that
// server speaks it or the hub holds its long calls.
func (h *Hub) offersTasks(server string, caps json.RawMessage) bool {
	return server == "" || declaresTasks(caps) || h.holds(server, caps)
}

// withTasks adds the extension to capabilities of 2026-07-28 (the session
// revisions have no extensions).
func withTasks(caps *mcp.ServerCapabilities) {
	if caps.Extensions == nil {
		caps.Extensions = map[string]json.RawMessage{}
	}
	caps.Extensions[mcp.ExtensionTasks] = json.RawMessage(`{}`)
}

// followedTasks returns the tasks of ids that a listen stream of the
// session may follow: its principal's, of its endpoint's server.
func (s *session) followedTasks(ctx context.Context, ids []string) []string {
	var out []string
	for _, id := range ids {
		if _, err := s.hub.tasks.lookup(ctx, s, id); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// follow starts sending a listen stream notifications/tasks for the tasks
// it asked for (l.filter.TaskIDs), beginning with how each stands now.
func (ts *tasks) follow(s *session, l *listener) {
	if len(l.filter.TaskIDs) == 0 {
		return
	}
	ts.mu.Lock()
	for _, id := range l.filter.TaskIDs {
		w := ts.watchers[id]
		if w == nil {
			w = map[*listener]*session{}
			ts.watchers[id] = w
		}
		w[l] = s
	}
	ts.mu.Unlock()
	s.mu.Lock()
	ended := l.ended
	s.mu.Unlock()
	if ended {
		ts.unfollow(l) // the stream ended meanwhile, and may have unfollowed before we followed
		return
	}
	for _, id := range l.filter.TaskIDs {
		ts.changed(id)
	}
}

// unfollow stops a stream's notifications/tasks; a server's task that no
// stream here follows any more is no longer polled.
func (ts *tasks) unfollow(l *listener) {
	ts.mu.Lock()
	var stop []context.CancelCauseFunc
	for _, id := range l.filter.TaskIDs {
		w := ts.watchers[id]
		delete(w, l)
		if len(w) == 0 {
			delete(ts.watchers, id)
			if cancel := ts.pollers[id]; cancel != nil {
				stop = append(stop, cancel)
				delete(ts.pollers, id)
			}
		}
	}
	ts.mu.Unlock()
	for _, cancel := range stop {
		cancel(nil)
	}
}

// changed tells the streams following a task how it stands: a hub-held
// task as its record says (failed first if its holder is gone); a
// server's task is polled for them.
func (ts *tasks) changed(id string) {
	h := ts.h
	ts.mu.Lock()
	n := len(ts.watchers[id])
	ts.mu.Unlock()
	if n == 0 {
		return
	}
	h.goOwned(func() {
		rec, err := ts.get(h.ctx, id)
		if err != nil {
			return
		}
		if !rec.held() {
			ts.poll(rec)
			return
		}
		rec = ts.settle(h.ctx, rec)
		ts.notify(id, rec.Task)
	})
}

// poll follows a server's task for the streams of this instance that
// follow it, at its pollIntervalMs, until it ends or no stream follows it.
func (ts *tasks) poll(rec *taskRecord) {
	h := ts.h
	ctx, cancel := context.WithCancelCause(h.ctx)
	ts.mu.Lock()
	if ts.pollers[rec.ID] != nil || len(ts.watchers[rec.ID]) == 0 {
		ts.mu.Unlock()
		cancel(nil)
		return
	}
	ts.pollers[rec.ID] = cancel
	ts.mu.Unlock()
	defer func() {
		cancel(nil)
		ts.mu.Lock()
		delete(ts.pollers, rec.ID)
		ts.mu.Unlock()
	}()
	c := &taskFollower{whose: rec.Owner, key: "tasks:" + h.id}
	var last mcp.Task
	for wait := time.Duration(0); ; {
		if sleepCtx(ctx, wait) != nil {
			return
		}
		ri := h.taskReplica(rec)
		if ri == nil {
			return
		}
		t, err := ts.upstreamGet(ctx, ri, rec.Server, c, rec.Upstream)
		if err != nil {
			h.log.Debug("polling a server's task failed", "server", rec.Server, "err", err)
			wait = defaultTaskPoll
			continue
		}
		t.TaskID = rec.ID
		if t.Status != last.Status || t.StatusMessage != last.StatusMessage || t.LastUpdatedAt != last.LastUpdatedAt {
			last = t.Task
			ts.notify(rec.ID, t)
		}
		if t.Status.Terminal() {
			return
		}
		wait = taskPoll(t.PollIntervalMs)
	}
}

// notify sends the streams following a task its state.
func (ts *tasks) notify(id string, t *mcp.DetailedTask) {
	params, err := jsonrpc.Marshal(&mcp.TaskStatusParams{DetailedTask: *t})
	if err != nil {
		return
	}
	ts.mu.Lock()
	type stream struct {
		l *listener
		s *session
	}
	var to []stream
	for l, s := range ts.watchers[id] {
		to = append(to, stream{l, s})
	}
	ts.mu.Unlock()
	for _, st := range to {
		// Keyed: a state not yet sent is replaced by a newer one.
		st.s.notice(mcp.NotificationTasks, st.l.tag(mcp.NotificationTasks, params), "task:"+id+st.l.key)
	}
}

// taskFollower is the caller of the hub's own polls of a server's task,
// in the name of the task's owner: it declares nothing but the extension,
// and takes no requests.
type taskFollower struct {
	whose identity
	key   string
}

var _ caller = (*taskFollower)(nil)

func (f *taskFollower) notify(string, json.RawMessage) {}
func (f *taskFollower) request(_ context.Context, method string, _ json.RawMessage, done func(json.RawMessage, error)) func(error) {
	done(nil, errNotAnswered(method))
	return noAbort
}
func (f *taskFollower) caps() clientCaps           { return clientCaps{Tasks: true} }
func (f *taskFollower) client() string             { return f.key }
func (f *taskFollower) logLevel() mcp.LoggingLevel { return "" }
func (f *taskFollower) owner() identity            { return f.whose }
