package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// A Client's side of the tasks extension: a client with
// ClientOptions.Tasks declares it in every request of 2026-07-28, and
// follows the tasks a server answers its tool calls with.

// ErrTaskCancelled is what AwaitTask returns for a task that ended
// cancelled.
var ErrTaskCancelled = errors.New("mcp: the task was cancelled")

// Bounds of the interval at which AwaitTask polls tasks/get: the server's
// pollIntervalMs within them, defaultTaskPoll when it suggests none.
const (
	minTaskPoll     = 10 * time.Millisecond
	maxTaskPoll     = 30 * time.Second
	defaultTaskPoll = time.Second
)

// toolAnswer reads a tools/call answer: a result, or a task for a client
// that declared the extension (to any other it is no valid answer).
func (c *Client) toolAnswer(answer json.RawMessage) (*CallToolResult, *Task, error) {
	if ResultTypeOf(answer) == ResultTask {
		if !c.opts.Tasks {
			return nil, nil, fmt.Errorf("mcp: %s: the server answered with a task, which this client did not declare it follows", MethodToolsCall)
		}
		var created CreateTaskResult
		if err := json.Unmarshal(answer, &created); err != nil || created.TaskID == "" {
			return nil, nil, fmt.Errorf("mcp: %s: the server answered with a task without a taskId", MethodToolsCall)
		}
		return nil, &created.Task, nil
	}
	var res CallToolResult
	if err := json.Unmarshal(answer, &res); err != nil {
		return nil, nil, fmt.Errorf("mcp: decoding the result of %s into %T: %w", MethodToolsCall, &res, err)
	}
	return &res, nil, nil
}

// followTask follows a task CallTool started, and cancels it when the
// client gives up on it first: ctx ended, or the client could not answer
// its input requests.
func (c *Client) followTask(ctx context.Context, id string) (*CallToolResult, error) {
	res, ended, err := c.await(ctx, id)
	if err != nil && !ended {
		cancelCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.CancelTask(cancelCtx, id)
	}
	return res, err
}

// AwaitTask follows the task of a tool call until it ends: it polls
// tasks/get as often as the server suggests, answers the task's input
// requests with the client's handlers (Sampling, Elicitation, Roots) by
// tasks/update, each once, and returns the tool's result (completed), the
// JSON-RPC error it failed with (a *jsonrpc.Error), or ErrTaskCancelled.
// When ctx ends first it returns ctx's error and leaves the task as it is
// (CancelTask ends it). Any client of the task's owner may await it, not
// only the one that started it.
func (c *Client) AwaitTask(ctx context.Context, id string) (*CallToolResult, error) {
	res, _, err := c.await(ctx, id)
	return res, err
}

// await follows a task; ended reports whether err is how the task ended.
func (c *Client) await(ctx context.Context, id string) (res *CallToolResult, ended bool, err error) {
	answered := map[string]bool{}
	for {
		t, err := c.GetTask(ctx, id)
		if err != nil {
			return nil, false, err
		}
		switch t.Status {
		case TaskCompleted:
			var res CallToolResult
			if err := json.Unmarshal(t.Result, &res); err != nil {
				return nil, true, fmt.Errorf("mcp: decoding the result of task %s: %w", id, err)
			}
			return &res, true, nil
		case TaskFailed:
			if t.Error == nil {
				return nil, true, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task failed: %s", t.StatusMessage)
			}
			return nil, true, t.Error.Err()
		case TaskCancelled:
			return nil, true, ErrTaskCancelled
		case TaskInputRequired:
			asked, err := c.answerTask(ctx, id, t.InputRequests, answered)
			if err != nil {
				return nil, false, err
			}
			if asked {
				continue // answered: see where the task stands now
			}
		}
		if err := sleepCtx(ctx, pollInterval(t.PollIntervalMs)); err != nil {
			return nil, false, err
		}
	}
}

// answerTask answers the input requests of a task that were not answered
// yet, and reports whether there were any: the extension has the client
// answer each key once, however often it sees it.
func (c *Client) answerTask(ctx context.Context, id string, requests map[string]InputRequest, answered map[string]bool) (bool, error) {
	pending := make(map[string]InputRequest, len(requests))
	for key, ir := range requests {
		if !answered[key] {
			pending[key] = ir
		}
	}
	if len(pending) == 0 {
		return false, nil
	}
	responses, err := c.fulfil(ctx, pending)
	if err != nil {
		return false, err
	}
	if err := c.UpdateTask(ctx, id, responses); err != nil {
		return false, err
	}
	for key := range pending {
		answered[key] = true
	}
	return true, nil
}

// pollInterval is the wait between two polls of a task whose server
// suggested ms milliseconds.
func pollInterval(ms int64) time.Duration {
	if ms <= 0 {
		return defaultTaskPoll
	}
	return min(max(time.Duration(ms)*time.Millisecond, minTaskPoll), maxTaskPoll)
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// GetTask asks where a task stands (tasks/get).
func (c *Client) GetTask(ctx context.Context, id string) (*DetailedTask, error) {
	var res GetTaskResult
	if err := c.taskCall(ctx, MethodTasksGet, &TaskParams{TaskID: id}, &res); err != nil {
		return nil, err
	}
	return &res.DetailedTask, nil
}

// UpdateTask answers a task's input requests (tasks/update), by the keys
// of its inputRequests.
func (c *Client) UpdateTask(ctx context.Context, id string, responses map[string]json.RawMessage) error {
	if responses == nil {
		responses = map[string]json.RawMessage{}
	}
	return c.taskCall(ctx, MethodTasksUpdate, &UpdateTaskParams{TaskID: id, InputResponses: responses}, nil)
}

// CancelTask asks the server to cancel a task (tasks/cancel). The server
// acknowledges it whether or not the task had ended.
func (c *Client) CancelTask(ctx context.Context, id string) error {
	return c.taskCall(ctx, MethodTasksCancel, &TaskParams{TaskID: id}, nil)
}

// taskCall sends a request of the extension, which only protocol version
// 2026-07-28 has.
func (c *Client) taskCall(ctx context.Context, method string, params, result any) error {
	if !c.modern {
		return fmt.Errorf("mcp: %s needs protocol version %s; this client speaks a session", method, ModernVersion)
	}
	return c.call(ctx, method, params, result)
}
