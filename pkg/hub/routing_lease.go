package hub

import (
	"slices"
	"sync"
	"time"
)

// Leases. A server whose requests to clients cannot name the call they
// serve (a published stdio server behind `hub connect`: the official SDKs
// put no related request on the stdio wire) has its sampling, elicitation
// and roots requests routed to the only client with calls in flight to its
// replica (routeToClient), and refused when there are several. So that
// there is never more than one, the replicas of such a server are leased:
// each serves one client's calls at a time. The connector says so on its
// URL (?lease=client); a server of the 2026-07-28 revision sends no
// requests, and one that names their call (pkg/mcp's helpers do) is not
// leased: each of its replicas serves every client at once.
//
// A call of a leased server goes, in this order of preference, to a
// replica of this instance already leased to its client (unless calls
// wait: then it waits behind them), to the oldest free one, which it
// leases (so that the newest ones idle, and a pool can shrink), to a
// replica on another instance (whose instance leases one of its own, or
// queues the call there), else it waits here, in order of arrival, for a
// replica to come free or to join; each replica that comes free takes the
// oldest waiting call and every other call of that call's client. The wait
// is part of the call, bounded by its timeout and ended by its
// cancellation; beyond MaxLeaseQueue waiting calls, a call is refused with
// -32004. A lease ends with its client's last call on the replica.
//
// Replicas of one server are taken to be alike (as the children of one
// `hub connect --pool` are): a call that waits may go to any of them.

// leaseRetryAfter is the retryAfterMs of a call refused because too many
// calls wait already.
const leaseRetryAfter = time.Second

// leases hands the replicas of leased servers to one client at a time.
// mu guards the queues, each waiter's state and every replica's holder and
// leased; it is a leaf: nothing else is taken while it is held, and
// nothing is sent under it.
type leases struct {
	h      *Hub
	mu     sync.Mutex
	queues map[string][]*leaseWaiter // by server name: the calls waiting on this instance, oldest first
}

func newLeases(h *Hub) *leases {
	return &leases{h: h, queues: map[string][]*leaseWaiter{}}
}

// leaseSend sends a call to the replica ri: one of this instance, with the
// release of its lease, or one of another instance (release nil). It
// returns how to abort the call, and arranges for release to run once when
// the call ends.
type leaseSend func(ri *replicaInfo, release func()) (abort func(error))

// waiterState is where a call that waited for a lease is.
type waiterState int

const (
	waiting waiterState = iota // in its server's queue
	sent                       // handed to a replica
	failed                     // ended before it was sent
)

// leaseWaiter is a call waiting for a replica.
type leaseWaiter struct {
	l      *leases
	server string
	client string
	here   bool // a call another instance sent here: only a replica of this instance may take it
	send   leaseSend
	fail   func(error)

	// Under leases.mu:
	state waiterState
	abort func(error) // once sent: ends the call at its replica
	cause error       // a cancellation that came while it was being sent
}

// route sends a call of client to a replica of server among replicas,
// leasing it, or queues the call until one comes free; fail runs instead
// when the queue is full. here says the call came from another instance,
// which chose this one: it stays here. It returns how to abort the call,
// whether it was sent or still waits.
func (l *leases) route(server string, replicas []*replicaInfo, client string, here bool, send leaseSend, fail func(error)) (abort func(error)) {
	l.mu.Lock()
	if rp := l.takeLocked(server, replicas, client); rp != nil {
		l.mu.Unlock()
		return send(rp.currentInfo(), l.releaser(server, rp))
	}
	if !here {
		if ri := remoteReplica(replicas); ri != nil {
			l.mu.Unlock()
			return send(ri, nil) // its instance leases it
		}
	}
	q := l.queues[server]
	if len(q) >= l.h.cfg.MaxLeaseQueue {
		l.mu.Unlock()
		l.h.metrics.refused.WithLabelValues("lease_queue_full").Inc()
		fail(errLeaseQueueFull(server, len(q), leaseRetryAfter))
		return func(error) {}
	}
	w := &leaseWaiter{l: l, server: server, client: client, here: here, send: send, fail: fail}
	l.queues[server] = append(q, w)
	l.mu.Unlock()
	return w.cancel
}

// takeLocked leases a replica of this instance among replicas to client: one
// it holds already (the one with the fewest of its calls), unless calls of
// others wait, else the oldest free one. nil when there is none.
func (l *leases) takeLocked(server string, replicas []*replicaInfo, client string) *replica {
	fair := len(l.queues[server]) == 0
	var own, free *replica
	var freeInfo *replicaInfo
	for _, ri := range replicas {
		rp := ri.local
		if rp == nil || !ri.Leased || rp.closed() {
			continue
		}
		switch {
		case rp.holder == client && fair:
			if own == nil || rp.leased < own.leased {
				own = rp
			}
		case rp.holder == "":
			if free == nil || ri.olderThan(freeInfo) {
				free, freeInfo = rp, ri
			}
		}
	}
	rp := own
	if rp == nil {
		rp = free
	}
	if rp != nil {
		rp.holder = client
		rp.leased++
	}
	return rp
}

// remoteReplica returns the leased replica on another instance with the
// fewest calls in flight from this one, or nil.
func remoteReplica(replicas []*replicaInfo) *replicaInfo {
	var best *replicaInfo
	for _, ri := range replicas {
		if ri.local == nil && ri.Leased && (best == nil || ri.inflight.Load() < best.inflight.Load()) {
			best = ri
		}
	}
	return best
}

// releaser returns the function that ends one call's share of rp's lease,
// once.
func (l *leases) releaser(server string, rp *replica) func() {
	var once sync.Once
	return func() { once.Do(func() { l.release(server, rp) }) }
}

// release ends one call's share of rp's lease; with the last, rp is free and
// goes to the oldest call waiting, with the other calls of its client.
func (l *leases) release(server string, rp *replica) {
	l.mu.Lock()
	rp.leased--
	if rp.leased > 0 {
		l.mu.Unlock()
		return
	}
	rp.holder = ""
	var ready []*leaseWaiter
	if !rp.closed() {
		ready = l.handOutLocked(server, rp)
	}
	l.mu.Unlock()
	l.start(server, rp, ready)
}

// handOutLocked leases the free replica rp to the oldest call waiting for
// server and to every other waiting call of the same client, and returns
// them, marked sent.
func (l *leases) handOutLocked(server string, rp *replica) []*leaseWaiter {
	q := l.queues[server]
	if len(q) == 0 {
		return nil
	}
	client := q[0].client
	var ready, rest []*leaseWaiter
	for _, w := range q {
		if w.client == client {
			w.state = sent
			ready = append(ready, w)
		} else {
			rest = append(rest, w)
		}
	}
	if len(rest) == 0 {
		delete(l.queues, server)
	} else {
		l.queues[server] = rest
	}
	rp.holder = client
	rp.leased += len(ready)
	return ready
}

// start sends the calls handed to rp (or, with rp nil, to the replica of
// another instance ri).
func (l *leases) start(server string, rp *replica, ready []*leaseWaiter) {
	if len(ready) == 0 {
		return
	}
	ri := rp.currentInfo()
	for _, w := range ready {
		w.sendTo(ri, l.releaser(server, rp))
	}
}

// sendTo sends the waiting call, already marked sent, and applies a
// cancellation that came meanwhile.
func (w *leaseWaiter) sendTo(ri *replicaInfo, release func()) {
	abort := w.send(ri, release)
	w.l.mu.Lock()
	w.abort = abort
	cause := w.cause
	w.l.mu.Unlock()
	if cause != nil {
		abort(cause)
	}
}

// cancel ends the call: out of the queue if it still waits, else at its
// replica.
func (w *leaseWaiter) cancel(cause error) {
	l := w.l
	l.mu.Lock()
	switch w.state {
	case waiting:
		q := l.queues[w.server]
		if i := slices.Index(q, w); i >= 0 {
			q = slices.Delete(q, i, i+1)
		}
		if len(q) == 0 {
			delete(l.queues, w.server)
		} else {
			l.queues[w.server] = q
		}
		w.state = failed
		l.mu.Unlock()
		w.fail(cause)
	case sent:
		abort := w.abort
		if abort == nil && w.cause == nil {
			w.cause = cause // sendTo applies it
		}
		l.mu.Unlock()
		if abort != nil {
			abort(cause)
		}
	default:
		l.mu.Unlock()
	}
}

// joined hands a replica of a leased server that registered here to the
// calls waiting for its server.
func (l *leases) joined(server string, rp *replica) {
	l.mu.Lock()
	var ready []*leaseWaiter
	if rp.holder == "" && !rp.closed() {
		ready = l.handOutLocked(server, rp)
	}
	l.mu.Unlock()
	l.start(server, rp, ready)
}

// left reconsiders the calls waiting for server once one of its replicas
// here left: while another replica here remains, they wait for it; else
// they go to a replica of another instance (unless another instance sent
// them here), or fail as calls to a server that left.
func (l *leases) left(server string) {
	v := l.h.reg.view()
	if slices.ContainsFunc(v.servers[server], func(ri *replicaInfo) bool { return ri.local != nil && ri.Leased && !ri.local.closed() }) {
		return
	}
	remote := remoteReplica(v.servers[server])
	var moved, dropped []*leaseWaiter
	l.mu.Lock()
	for _, w := range l.queues[server] {
		if remote != nil && !w.here {
			w.state = sent
			moved = append(moved, w)
		} else {
			w.state = failed
			dropped = append(dropped, w)
		}
	}
	delete(l.queues, server)
	l.mu.Unlock()
	for _, w := range moved {
		w.sendTo(remote, nil)
	}
	for _, w := range dropped {
		w.fail(errServerGone(server))
	}
}

// waitingFor returns the number of calls waiting for server here.
func (l *leases) waitingFor(server string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queues[server])
}
