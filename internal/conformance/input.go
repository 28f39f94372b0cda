package conformance

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The tools of the 2026-07-28 scenarios: stateless servers (SEP-2575) and
// input requests (SEP-2322). The input tools are written as a stateless
// server must write them: whatever a later round needs travels in the
// request's requestState, sealed with an HMAC so that a client cannot
// forge or alter it, and the server remembers nothing between rounds.

// sealer signs and checks request states with a key of its own.
type sealer struct{ key []byte }

func newSealer() *sealer {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &sealer{key: key}
}

// state is what a round hands the next: which tool it is for (a state is
// good for that tool only), the round, and what was learned.
type state struct {
	Tool  string `json:"tool"`
	Round int    `json:"round"`
	Name  string `json:"name,omitempty"`
}

// seal returns st as a request state: its JSON, then its HMAC, both in
// base64url.
func (s *sealer) seal(st state) string {
	payload, _ := json.Marshal(st)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

func (s *sealer) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	return m.Sum(nil)
}

// open checks a request state and returns what it holds: -32602 for one
// this server did not seal for tool.
func (s *sealer) open(raw, tool string) (state, error) {
	var st state
	payload64, mac64, ok := strings.Cut(raw, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(payload64)
	mac, err2 := base64.RawURLEncoding.DecodeString(mac64)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(payload)) ||
		json.Unmarshal(payload, &st) != nil || st.Tool != tool {
		return state{}, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "requestState integrity check failed")
	}
	return st, nil
}

// accepted returns the form an elicitation answer under key accepted.
func accepted(responses map[string]json.RawMessage, key string) (map[string]any, bool) {
	res, ok := mcp.InputResponse[mcp.ElicitResult](responses, key)
	if !ok || res.Action != "accept" || res.Content == nil {
		return nil, false
	}
	return res.Content, true
}

// formOf is an elicitation of one property of type typ.
func formOf(message, property, typ string) mcp.InputRequest {
	return mcp.ElicitInput(&mcp.ElicitParams{Message: message, RequestedSchema: json.RawMessage(
		fmt.Sprintf(`{"type":"object","properties":{%q:{"type":%q}},"required":[%q]}`, property, typ, property))})
}

func sampling(prompt string, maxTokens int) mcp.InputRequest {
	return mcp.SamplingInput(&mcp.CreateMessageParams{
		Messages:  []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent(prompt)}},
		MaxTokens: maxTokens,
	})
}

func ask(requests map[string]mcp.InputRequest, st string) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{InputRequests: requests, RequestState: st}, nil
}

// addStatelessTools adds the tools of the server-stateless scenario.
func addStatelessTools(s *mcp.Server) {
	s.AddTool(noArgs("test_missing_capability", "Needs the client's sampling capability: "+
		"without it the answer is -32021 naming it (SEP-2575)"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if req.ClientCapabilities().Sampling == nil {
				return nil, mcp.ErrMissingCapability("sampling")
			}
			return text("The client declared the sampling capability."), nil
		})
	s.AddTool(noArgs("test_streaming_elicitation", "Answers on its request's stream with no request of its own (SEP-2575)"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return text("The stream carried this result and nothing else."), nil
		})
	s.AddTool(noArgs("test_logging_tool", "Logs at info: a client of 2026-07-28 hears of it only when its request's "+
		"_meta asks for a log level that admits it"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			req.Log(ctx, mcp.LevelInfo, "conformance-fixture", "test_logging_tool executed")
			return text("Logged at info, for those who asked."), nil
		})
	// The triggers change their list every time, adding a transient item
	// or removing it again: a server may send list_changed for a list that
	// did not change, but a hub in front of it only passes on a real change.
	var mu sync.Mutex // one trigger at a time
	transientTool, transientPrompt := false, false
	s.AddTool(noArgs("test_trigger_tool_change", "Adds or removes a transient tool, which sends notifications/tools/list_changed "+
		"to every subscriptions/listen stream that asked for it"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if transientTool = !transientTool; !transientTool {
				s.RemoveTool("test_transient_tool")
			} else {
				s.AddTool(noArgs("test_transient_tool", "A tool test_trigger_tool_change adds and removes"),
					func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
						return text("transient"), nil
					})
			}
			return text("tools/list_changed sent"), nil
		})
	s.AddTool(noArgs("test_trigger_prompt_change", "Adds or removes a transient prompt, which sends notifications/prompts/list_changed "+
		"to every subscriptions/listen stream that asked for it"),
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if transientPrompt = !transientPrompt; !transientPrompt {
				s.RemovePrompt("test_transient_prompt")
			} else {
				s.AddPrompt(&mcp.Prompt{Name: "test_transient_prompt", Description: "A prompt test_trigger_prompt_change adds and removes"},
					func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
						return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("transient")}}}, nil
					})
			}
			return text("prompts/list_changed sent"), nil
		})
}

// addInputTools adds the tools, and the prompt, of the
// input-required-result scenarios (SEP-2322).
func addInputTools(s *mcp.Server, seal *sealer) {
	tool := func(name, description string, h mcp.ToolHandler) {
		s.AddTool(noArgs(name, description), h)
	}
	tool("test_input_required_result_elicitation", "Asks the user's name (key user_name), then greets them",
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if form, ok := accepted(req.InputResponses, "user_name"); ok {
				if name, _ := form["name"].(string); name != "" {
					return text("Hello, " + name + "!"), nil
				}
			}
			return ask(map[string]mcp.InputRequest{"user_name": formOf("What is your name?", "name", "string")}, "")
		})
	tool("test_input_required_result_sampling", "Asks the client's model a question (key capital_question)",
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if res, ok := mcp.InputResponse[mcp.CreateMessageResult](req.InputResponses, "capital_question"); ok {
				return text("The model said: " + res.Content.Text), nil
			}
			return ask(map[string]mcp.InputRequest{"capital_question": sampling("What is the capital of France?", 100)}, "")
		})
	tool("test_input_required_result_list_roots", "Asks the client's roots (key client_roots)",
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if res, ok := mcp.InputResponse[mcp.ListRootsResult](req.InputResponses, "client_roots"); ok {
				return text(fmt.Sprintf("The client has %d root(s).", len(res.Roots))), nil
			}
			return ask(map[string]mcp.InputRequest{"client_roots": mcp.RootsInput()}, "")
		})
	confirm := func(name string) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if req.RequestState != "" {
				if _, err := seal.open(req.RequestState, name); err != nil {
					return nil, err
				}
				if _, ok := accepted(req.InputResponses, "confirm"); ok {
					return text("state-ok: the request state came back intact, and the confirmation with it."), nil
				}
			}
			return ask(map[string]mcp.InputRequest{"confirm": formOf("Please confirm", "ok", "boolean")},
				seal.seal(state{Tool: name, Round: 1}))
		}
	}
	tool("test_input_required_result_request_state", "Asks for a confirmation (key confirm) with a sealed request state",
		confirm("test_input_required_result_request_state"))
	tool("test_input_required_result_tampered_state", "As test_input_required_result_request_state: "+
		"a request state that fails its HMAC is -32602", confirm("test_input_required_result_tampered_state"))

	const multiple = "test_input_required_result_multiple_inputs"
	tool(multiple, "Asks for three inputs at once: user_name (elicitation), greeting (sampling), client_roots (roots)",
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if req.RequestState != "" {
				if _, err := seal.open(req.RequestState, multiple); err != nil {
					return nil, err
				}
				form, named := accepted(req.InputResponses, "user_name")
				greeting, greeted := mcp.InputResponse[mcp.CreateMessageResult](req.InputResponses, "greeting")
				roots, rooted := mcp.InputResponse[mcp.ListRootsResult](req.InputResponses, "client_roots")
				if named && greeted && rooted {
					return text(fmt.Sprintf("%s %v, with %d root(s).", greeting.Content.Text, form["name"], len(roots.Roots))), nil
				}
			}
			return ask(map[string]mcp.InputRequest{
				"user_name":    formOf("What is your name?", "name", "string"),
				"greeting":     sampling("Generate a greeting", 50),
				"client_roots": mcp.RootsInput(),
			}, seal.seal(state{Tool: multiple, Round: 1}))
		})

	const multiRound = "test_input_required_result_multi_round"
	tool(multiRound, "Asks in two rounds (step1: a name, step2: a color), keeping what it learned in a sealed request state",
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			st := state{Tool: multiRound}
			if req.RequestState != "" {
				var err error
				if st, err = seal.open(req.RequestState, multiRound); err != nil {
					return nil, err
				}
			}
			switch st.Round {
			case 1:
				if form, ok := accepted(req.InputResponses, "step1"); ok {
					name, _ := form["name"].(string)
					return ask(map[string]mcp.InputRequest{"step2": formOf("Step 2: what is your favorite color?", "color", "string")},
						seal.seal(state{Tool: multiRound, Round: 2, Name: name}))
				}
			case 2:
				if form, ok := accepted(req.InputResponses, "step2"); ok {
					return text(fmt.Sprintf("%s likes %v.", st.Name, form["color"])), nil
				}
				return ask(map[string]mcp.InputRequest{"step2": formOf("Step 2: what is your favorite color?", "color", "string")},
					req.RequestState)
			}
			return ask(map[string]mcp.InputRequest{"step1": formOf("Step 1: what is your name?", "name", "string")},
				seal.seal(state{Tool: multiRound, Round: 1}))
		})

	tool("test_input_required_result_capabilities", "Asks only for input the request's client capabilities can give",
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			if len(req.InputResponses) > 0 {
				return text(fmt.Sprintf("Got %d answer(s).", len(req.InputResponses))), nil
			}
			caps := req.ClientCapabilities()
			requests := map[string]mcp.InputRequest{}
			if caps.Elicitation != nil {
				requests["user_name"] = formOf("What is your name?", "name", "string")
			}
			if caps.Sampling != nil {
				requests["greeting"] = sampling("Generate a short greeting", 50)
			}
			if caps.Roots != nil {
				requests["client_roots"] = mcp.RootsInput()
			}
			if len(requests) == 0 {
				return text("The client can give no input: done without."), nil
			}
			return ask(requests, "")
		})

	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks the user for context (key user_context) before it renders"},
		func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
			if form, ok := accepted(req.InputResponses, "user_context"); ok {
				return &mcp.GetPromptResult{Description: "A prompt with the user's context", Messages: []*mcp.PromptMessage{
					{Role: "user", Content: mcp.TextContent(fmt.Sprintf("Context: %v", form["context"]))},
				}}, nil
			}
			return &mcp.GetPromptResult{InputRequests: map[string]mcp.InputRequest{
				"user_context": formOf("Please provide context for the prompt", "context", "string"),
			}}, nil
		})
}
