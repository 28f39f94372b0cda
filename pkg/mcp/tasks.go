package mcp

import (
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) of protocol
// version 2026-07-28. A client declares it in a request's
// _meta["io.modelcontextprotocol/clientCapabilities"].extensions; a server
// declares it in its server/discover capabilities. To such a request a
// server may answer tools/call with a CreateTaskResult (resultType "task"):
// a handle the client follows with tasks/get until the task ends, answering
// its input requests with tasks/update, or ends it with tasks/cancel. A
// server decides per request; it never answers a request that did not
// declare the extension with a task, and answers tasks/get, tasks/update
// and tasks/cancel from such a request with -32021.

// ExtensionTasks is the tasks extension's identifier.
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// Methods and notifications of the tasks extension.
const (
	MethodTasksGet    = "tasks/get"
	MethodTasksUpdate = "tasks/update"
	MethodTasksCancel = "tasks/cancel"
	// NotificationTasks carries a task's state (a DetailedTask) on a
	// subscriptions/listen stream that asked for the task's id.
	NotificationTasks = "notifications/tasks"
)

// ResultTask is the resultType of a CreateTaskResult.
const ResultTask = "task"

// MetaRelatedTask is the _meta key by which the tasks of 2025-11-25 tied a
// message to its task. The extension has no use for it (every task message
// carries taskId) and says it must not appear in a task's inlined result:
// the Server removes it from the results it keeps.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"

// TaskStatus is where a task stands.
type TaskStatus string

// The statuses of a task. A task starts working, may wait for input and go
// back to working any number of times, and ends completed, failed or
// cancelled.
const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	// TaskCompleted: the request's result is in DetailedTask.Result, a
	// tool's error (isError) included.
	TaskCompleted TaskStatus = "completed"
	// TaskFailed: the request ended with a JSON-RPC error, in
	// DetailedTask.Error.
	TaskFailed    TaskStatus = "failed"
	TaskCancelled TaskStatus = "cancelled"
)

// Terminal reports whether a task in status s has ended.
func (s TaskStatus) Terminal() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// Task is what every message about a task says of it.
type Task struct {
	TaskID string     `json:"taskId"`
	Status TaskStatus `json:"status"`
	// StatusMessage says more of the status: progress while working, why
	// it failed or was cancelled.
	StatusMessage string `json:"statusMessage,omitempty"`
	// CreatedAt and LastUpdatedAt are ISO 8601 times (RFC 3339, UTC).
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is how long after its creation the task may be discarded, in
	// milliseconds; nil for never.
	TTLMs *int64 `json:"ttlMs"`
	// PollIntervalMs is how often the server suggests polling tasks/get,
	// in milliseconds; 0 when it suggests nothing.
	PollIntervalMs int64 `json:"pollIntervalMs,omitempty"`
}

// DetailedTask is a task with what its status carries: the outstanding
// input requests (input_required), the result (completed) or the error
// (failed). tasks/get answers it, and notifications/tasks carries it.
type DetailedTask struct {
	Task
	InputRequests map[string]InputRequest `json:"inputRequests,omitempty"`
	Result        json.RawMessage         `json:"result,omitempty"`
	Error         *TaskError              `json:"error,omitempty"`
}

// TaskError is the JSON-RPC error a failed task ended with.
type TaskError struct {
	Code    jsonrpc.Code    `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Err returns the error as a *jsonrpc.Error, keeping its code.
func (e *TaskError) Err() *jsonrpc.Error {
	return &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: e.Data}
}

// taskErrorOf returns err's JSON-RPC form as jsonrpc.ErrorOf maps it: its
// own code when it has one, else a bare -32603 (its text may hold what a
// peer must not see).
func taskErrorOf(err error) *TaskError {
	rpc := jsonrpc.ErrorOf(err)
	return &TaskError{Code: rpc.Code, Message: rpc.Message, Data: rpc.Data}
}

// CreateTaskResult answers a request with a task instead of its result
// (resultType "task"): the task's first state, flat.
type CreateTaskResult struct {
	ResultType string `json:"resultType"`
	Task
	Meta Meta `json:"_meta,omitempty"`
}

// GetTaskResult answers tasks/get (resultType "complete").
type GetTaskResult struct {
	ResultType string `json:"resultType"`
	DetailedTask
	Meta Meta `json:"_meta,omitempty"`
}

// TaskParams name the task of tasks/get and tasks/cancel.
type TaskParams struct {
	TaskID string `json:"taskId"`
	Meta   Meta   `json:"_meta,omitempty"`
}

// UpdateTaskParams answer a task's input requests (tasks/update), by the
// keys of its inputRequests.
type UpdateTaskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	Meta           Meta                       `json:"_meta,omitempty"`
}

// TaskStatusParams are the params of notifications/tasks.
type TaskStatusParams struct {
	DetailedTask
	Meta Meta `json:"_meta,omitempty"`
}

// ErrMissingExtension is -32021 for a request that needs an extension its
// client did not declare, naming it as the extension says:
// data.requiredCapabilities.extensions[id].
func ErrMissingExtension(id string) *jsonrpc.Error {
	return (&jsonrpc.Error{Code: CodeMissingClientCapability,
		Message: "Missing required client capability: extension " + id}).
		WithData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{id: map[string]any{}}}})
}

// ErrTaskNotFound is -32602 for a task id that names no task the requester
// may see: unknown, expired, or another's. The three read alike, so that an
// id says nothing of tasks that are not the requester's.
var ErrTaskNotFound = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Task not found"}

// taskTime formats t as the extension's ISO 8601 times.
func taskTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
