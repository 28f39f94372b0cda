package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// taskServer returns a server that offers the tasks extension (opts.Tasks
// may tune it) and stops its tasks when the test ends, checking that they
// all ended.
func taskServer(t *testing.T, opts *mcp.ServerOptions) *mcp.Server {
	t.Helper()
	o := mcp.ServerOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Tasks == nil {
		o.Tasks = &mcp.TaskOptions{PollInterval: 10 * time.Millisecond}
	}
	s := mcp.NewServer(testInfo, &o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait) // t.Context has ended
		defer cancel()
		assert.NoError(t, s.Shutdown(ctx), "every task's goroutine returned")
	})
	return s
}

// gate is a task's work that waits for its release (or for its context,
// whose cause it reports on stopped) and then answers "done".
type gate struct {
	started chan *mcp.ToolRequest
	release chan struct{}
	stopped chan error
}

func newGate() *gate {
	return &gate{started: make(chan *mcp.ToolRequest, 16), release: make(chan struct{}), stopped: make(chan error, 16)}
}

func (g *gate) work(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
	g.started <- req
	select {
	case <-g.release:
		return textResult("done"), nil
	case <-ctx.Done():
		g.stopped <- ctx.Err()
		return nil, ctx.Err()
	}
}

// slowTool registers a tool that runs g's work as a task when it can.
func slowTool(s *mcp.Server, name string, work mcp.ToolHandler) {
	s.AddTool(&mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return req.RunAsTask(ctx, work)
	})
}

// tasksClient connects a client of 2026-07-28 that declares the tasks
// extension, with the handlers of answering.
func tasksClient(t *testing.T, s *mcp.Server) *mcp.Client {
	t.Helper()
	opts := answering(nil)
	opts.Tasks = true
	c, _ := connectModern(t, s, opts)
	return c
}

// gatedServer is a taskServer with a tool, slow, whose work is g's.
func gatedServer(t *testing.T, opts *mcp.ServerOptions) (*mcp.Server, *gate) {
	t.Helper()
	s := taskServer(t, opts)
	g := newGate()
	slowTool(s, "slow", g.work)
	return s, g
}

// startSlow starts slow as a task, and returns it once its work runs.
func startSlow(t *testing.T, c *mcp.Client, g *gate) *mcp.Task {
	t.Helper()
	_, task, err := c.StartTool(testCtx(t), "slow", nil, nil)
	require.NoError(t, err)
	require.NotNil(t, task)
	recv(t, g.started)
	return task
}

var isoTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$`)

// TestTasks_aCallBecomesATask follows a tool call that the server runs as
// a task: the call answers at once with the task, tasks/get finds it
// working until the work ends, then completed with the tool's result.
func TestTasks_aCallBecomesATask(t *testing.T) {
	t.Parallel()
	s, g := gatedServer(t, &mcp.ServerOptions{Tasks: &mcp.TaskOptions{TTL: time.Minute, PollInterval: 20 * time.Millisecond}})
	c := tasksClient(t, s)
	ctx := testCtx(t)

	res, task, err := c.StartTool(ctx, "slow", map[string]int{"n": 1}, nil)
	require.NoError(t, err)
	require.Nil(t, res, "a task, not a result")
	require.NotNil(t, task)
	assert.Regexp(t, `^[0-9a-f-]{36}$`, task.TaskID, "a random UUID")
	assert.Equal(t, mcp.TaskWorking, task.Status)
	assert.Regexp(t, isoTime, task.CreatedAt)
	assert.Regexp(t, isoTime, task.LastUpdatedAt)
	require.NotNil(t, task.TTLMs)
	assert.Equal(t, int64(60_000), *task.TTLMs)
	assert.Equal(t, int64(20), task.PollIntervalMs)

	req := recv(t, g.started)
	assert.JSONEq(t, `{"n":1}`, string(req.Params.Arguments), "the work sees the call's arguments")
	got, err := c.GetTask(ctx, task.TaskID)
	require.NoError(t, err, "the task is there as soon as the call answered")
	assert.Equal(t, mcp.TaskWorking, got.Status)
	assert.Nil(t, got.Result)

	close(g.release)
	res, err = c.AwaitTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "done", text(res))
	got, err = c.GetTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskCompleted, got.Status)
	assert.Nil(t, got.Error)

	// CallTool does both.
	res, err = c.CallTool(ctx, "slow", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "done", text(res))
}

// TestTasks_theWire checks the extension's shapes as a raw client sees
// them: a flat CreateTaskResult (resultType "task"), tasks/get's
// DetailedTask with the inlined result and resultType "complete", empty
// acknowledgements of tasks/update and tasks/cancel, and no requestState
// anywhere.
func TestTasks_theWire(t *testing.T) {
	t.Parallel()
	s, g := gatedServer(t, nil)
	p, _ := rawPeer(t, s)
	ctx := testCtx(t)
	const caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	call := func(method, params string) map[string]json.RawMessage {
		t.Helper()
		var res map[string]json.RawMessage
		require.NoError(t, p.Call(ctx, method, modern(t, params, caps), &res), method)
		return res
	}

	created := call(mcp.MethodToolsCall, `{"name":"slow","arguments":{},"requestState":"x"}`)
	assert.JSONEq(t, `"task"`, string(created["resultType"]))
	for _, key := range []string{"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
		assert.Contains(t, created, key)
	}
	for _, key := range []string{"task", "result", "error", "inputRequests", "requestState", "content", "ttl", "pollInterval"} {
		assert.NotContains(t, created, key)
	}
	var id string
	require.NoError(t, json.Unmarshal(created["taskId"], &id))
	recv(t, g.started)

	working := call(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`)
	assert.JSONEq(t, `"complete"`, string(working["resultType"]))
	assert.JSONEq(t, `"working"`, string(working["status"]))
	assert.NotContains(t, working, "requestState")

	close(g.release)
	var done map[string]json.RawMessage
	require.Eventually(t, func() bool {
		done = call(mcp.MethodTasksGet, `{"taskId":"`+id+`"}`)
		return string(done["status"]) == `"completed"`
	}, wait, 5*time.Millisecond)
	var result map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(done["result"], &result))
	assert.JSONEq(t, `[{"type":"text","text":"done"}]`, string(result["content"]))
	assert.JSONEq(t, `"complete"`, string(result["resultType"]), "the result as the call would have answered it")
	assert.NotContains(t, string(done["result"]), mcp.MetaRelatedTask)
	assert.NotContains(t, done, "error")
	assert.NotContains(t, done, "requestState")

	for _, method := range []string{mcp.MethodTasksUpdate, mcp.MethodTasksCancel} {
		ack := call(method, `{"taskId":"`+id+`","inputResponses":{}}`)
		assert.JSONEq(t, `"complete"`, string(ack["resultType"]), method)
		for _, key := range []string{"taskId", "status", "result", "error", "inputRequests"} {
			assert.NotContains(t, ack, key, "%s acknowledges, no more", method)
		}
	}
}

// TestTasks_onlyForClientsThatDeclareTheExtension: a request that did not
// declare the extension never gets a task (the work runs in the call),
// nor may it use the task methods (-32021); a server without the
// extension has no task methods and does not declare it.
func TestTasks_onlyForClientsThatDeclareTheExtension(t *testing.T) {
	t.Parallel()
	s := taskServer(t, nil)
	var calls atomic.Int32
	slowTool(s, "quick", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return textResult("in the call"), nil
	})
	ctx := testCtx(t)

	plain, _ := connectModern(t, s, answering(nil))
	res, err := plain.CallTool(ctx, "quick", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "in the call", text(res), "a client of 2026-07-28 without the extension")
	session, _ := connect(t, s, nil)
	res, err = session.CallTool(ctx, "quick", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "in the call", text(res), "a session's client")
	assert.Equal(t, int32(2), calls.Load())
	assert.Contains(t, plain.InitializeResult().Capabilities.Extensions, mcp.ExtensionTasks, "server/discover declares it")
	assert.Empty(t, session.InitializeResult().Capabilities.Extensions, "initialize does not: sessions have no extensions")

	p, _ := rawPeer(t, s)
	for _, method := range []string{mcp.MethodTasksGet, mcp.MethodTasksUpdate, mcp.MethodTasksCancel} {
		err := p.Call(ctx, method, modern(t, `{"taskId":"x","inputResponses":{}}`, `{"sampling":{}}`), nil)
		e := rpcError(t, err)
		assert.Equal(t, mcp.CodeMissingClientCapability, e.Code, method)
		assert.JSONEq(t, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`, string(e.Data), method)
	}
	err = p.Call(ctx, mcp.MethodTasksGet, json.RawMessage(`{"taskId":"x"}`), nil)
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcCode(t, err), "a request of a session has no task methods")

	without := mcp.NewServer(testInfo, nil)
	slowTool(without, "quick", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return textResult("in the call"), nil
	})
	c := tasksClient(t, without)
	assert.Empty(t, c.InitializeResult().Capabilities.Extensions)
	res, err = c.CallTool(ctx, "quick", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "in the call", text(res), "a server without the extension runs the work in the call")
	_, err = c.GetTask(ctx, "x")
	assert.Equal(t, jsonrpc.CodeMethodNotFound, rpcCode(t, err))
}

// TestTasks_howTheyEnd: a JSON-RPC error fails the task with it, a tool
// error completes it with isError, and an id that names no task is -32602.
func TestTasks_howTheyEnd(t *testing.T) {
	t.Parallel()
	s := taskServer(t, nil)
	slowTool(s, "protocol", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return nil, jsonrpc.NewError(-32042, "out of luck").WithData(map[string]int{"tries": 3})
	})
	slowTool(s, "tool", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("the disk is full")
	})
	slowTool(s, "internal", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: func() {}}, nil // cannot be encoded
	})
	c := tasksClient(t, s)
	ctx := testCtx(t)

	_, err := c.CallTool(ctx, "protocol", nil, nil)
	e := rpcError(t, err)
	assert.Equal(t, jsonrpc.Code(-32042), e.Code)
	assert.Equal(t, "out of luck", e.Message)
	assert.JSONEq(t, `{"tries":3}`, string(e.Data))

	res, err := c.CallTool(ctx, "tool", nil, nil)
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "the disk is full", text(res))

	_, task, err := c.StartTool(ctx, "internal", nil, nil)
	require.NoError(t, err)
	_, err = c.AwaitTask(ctx, task.TaskID)
	e = rpcError(t, err)
	assert.Equal(t, jsonrpc.CodeInternalError, e.Code)
	assert.Equal(t, "Internal error", e.Message, "what went wrong inside stays inside")
	got, err := c.GetTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskFailed, got.Status)
	assert.Nil(t, got.Result)

	for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000"} {
		_, err := c.GetTask(ctx, id)
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err))
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, c.CancelTask(ctx, id)))
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, c.UpdateTask(ctx, id, nil)))
	}
	_, err = c.GetTask(ctx, "")
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, err), "a task id is required")
}

// TestTasks_cancel: tasks/cancel cancels the task at once and stops its
// work; cancelling it again, or a task that ended, is acknowledged alike;
// a CallTool given up on cancels its task.
func TestTasks_cancel(t *testing.T) {
	t.Parallel()
	store := &readStore{TaskStore: mcp.NewMemoryTaskStore(0), reads: make(chan string, 64)}
	s, g := gatedServer(t, &mcp.ServerOptions{Tasks: &mcp.TaskOptions{Store: store, PollInterval: 10 * time.Millisecond}})
	c := tasksClient(t, s)
	ctx := testCtx(t)

	task := startSlow(t, c, g)
	require.NoError(t, c.CancelTask(ctx, task.TaskID))
	got, err := c.GetTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskCancelled, got.Status, "cancelled as soon as acknowledged")
	assert.ErrorIs(t, recv(t, g.stopped), context.Canceled, "and its work stops")
	require.NoError(t, c.CancelTask(ctx, task.TaskID), "again: the same acknowledgement")
	_, err = c.AwaitTask(ctx, task.TaskID)
	assert.ErrorIs(t, err, mcp.ErrTaskCancelled)

	// CallTool, given up on.
	callCtx, giveUp := context.WithCancel(ctx)
	called := make(chan error, 1)
	go func() {
		_, err := c.CallTool(callCtx, "slow", nil, nil)
		called <- err
	}()
	recv(t, g.started)
	for len(store.reads) > 0 {
		<-store.reads
	}
	recv(t, store.reads) // the client polls: it has the task
	giveUp()
	assert.ErrorIs(t, recv(t, called), context.Canceled)
	assert.ErrorIs(t, recv(t, g.stopped), context.Canceled, "the client cancelled the task")
}

// readStore tells each Get, by task id.
type readStore struct {
	mcp.TaskStore
	reads chan string
}

func (s *readStore) Get(ctx context.Context, id string) (*mcp.TaskRecord, error) {
	select {
	case s.reads <- id:
	default:
	}
	return s.TaskStore.Get(ctx, id)
}

// TestTasks_input runs a task whose work asks for input: the task waits
// in input_required with every outstanding request, tasks/update may
// answer them one at a time (answers to other keys are ignored), and the
// work goes on with the answers when the last one came. A key the work asks
// again gets a new name on the wire.
func TestTasks_input(t *testing.T) {
	t.Parallel()
	s := taskServer(t, nil)
	form := func(msg string) mcp.InputRequest {
		return mcp.ElicitInput(&mcp.ElicitParams{Message: msg, RequestedSchema: json.RawMessage(`{"type":"object"}`)})
	}
	rounds := make(chan map[string]json.RawMessage, 8)
	slowTool(s, "ask", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		rounds <- req.InputResponses
		switch req.RequestState {
		case "":
			return &mcp.CallToolResult{RequestState: "one", InputRequests: map[string]mcp.InputRequest{"a": form("A?"), "b": form("B?")}}, nil
		case "one":
			return &mcp.CallToolResult{RequestState: "two", InputRequests: map[string]mcp.InputRequest{"a": form("A again?")}}, nil
		}
		a, _ := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "a")
		return textResult("a=" + a.Action), nil
	})
	c := tasksClient(t, s)
	ctx := testCtx(t)

	_, task, err := c.StartTool(ctx, "ask", nil, nil)
	require.NoError(t, err)
	assert.Empty(t, recv(t, rounds))
	waitStatus := func(status mcp.TaskStatus) *mcp.DetailedTask {
		t.Helper()
		var got *mcp.DetailedTask
		require.Eventually(t, func() bool {
			got, err = c.GetTask(ctx, task.TaskID)
			require.NoError(t, err)
			return got.Status == status
		}, wait, 2*time.Millisecond, "the task gets to %s", status)
		return got
	}
	got := waitStatus(mcp.TaskInputRequired)
	assert.ElementsMatch(t, []string{"a", "b"}, keysOf(got.InputRequests))
	assert.Equal(t, mcp.MethodElicitationCreate, got.InputRequests["a"].Method)

	accept := json.RawMessage(`{"action":"accept","content":{}}`)
	require.NoError(t, c.UpdateTask(ctx, task.TaskID, map[string]json.RawMessage{"a": accept, "zzz": accept}))
	got, err = c.GetTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskInputRequired, got.Status, "b is still outstanding")
	assert.Equal(t, []string{"b"}, keysOf(got.InputRequests))
	select {
	case r := <-rounds:
		t.Fatalf("the work went on before every answer came: %v", r)
	default:
	}
	require.NoError(t, c.UpdateTask(ctx, task.TaskID, map[string]json.RawMessage{"b": json.RawMessage(`{"action":"decline"}`)}))
	r := recv(t, rounds)
	assert.ElementsMatch(t, []string{"a", "b"}, keysOf(r), "the work gets the round's answers under its keys")
	assert.NotContains(t, r, "zzz")

	got = waitStatus(mcp.TaskInputRequired)
	assert.Equal(t, []string{"a.2"}, keysOf(got.InputRequests), "a key is never reused on the wire")
	require.NoError(t, c.UpdateTask(ctx, task.TaskID, map[string]json.RawMessage{"a.2": json.RawMessage(`{"action":"cancel"}`)}))
	assert.Equal(t, []string{"a"}, keysOf(recv(t, rounds)), "and the work gets it back under its own")
	res, err := c.AwaitTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "a=cancel", text(res))
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTasks_clientAnswersInput: CallTool answers a task's input requests
// with the client's handlers, each key once however often it sees it, and
// input the client did not declare fails the task with -32021.
func TestTasks_clientAnswersInput(t *testing.T) {
	t.Parallel()
	s := taskServer(t, nil)
	slowTool(s, "greet", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if form, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name"); ok {
			return textResult("Hello, " + form.Content["name"].(string)), nil
		}
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"name": mcp.ElicitInput(&mcp.ElicitParams{
			Message: "Name?", RequestedSchema: json.RawMessage(`{"type":"object"}`)})}}, nil
	})
	slowTool(s, "sample", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"m": mcp.SamplingInput(&mcp.CreateMessageParams{MaxTokens: 1})}}, nil
	})
	var asked atomic.Int32
	opts := &mcp.ClientOptions{Tasks: true, Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		asked.Add(1)
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}}
	c, _ := connectModern(t, s, opts)
	ctx := testCtx(t)

	res, err := c.CallTool(ctx, "greet", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada", text(res))
	assert.Equal(t, int32(1), asked.Load(), "asked once")

	_, err = c.CallTool(ctx, "sample", nil, nil)
	e := rpcError(t, err)
	assert.Equal(t, mcp.CodeMissingClientCapability, e.Code, "the task failed: the client cannot sample")
}

// TestTasks_inputBeforeTheTask: a handler asks for input in the call
// (an InputRequiredResult, no task yet), then runs its work as a task,
// which gets the answers the call came with.
func TestTasks_inputBeforeTheTask(t *testing.T) {
	t.Parallel()
	s := taskServer(t, nil)
	s.AddTool(&mcp.Tool{Name: "greet"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if _, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name"); !ok {
			return &mcp.CallToolResult{RequestState: "s", InputRequests: map[string]mcp.InputRequest{"name": mcp.ElicitInput(&mcp.ElicitParams{
				Message: "Name?", RequestedSchema: json.RawMessage(`{"type":"object"}`)})}}, nil
		}
		return req.RunAsTask(ctx, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			form, _ := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name")
			return textResult("Hello, " + form.Content["name"].(string) + " (" + req.RequestState + ")"), nil
		})
	})
	p, _ := rawPeer(t, s)
	ctx := testCtx(t)
	const caps = `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	var first map[string]json.RawMessage
	require.NoError(t, p.Call(ctx, mcp.MethodToolsCall, modern(t, `{"name":"greet"}`, caps), &first))
	assert.JSONEq(t, `"input_required"`, string(first["resultType"]))
	assert.NotContains(t, first, "taskId")

	c := tasksClient(t, s)
	res, err := c.CallTool(ctx, "greet", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello, Ada (s)", text(res))
}

// ownerKey carries who a session's requests come from in these tests.
type ownerKey struct{}

// TestTasks_belongToTheirOwner: another owner's requests cannot read,
// answer or cancel a task (its id names nothing for them, exactly as an
// unknown one), and the owner's task is unharmed.
func TestTasks_belongToTheirOwner(t *testing.T) {
	t.Parallel()
	s, g := gatedServer(t, &mcp.ServerOptions{Tasks: &mcp.TaskOptions{PollInterval: 10 * time.Millisecond,
		Owner: func(ctx context.Context) string { v, _ := ctx.Value(ownerKey{}).(string); return v }}})
	clientOf := func(owner string) *mcp.Client {
		serverEnd, clientEnd := peer.Pipe(64)
		ss := s.Serve(context.WithValue(context.Background(), ownerKey{}, owner), serverEnd)
		c, err := mcp.ConnectConn(testCtx(t), clientEnd, &mcp.ClientOptions{Tasks: true})
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.NoError(t, c.Close())
			assert.NoError(t, ss.Wait())
		})
		return c
	}
	alice, mallory := clientOf("alice"), clientOf("mallory")
	ctx := testCtx(t)

	task := startSlow(t, alice, g)
	_, unknown := mallory.GetTask(ctx, "00000000-0000-0000-0000-000000000000")
	_, err := mallory.GetTask(ctx, task.TaskID)
	assert.Equal(t, rpcError(t, unknown), rpcError(t, err), "another's task reads as an unknown one")
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, mallory.CancelTask(ctx, task.TaskID)))
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(t, mallory.UpdateTask(ctx, task.TaskID, nil)))

	got, err := alice.GetTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskWorking, got.Status, "not cancelled")
	close(g.release)
	res, err := alice.AwaitTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "done", text(res))
}

// TestTasks_progressIsTheStatusMessage: a task's work reports progress in
// its statusMessage, and sends no log messages.
func TestTasks_progressIsTheStatusMessage(t *testing.T) {
	t.Parallel()
	s := taskServer(t, nil)
	g := newGate()
	slowTool(s, "slow", func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		req.Log(ctx, mcp.LevelEmergency, "l", "not sent")
		require.NoError(t, req.Progress(ctx, 1, 4, ""))
		_, err := req.Elicit(ctx, &mcp.ElicitParams{Message: "?"})
		assert.ErrorIs(t, err, mcp.ErrNoServerRequests, "a task has no request to send the client one on")
		return g.work(ctx, req)
	})
	notes, on := notifications(t)
	opts := &mcp.ClientOptions{Tasks: true, OnNotification: on}
	c, _ := connectModern(t, s, opts)
	ctx := testCtx(t)
	require.NoError(t, c.SetLoggingLevel(ctx, mcp.LevelDebug))

	task := startSlow(t, c, g)
	got, err := c.GetTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "1 of 4", got.StatusMessage)
	close(g.release)
	_, err = c.AwaitTask(ctx, task.TaskID)
	require.NoError(t, err)
	// Anything the work sent came before the answers that followed it, on
	// the one connection.
	for len(notes) > 0 {
		n := <-notes
		assert.Equal(t, mcp.NotificationSubscriptionsAcknowledged, n.method, "a task sent %s", n.method)
	}
}

// TestTasks_limitsAndShutdown: past MaxRunning a task is refused with
// -32603; Shutdown stops the running ones, which fail saying so, and no
// task starts after it.
func TestTasks_limitsAndShutdown(t *testing.T) {
	t.Parallel()
	s, g := gatedServer(t, &mcp.ServerOptions{Tasks: &mcp.TaskOptions{MaxRunning: 1}})
	c := tasksClient(t, s)
	ctx := testCtx(t)

	task := startSlow(t, c, g)
	_, _, err := c.StartTool(ctx, "slow", nil, nil)
	assert.ErrorIs(t, err, mcp.ErrTooManyTasks)

	require.NoError(t, s.Shutdown(ctx))
	assert.ErrorIs(t, recv(t, g.stopped), context.Canceled)
	got, err := c.GetTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskFailed, got.Status)
	require.NotNil(t, got.Error)
	assert.Equal(t, jsonrpc.CodeInternalError, got.Error.Code)
	assert.Contains(t, got.Error.Message, "server stopped")
	_, _, err = c.StartTool(ctx, "slow", nil, nil)
	assert.Equal(t, jsonrpc.CodeInternalError, rpcCode(t, err), "no task starts after Shutdown")
}

// TestTasks_aClientThatDidNotAsk: an answer with a task to a client that
// did not declare the extension is no valid answer.
func TestTasks_aClientThatDidNotAsk(t *testing.T) {
	t.Parallel()
	// A server that answers with a task regardless: a bare peer on the
	// other end of the client's pipe.
	serverEnd, clientEnd := peer.Pipe(64)
	rogue := peer.New(serverEnd, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		switch req.Method {
		case mcp.MethodServerDiscover:
			return &mcp.DiscoverResult{SupportedVersions: []string{mcp.ModernVersion}, ResultType: mcp.ResultComplete}, nil
		case mcp.MethodToolsCall:
			return json.RawMessage(`{"resultType":"task","taskId":"t","status":"working","createdAt":"2026-01-01T00:00:00Z",` +
				`"lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":null}`), nil
		}
		return nil, nil
	})})
	rogue.Start(context.Background())
	defer rogue.Close()
	c, err := mcp.ConnectConn(testCtx(t), clientEnd, &mcp.ClientOptions{ProtocolVersion: mcp.ModernVersion})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CallTool(testCtx(t), "rogue", nil, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "answered with a task")
}

// TestTasks_overStreamableHTTP follows a task over stateless HTTP
// requests: each one's session ends with its answer, the task goes on,
// and the task methods carry the task id in Mcp-Name.
func TestTasks_overStreamableHTTP(t *testing.T) {
	t.Parallel()
	s, g := gatedServer(t, nil)
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Stateless: func(r *http.Request, sess *mcp.StreamSession) error {
			s.Serve(sess.Context(), sess.Conn())
			return nil
		},
	})
	var mu sync.Mutex
	names := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		names[r.Header.Get(mcp.HeaderMethod)] = append(names[r.Header.Get(mcp.HeaderMethod)], r.Header.Get(mcp.HeaderName))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	opts := &mcp.ClientOptions{Tasks: true}
	opts.HTTP.HTTPClient = srv.Client()
	c, err := mcp.Connect(testCtx(t), srv.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := testCtx(t)

	task := startSlow(t, c, g)
	close(g.release)
	res, err := c.AwaitTask(ctx, task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "done", text(res))
	require.NoError(t, c.CancelTask(ctx, task.TaskID))
	mu.Lock()
	defer mu.Unlock()
	for _, method := range []string{mcp.MethodTasksGet, mcp.MethodTasksCancel} {
		require.NotEmpty(t, names[method], method)
		for _, name := range names[method] {
			assert.Equal(t, task.TaskID, name, "%s mirrors its task id in %s", method, mcp.HeaderName)
		}
	}
}

// TestNameMember: the member each method's Mcp-Name header mirrors.
func TestNameMember(t *testing.T) {
	t.Parallel()
	for method, want := range map[string]string{
		mcp.MethodToolsCall: "name", mcp.MethodPromptsGet: "name", mcp.MethodResourcesRead: "uri",
		mcp.MethodTasksGet: "taskId", mcp.MethodTasksUpdate: "taskId", mcp.MethodTasksCancel: "taskId",
		mcp.MethodToolsList: "", mcp.MethodServerDiscover: "",
	} {
		assert.Equal(t, want, mcp.NameMember(method), method)
	}
}

// TestTasks_listenForTasks: a listen stream that asks for a task's
// notifications without declaring the extension is -32021, as the
// extension says; one that declares it is acknowledged without them (the
// Server sends none: clients poll) and, asking for nothing else, ends.
func TestTasks_listenForTasks(t *testing.T) {
	t.Parallel()
	s, _ := gatedServer(t, nil)
	p, notes := rawPeer(t, s)
	ctx := testCtx(t)
	params := `{"notifications":{"taskIds":["x"]}}`
	err := p.Call(ctx, mcp.MethodSubscriptionsListen, modern(t, params, `{}`), nil)
	assert.Equal(t, mcp.CodeMissingClientCapability, rpcCode(t, err))

	var res map[string]json.RawMessage
	require.NoError(t, p.Call(ctx, mcp.MethodSubscriptionsListen, modern(t, params, `{"extensions":{"`+mcp.ExtensionTasks+`":{}}}`), &res))
	assert.JSONEq(t, `"complete"`, string(res["resultType"]))
	n := recv(t, notes)
	require.Equal(t, mcp.NotificationSubscriptionsAcknowledged, n.method)
	var ack mcp.AcknowledgedParams
	require.NoError(t, json.Unmarshal(n.params, &ack))
	assert.Empty(t, ack.Notifications.TaskIDs)
}
