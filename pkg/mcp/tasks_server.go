package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// A Server's side of the tasks extension. A tool handler decides, per
// request, to run its work as a task (ToolRequest.RunAsTask): the Server
// then creates the task's record in its TaskStore, answers the call with a
// CreateTaskResult once the record is there, and runs the work on a
// goroutine of its own (a taskRun) that outlives the request. tasks/get
// reads the record; tasks/update and tasks/cancel change it, and the run
// hears of their changes through TaskStore.Watch, so that they may reach
// any process sharing the store.

// Defaults of TaskOptions.
const (
	DefaultTaskTTL          = time.Hour
	DefaultTaskPollInterval = time.Second
	DefaultMaxRunningTasks  = 256
)

// TaskOptions configure a Server's tasks (ServerOptions.Tasks). The zero
// value is usable.
type TaskOptions struct {
	// Store keeps the tasks' records; default a MemoryTaskStore of the
	// Server's own.
	Store TaskStore
	// TTL is how long a task's record is kept after its creation (its
	// ttlMs): a task still running then is stopped, and its record
	// discarded. Default DefaultTaskTTL.
	TTL time.Duration
	// PollInterval is how often clients are asked to poll tasks/get (its
	// pollIntervalMs); default DefaultTaskPollInterval.
	PollInterval time.Duration
	// MaxRunning bounds the tasks running at once: past it, RunAsTask
	// answers ErrTooManyTasks. Default DefaultMaxRunningTasks.
	MaxRunning int
	// Owner names who a request comes from, given its ctx (which carries
	// the values of the context the session was served with). A task can be
	// read, answered and cancelled only by requests of the owner of the
	// request that made it; to anyone else its id names no task (-32602).
	// Default: no one is told apart, and the task id (122 random bits) is
	// the only key to a task.
	Owner func(ctx context.Context) string
}

// Why a task's work was stopped (the cause of its context's end).
var (
	errTaskEnded     = errors.New("mcp: the task ended")            // cancelled by the client, or ended elsewhere
	errTaskGone      = errors.New("mcp: the task's record is gone") // expired, or discarded
	errServerStopped = errors.New("mcp: the server stopped")        // Shutdown
)

// taskEngine runs a Server's tasks.
type taskEngine struct {
	s    *Server
	opts TaskOptions
	// ctx ends at Shutdown, and with it every task's work.
	ctx  context.Context
	stop context.CancelCauseFunc

	mu      sync.Mutex
	running int  // tasks running, bounded by opts.MaxRunning
	closed  bool // Shutdown was called: no task starts
	wg      sync.WaitGroup
}

func newTaskEngine(s *Server, opts TaskOptions) *taskEngine {
	if opts.Store == nil {
		opts.Store = NewMemoryTaskStore(0)
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTaskTTL
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultTaskPollInterval
	}
	if opts.MaxRunning <= 0 {
		opts.MaxRunning = DefaultMaxRunningTasks
	}
	e := &taskEngine{s: s, opts: opts}
	e.ctx, e.stop = context.WithCancelCause(context.Background())
	return e
}

// errShuttingDown answers a task asked for after Shutdown.
var errShuttingDown = jsonrpc.NewError(jsonrpc.CodeInternalError, "The server is shutting down")

// acquire takes a place for a task to run: ErrTooManyTasks when there is
// none. The wait group is added to under mu, so that Shutdown's Wait never
// races it.
func (e *taskEngine) acquire() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return errShuttingDown
	case e.running >= e.opts.MaxRunning:
		return ErrTooManyTasks
	}
	e.running++
	e.wg.Add(1)
	return nil
}

func (e *taskEngine) release() {
	e.mu.Lock()
	e.running--
	e.mu.Unlock()
	e.wg.Done()
}

func (e *taskEngine) owner(ctx context.Context) string {
	if e.opts.Owner == nil {
		return ""
	}
	return e.opts.Owner(ctx)
}

// Shutdown stops the server's tasks: the work of each is cancelled, and a
// task that has not ended by then fails (-32603, the server stopped). It
// waits until their goroutines returned, or ctx ended. No task starts
// after it. Sessions are not closed: they end with their connections.
func (s *Server) Shutdown(ctx context.Context) error {
	e := s.tasks
	if e == nil {
		return nil
	}
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stop(errServerStopped)
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CanRunTask reports whether RunAsTask would make a task of this request:
// the Server offers the extension (ServerOptions.Tasks), and the request,
// of protocol version 2026-07-28, declared it in its client capabilities.
// A request of a session never does. Inside a task it is false: work runs
// in the task it is in.
func (r *ToolRequest) CanRunTask() bool {
	return r.task == nil && r.Session.server.tasks != nil && r.in.meta != nil &&
		r.in.meta.Capabilities.HasExtension(ExtensionTasks)
}

// RunAsTask runs work, a handler like any other, as a task when it can
// (CanRunTask): it records the task, starts work in the background and
// answers the call with the task (a CreateTaskResult), which the client
// follows with tasks/get. Otherwise it runs work in the call and answers
// with what work answers. A handler returns what RunAsTask returns.
//
// In the task, work is called with this request: its params, and the input
// responses and state it came with. Work may ask for input as any handler
// does (InputRequests, and RequestState if it wants it back): the task
// waits in status input_required until the client has answered every
// request (tasks/update), and work is called again with the answers and
// the state, as a retry would be. The keys are the handler's; on the wire
// a key asked a second time gets a suffix, since the extension wants every
// key of a task to be new. Progress becomes the task's statusMessage; Log
// sends nothing. Work's ctx keeps the values of ctx but not its end: it
// ends when the client cancels the task (tasks/cancel), at the end of the
// task's TTL, or at Shutdown.
//
// A tool that cannot answer in the call, when the client cannot follow a
// task, returns ErrMissingExtension(ExtensionTasks) instead (-32021).
func (r *ToolRequest) RunAsTask(ctx context.Context, work ToolHandler) (*CallToolResult, error) {
	if !r.CanRunTask() {
		return work(ctx, r)
	}
	created, err := r.Session.server.tasks.start(ctx, r, work)
	if err != nil {
		return nil, err
	}
	r.created = created
	return &CallToolResult{}, nil
}

// start creates a task's record and starts its run.
func (e *taskEngine) start(ctx context.Context, r *ToolRequest, work ToolHandler) (*CreateTaskResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // the client gave up on the call: it would never learn of the task
	}
	if err := e.acquire(); err != nil {
		return nil, err
	}
	now := time.Now()
	ttl := e.opts.TTL.Milliseconds()
	rec := &TaskRecord{
		DetailedTask: DetailedTask{Task: Task{
			TaskID: uuid.NewString(), Status: TaskWorking, CreatedAt: taskTime(now), LastUpdatedAt: taskTime(now),
			TTLMs: &ttl, PollIntervalMs: e.opts.PollInterval.Milliseconds(),
		}},
		Owner:     e.owner(ctx),
		ExpiresAt: now.Add(e.opts.TTL),
	}
	if err := e.opts.Store.Create(ctx, rec); err != nil {
		e.release()
		e.s.log.Warn("mcp: creating a task failed", "tool", r.Params.Name, "err", err)
		return nil, jsonrpc.ErrorOf(err)
	}
	// The work's context keeps the request's values (its owner among them)
	// but ends with the task, not with the request.
	runCtx, cancel := context.WithDeadlineCause(context.WithoutCancel(ctx), rec.ExpiresAt, errTaskGone)
	runCtx, cancelCause := context.WithCancelCause(runCtx)
	unlink := context.AfterFunc(e.ctx, func() { cancelCause(context.Cause(e.ctx)) })
	t := &taskRun{e: e, id: rec.TaskID, work: work, used: map[string]bool{}}
	t.req = *r
	if e.s.opts.LendRequests {
		t.req.detach() // the work outlives the answer, and with it the request's frame
	}
	t.req.task, t.req.progressToken, t.req.created = t, nil, nil
	go func() {
		defer e.release()
		defer cancel()
		defer unlink()
		t.run(runCtx, cancelCause)
	}()
	return &CreateTaskResult{ResultType: ResultTask, Task: rec.Task}, nil
}

// taskRun is one task's work, on a goroutine of its own.
type taskRun struct {
	e    *taskEngine
	id   string
	work ToolHandler
	req  ToolRequest // the request that made the task, as work sees it
	// used are the input request keys the task has put on the wire, each
	// once; wire maps those of the outstanding round to the handler's.
	used map[string]bool
	wire map[string]string
}

// run calls work until it answers, in rounds of input, and records how the
// task ended. A watcher stops the work when the record ends elsewhere
// (tasks/cancel) or is discarded, and wakes the run when it changed (an
// answer came).
func (t *taskRun) run(ctx context.Context, cancel context.CancelCauseFunc) {
	changed, unwatch := t.e.opts.Store.Watch(t.id)
	defer unwatch()
	wake := make(chan struct{}, 1)
	var watcher sync.WaitGroup
	defer watcher.Wait()
	defer cancel(nil) // before the Wait: it stops the watcher
	watcher.Go(func() { t.watch(ctx, cancel, changed, wake) })

	responses, state := t.req.InputResponses, t.req.RequestState
	for round := 1; ; round++ {
		tr := t.req
		tr.InputResponses, tr.RequestState = responses, state
		res, err := runTool(ctx, t.work, &tr)
		switch {
		case ctx.Err() != nil:
			t.stopped(ctx)
			return
		case err != nil:
			t.fail(err)
			return
		case len(res.InputRequests) == 0:
			t.complete(res)
			return
		}
		if err := t.canAsk(res, round); err != nil {
			t.fail(err)
			return
		}
		if err := t.ask(ctx, res.InputRequests); err != nil {
			t.fail(err)
			return
		}
		got, err := t.answers(ctx, wake)
		if err != nil {
			t.stopped(ctx)
			return
		}
		responses, state = got, res.RequestState
	}
}

// watch follows the task's record for the run, until ctx ends.
func (t *taskRun) watch(ctx context.Context, cancel context.CancelCauseFunc, changed <-chan struct{}, wake chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		rec, err := t.e.opts.Store.Get(ctx, t.id)
		switch {
		case errors.Is(err, ErrTaskNotFound):
			cancel(errTaskGone)
			return
		case err != nil: // the store failed for now: the next change tells
		case rec.Status.Terminal():
			cancel(errTaskEnded)
			return
		default:
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// canAsk checks a round's input requests as serveInput does for a call:
// no content beside them, capabilities the client declared, and a bound on
// the rounds.
func (t *taskRun) canAsk(res *CallToolResult, round int) error {
	if res.hasContent() {
		return jsonrpc.Errorf(jsonrpc.ErrInternal, "the server answered with both content and input requests")
	}
	caps := t.req.ClientCapabilities()
	for _, key := range sortedKeys(res.InputRequests) {
		if err := res.InputRequests[key].needs(caps); err != nil {
			return err
		}
	}
	if round >= maxInputRounds {
		return jsonrpc.Errorf(jsonrpc.ErrInternal, "the handler asked for input more than %d times", maxInputRounds)
	}
	return nil
}

// ask puts a round's input requests in the record, under keys the task has
// not used yet, and the task in input_required.
func (t *taskRun) ask(ctx context.Context, requests map[string]InputRequest) error {
	t.wire = make(map[string]string, len(requests))
	onWire := make(map[string]InputRequest, len(requests))
	for _, key := range sortedKeys(requests) {
		w := key
		for n := 2; t.used[w]; n++ {
			w = fmt.Sprintf("%s.%d", key, n)
		}
		t.used[w] = true
		t.wire[w] = key
		onWire[w] = requests[key]
	}
	return t.update(ctx, func(rec *TaskRecord) {
		rec.Status, rec.StatusMessage = TaskInputRequired, ""
		rec.InputRequests, rec.Responses = onWire, nil
	})
}

// errNotYet: the round's answers are not all in.
var errNotYet = errors.New("mcp: the task's input requests are not all answered")

// answers waits until tasks/update brought the answer to every request of
// the round, takes them from the record and returns them under the
// handler's keys.
func (t *taskRun) answers(ctx context.Context, wake <-chan struct{}) (map[string]json.RawMessage, error) {
	for {
		var got map[string]json.RawMessage
		_, err := t.e.opts.Store.Update(ctx, t.id, func(rec *TaskRecord) error {
			switch {
			case rec.Status.Terminal():
				return errTaskEnded
			case rec.Status != TaskWorking || len(rec.InputRequests) > 0:
				return errNotYet
			}
			got, rec.Responses = rec.Responses, nil
			return nil
		})
		if err == nil {
			out := make(map[string]json.RawMessage, len(got))
			for w, raw := range got {
				if key, ok := t.wire[w]; ok {
					out[key] = raw
				}
			}
			return out, nil
		}
		if !errors.Is(err, errNotYet) {
			return nil, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// progress makes a report of the work's progress the task's statusMessage.
func (t *taskRun) progress(ctx context.Context, progress, total float64, message string) error {
	if message == "" {
		message = fmt.Sprintf("%g", progress)
		if total > 0 {
			message += fmt.Sprintf(" of %g", total)
		}
	}
	return t.update(ctx, func(rec *TaskRecord) {
		if rec.Status == TaskWorking {
			rec.StatusMessage = message
		}
	})
}

// complete records the work's result, as the call would have answered it.
func (t *taskRun) complete(res *CallToolResult) {
	if _, ok := res.Meta[MetaRelatedTask]; ok {
		res.Meta = maps.Clone(res.Meta)
		delete(res.Meta, MetaRelatedTask)
	}
	raw, err := t.e.s.decorate(MethodToolsCall, res)
	if err != nil {
		t.fail(err)
		return
	}
	t.end(func(rec *TaskRecord) {
		rec.Status, rec.Result = TaskCompleted, raw
	})
}

// fail records the JSON-RPC error the work ended with.
func (t *taskRun) fail(err error) {
	te := taskErrorOf(err)
	if jsonrpc.ErrorOf(err) == jsonrpc.ErrInternal {
		// Not an error of the protocol's: the client sees a bare -32603,
		// the log says what it was.
		t.e.s.log.Warn("mcp: a task failed", "tool", t.req.Params.Name, "err", err)
	}
	t.end(func(rec *TaskRecord) {
		rec.Status, rec.StatusMessage, rec.Error = TaskFailed, te.Message, te
	})
}

// stopped records why the work was stopped, unless the task ended
// already (cancelled by the client, or gone).
func (t *taskRun) stopped(ctx context.Context) {
	switch context.Cause(ctx) {
	case errTaskEnded, errTaskGone:
	case errServerStopped:
		t.fail(jsonrpc.NewError(jsonrpc.CodeInternalError, "The server stopped before the task ended"))
	default:
		t.fail(jsonrpc.NewError(jsonrpc.CodeInternalError, "The task was stopped"))
	}
}

// end makes the task's record terminal, unless it is already.
func (t *taskRun) end(fn func(*TaskRecord)) {
	// The run's context may have ended: the last word gets its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.e.ctx), 10*time.Second)
	defer cancel()
	_ = t.update(ctx, func(rec *TaskRecord) {
		fn(rec)
		rec.InputRequests, rec.Responses = nil, nil
	})
}

// update changes the task's record with fn and stamps it, unless it has
// ended; a task that ended is no error.
func (t *taskRun) update(ctx context.Context, fn func(*TaskRecord)) error {
	_, err := t.e.opts.Store.Update(ctx, t.id, func(rec *TaskRecord) error {
		if rec.Status.Terminal() {
			return errTaskEnded
		}
		fn(rec)
		rec.LastUpdatedAt = taskTime(time.Now())
		return nil
	})
	if errors.Is(err, errTaskEnded) {
		return nil
	}
	return err
}

// taskRequest checks a request of a task method and decodes its params: a
// client that did not declare the extension gets -32021, params without a
// task id -32602.
func taskRequest[P TaskParams | UpdateTaskParams](in *inbound) (*P, string, error) {
	if in.meta == nil || !in.meta.Capabilities.HasExtension(ExtensionTasks) {
		return nil, "", ErrMissingExtension(ExtensionTasks)
	}
	p, err := decodeParams[P](in.req)
	if err != nil {
		return nil, "", err
	}
	var id string
	switch p := any(p).(type) {
	case *TaskParams:
		id = p.TaskID
	case *UpdateTaskParams:
		id = p.TaskID
	}
	if id == "" {
		return nil, "", jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%s: taskId is required", in.req.Method)
	}
	return p, id, nil
}

// changeTask changes the record of a task the requester owns with fn,
// which may return errTaskEnded to leave it as it is.
func changeTask(ctx context.Context, in *inbound, id string, fn func(*TaskRecord) error) error {
	e := in.ss.server.tasks
	owner := e.owner(ctx)
	_, err := e.opts.Store.Update(ctx, id, func(rec *TaskRecord) error {
		if rec.Owner != owner {
			return ErrTaskNotFound
		}
		if err := fn(rec); err != nil {
			return err
		}
		rec.LastUpdatedAt = taskTime(time.Now())
		return nil
	})
	if errors.Is(err, errTaskEnded) {
		return nil
	}
	return err
}

// getTask serves tasks/get: the task as its record says.
func getTask(ctx context.Context, in *inbound) (any, error) {
	_, id, err := taskRequest[TaskParams](in)
	if err != nil {
		return nil, err
	}
	e := in.ss.server.tasks
	rec, err := e.opts.Store.Get(ctx, id)
	if err == nil && rec.Owner != e.owner(ctx) {
		err = ErrTaskNotFound
	}
	if err != nil {
		return nil, jsonrpc.ErrorOf(err)
	}
	return &GetTaskResult{ResultType: ResultComplete, DetailedTask: rec.DetailedTask}, nil
}

// updateTask serves tasks/update: answers to outstanding input requests
// leave them for the run to take; when none is outstanding any more the
// task is working again. Answers to keys not outstanding are ignored, as
// the extension says, and so is an update of a task that waits for none.
func updateTask(ctx context.Context, in *inbound) (any, error) {
	p, id, err := taskRequest[UpdateTaskParams](in)
	if err != nil {
		return nil, err
	}
	err = changeTask(ctx, in, id, func(rec *TaskRecord) error {
		if rec.Status != TaskInputRequired {
			return errTaskEnded
		}
		for key, raw := range p.InputResponses {
			if _, ok := rec.InputRequests[key]; !ok {
				continue
			}
			delete(rec.InputRequests, key)
			if rec.Responses == nil {
				rec.Responses = map[string]json.RawMessage{}
			}
			rec.Responses[key] = raw
		}
		if len(rec.InputRequests) == 0 {
			rec.Status, rec.InputRequests = TaskWorking, nil
		}
		return nil
	})
	if err != nil {
		return nil, jsonrpc.ErrorOf(err)
	}
	return struct{}{}, nil
}

// cancelTask serves tasks/cancel: the task is cancelled at once, and its
// work hears of it through the store. A task that ended already is
// acknowledged alike.
func cancelTask(ctx context.Context, in *inbound) (any, error) {
	_, id, err := taskRequest[TaskParams](in)
	if err != nil {
		return nil, err
	}
	err = changeTask(ctx, in, id, func(rec *TaskRecord) error {
		if rec.Status.Terminal() {
			return errTaskEnded
		}
		rec.Status, rec.StatusMessage = TaskCancelled, "Cancelled by the client"
		rec.InputRequests, rec.Responses = nil, nil
		return nil
	})
	if err != nil {
		return nil, jsonrpc.ErrorOf(err)
	}
	return struct{}{}, nil
}
