package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// A Client of protocol version 2026-07-28: what it says of itself in every
// request, the rounds of input a request may take, and its listen streams.

// discover asks the server what it is, in protocol version 2026-07-28; the
// answer stands in for initialize's.
func (c *Client) discover(ctx context.Context) error {
	params, err := c.modernParams(nil)
	if err != nil {
		return err
	}
	var res DiscoverResult
	if err := c.peer.Call(ctx, MethodServerDiscover, params, &res); err != nil {
		return fmt.Errorf("mcp: server/discover: %w", err)
	}
	if !slices.Contains(res.SupportedVersions, ModernVersion) {
		return fmt.Errorf("mcp: server/discover: the server speaks %v, not %s", res.SupportedVersions, ModernVersion)
	}
	var info Implementation
	if v, ok := res.Meta[MetaServerInfo]; ok {
		if raw, err := json.Marshal(v); err == nil {
			_ = json.Unmarshal(raw, &info)
		}
	}
	c.modern = true
	c.init = InitializeResult{ProtocolVersion: ModernVersion, Capabilities: res.Capabilities, ServerInfo: info, Instructions: res.Instructions}
	return nil
}

// modernParams returns params with what a request of 2026-07-28 says of
// itself in _meta: the protocol version, the client's capabilities and
// info, and the log level when SetLoggingLevel set one. Members the caller
// set win.
func (c *Client) modernParams(params any) (json.RawMessage, error) {
	raw, err := jsonrpc.Marshal(params)
	if err != nil {
		return nil, err
	}
	obj, err := ParseObject(raw)
	if err != nil {
		return nil, err
	}
	meta := obj.Meta()
	set := func(key string, v any) {
		if _, ok := meta[key]; !ok {
			meta.Set(key, v)
		}
	}
	set(MetaProtocolVersion, ModernVersion)
	set(MetaClientCapabilities, c.modernCaps)
	set(MetaClientInfo, c.opts.Info)
	c.mu.Lock()
	level := c.level
	c.mu.Unlock()
	if level != "" {
		set(MetaLogLevel, level)
	}
	obj.Set("_meta", meta)
	return obj.Raw(), nil
}

// call sends a request and decodes its result. In 2026-07-28 it describes
// the request in _meta, and fulfils the input requests of an
// InputRequiredResult with the client's handlers and sends the request
// again with the answers, for up to maxInputRounds rounds.
func (c *Client) call(ctx context.Context, method string, params, result any) error {
	if !c.modern {
		return c.peer.Call(ctx, method, params, result)
	}
	raw, err := c.modernParams(params)
	if err != nil {
		return fmt.Errorf("mcp: encoding the params of %s: %w", method, err)
	}
	for round := 1; ; round++ {
		var res json.RawMessage
		if err := c.peer.Call(ctx, method, raw, &res); err != nil {
			return err
		}
		if ResultTypeOf(res) != ResultInputRequired {
			if result == nil {
				return nil
			}
			if err := json.Unmarshal(res, result); err != nil {
				return fmt.Errorf("mcp: decoding the result of %s into %T: %w", method, result, err)
			}
			return nil
		}
		if !MayRequireInput(method) {
			return fmt.Errorf("mcp: the server asked for input in answer to %s, which cannot take any", method)
		}
		if round >= maxInputRounds {
			return fmt.Errorf("mcp: %s: the server asked for input more than %d times", method, maxInputRounds)
		}
		var ir InputRequiredResult
		if err := json.Unmarshal(res, &ir); err != nil {
			return fmt.Errorf("mcp: decoding the input requests of %s: %w", method, err)
		}
		responses, err := c.fulfil(ctx, ir.InputRequests)
		if err != nil {
			return err
		}
		if raw, err = retryParams(raw, responses, ir.RequestState); err != nil {
			return err
		}
	}
}

// retryParams returns a request's params for its next round: the answers
// to the input requests, and the server's state.
func retryParams(params json.RawMessage, responses map[string]json.RawMessage, state string) (json.RawMessage, error) {
	obj, err := ParseObject(params)
	if err != nil {
		return nil, err
	}
	obj.Set("inputResponses", responses)
	delete(obj, "requestState")
	if state != "" {
		obj.Set("requestState", state)
	}
	return obj.Raw(), nil
}

// fulfil answers a server's input requests with the client's own handlers
// (Sampling, Elicitation, Roots), all at once, and returns the answers by
// key. The first failure cancels the others.
func (c *Client) fulfil(ctx context.Context, requests map[string]InputRequest) (map[string]json.RawMessage, error) {
	return AnswerInputs(ctx, requests, c.answer)
}

// answer runs the client's handler of one input request.
func (c *Client) answer(ctx context.Context, ir InputRequest) (json.RawMessage, error) {
	fn, ok := clientMethods[ir.Method]
	spec, known := LookupMethod(ir.Method)
	if !ok || !known || spec.ClientCap == "" {
		return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%q is not an input request", ir.Method)
	}
	res, err := fn(c, ctx, &jsonrpc.Request{ID: jsonrpc.Int64ID(0), Method: ir.Method, Params: ir.Params})
	if err != nil {
		return nil, err
	}
	return jsonrpc.Marshal(res)
}

// listenStream is one subscriptions/listen stream of a Client's.
type listenStream struct {
	id       jsonrpc.ID
	cancel   context.CancelFunc
	acked    chan struct{} // closed at the acknowledgement
	honoured SubscriptionFilter
	done     chan struct{} // closed when the request ends
	err      error         // why it ended, once done is closed
}

// stop cancels the stream (the server hears of it: notifications/cancelled,
// or over HTTP the end of its POST) and waits until it ended.
func (st *listenStream) stop() {
	st.cancel()
	<-st.done
}

// openListen opens a subscriptions/listen stream and returns once the
// server acknowledged it.
func (c *Client) openListen(ctx context.Context, filter SubscriptionFilter) (*listenStream, error) {
	params, err := c.modernParams(&ListenParams{Notifications: &filter})
	if err != nil {
		return nil, err
	}
	st := &listenStream{id: c.peer.NextID(), acked: make(chan struct{}), done: make(chan struct{})}
	lctx, cancel := context.WithCancel(c.ctx)
	st.cancel = cancel
	key := st.id.String()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return nil, ErrConnectionClosed
	}
	c.streams[key] = st
	c.wg.Add(1) // under mu, so that Close's Wait never races it
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		var res json.RawMessage
		err := c.peer.CallID(lctx, st.id, MethodSubscriptionsListen, params, &res)
		c.mu.Lock()
		delete(c.streams, key)
		c.mu.Unlock()
		st.err = err
		close(st.done)
	}()
	select {
	case <-st.acked:
		return st, nil
	case <-st.done:
		select {
		case <-st.acked: // acknowledged, and ended at once: it honours nothing
			return st, nil
		default:
		}
		if st.err == nil {
			st.err = errors.New("mcp: the server ended a subscriptions/listen stream without acknowledging it")
		}
		return nil, st.err
	case <-ctx.Done():
		st.stop()
		return nil, ctx.Err()
	}
}

// acknowledged records a stream's acknowledgement.
func (c *Client) acknowledged(params json.RawMessage) {
	raw, ok := metaMember(params, MetaSubscriptionID)
	if !ok {
		return
	}
	var id jsonrpc.ID
	if json.Unmarshal(raw, &id) != nil {
		return
	}
	var p AcknowledgedParams
	_ = json.Unmarshal(params, &p)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[id.String()]
	if st == nil {
		return
	}
	select {
	case <-st.acked:
	default:
		st.honoured = p.Notifications
		close(st.acked)
	}
}

// listenForChanges opens one listen stream for every list the server says
// may change, so that OnNotification hears of changes as on a session. A
// server that refuses it is logged, not fatal: the client works without.
func (c *Client) listenForChanges(ctx context.Context, log *slog.Logger) {
	caps := c.init.Capabilities
	f := SubscriptionFilter{
		ToolsListChanged:     caps.Tools != nil && caps.Tools.ListChanged,
		PromptsListChanged:   caps.Prompts != nil && caps.Prompts.ListChanged,
		ResourcesListChanged: caps.Resources != nil && caps.Resources.ListChanged,
	}
	if f.empty() {
		return
	}
	if _, err := c.openListen(ctx, f); err != nil {
		log.Warn("mcp: subscriptions/listen for list changes failed", "err", err)
	}
}
