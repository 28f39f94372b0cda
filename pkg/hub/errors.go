package hub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Every JSON-RPC error the hub itself gives a client or a server is built
// here, so that its code, message and data are decided in one place.
// (HTTP refusals before a session exists are in admission.go.)

// A client's request the hub refuses.
var (
	errNotInitialized     = jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "session not initialized: send initialize first")
	errAlreadyInitialized = jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "already initialized")
	errInvalidCursor      = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "invalid cursor")
	errInvalidLevel       = jsonrpc.Errorf(jsonrpc.ErrInvalidParams,
		"level must be one of debug, info, notice, warning, error, critical, alert, emergency")
	errParamsNotObject = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "params must be a JSON object")
	errDuplicateMeta   = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `params hold "_meta" more than once`)
	errDuplicateName   = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `params hold "name" more than once`)
	errRefNotObject    = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `"ref" must be an object`)
	errRefType         = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `"ref.type" must be "ref/prompt" or "ref/resource"`)
)

// errBadInitialize answers initialize params that do not decode.
func errBadInitialize(err error) error {
	return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "initialize: %v", err)
}

// errMethodNotFound answers a method the hub does not serve.
func errMethodNotFound(method string) error {
	return jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "%s", method)
}

// errNotString answers params whose member key must be a non-empty string.
func errNotString(key string) error {
	return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "%q must be a non-empty string", key)
}

// errUnknownItem answers a tool or prompt name that no server offers.
func errUnknownItem(what, name string) error {
	return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "unknown %s %q", what, name)
}

// errResourceNotFound answers a URI that no server serves.
func errResourceNotFound(uri string) error {
	return mcp.ErrResourceNotFound.WithData(map[string]string{"uri": uri})
}

// errOverloaded answers a request beyond a connection's MaxInFlight.
func errOverloaded(maxInFlight int) *jsonrpc.Error {
	return (&jsonrpc.Error{Code: mcp.CodeRateLimited, Message: "too many requests in flight on this connection"}).
		WithData(map[string]any{"retryAfterMs": 100, "maxInFlight": maxInFlight})
}

// errTooManySubscriptions answers a subscription beyond a limit.
func errTooManySubscriptions(who string, limit int) error {
	return (&jsonrpc.Error{Code: mcp.CodeRateLimited, Message: fmt.Sprintf("too many subscriptions: %s holds %d", who, limit)}).
		WithData(map[string]any{"maxSubscriptions": limit})
}

// errRateLimited answers a request over the token's rate limit.
func errRateLimited(retry time.Duration) error {
	ms := max(retry.Milliseconds(), 1)
	return (&jsonrpc.Error{Code: mcp.CodeRateLimited, Message: "rate limited: retry after " + strconv.FormatInt(ms, 10) + " ms"}).
		WithData(map[string]any{"retryAfterMs": ms})
}

// errLeaseQueueFull answers a call of a server whose replicas are leased to
// one client at a time when all are busy and waiting calls fill the queue.
func errLeaseQueueFull(server string, waiting int, retry time.Duration) error {
	return (&jsonrpc.Error{Code: mcp.CodeRateLimited, Message: fmt.Sprintf(
		"every replica of server %q serves another client's calls and %d calls wait already: retry later", server, waiting)}).
		WithData(map[string]any{"server": server, "retryAfterMs": retry.Milliseconds()})
}

// forbidden answers a request the token may not make.
func forbidden(p *principal, what string) error {
	return &jsonrpc.Error{Code: mcp.CodeForbidden, Message: fmt.Sprintf("forbidden: token %q may not %s", p.name, what)}
}

// forbiddenUnless answers a request the token may not make, which allowed
// checks: an OAuth token that a scope would allow is told which, in data
// ({"error": "insufficient_scope", "scopes": [...]}: step-up
// authorization).
func (h *Hub) forbiddenUnless(p *principal, what string, allowed func(*grant) bool) error {
	e := forbidden(p, what).(*jsonrpc.Error)
	if scopes := h.stepUp(p, allowed); len(scopes) > 0 {
		return e.WithData(map[string]any{"error": "insufficient_scope", "scopes": scopes})
	}
	return e
}

// Routing failures: the server, its instance or the way to it is gone.
var (
	// errDraining answers a routed request while the instance drains.
	errDraining = (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
		Message: "this hub instance is shutting down: reconnect and try again"}).WithData(map[string]any{"reason": "draining"})
	// errInstanceGone fails the calls to an instance that left or went
	// silent.
	errInstanceGone = (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
		Message: "the hub instance serving this server left"}).WithData(map[string]any{"reason": "instance gone"})
	// errInterrupted fails the cross-instance calls in flight when the
	// broker connection of either instance is lost: their answers may be
	// lost with it. The call may or may not have run.
	errInterrupted = (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
		Message: "the connection between hub instances was interrupted; the call may or may not have run"}).
		WithData(map[string]any{"reason": "broker connection lost"})
	// errNotListening fails, without sending it, a request to an instance
	// whose last heartbeat said its subscriptions are down: it would be
	// lost.
	errNotListening = (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
		Message: "the server is on another hub instance, unreachable now: that instance's broker connection is down"}).
		WithData(map[string]any{"reason": "instance not listening"})
)

// errServerGone is what a call gets when its server disconnects, or has no
// replica left.
func errServerGone(server string) error {
	msg := "the server disconnected"
	if server != "" {
		msg = fmt.Sprintf("server %q disconnected", server)
	}
	e := &jsonrpc.Error{Code: mcp.CodeConnectionClosed, Message: msg}
	if server == "" {
		return e
	}
	return e.WithData(map[string]string{"server": server})
}

// errBrokerDown is what a cross-instance request gets while the broker is
// unreachable: at once, instead of a timeout. The cause is named (it holds
// no secret: the brokers scrub their passwords).
func errBrokerDown(cause error) error {
	data := map[string]string{"reason": "broker unavailable"}
	if cause != nil {
		data["cause"] = cause.Error()
	}
	return (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
		Message: "the server is on another hub instance, unreachable now: the broker is unavailable"}).WithData(data)
}

// errUnconfirmed is what a cross-instance request gets when the broker
// failed without saying whether it delivered it: the other instance may
// have begun serving it, and is told to stop.
func errUnconfirmed(cause error) error {
	return (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
		Message: "the broker did not confirm delivery to the server's hub instance; the request was cancelled there and may or may not have run"}).
		WithData(map[string]string{"reason": "delivery unconfirmed", "cause": cause.Error()})
}

// errTimedOut answers a routed request that outlived the call timeout.
func errTimedOut(server string, timeout time.Duration) error {
	data := map[string]any{"timeoutMs": timeout.Milliseconds()}
	if server != "" {
		data["server"] = server
	}
	return mcp.ErrRequestTimeout.WithData(data)
}

// errClientGone answers a server whose request's client disconnected.
var errClientGone = &jsonrpc.Error{Code: mcp.CodeConnectionClosed, Message: "the client disconnected"}

// errTooManyAsks answers a server's request for a client that holds as
// many of them, unanswered, as it may.
func errTooManyAsks(limit int) error {
	return (&jsonrpc.Error{Code: mcp.CodeRateLimited, Message: fmt.Sprintf("the client has %d requests of servers unanswered already", limit)}).
		WithData(map[string]any{"maxWaiting": limit})
}

// errRelatedNotID answers a server's message whose
// _meta["switchboard/relatedRequest"] is not a request id.
var errRelatedNotID = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "_meta[%q] must be a request id", mcp.MetaRelatedRequest)

// errCannotRoute answers a server's request that has no client to go to.
func errCannotRoute(method, why string) error {
	return jsonrpc.Errorf(jsonrpc.ErrInvalidRequest, "cannot route %s: %s", method, why)
}

// errNoClient answers a server's sampling or elicitation request made
// outside any client's call: there is no one to ask, as there would be
// none if the client had not declared the capability.
func errNoClient(method string) error {
	return jsonrpc.Errorf(jsonrpc.ErrMethodNotFound,
		"%s outside a client's call: no client can answer it (make it while serving a call, naming it in _meta[%q])",
		method, mcp.MetaRelatedRequest)
}

// errMissingCapability answers a server's request whose client did not
// declare the capability it needs.
func errMissingCapability(capability, method string) error {
	return jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "the client did not declare the %s capability that %s needs", capability, method)
}

// modernError turns an error into what the 2026-07-28 revision asks: a
// resource that does not exist is invalid params naming the URI (-32602),
// not -32002.
func modernError(err error) error {
	if e, ok := err.(*jsonrpc.Error); ok && e.Code == mcp.CodeResourceNotFound {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: e.Message, Data: e.Data}
	}
	return err
}

// errNoFilter answers a subscriptions/listen without its filter.
var errNoFilter = jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `subscriptions/listen needs "notifications", the filter of what to send`)

// errInputResponses answers a retry whose inputResponses (or one of them,
// key) are not what an input request's answer is.
func errInputResponses(key string) error {
	if key == "" {
		return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, `"inputResponses" must be an object`)
	}
	return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "inputResponses[%q] must be the result of the input request", key)
}

// errBadInputRequests fails a session-based client's call whose server's
// input requests the hub cannot ask.
func errBadInputRequests(why string) error {
	return jsonrpc.Errorf(jsonrpc.ErrInternal, "the server's input requests cannot be asked: %s", why)
}

// errBadState answers a modern client's retry whose requestState the hub
// cannot continue from.
func errBadState(why string) error {
	return jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "requestState is not valid: %s", why)
}

// errCallEnded answers a server's request for input about a call that
// ended meanwhile (the client gave up, or did not come back in time).
var errCallEnded = (&jsonrpc.Error{Code: mcp.CodeConnectionClosed,
	Message: "the call this request serves has ended: the client gave up on it or did not come back with the input"})

// errNotAnswered answers a server's request the hub does not answer.
func errNotAnswered(method string) error {
	return jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "the hub does not answer %s", method)
}

// upstreamError turns the outcome of a call routed to a server into what
// its caller sees: the server's own error as is, a timeout as -32001, a lost
// server as -32000, the caller's own cancellation as context.Canceled (no
// one hears that answer).
func (h *Hub) upstreamError(server string, err error) error {
	if err == nil {
		return nil // before rpcErr, which escapes: no allocation for an answer
	}
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errTimedOut(server, h.cfg.CallTimeout)
	case errors.As(err, &rpcErr):
		if rpcErr == peer.ErrClosed { // the connection closed, as opposed to a -32000 the server sent
			return errServerGone(server)
		}
		return rpcErr
	case errors.Is(err, context.Canceled):
		return err
	}
	h.log.Warn("routing failed", "server", server, "err", err)
	return jsonrpc.ErrInternal
}

// downstreamError is upstreamError for a server's request routed to a
// client.
func (h *Hub) downstreamError(err error) error {
	if err == nil {
		return nil
	}
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return errTimedOut("", h.cfg.CallTimeout)
	case errors.As(err, &rpcErr):
		if rpcErr == peer.ErrClosed {
			return errClientGone
		}
		return rpcErr
	case errors.Is(err, context.Canceled):
		return err
	}
	h.log.Warn("routing to a client failed", "err", err)
	return jsonrpc.ErrInternal
}

// errTaskStore answers a request about tasks that needs their records
// while the broker cannot be read or written: the task's fate is unknown
// here, not its existence.
func errTaskStore(cause error) error {
	data := map[string]string{"reason": "task records unavailable"}
	if cause != nil {
		data["cause"] = cause.Error()
	}
	return (&jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: "the hub cannot reach its task records now: try again"}).WithData(data)
}

// errBadTask fails a call whose server answered with a task the hub cannot
// follow.
func errBadTask(why string) error {
	return jsonrpc.Errorf(jsonrpc.ErrInternal, "the server's task cannot be followed: %s", why)
}

// errTooManyTasks refuses a server's task to a principal that has as many
// as it may on this instance (the task is cancelled at the server).
func errTooManyTasks(limit int) error {
	return (&jsonrpc.Error{Code: mcp.CodeRateLimited,
		Message: fmt.Sprintf("too many tasks: this client has %d on this hub instance; let some end or expire", limit)}).
		WithData(map[string]any{"maxTasks": limit})
}

// errTaskCancelledUpstream ends the call of a client that cannot follow
// tasks whose server's task was cancelled (by the server).
func errTaskCancelledUpstream(why string) error {
	msg := "the server cancelled the task the call ran as"
	if why != "" {
		msg += ": " + why
	}
	return jsonrpc.Errorf(jsonrpc.ErrInternal, "%s", msg)
}

// errTaskResultTooLarge fails a hub-held task whose result would take its
// principal past the bytes the hub keeps for it.
func errTaskResultTooLarge(n, limit int) *jsonrpc.Error {
	return (&jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("the task's result (%d bytes) does not fit in what the hub keeps for this client's tasks (%d bytes)", n, limit)}).
		WithData(map[string]any{"resultBytes": n, "maxTaskBytes": limit})
}
