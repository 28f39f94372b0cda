package hub

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// taskServer is a server of 2026-07-28 that speaks the tasks extension
// (pkg/mcp's): "build" runs as a task for a client that can follow one and
// in the call for any other; "report" only runs as a task (-32021 to any
// other client); "ask" asks its client to confirm, in its task.
func taskServer(release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "tasker", Version: "1"}, &mcp.ServerOptions{
		ProtocolVersions: []string{mcp.ModernVersion},
		Tasks:            &mcp.TaskOptions{PollInterval: 20 * time.Millisecond},
	})
	work := func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("built")}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "build", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return req.RunAsTask(ctx, work)
		})
	s.AddTool(&mcp.Tool{Name: "report", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if !req.CanRunTask() {
				return nil, mcp.ErrMissingExtension(mcp.ExtensionTasks)
			}
			return req.RunAsTask(ctx, work)
		})
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if !req.CanRunTask() {
				return nil, mcp.ErrMissingExtension(mcp.ExtensionTasks)
			}
			return req.RunAsTask(ctx, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
				if res, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "ok"); ok {
					return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("answer: " + res.Action)}}, nil
				}
				return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{"ok": mcp.ElicitInput(&mcp.ElicitParams{
					Message: "Go on?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{}}`)})}}, nil
			})
		})
	return s
}

// tasksClient connects a modern client that follows tasks.
func (th *testHub) tasksClient(path string, opts *mcp.ClientOptions) *mcp.Client {
	th.t.Helper()
	o := mcp.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	o.Tasks = true
	o.ProtocolVersion = mcp.ModernVersion
	c, err := mcp.Connect(ctxFor(th.t), th.wsURL(path), &o)
	require.NoError(th.t, err)
	th.t.Cleanup(func() { c.Close() })
	return c
}

func TestTasks_passThrough(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	release := make(chan struct{})
	s := taskServer(release)
	th.runServer(s, "tasker")
	t.Cleanup(func() { shutdownServer(t, s) })

	c := th.tasksClient("/mcp", nil)
	res, task, err := c.StartTool(ctxFor(t), "tasker__build", map[string]any{}, nil)
	require.NoError(t, err)
	require.Nil(t, res)
	require.NotNil(t, task, "the server's task reaches the client")
	assert.Len(t, task.TaskID, 22, "under an id of the hub's")

	got, err := c.GetTask(ctxFor(t), task.TaskID)
	require.NoError(t, err, "tasks/get at once")
	assert.Equal(t, mcp.TaskWorking, got.Status)
	assert.Equal(t, task.TaskID, got.TaskID)

	close(release)
	final, err := c.AwaitTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "built", final.Content[0].Text)

	// A session's client, which cannot declare the extension, calls a tool
	// the server only runs as a task: the hub awaits the task for it.
	legacy := th.client(nil)
	out, err := legacy.CallTool(ctxFor(t), "tasker__report", map[string]any{}, nil)
	require.NoError(t, err, "a session's client calls a task-only tool")
	assert.Equal(t, "built", out.Content[0].Text)
	// A modern client that could declare it and did not is told so
	// (-32021), as the extension says.
	modern, err := mcp.Connect(ctxFor(t), th.wsURL("/mcp"), &mcp.ClientOptions{ProtocolVersion: mcp.ModernVersion})
	require.NoError(t, err)
	defer modern.Close()
	_, err = modern.CallTool(ctxFor(t), "tasker__report", map[string]any{}, nil)
	assert.Equal(t, mcp.CodeMissingClientCapability, rpcCode(err), "%v", err)
}

func TestTasks_legacyClientAnswersTheTasksInput(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := taskServer(nil)
	th.runServer(s, "tasker")
	t.Cleanup(func() { shutdownServer(t, s) })
	legacy := th.client(&mcp.ClientOptions{Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
	}})
	out, err := legacy.CallTool(ctxFor(t), "tasker__ask", map[string]any{}, nil)
	require.NoError(t, err)
	assert.Equal(t, "answer: accept", out.Content[0].Text)
}

// slowServer is a server of both eras (the hub speaks 2026-07-28 to it),
// without the extension: "slow" reports progress and answers when
// released.
func slowServer(release <-chan struct{}, started chan<- struct{}) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "slow", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if started != nil {
				started <- struct{}{}
			}
			_ = req.Progress(ctx, 1, 2, "halfway")
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("slow and done")}}, nil
		})
	return s
}

func TestTasks_heldTask(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 50 * time.Millisecond, TaskPollInterval: 20 * time.Millisecond})
	release := make(chan struct{})
	th.runServer(slowServer(release, nil), "slow")

	c := th.tasksClient("/mcp", nil)
	res, task, err := c.StartTool(ctxFor(t), "slow__slow", map[string]any{}, nil)
	require.NoError(t, err)
	require.Nil(t, res)
	require.NotNil(t, task, "the long call became a task")
	require.Eventually(t, func() bool {
		got, err := c.GetTask(ctxFor(t), task.TaskID)
		return err == nil && got.StatusMessage == "halfway"
	}, wait, 5*time.Millisecond, "progress shows as the status")
	assert.Equal(t, 1.0, scrape(t, th, "switchboard_tasks_held"))
	close(release)
	final, err := c.AwaitTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "slow and done", final.Content[0].Text)
	again, err := c.GetTask(ctxFor(t), task.TaskID)
	require.NoError(t, err, "the result is kept")
	assert.Equal(t, mcp.TaskCompleted, again.Status)
	// The record is written before the holder lets the call go.
	assert.Eventually(t, func() bool { return scrape(t, th, "switchboard_tasks_held") == 0 }, wait, 5*time.Millisecond, "the call ended")
	assert.Equal(t, 1.0, scrape(t, th, "switchboard_task_records"), "its record is kept")

	// A client that did not negotiate tasks never sees one.
	modern, err := mcp.Connect(ctxFor(t), th.wsURL("/mcp"), &mcp.ClientOptions{ProtocolVersion: mcp.ModernVersion})
	require.NoError(t, err)
	defer modern.Close()
	out, err := modern.CallTool(ctxFor(t), "slow__slow", map[string]any{}, nil)
	require.NoError(t, err)
	assert.Equal(t, "slow and done", out.Content[0].Text)
}

// TestTasks_heldTaskOfAModernServer: a call to a server of 2026-07-28
// only, without the extension, that outlasts TaskAfter is a task the hub
// holds, as for any server without it: tasks/get reads it, tasks/cancel
// cancels it at the hub. (The hub took its own CreateTaskResult, in the
// call's place, for the server's task, recorded it as the server's, and
// sent tasks/get and tasks/cancel to a server that has no such methods.)
func TestTasks_heldTaskOfAModernServer(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 20 * time.Millisecond})
	s := mcp.NewServer(mcp.Implementation{Name: "slow", Version: "1"}, &mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}})
	s.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	th.runServer(s, "slow")
	c := th.tasksClient("/mcp", nil)
	task := startTask(t, c, "slow__slow", map[string]any{})
	got, err := c.GetTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskWorking, got.Status)
	require.NoError(t, c.CancelTask(ctxFor(t), task.TaskID))
	got, err = c.GetTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskCancelled, got.Status)
}

func TestTasks_heldTaskCancelled(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 20 * time.Millisecond})
	started := make(chan struct{}, 1)
	th.runServer(slowServer(nil, started), "slow")
	c := th.tasksClient("/mcp", nil)
	task := startTask(t, c, "slow__slow", map[string]any{})
	require.NoError(t, c.CancelTask(ctxFor(t), task.TaskID))
	got, err := c.GetTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskCancelled, got.Status)
	_, err = c.AwaitTask(ctxFor(t), task.TaskID)
	assert.ErrorIs(t, err, mcp.ErrTaskCancelled)
}

func TestTasks_unknownIDs(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	c := th.tasksClient("/mcp", nil)
	for _, id := range []string{"nope", strings.Repeat("A", 22), strings.Repeat("x", 5000)} {
		_, err := c.GetTask(ctxFor(t), id)
		var rpc *jsonrpc.Error
		require.True(t, errors.As(err, &rpc), "%v", err)
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpc.Code)
	}
}

// startTask calls tool with args and returns the task it was answered
// with.
func startTask(t *testing.T, c *mcp.Client, tool string, args any) *mcp.Task {
	t.Helper()
	_, task, err := c.StartTool(ctxFor(t), tool, args, nil)
	require.NoError(t, err)
	require.NotNil(t, task, "%s answered with a task", tool)
	return task
}

// shutdownServer stops a server's tasks, which outlive their requests.
func shutdownServer(t *testing.T, s *mcp.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	assert.NoError(t, s.Shutdown(ctx))
}
