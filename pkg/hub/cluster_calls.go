package hub

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// A request for a server on another instance travels to that instance's
// inbox topic; its answer, progress reports, logs and the server's own
// requests for the client come back to the caller's inbox, and a
// cancellation follows the request. Ids are the caller's call numbers, so
// nothing of one client can be confused with another's.
//
// The broker delivers at most once, and nothing published to an instance
// while its broker connection is down reaches it. So an exchange never
// spans an interruption: when this instance loses the broker, the calls it
// sent fail at once (errInterrupted) and those it serves for others are
// cancelled, and when another instance says it rejoined (hello), the same
// happens to the exchanges with it. After its own reconnection an instance
// sends nothing to another until it has heard from it again, which proves
// the other is subscribed: calls wait for that (within their timeout)
// instead of vanishing. A request is taken for unsent only when the broker
// says so (pubsub.ErrNotSent); after any other failure to publish it may
// have arrived, so it fails and its cancellation follows it.

// outCall is a request this instance sent to another and waits on.
type outCall struct {
	instance string
	caller   caller                       // for calls: where progress, logs and the server's requests go
	done     func(json.RawMessage, error) // the answer, or why there is none
	started  bool                         // the request is being sent (guarded by cluster.mu)
	sent     chan struct{}                // closed once the broker took the request, or refused it
}

// interrupt ends the exchanges in flight with instance ("" for every
// instance) after an interruption of the broker: the calls we sent fail
// with errInterrupted, and those we serve for it are cancelled. Requests
// still held, never sent, are kept: they go out once the instance is heard.
func (c *cluster) interrupt(instance string) {
	c.endExchanges(instance, errInterrupted, false)
}

// endExchanges fails the requests we sent to instance ("" for all) with
// err (those never sent too when all is set) and cancels those we serve
// for it: a call we serve is answered err, in case its caller still waits
// for it (it sent it after it rejoined, and we heard of the call before
// its hello), unless the caller is gone (all).
func (c *cluster) endExchanges(instance string, err error, all bool) {
	c.mu.Lock()
	ex := c.takeExchangesLocked(instance, all)
	c.mu.Unlock()
	ex.end(err, all)
}

// exchanges are what takeExchangesLocked took out of the cluster's maps:
// the calls we sent, to fail, and those we serve, to cancel.
type exchanges struct {
	failed  []*outCall
	cancels []canceler
}

// takeExchangesLocked takes the exchanges with instance ("" for all) out of
// the cluster's maps, as endExchanges describes, and ends the relayed
// requests at once (closing their lost channel). c.mu is held.
func (c *cluster) takeExchangesLocked(instance string, all bool) exchanges {
	var ex exchanges
	for n, oc := range c.calls {
		if (instance == "" || oc.instance == instance) && (all || oc.started) {
			ex.failed = append(ex.failed, oc)
			delete(c.calls, n)
		}
	}
	for key, cancel := range c.served {
		if instance == "" || servedBy(key, instance) {
			ex.cancels = append(ex.cancels, cancel)
		}
	}
	for n, rl := range c.relays {
		if instance == "" || rl.instance == instance {
			delete(c.relays, n)
			close(rl.lost)
		}
	}
	return ex
}

// end fails the calls with err and cancels the requests served (with
// context.Canceled when all: no one is left to answer).
func (ex exchanges) end(err error, all bool) {
	for _, oc := range ex.failed {
		oc.done(nil, err)
	}
	cause := err
	if all {
		cause = context.Canceled
	}
	for _, cancel := range ex.cancels {
		cancel.cancel(cause)
	}
}

// endHeld fails the requests held for instance, never sent (they waited
// to hear from it), with err.
func (c *cluster) endHeld(instance string, err error) {
	c.mu.Lock()
	held := exchanges{failed: c.takeHeldLocked(instance)}
	c.mu.Unlock()
	held.end(err, false)
}

// takeHeldLocked takes the requests held for instance, never sent, out of
// the calls in flight, and returns them. c.mu is held.
func (c *cluster) takeHeldLocked(instance string) []*outCall {
	var held []*outCall
	for n, oc := range c.calls {
		if oc.instance == instance && !oc.started {
			held = append(held, oc)
			delete(c.calls, n)
		}
	}
	return held
}

// servedID names a request another instance sent us: its sender, and the
// sender's number for it.
type servedID struct {
	from string
	call uint64
}

// servedKey names a request another instance sent us.
func servedKey(from string, n uint64) servedID { return servedID{from: from, call: n} }

func servedBy(key servedID, instance string) bool { return key.from == instance }

// sendCall is replica.send's twin for a replica on another instance: it
// forwards a call there and returns at once; done runs with the answer when
// it comes back. The returned function ends the call early: the other
// instance is told to give up. ctx carries the call's trace, which the
// envelope carries on.
func (c *cluster) sendCall(ctx context.Context, ri *replicaInfo, server string, cl caller, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	return c.sendCallRenamed(ctx, ri, server, cl, method, params, nil, "", done)
}

// sendCallRenamed is sendCall with old, when set (a slice of params: a
// tool's name as the client sent it), replaced by the JSON string name as
// the envelope is written.
func (c *cluster) sendCallRenamed(ctx context.Context, ri *replicaInfo, server string, cl caller, method string, params json.RawMessage, old []byte, name string, done func(json.RawMessage, error)) (abort func(error)) {
	caps := cl.caps()
	env := &envelope{Kind: envCall, Replica: ri.ID, Server: server, Method: method, Params: params, Caps: caps.shared(), Client: cl.client(),
		LogLevel: cl.logLevel(), Rename: old, RenameTo: name}
	if caps.Tasks {
		env.Owner = cl.owner() // a task made of the call there is theirs
	}
	span := c.traceOut(ctx, ri.Instance, env)
	return c.startRequest(ri.Instance, env, cl, true, ending(span, done))
}

// request sends a request (a sub, or a server's request for a client) to
// another instance and waits for the answer; if ctx ends first, the other
// instance is told to give up.
func (c *cluster) request(ctx context.Context, instance string, env *envelope) (json.RawMessage, error) {
	return await(ctx, func(done func(json.RawMessage, error)) func(error) {
		return c.startRequest(instance, env, nil, false, done)
	})
}

// startRequest registers a request under a new number, sends it (once the other
// instance is known to listen) and returns how to abort it. done runs
// exactly once: with the answer, a failure to send, an interruption, or the
// abort's cause. toReplica says that the request is for a replica the
// registry listed: if its instance is gone for good meanwhile (neither
// heard nor waited for, expire), the request fails at once, where it would
// otherwise be registered after the requests to that instance were ended,
// and wait for its timeout.
func (c *cluster) startRequest(instance string, env *envelope, cl caller, toReplica bool, done func(json.RawMessage, error)) (abort func(error)) {
	h := c.hub
	n := c.nextCall.Add(1)
	env.Call = n
	oc := &outCall{instance: instance, caller: cl, done: done, sent: make(chan struct{})}
	c.mu.Lock()
	r := c.remotes[instance]
	if _, silent := c.silent[instance]; r == nil && !silent && toReplica {
		c.mu.Unlock()
		done(nil, errInstanceGone)
		return func(error) {}
	}
	c.calls[n] = oc
	if r != nil && r.deaf {
		// Sent now, it would be lost: fail it clearly, at once, rather
		// than hold it for as long as the other's broker is down.
		delete(c.calls, n)
		c.mu.Unlock()
		done(nil, errNotListening)
		return func(error) {}
	}
	held := r != nil && c.brokerUp && r.heard != c.epoch
	if held {
		r.waiting = append(r.waiting, func() {
			c.mu.Lock()
			_, live := c.calls[n]
			oc.started = live
			c.mu.Unlock()
			if live {
				c.sendRequest(n, oc, env)
			}
		})
	} else {
		oc.started = true
	}
	c.mu.Unlock()
	if !held {
		c.sendRequest(n, oc, env)
	}
	return func(cause error) {
		if !c.finish(n, nil, cause) {
			return
		}
		c.mu.Lock()
		started := oc.started
		c.mu.Unlock()
		if !started {
			return
		}
		// The cancellation follows the request, never overtakes it.
		h.goOwned(func() {
			select {
			case <-oc.sent:
			case <-h.ctx.Done():
				return
			}
			c.cancelSent(instance, env, cause)
		})
	}
}

// cancelSent tells instance to give up a call, retry or sreq this instance
// sent it (other requests have nothing to cancel), and whether it timed
// out.
func (c *cluster) cancelSent(instance string, req *envelope, cause error) {
	timeout := errors.Is(cause, context.DeadlineExceeded)
	switch req.Kind {
	case envCall, envResume:
		c.send(instance, &envelope{Kind: envCancel, Call: req.Call, Timeout: timeout})
	case envSReq:
		c.send(instance, &envelope{Kind: envSCancel, Call: req.Call, Timeout: timeout})
	}
}

// sendFailed ends request n, whose publish failed: certainly not sent
// (pubsub.ErrNotSent), or perhaps delivered (a write that timed out, a
// connection lost after the write), and then the other instance may be
// serving it: it is told to stop, as when the caller gives up.
func (c *cluster) sendFailed(n uint64, instance string, env *envelope, err error) {
	if errors.Is(err, pubsub.ErrNotSent) {
		c.finish(n, nil, errBrokerDown(err))
		return
	}
	if c.finish(n, nil, errUnconfirmed(err)) {
		c.cancelSent(instance, env, context.Canceled)
	}
}

// sendRequest posts request n; a failure to send ends it (sendFailed).
func (c *cluster) sendRequest(n uint64, oc *outCall, env *envelope) {
	c.post(oc.instance, env, func(err error) {
		c.hub.metrics.published(err)
		close(oc.sent)
		// Off the broker's goroutine: ending a call answers its client.
		if err != nil && !c.hub.goOwned(func() { c.sendFailed(n, oc.instance, env, err) }) {
			c.finish(n, nil, errDraining)
		}
	})
}

// finish ends a request we sent; it reports false when it had ended
// already.
func (c *cluster) finish(n uint64, raw json.RawMessage, err error) bool {
	c.mu.Lock()
	oc := c.calls[n]
	delete(c.calls, n)
	c.mu.Unlock()
	if oc == nil {
		return false
	}
	oc.done(raw, err)
	return true
}

// serving returns how many requests of other instances this one serves.
func (c *cluster) serving() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.served)
}

func (c *cluster) onInbox(ctx context.Context, topic string, payload []byte) {
	env, ok := decodeEnvelope(payload)
	if !ok {
		return
	}
	h := c.hub
	switch env.Kind {
	case envBye: // behind every answer it sent us (leaving)
		c.drop(env.From)
	case envSync:
		c.localChanged()
	case envResult, envSRes:
		raw, err := env.outcome()
		c.finish(env.Call, raw, err)
	case envNotify:
		c.mu.Lock()
		oc := c.calls[env.Call]
		c.mu.Unlock()
		if oc != nil && oc.caller != nil {
			oc.caller.notify(env.Method, env.Params)
		}
	case envClientNotify:
		if !c.hub.notifyLocalClient(env.Client, env.Method, env.Params) {
			c.hub.unrouted(env.Method, unroutedNoDestination, "client", env.Client)
		}
	case envCancel, envSCancel:
		key := servedKey(env.From, env.Call)
		c.mu.Lock()
		cancel := c.served[key]
		c.mu.Unlock()
		if cancel != nil {
			cause := context.Canceled
			if env.Timeout {
				cause = context.DeadlineExceeded // the server hears the call timed out
			}
			cancel.cancel(cause)
		}
	case envCall:
		c.serveCall(env)
	case envResume:
		c.serveResume(env)
	case envHTTP:
		if env.HTTP != nil {
			c.serveRelayed(env)
		}
	case envHTTPRes:
		c.onRelayPart(env)
	case envSub, envSReq, envTask:
		// Served on a goroutine of its own: the inbox must keep flowing
		// (the answer to a sampling request this call makes comes through
		// it).
		key := servedKey(env.From, env.Call)
		tctx, cancel := context.WithTimeout(h.ctx, h.cfg.CallTimeout+time.Second)
		sctx, stop := context.WithCancelCause(tctx)
		c.mu.Lock()
		c.served[key] = cancelFunc(stop)
		c.mu.Unlock()
		if !h.goOwned(func() {
			defer cancel()
			defer c.unserve(key) // once answered: until then a drain waits
			res, err := c.serveRequest(sctx, env)
			switch cause := context.Cause(sctx); {
			case errors.Is(cause, context.Canceled):
				return // the caller gave up, or left: no one wants the answer
			case errors.Is(cause, errInterrupted):
				res, err = nil, cause // as for a call (endExchanges)
			}
			kind := envResult
			if env.Kind == envSReq {
				kind = envSRes
			}
			c.answer(env, kind, res, err)
		}) {
			c.unserve(key)
			cancel()
		}
	}
}

// canceler ends something this instance serves for another: a
// *servedCall (a call's flight), or a cancelFunc.
type canceler interface{ cancel(cause error) }

// cancelFunc is a canceler made of a function.
type cancelFunc func(cause error)

func (f cancelFunc) cancel(cause error) { f(cause) }

func (c *cluster) unserve(key servedID) {
	c.mu.Lock()
	delete(c.served, key)
	c.mu.Unlock()
}

// answer sends the outcome of a request another instance sent, and
// returns once the broker took it (or it was given up: postAnswer).
func (c *cluster) answer(req *envelope, kind string, res json.RawMessage, err error) {
	posted := make(chan struct{})
	c.postAnswer(req, kind, res, err, func(error) { close(posted) })
	<-posted
}

// postAnswer is answer without waiting: done learns the outcome once the
// broker has it. The caller waits for the answer and nothing else would
// tell it, so an answer the broker did not take (a Redis Cluster shard
// whose master changed, before the route to the new one is known) is
// posted again, a little later each time, for as long as the request may
// last, unless the caller's instance leaves or this hub closes. A copy
// that arrives twice is taken once.
func (c *cluster) postAnswer(req *envelope, kind string, res json.RawMessage, err error, done func(error)) {
	h := c.hub
	if done == nil {
		done = h.metrics.published
	}
	ans := answerTo(req, kind, res, err)
	until := time.Now().Add(h.cfg.CallTimeout)
	var try func(wait time.Duration)
	try = func(wait time.Duration) {
		c.post(req.From, ans, func(err error) {
			if err == nil || !c.worthRetrying(req.From, until, err) {
				done(err)
				return
			}
			h.metrics.published(err) // this try
			h.log.Debug("posting an answer failed; trying again", "peer", shortID(req.From), "err", err)
			if !h.goOwned(func() {
				t := time.NewTimer(wait)
				defer t.Stop()
				select {
				case <-t.C:
					try(min(2*wait, time.Second))
				case <-h.ctx.Done():
					done(err)
				}
			}) {
				done(err)
			}
		})
	}
	try(20 * time.Millisecond)
}

// worthRetrying reports whether an answer to instance that the broker did
// not take (err) should be posted again: the broker could not reach Redis,
// the request may still be waited for, and its instance is still known.
func (c *cluster) worthRetrying(instance string, until time.Time, err error) bool {
	unavailable := errors.Is(err, pubsub.ErrUnavailable) || errors.Is(err, pubsub.ErrNotSent)
	if !unavailable || c.hub.ctx.Err() != nil || time.Now().After(until) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, known := c.remotes[instance]
	return known
}

func answerTo(req *envelope, kind string, res json.RawMessage, err error) *envelope {
	ans := &envelope{Kind: kind, Call: req.Call, Result: res}
	if err != nil {
		ans.Result, ans.Error = nil, toWire(err)
	}
	return ans
}

// serveCall forwards a call another instance sent to one of this
// instance's replicas, without a goroutine waiting: the answer is published
// from wherever it arrives. A call of a server whose replicas are leased
// goes to a replica of this instance its client may have, or waits here for
// one (routing_lease.go).
func (c *cluster) serveCall(env *envelope) {
	h := c.hub
	rp := h.reg.localReplica(env.Replica)
	if rp == nil {
		h.goOwned(func() { c.answer(env, envResult, nil, errServerGone(env.Server)) })
		return
	}
	sc := &servedCall{env: env,
		remoteCaller: remoteCaller{c: c, instance: env.From, call: env.Call, clientKey: env.Client, declared: env.Caps, level: env.LogLevel,
			whose: env.Owner}}
	sc.trace, sc.span = c.traceIn(context.Background(), env)
	c.mu.Lock()
	c.served[servedKey(env.From, env.Call)] = sc
	c.mu.Unlock()
	ri := rp.currentInfo()
	var abort func(error)
	if ri.Leased {
		abort = h.leases.route(ri.Name, h.reg.view().servers[ri.Name], env.Client, true, sc.sendTo,
			func(err error) { sc.finish(nil, err) })
	} else {
		abort = sc.sendTo(ri, nil)
	}
	// The caller times the call out and cancels it; this bound only holds
	// if that cancellation is lost.
	sc.started(0, abort, h.cfg.CallTimeout+time.Second)
}

// servedCall is a call another instance sent, on its way through one of
// this instance's replicas: one allocation for all it needs.
type servedCall struct {
	remoteCaller
	flight
	env     *envelope
	ri      *replicaInfo // the replica it was sent to; nil while it waits for a lease
	release func()       // ends its share of the replica's lease, if leased
	span    tracing.Span // its crossing, received (its flight's trace holds it)
}

// sendTo sends the call to ri, a replica of this instance; release, when
// set, runs when it ends.
func (sc *servedCall) sendTo(ri *replicaInfo, release func()) (abort func(error)) {
	sc.ri, sc.release = ri, release
	ri.inflight.Add(1)
	return ri.local.send(sc.trace, &sc.remoteCaller, sc.env.Method, sc.env.Params, sc.finish)
}

// finish sends the call's answer back, once.
func (sc *servedCall) finish(raw json.RawMessage, err error) {
	if !sc.end() {
		return
	}
	sc.span.EndWith(raw, err)
	c := sc.c
	server := sc.env.Server
	if sc.ri != nil {
		if sc.release != nil {
			sc.release()
		}
		sc.ri.inflight.Add(-1)
		server = sc.ri.Name
	}
	if errors.Is(err, context.Canceled) {
		c.unserve(servedKey(sc.env.From, sc.env.Call))
		return // the caller gave up, or the exchange was interrupted: no one wants the answer
	}
	// The call stays served until its answer is published: a drain that
	// saw it gone would close the hub before the answer left, and the
	// caller would hear "instance gone" instead.
	c.postAnswer(sc.env, envResult, raw, c.hub.upstreamError(server, err), sc.answered)
}

// answered ends the call's service once its answer is published (or could
// not be).
func (sc *servedCall) answered(err error) {
	sc.c.hub.metrics.published(err)
	sc.c.unserve(servedKey(sc.env.From, sc.env.Call))
}

// resume sends owner's retry of a call that asked for input to the
// instance whose requestState it carries (routing_input.go), which checks that the
// call is owner's; done runs with what comes next: the call's answer, or
// its next input requests. The returned function gives up on it.
func (c *cluster) resume(ctx context.Context, instance string, owner identity, method string, params json.RawMessage, cl caller, done func(json.RawMessage, error)) (abort func(error), err error) {
	c.mu.Lock()
	_, known := c.remotes[instance]
	c.mu.Unlock()
	if !known {
		return nil, errBadState("the hub instance that gave it has left; send the request again without it")
	}
	env := &envelope{Kind: envResume, Method: method, Params: params, Client: cl.client(), Owner: owner}
	span := c.traceOut(ctx, instance, env)
	return c.startRequest(instance, env, cl, false, ending(span, done)), nil
}

// serveResume takes a retry another instance sent for a call of this one,
// in the name of the principal the envelope says (the sender checked its
// credentials): the client there waits for what comes next.
func (c *cluster) serveResume(env *envelope) {
	h := c.hub
	key := servedKey(env.From, env.Call)
	_, span := c.traceIn(context.Background(), env)
	answer := func(raw json.RawMessage, err error) {
		span.EndWith(raw, err)
		c.unserve(key)
		h.goOwned(func() { c.answer(env, envResult, raw, err) })
	}
	st, ok := h.inputs.stateOf(env.Params)
	m, err := mcp.ParseRequestMeta(env.Params)
	if !ok || err != nil {
		answer(nil, errBadState("the retry carries no requestState of the hub's"))
		return
	}
	w := &inputWaiter{c: &remoteCaller{c: c, instance: env.From, call: env.Call, clientKey: env.Client}, meta: m,
		token: progressToken(env.Params), send: answer}
	c.mu.Lock()
	c.served[key] = cancelFunc(func(error) {
		c.unserve(key)
		h.inputs.giveUp(st.call, w)
	})
	c.mu.Unlock()
	if err := h.inputs.resumeWith(st, env.Owner, env.Method, env.Params, w); err != nil {
		answer(nil, err)
	}
}

// serveRequest carries out a sub or a sreq another instance sent.
func (c *cluster) serveRequest(ctx context.Context, env *envelope) (raw json.RawMessage, err error) {
	h := c.hub
	switch env.Kind {
	case envSub:
		rp := h.reg.localReplica(env.Replica)
		if env.Unsub {
			h.subs.coordRemove(env.URI, env.Replica, env.From)
			return json.RawMessage(`{}`), nil
		}
		if rp == nil {
			return nil, errServerGone(env.Server)
		}
		if err := h.subs.coordAdd(ctx, rp, env.URI, env.From); err != nil {
			return nil, err
		}
		return json.RawMessage(`{}`), nil
	case envTask:
		return h.tasks.serveOp(ctx, env.Owner, env.Method, env.Params)
	case envSReq:
		ctx, span := c.traceIn(ctx, env)
		defer func() { span.EndWith(raw, err) }()
		oc := c.callerOf(env.Of, env.Client)
		if oc == nil {
			return nil, errCannotRoute(env.Method, "the call it serves has ended")
		}
		params, err := mcp.ParseObject(env.Params)
		if err != nil {
			return nil, err
		}
		if err := oc.caller.caps().check(env.Method, params); err != nil {
			return nil, err
		}
		raw, err := await(ctx, func(done func(json.RawMessage, error)) func(error) {
			return oc.caller.request(ctx, env.Method, env.Params, done)
		})
		if err != nil {
			return nil, h.downstreamError(err)
		}
		return raw, nil
	}
	return nil, jsonrpc.ErrInternal
}

// remoteCaller is a client's call on another instance, as the replica
// serving it sees it.
type remoteCaller struct {
	c         *cluster
	instance  string
	call      uint64 // the caller's number for the call
	clientKey string // the caller's key for its client
	declared  *clientCaps
	level     mcp.LoggingLevel
	whose     identity // the client's principal, when it negotiated tasks
}

var _ caller = (*remoteCaller)(nil)

// notify posts at once, from the replica's read loop, so that a progress
// report is never overtaken by the answer it precedes: both leave in the
// order they were posted.
func (o *remoteCaller) notify(method string, params json.RawMessage) {
	o.c.post(o.instance, &envelope{Kind: envNotify, Call: o.call, Method: method, Params: params}, nil)
}

func (o *remoteCaller) request(ctx context.Context, method string, params json.RawMessage, done func(json.RawMessage, error)) (abort func(error)) {
	// The sreq names the caller's call, so that the caller's instance finds
	// the client; the answer comes back under this instance's own number.
	env := &envelope{Kind: envSReq, Method: method, Params: params, Of: o.call, Client: o.clientKey}
	span := o.c.traceOut(ctx, o.instance, env)
	return o.c.startRequest(o.instance, env, nil, false, ending(span, done))
}

func (o *remoteCaller) caps() clientCaps {
	if o.declared == nil {
		return clientCaps{}
	}
	return *o.declared
}

func (o *remoteCaller) client() string { return o.clientKey }

func (o *remoteCaller) logLevel() mcp.LoggingLevel { return o.level }

func (o *remoteCaller) owner() identity { return o.whose }

// callerOf finds the call in flight from this instance that a server's
// request is for: the one numbered n, else, when it has ended, another of
// the same client (client, when set). A request that names no call goes to
// whichever of its client's calls the server's instance saw first, and the
// answer to that one may overtake the request on the way here (a server
// whose replicas are leased serves many calls of one client at once). nil
// when the client has no call in flight here.
func (c *cluster) callerOf(n uint64, client string) *outCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	if oc := c.calls[n]; oc != nil && oc.caller != nil {
		return oc
	}
	if client == "" {
		return nil
	}
	for _, oc := range c.calls {
		if oc.caller != nil && oc.caller.client() == client {
			return oc
		}
	}
	return nil
}

// askRemote asks another instance to keep uri subscribed at its replica ri
// for this instance, or no longer.
func (h *Hub) askRemote(ctx context.Context, ri *replicaInfo, uri string, subscribe bool) error {
	_, err := h.cluster.request(ctx, ri.Instance, &envelope{Kind: envSub, Replica: ri.ID, Server: ri.Name, URI: uri, Unsub: !subscribe})
	return err
}
