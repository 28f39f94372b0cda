package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The tools of the tasks-* scenarios (the tasks extension, SEP-2663). Each
// decides per request, as the extension has a server do: those that may
// run long run as a task for a client that declared the extension
// (ToolRequest.RunAsTask) and in the call for any other; those that need a
// task answer a client that cannot follow one with -32021. A session's
// client never gets a task.

// taskPollInterval is the pollIntervalMs the fixture suggests: the suite
// polls every 200 ms whatever it says.
const taskPollInterval = 100 * time.Millisecond

// withTasks returns opts with the tasks extension on (the fixture's
// defaults when opts has no TaskOptions of its own).
func withTasks(opts *mcp.ServerOptions) *mcp.ServerOptions {
	var o mcp.ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.Tasks == nil {
		o.Tasks = &mcp.TaskOptions{PollInterval: taskPollInterval}
	}
	return &o
}

// requireTask answers a client that cannot follow a task with -32021
// naming the extension, before anything else: for tools that only run as
// tasks.
func requireTask(h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if !req.CanRunTask() {
			return nil, mcp.ErrMissingExtension(mcp.ExtensionTasks)
		}
		return h(ctx, req)
	}
}

// asTask runs work as a task when the request can have one.
func asTask(work mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return req.RunAsTask(ctx, work)
	}
}

func schema(properties string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if len(required) == 0 {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + properties + `},"required":` + string(req) + `}`)
}

func addTaskTools(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Greets at once, never as a task",
		InputSchema: schema(`"name":{"type":"string"}`, "name")},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return text("Hello, " + args.Name + "!"), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow_compute", Description: "Computes for the given seconds: as a task for a client that can follow one",
		InputSchema: schema(`"seconds":{"type":"number","minimum":0},"label":{"type":"string"}`, "seconds")},
		asTask(func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Seconds float64 `json:"seconds"`
				Label   string  `json:"label"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if err := sleep(ctx, time.Duration(args.Seconds*float64(time.Second))); err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("Computed %q in %g s.", args.Label, args.Seconds)), nil
		}))
	s.AddTool(&mcp.Tool{Name: "failing_job", Description: "Runs only as a task, which ends with a tool error",
		InputSchema: schema(``)},
		requireTask(asTask(func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("The job failed, as it always does.")}, IsError: true}, nil
		})))
	s.AddTool(&mcp.Tool{Name: "protocol_error_job", Description: "Ends with a JSON-RPC error: as a task, the task fails",
		InputSchema: schema(``)},
		asTask(func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "protocol_error_job failed on purpose")
		}))
	s.AddTool(&mcp.Tool{Name: "confirm_delete", Description: "Asks the user to confirm (key confirm) before it deletes the file",
		InputSchema: schema(`"filename":{"type":"string"}`, "filename")},
		asTask(func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Filename string `json:"filename"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if form, ok := accepted(req.InputResponses, "confirm"); ok {
				if yes, _ := form["confirm"].(bool); yes {
					return text("Deleted " + args.Filename + "."), nil
				}
			}
			if res, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "confirm"); ok {
				return text(fmt.Sprintf("Kept %s (%s).", args.Filename, res.Action)), nil
			}
			return ask(map[string]mcp.InputRequest{"confirm": formOf("Delete "+args.Filename+"?", "confirm", "boolean")}, "")
		}))
	s.AddTool(&mcp.Tool{Name: "multi_input", Description: "Asks for two inputs at once (keys first and second)",
		InputSchema: schema(``)},
		asTask(func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			first, ok1 := accepted(req.InputResponses, "first")
			second, ok2 := accepted(req.InputResponses, "second")
			if ok1 && ok2 {
				return text(fmt.Sprintf("Got %v and %v.", first["name"], second["name"])), nil
			}
			return ask(map[string]mcp.InputRequest{
				"first":  formOf("First input", "name", "string"),
				"second": formOf("Second input", "name", "string"),
			}, "")
		}))
	s.AddTool(&mcp.Tool{Name: "test_tool_with_task", Description: "Asks the user's name in the call (key user_name), then greets them in a task",
		InputSchema: schema(``)},
		requireTask(func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			form, ok := accepted(req.InputResponses, "user_name")
			name, _ := form["name"].(string)
			if !ok || name == "" {
				return ask(map[string]mcp.InputRequest{"user_name": formOf("What is your name?", "name", "string")}, "")
			}
			return req.RunAsTask(ctx, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
				return text("Hello, " + name + ", from a task!"), nil
			})
		}))
}
