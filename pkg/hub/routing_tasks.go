package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The answers of servers that speak the tasks extension, on a call's way
// back (routing.go's sendTo sees them, and the flight takes one more step,
// off the read loop):
//
//   - a task (a CreateTaskResult) for a client that negotiated the
//     extension passes through: the hub records it under an id of its own
//     (cluster_tasks.go), and the client is given that id, once the record
//     is in the Store;
//   - a task for a client that did not (a session's client, or a modern
//     one without the extension) is awaited: the hub polls tasks/get at the
//     server, asks the client the task's input requests as it would a
//     server's own requests, answers them with tasks/update, and answers
//     the client's call with the task's result, or its error. The client
//     never sees a task;
//   - -32021 asking for the extension, from a server that speaks it (a
//     tool that only runs as a task), to a session's client, which cannot
//     declare it: the hub sends the call again declaring the extension
//     itself, and awaits the task. A modern client that did not declare it
//     gets the -32021, as the extension says: it can.
//
// A client's capabilities toward a server that does not speak the
// extension lose it: the server never offered it, and the hub, which
// holds that server's long calls itself (routing_heldtasks.go), is the one
// that does tasks there.

// flightStep is what a call does next, off the read loop, when the answer
// that came is not yet the client's: send the call again (next), or end it
// with what the step found (raw, or err).
type flightStep func(ctx context.Context) (next, raw json.RawMessage, err error)

// taskStep returns the step a call's answer asks of the hub about tasks,
// or nil for none.
func (ts *tasks) taskStep(ri *replicaInfo, server string, c caller, method string, params, raw json.RawMessage, err error) flightStep {
	if method != mcp.MethodToolsCall || ri.ProtocolVersion != mcp.ModernVersion {
		return nil
	}
	if err != nil {
		if !sessionEra(c) || !asksForTasks(err) || !declaresTasks(ri.Capabilities) || declaresTasksIn(params) {
			return nil
		}
		return func(context.Context) (json.RawMessage, json.RawMessage, error) {
			return withTasksDeclared(c, params), nil, nil
		}
	}
	if !declaresTasks(ri.Capabilities) || mcp.ResultTypeOf(raw) != mcp.ResultTask { // the declaration first: it needs no scan of the answer
		// Not a server's task: a server without the extension makes none,
		// and a task in its call's place is one the hub holds
		// (routing_heldtasks.go), already the client's.
		return nil
	}
	if c.caps().Tasks {
		return func(ctx context.Context) (json.RawMessage, json.RawMessage, error) {
			out, err := ts.passThrough(ctx, ri, server, c, raw)
			return nil, out, err
		}
	}
	return func(ctx context.Context) (json.RawMessage, json.RawMessage, error) {
		out, err := ts.await(ctx, ri, server, c, raw)
		return nil, out, err
	}
}

// sessionEra reports whether a call's client speaks a session revision,
// whose requests cannot declare an extension.
func sessionEra(c caller) bool {
	sc, ok := c.(*sessionCall)
	return ok && sc.meta == nil
}

// asksForTasks reports whether a server's error is -32021 naming the tasks
// extension.
func asksForTasks(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code == mcp.CodeMissingClientCapability &&
		bytes.Contains(rpc.Data, []byte(mcp.ExtensionTasks))
}

// declaresTasks reports whether server capabilities name the extension.
func declaresTasks(caps json.RawMessage) bool {
	if !bytes.Contains(caps, []byte(mcp.ExtensionTasks)) {
		return false // the usual case, found without decoding
	}
	var c mcp.ServerCapabilities
	return json.Unmarshal(caps, &c) == nil && c.Has(mcp.ExtensionTasks)
}

// declaresTasksIn reports whether a request's params declare the
// extension among the client's capabilities.
func declaresTasksIn(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(mcp.ExtensionTasks)) {
		return false
	}
	m, err := mcp.ParseRequestMeta(params)
	return err == nil && m.Capabilities.HasExtension(mcp.ExtensionTasks)
}

// withTasksDeclared returns a call's params as a request of the stateless
// revision whose client capabilities declare the extension.
func withTasksDeclared(c caller, params json.RawMessage) json.RawMessage {
	return editCapabilities(requestMeta(c, params), func(ext mcp.Object) { ext.Set(mcp.ExtensionTasks, struct{}{}) })
}

// forServer returns a modern request's params as rp may see them: without
// the extension among the client's capabilities when its server does not
// speak it.
func (ts *tasks) forServer(rp *replica, params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(mcp.ExtensionTasks)) {
		return params
	}
	if ri := rp.currentInfo(); ri != nil && declaresTasks(ri.Capabilities) {
		return params
	}
	return editCapabilities(params, func(ext mcp.Object) { delete(ext, mcp.ExtensionTasks) })
}

// editCapabilities returns params with the extensions of
// _meta[clientCapabilities] changed by edit; an empty set of extensions
// is dropped. Params it cannot read are returned as they are.
func editCapabilities(params json.RawMessage, edit func(ext mcp.Object)) json.RawMessage {
	o, err := mcp.ParseObject(params)
	if err != nil {
		return params
	}
	meta := o.Meta()
	caps, err := mcp.ParseObject(meta[mcp.MetaClientCapabilities])
	if err != nil {
		return params
	}
	ext, err := mcp.ParseObject(caps["extensions"])
	if err != nil || ext == nil {
		ext = mcp.Object{}
	}
	edit(ext)
	if len(ext) == 0 {
		delete(caps, "extensions")
	} else {
		caps.Set("extensions", ext)
	}
	meta[mcp.MetaClientCapabilities] = caps.Raw()
	o.Set("_meta", meta)
	return o.Raw()
}

// passThrough gives a client a server's task under an id of the hub's,
// recorded before the answer leaves. A task the hub cannot record is
// cancelled at the server, and the client told why.
func (ts *tasks) passThrough(ctx context.Context, ri *replicaInfo, server string, c caller, raw json.RawMessage) (json.RawMessage, error) {
	var created mcp.CreateTaskResult
	if json.Unmarshal(raw, &created) != nil || created.TaskID == "" {
		return nil, errBadTask("its task has no taskId")
	}
	owner := c.owner()
	if !ts.admit(owner) {
		ts.cancelUpstream(ri, server, c, created.TaskID)
		return nil, errTooManyTasks(ts.h.cfg.MaxTasks)
	}
	rec := &taskRecord{ID: newTaskID(), Owner: owner, Server: server, Instance: ri.Instance, Replica: ri.ID,
		Upstream: created.TaskID, Expires: time.Now().Add(ts.handleTTL(created.TTLMs))}
	if err := ts.create(ctx, rec, nil); err != nil {
		ts.unadmit(owner)
		ts.cancelUpstream(ri, server, c, created.TaskID)
		ts.h.log.Warn("a server's task could not be recorded; it was cancelled", "server", server, "err", err)
		return nil, errTaskStore(err)
	}
	out, err := jsonrpc.SetMember(raw, "taskId", jsonrpc.AppendString(nil, rec.ID))
	if err != nil {
		return nil, errBadTask("its task does not decode")
	}
	return out, nil
}

// handleTTL is how long the hub keeps the handle of a server's task: as
// long as the server keeps the task (its ttlMs), TaskTTL when it says
// nothing, at most maxTaskHandleTTL.
func (ts *tasks) handleTTL(ms *int64) time.Duration {
	switch {
	case ms == nil:
		return maxTaskHandleTTL
	case *ms <= 0:
		return ts.h.cfg.TaskTTL
	}
	return min(time.Duration(*ms)*time.Millisecond, maxTaskHandleTTL)
}

// Bounds of the interval at which the hub polls a server's task: the
// server's pollIntervalMs within them, a second when it suggests none.
const (
	minTaskPoll     = 10 * time.Millisecond
	maxTaskPoll     = 30 * time.Second
	defaultTaskPoll = time.Second
)

func taskPoll(ms int64) time.Duration {
	if ms <= 0 {
		return defaultTaskPoll
	}
	return min(max(time.Duration(ms)*time.Millisecond, minTaskPoll), maxTaskPoll)
}

// await follows a server's task for a client that cannot, until it ends,
// and returns its result or its error. Its input requests are asked of the
// client as the server's own requests would be, each once. When ctx ends
// first (the client gave up, or the call timed out), the task is cancelled
// at the server.
func (ts *tasks) await(ctx context.Context, ri *replicaInfo, server string, c caller, raw json.RawMessage) (json.RawMessage, error) {
	var created mcp.CreateTaskResult
	if json.Unmarshal(raw, &created) != nil || created.TaskID == "" {
		return nil, errBadTask("its task has no taskId")
	}
	id := created.TaskID
	res, err := ts.track(ctx, ri, server, c, id)
	if ctx.Err() != nil {
		ts.cancelUpstream(ri, server, c, id)
	}
	return res, err
}

// track polls a server's task (await).
func (ts *tasks) track(ctx context.Context, ri *replicaInfo, server string, c caller, id string) (json.RawMessage, error) {
	answered := map[string]bool{}
	var wait time.Duration // the first look at once: the task may have ended already
	for {
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, err
		}
		t, err := ts.upstreamGet(ctx, ri, server, c, id)
		if err != nil {
			return nil, err
		}
		wait = taskPoll(t.PollIntervalMs)
		switch t.Status {
		case mcp.TaskCompleted:
			if len(t.Result) == 0 {
				return json.RawMessage(`{}`), nil
			}
			return t.Result, nil
		case mcp.TaskFailed:
			if t.Error == nil {
				return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the server's task failed: %s", t.StatusMessage)
			}
			return nil, t.Error.Err()
		case mcp.TaskCancelled:
			return nil, errTaskCancelledUpstream(t.StatusMessage)
		case mcp.TaskInputRequired:
			asked, err := ts.answerUpstream(ctx, ri, server, c, id, t.InputRequests, answered)
			if err != nil {
				return nil, err
			}
			if asked {
				wait = 0 // answered: see where it stands now
			}
		}
	}
}

// answerUpstream asks the client the input requests of a server's task it
// was not asked yet, and answers the task with tasks/update; it reports
// whether there were any.
func (ts *tasks) answerUpstream(ctx context.Context, ri *replicaInfo, server string, c caller, id string, requests map[string]mcp.InputRequest, answered map[string]bool) (bool, error) {
	pending := make(map[string]mcp.InputRequest, len(requests))
	for key, ir := range requests {
		if !answered[key] {
			pending[key] = ir
		}
	}
	if len(pending) == 0 {
		return false, nil
	}
	responses, err := mcp.AnswerInputs(ctx, pending, func(ctx context.Context, ir mcp.InputRequest) (json.RawMessage, error) {
		return ts.h.askClient(ctx, c, ir)
	})
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return false, cause
		}
		return false, err
	}
	if _, err := ts.upstream(ctx, ri, server, c, mcp.MethodTasksUpdate, &mcp.UpdateTaskParams{TaskID: id, InputResponses: responses}); err != nil {
		return false, err
	}
	for key := range pending {
		answered[key] = true
	}
	return true, nil
}

// upstreamGet asks a server where its task stands.
func (ts *tasks) upstreamGet(ctx context.Context, ri *replicaInfo, server string, c caller, id string) (*mcp.DetailedTask, error) {
	raw, err := ts.upstream(ctx, ri, server, c, mcp.MethodTasksGet, &mcp.TaskParams{TaskID: id})
	if err != nil {
		return nil, err
	}
	var t mcp.GetTaskResult
	if err := json.Unmarshal(raw, &t); err != nil || t.Status == "" {
		return nil, errBadTask("its tasks/get answer does not decode")
	}
	return &t.DetailedTask, nil
}

// cancelUpstream cancels a server's task that no client will follow, on
// its own short deadline: the caller's may have ended.
func (ts *tasks) cancelUpstream(ri *replicaInfo, server string, c caller, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ts.h.ctx), 5*time.Second)
	defer cancel()
	if _, err := ts.upstream(ctx, ri, server, c, mcp.MethodTasksCancel, &mcp.TaskParams{TaskID: id}); err != nil {
		ts.h.log.Debug("cancelling a server's task failed", "server", server, "err", err)
	}
}

// upstream sends a request of the extension to the replica ri, declaring
// it, for the client of c, and waits for the answer, within the call
// timeout.
func (ts *tasks) upstream(ctx context.Context, ri *replicaInfo, server string, c caller, method string, params any) (json.RawMessage, error) {
	h := ts.h
	raw, err := jsonrpc.Marshal(params)
	if err != nil {
		return nil, err
	}
	raw = withTasksDeclared(c, raw)
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	res, err := await(ctx, func(done func(json.RawMessage, error)) func(error) {
		return h.sendOne(ctx, ri, server, c, method, raw, done)
	})
	if err != nil {
		return nil, h.upstreamError(server, err)
	}
	return res, nil
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// taskReplica finds where a server's task lives: the replica that made
// it, else any replica of its server (whose tasks may be in a store the
// replicas share); nil when the server is gone.
func (h *Hub) taskReplica(rec *taskRecord) *replicaInfo {
	replicas := h.reg.view().servers[rec.Server]
	for _, ri := range replicas {
		if ri.ID == rec.Replica {
			return ri
		}
	}
	return h.pick(replicas)
}
