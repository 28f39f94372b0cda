package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Input requests (SEP-2322). In protocol version 2026-07-28 a server sends
// its client no requests: a handler that needs a message from the client's
// model, a form filled by its user or its roots returns InputRequests (by
// keys of its choosing) instead of a result, and RequestState if it wants
// something back. The client fulfils them and sends the same request again
// with InputResponses under the same keys and the state, as often as the
// handler asks. A handler written so serves both eras: for a client of a
// session the Server fulfils the input requests itself, with real requests
// to the client, and calls the handler again with the answers.

// maxInputRounds bounds how many rounds of input one request may take, on
// either side: a handler or a server that asks forever cannot hold a call
// forever.
const maxInputRounds = 10

// ErrNoServerRequests is what ToolRequest.CreateMessage, Elicit and
// ListRoots return for a request of protocol version 2026-07-28 that came
// without a session to send requests on (a stateless HTTP request, or a
// client that never sent initialize): that revision has no requests from
// server to client. Return InputRequests from the handler instead, which
// serves clients of both eras.
var ErrNoServerRequests = errors.New("mcp: protocol version " + ModernVersion +
	" has no requests from server to client: return InputRequests from the handler instead")

// ElicitInput returns an input request that asks the client's user to fill
// a form (or, with Mode "url", to visit a URL).
func ElicitInput(p *ElicitParams) InputRequest { return newInputRequest(MethodElicitationCreate, p) }

// SamplingInput returns an input request for a message from the client's
// model.
func SamplingInput(p *CreateMessageParams) InputRequest {
	return newInputRequest(MethodSamplingCreateMessage, p)
}

// RootsInput returns an input request for the client's roots.
func RootsInput() InputRequest {
	return InputRequest{Method: MethodRootsList, Params: json.RawMessage(`{}`)}
}

func newInputRequest(method string, p any) InputRequest {
	raw, err := jsonrpc.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("mcp: encoding a %s input request: %v", method, err)) // the params types always encode
	}
	return InputRequest{Method: method, Params: raw}
}

// InputResponse decodes the client's answer to the input request key, from
// a retry's InputResponses: an ElicitResult (it has an action), a
// CreateMessageResult (it has a role) or a ListRootsResult (it has roots).
// It reports false when there is no answer under key, or it is not a T:
// the handler then asks again.
func InputResponse[T ElicitResult | CreateMessageResult | ListRootsResult](responses map[string]json.RawMessage, key string) (*T, bool) {
	raw, ok := responses[key]
	if !ok {
		return nil, false
	}
	v := new(T)
	if json.Unmarshal(raw, v) != nil {
		return nil, false
	}
	switch r := any(v).(type) {
	case *ElicitResult:
		ok = r.Action == "accept" || r.Action == "decline" || r.Action == "cancel"
	case *CreateMessageResult:
		ok = r.Role != ""
	case *ListRootsResult:
		roots, _ := jsonrpc.Member(raw, "roots")
		ok = len(roots) > 0 && roots[0] == '['
	}
	if !ok {
		return nil, false
	}
	return v, true
}

// needs checks that the client declared the capability an input request
// needs: -32021 when it did not, -32603 for a request no client could
// answer.
func (ir InputRequest) needs(caps ClientCapabilities) error {
	spec, ok := LookupMethod(ir.Method)
	if !ok || spec.ClientCap == "" || spec.Direction&ServerToClient == 0 {
		return jsonrpc.Errorf(jsonrpc.ErrInternal, "%q cannot be asked of a client", ir.Method)
	}
	declared := false
	switch spec.ClientCap {
	case "sampling":
		declared = caps.Sampling != nil
	case "elicitation":
		declared = caps.Elicitation != nil
		if mode, _ := jsonrpc.StringMember(ir.Params, "mode"); mode == "url" {
			declared = declared && caps.Elicitation.URL != nil
		}
	case "roots":
		declared = caps.Roots != nil
	}
	if !declared {
		return ErrMissingCapability(spec.ClientCap)
	}
	return nil
}

// asksInput is a result that may ask for input instead: CallToolResult,
// GetPromptResult and ReadResourceResult.
type asksInput interface {
	inputs() (requests map[string]InputRequest, state string, meta Meta)
	hasContent() bool
}

func (r *CallToolResult) inputs() (map[string]InputRequest, string, Meta) {
	return r.InputRequests, r.RequestState, r.Meta
}
func (r *CallToolResult) hasContent() bool { return len(r.Content) > 0 || r.StructuredContent != nil }

func (r *GetPromptResult) inputs() (map[string]InputRequest, string, Meta) {
	return r.InputRequests, r.RequestState, r.Meta
}
func (r *GetPromptResult) hasContent() bool { return len(r.Messages) > 0 }

func (r *ReadResourceResult) inputs() (map[string]InputRequest, string, Meta) {
	return r.InputRequests, r.RequestState, r.Meta
}
func (r *ReadResourceResult) hasContent() bool { return len(r.Contents) > 0 }

// serveInput runs a handler that may ask for input: round calls it with a
// round's responses and state. For a modern request input requests become
// the InputRequiredResult; for a request of a session the server asks the
// client itself and runs the handler again, for up to maxInputRounds.
func serveInput[R asksInput](ctx context.Context, in *inbound, responses map[string]json.RawMessage, state string,
	round func(responses map[string]json.RawMessage, state string) (R, error)) (any, error) {
	for n := 1; ; n++ {
		res, err := round(responses, state)
		if err != nil {
			return nil, err
		}
		requests, next, meta := res.inputs()
		if len(requests) == 0 {
			return res, nil
		}
		if res.hasContent() {
			in.ss.server.log.Warn("a handler returned both content and input requests", "method", in.req.Method)
			return nil, jsonrpc.Errorf(jsonrpc.ErrInternal, "the server answered with both content and input requests")
		}
		caps := in.clientCapabilities()
		for _, key := range sortedKeys(requests) {
			if err := requests[key].needs(caps); err != nil {
				return nil, err
			}
		}
		if in.meta != nil {
			return &InputRequiredResult{ResultType: ResultInputRequired, InputRequests: requests, RequestState: next, Meta: meta}, nil
		}
		if n >= maxInputRounds {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInternal, "the handler asked for input more than %d times", maxInputRounds)
		}
		if responses, err = in.ss.fulfil(ctx, in.req.ID, requests); err != nil {
			return nil, err
		}
		state = next
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// fulfil asks the client of a session for every input request at once,
// each naming the call it is for (related), and returns the answers by
// key. The first failure cancels the others.
func (ss *ServerSession) fulfil(ctx context.Context, related jsonrpc.ID, requests map[string]InputRequest) (map[string]json.RawMessage, error) {
	return AnswerInputs(ctx, requests, func(ctx context.Context, ir InputRequest) (json.RawMessage, error) {
		var raw json.RawMessage
		err := ss.peer.Call(ctx, ir.Method, withRelated(ir.Params, related), &raw)
		return raw, err
	})
}

// AnswerInputs answers every input request of an InputRequiredResult at
// once, with answer, and returns the answers by key, ready for
// inputResponses. The first failure cancels the others and is returned,
// naming its request (and keeping its JSON-RPC code).
func AnswerInputs(ctx context.Context, requests map[string]InputRequest, answer func(context.Context, InputRequest) (json.RawMessage, error)) (map[string]json.RawMessage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		out   = make(map[string]json.RawMessage, len(requests))
		first error
		wg    sync.WaitGroup
	)
	for key, ir := range requests {
		wg.Go(func() {
			raw, err := answer(ctx, ir)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				out[key] = raw
				return
			}
			if first == nil {
				first = inputError(key, ir.Method, err)
				cancel()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// inputError says which input request failed, keeping the client's code.
func inputError(key, method string, err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return jsonrpc.NewError(rpcErr.Code, "input request %q (%s): %s", key, method, rpcErr.Message)
	}
	return fmt.Errorf("mcp: input request %q (%s): %w", key, method, err)
}

// withRelated returns params with _meta["switchboard/relatedRequest"] set
// to id.
func withRelated(params json.RawMessage, id jsonrpc.ID) json.RawMessage {
	obj, err := ParseObject(params)
	if err != nil {
		obj = Object{}
	}
	obj.SetMeta(MetaRelatedRequest, id)
	return obj.Raw()
}
