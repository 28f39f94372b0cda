package pubsub

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A shard is the subscriber connection to one Redis node, and the channels
// it must hold there: every channel for a single server; for a cluster, the
// channels whose slots that node serves as master. Its goroutine, loop,
// keeps the connection for the shard's lifetime: it connects, subscribes
// every channel, reads and dispatches messages, checks the connection's
// health when it is silent, and reconnects with backoff when it is lost.
type shard struct {
	r    *Redis
	addr string
	log  *slog.Logger

	ctx    context.Context // cancelled to stop the shard
	cancel context.CancelFunc
	done   chan struct{} // closed when loop returns
	// poke cuts short the wait before the next reconnection: Redis, or
	// another of its nodes, is back.
	poke chan struct{}

	// Guarded by r.subMu, which is held while these change and while the
	// commands that follow from the change are written, so that commands
	// reach Redis in the order of the changes.
	channels map[string]struct{}
	dirty    map[string]struct{} // channels Redis unsubscribed by itself (their slot moved)
	conn     *subConn            // the connection once every channel is written on it; nil while there is none

	// mu guards the state below; update changes it.
	mu    sync.Mutex
	phase int
	// lastErr says why the connection is down; nil while connected.
	lastErr error
	// probe is the token of the PING in flight whose PONG tells that
	// every command written before it was processed; "" if none. Without
	// its PONG by probeBy the connection counts as lost.
	probe   string
	probeBy time.Time
	// owed is set while some channels of the shard may be missing
	// messages although the connection is up: they moved to this node, or
	// Redis unsubscribed them. The PONG of owedBy settles it; "" means the
	// next connection's first PONG does.
	owed    bool
	owedBy  string
	settled chan struct{}            // closed when the first connection attempt ends, either way
	waiters map[string]chan struct{} // barrier PING token -> closed on its PONG or when the connection is lost
	counted bool                     // whether the shard counts as down in Redis.state
	removed bool
}

// Phases of a shard's connection.
const (
	phaseStarting = iota // first connection attempt under way
	phaseUp              // connected, and every channel subscribed
	phaseDown            // lost, or never made: reconnecting
)

// newShard returns a shard, not started.
func (r *Redis) newShard(addr string) *shard {
	ctx, cancel := context.WithCancel(r.ctx)
	log := r.log
	if r.cluster != nil {
		log = log.With("node", addr)
	}
	return &shard{
		r:        r,
		addr:     addr,
		log:      log,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		poke:     make(chan struct{}, 1),
		channels: make(map[string]struct{}),
		dirty:    make(map[string]struct{}),
		settled:  make(chan struct{}),
		waiters:  make(map[string]chan struct{}),
	}
}

// update applies f to the shard's state under its lock, then tells the
// broker if whether the shard counts as down has changed. Every change of
// that state goes through here.
func (sh *shard) update(f func()) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f()
	if sh.removed {
		return
	}
	down := sh.phase == phaseDown || sh.owed
	if down != sh.counted {
		sh.counted = down
		d := 1
		if !down {
			d = -1
		}
		sh.r.adjust(d, 0, sh.lastErr)
	}
}

// remove takes the shard out of the broker's count; it must be stopped
// next.
func (sh *shard) remove() {
	sh.update(func() {
		if sh.counted {
			sh.r.adjust(-1, 0, nil)
			sh.counted = false
		}
		sh.removed = true
	})
}

// stop ends the shard's goroutine and connection and waits for them.
func (sh *shard) stop() {
	sh.cancel()
	<-sh.done
}

func (sh *shard) start() {
	go sh.loop()
}

func (sh *shard) loop() {
	defer close(sh.done)
	defer sh.releaseWaiters()
	backoff := sh.r.opts.MinBackoff
	for sh.ctx.Err() == nil {
		reachedUp, err := sh.session()
		if sh.ctx.Err() != nil {
			return
		}
		if reachedUp {
			backoff = sh.r.opts.MinBackoff
		}
		wasUp := sh.fail(err)
		sh.r.resolveSoon()
		if wasUp {
			continue // first failure: try again at once
		}
		t := time.NewTimer(jitter(backoff))
		backoff = min(2*backoff, sh.r.opts.MaxBackoff)
		select {
		case <-t.C:
		case <-sh.poke:
			t.Stop()
		case <-sh.ctx.Done():
			t.Stop()
			return
		}
	}
}

// session makes one connection and serves it until it fails; it returns
// why, and whether the connection was up at some point.
func (sh *shard) session() (reachedUp bool, err error) {
	r := sh.r
	c, err := dialConn(sh.ctx, r.conn, sh.addr)
	if err != nil {
		return false, err
	}
	stop := context.AfterFunc(sh.ctx, func() { _ = c.close() })
	defer stop()
	defer func() {
		r.subMu.Lock()
		if sh.conn == c {
			sh.conn = nil
		}
		r.subMu.Unlock()
		_ = c.close()
	}()

	// Subscribe everything, then PING: its PONG comes once every
	// subscription is in place.
	token := r.newToken()
	r.subMu.Lock()
	cmds := r.subscribeCommands(r.subCmd, keysOf(sh.channels))
	err = c.send(append(cmds, []string{"PING", token})...)
	if err == nil {
		sh.conn = c
		sh.update(func() {
			sh.lastErr = nil
			sh.probe, sh.probeBy = token, time.Now().Add(r.opts.ReadTimeout)
			if sh.owed {
				sh.owedBy = token
			}
		})
	}
	r.subMu.Unlock()
	if err != nil {
		return false, err
	}

	for {
		sh.mu.Lock()
		probe, probeBy := sh.probe, sh.probeBy
		up := sh.phase == phaseUp
		sh.mu.Unlock()
		reachedUp = reachedUp || up
		wait := time.Now().Add(r.opts.HealthCheckInterval)
		if probe != "" {
			wait = probeBy
		}
		err := c.await(wait)
		if err == nil {
			var channel, payload []byte
			var ok bool
			if channel, payload, ok, err = c.message(r.msgHead); ok && err == nil {
				r.dispatch(channel, payload)
				continue
			}
		}
		var rep reply
		if err == nil {
			rep, err = readReply(c.rd, 0)
		}
		switch {
		case errors.Is(err, errSilent):
			if probe != "" {
				return reachedUp, errors.New("no answer to PING within the read timeout")
			}
			// Silent for HealthCheckInterval: is anyone there?
			token := r.newToken()
			sh.update(func() { sh.probe, sh.probeBy = token, time.Now().Add(r.opts.ReadTimeout) })
			if err := c.send([]string{"PING", token}); err != nil {
				return reachedUp, err
			}
		case err != nil:
			return reachedUp, err
		default:
			if err := sh.handle(c, rep); err != nil {
				return reachedUp, err
			}
		}
	}
}

// handle acts on one reply of the subscriber connection.
func (sh *shard) handle(c *subConn, rep reply) error {
	r := sh.r
	switch rep.kind {
	case '-':
		// A SUBSCRIBE refused. MOVED: the slot is elsewhere now; its
		// channels wait for the resolver to move them. Anything else (the
		// cluster is down...): reconnect, and find where the slots are.
		if slot, ok := movedSlot(rep.str); ok && r.cluster != nil {
			r.subMu.Lock()
			if sh.conn == c {
				var moved []string
				for ch := range sh.channels {
					if keySlot(ch) == slot {
						sh.dirty[ch] = struct{}{}
						moved = append(moved, ch)
					}
				}
				if len(moved) > 0 {
					sh.update(func() { sh.owed, sh.owedBy = true, "" })
					sh.log.Info("pubsub: subscription refused, the slot has moved; resubscribing", "channels", moved)
				}
			}
			r.subMu.Unlock()
			r.resolveSoon()
			return nil
		}
		return redisError(rep.str)
	case '$', '+':
		// The PONG of a PING written before the first SUBSCRIBE.
		sh.pong(string(rep.str))
		return nil
	case '*':
	default:
		return errProtocol
	}
	if len(rep.elems) < 2 {
		return errProtocol
	}
	kind := rep.elems[0]
	switch {
	case kind.is(r.msgKind) && len(rep.elems) == 3:
		r.dispatch(rep.elems[1].str, rep.elems[2].str)
	case kind.is("pong"):
		sh.pong(string(rep.elems[1].str))
	case kind.is(r.unsubKind):
		channel := string(rep.elems[1].str)
		r.subMu.Lock()
		if c.unsubs[channel] > 0 {
			// The answer to our UNSUBSCRIBE.
			c.unsubs[channel]--
			if c.unsubs[channel] == 0 {
				delete(c.unsubs, channel)
			}
		} else if _, ok := sh.channels[channel]; ok && sh.conn == c {
			// Redis dropped a channel we hold: its slot left this node.
			// Messages on it are lost until it is subscribed where the
			// slot went.
			sh.dirty[channel] = struct{}{}
			sh.update(func() { sh.owed, sh.owedBy = true, "" })
			sh.log.Warn("pubsub: Redis dropped a subscription (its slot moved); resubscribing", "channel", channel)
			r.resolveSoon()
		}
		r.subMu.Unlock()
	}
	return nil
}

// pokeShards wakes the shards waiting to reconnect.
func (r *Redis) pokeShards() {
	if r.cluster == nil {
		return
	}
	v := r.cluster.view.Load()
	if v == nil {
		return
	}
	for _, sh := range v.shards {
		select {
		case sh.poke <- struct{}{}:
		default:
		}
	}
}

// movedSlot reads the slot of a MOVED error: "MOVED 3999 127.0.0.1:6381".
func movedSlot(msg []byte) (int, bool) {
	f := strings.Fields(string(msg))
	if len(f) != 3 || f[0] != "MOVED" {
		return 0, false
	}
	slot, err := strconv.Atoi(f[1])
	return slot, err == nil && slot >= 0 && slot < numSlots
}

// pong records the PONG of token.
func (sh *shard) pong(token string) {
	sh.update(func() {
		if ch, ok := sh.waiters[token]; ok {
			close(ch)
			delete(sh.waiters, token)
		}
		if token != sh.probe || token == "" {
			return
		}
		sh.probe = ""
		if sh.owed && sh.owedBy == token {
			sh.owed, sh.owedBy = false, ""
		}
		switch sh.phase {
		case phaseStarting:
			close(sh.settled)
		case phaseDown:
			sh.log.Info("pubsub: Redis connection restored; topics resubscribed")
			// The other nodes are likely back too (after an outage of the
			// whole cluster): let their shards try now rather than at the
			// end of their backoff, so that the broker comes back whole.
			sh.r.pokeShards()
		}
		sh.phase = phaseUp
	})
}

// fail records that the connection is lost or could not be made, and
// releases the barriers waiting on it; it reports whether it was up.
func (sh *shard) fail(err error) (wasUp bool) {
	sh.update(func() {
		wasUp = sh.phase == phaseUp
		sh.lastErr = err
		sh.probe = ""
		sh.owedBy = "" // the next connection settles what is owed
		for token, ch := range sh.waiters {
			close(ch)
			delete(sh.waiters, token)
		}
		switch sh.phase {
		case phaseStarting:
			close(sh.settled)
			sh.log.Warn("pubsub: cannot connect to Redis; retrying", "err", sh.r.redact(err))
		case phaseUp:
			sh.log.Warn("pubsub: Redis connection lost; reconnecting", "err", sh.r.redact(err))
		}
		sh.phase = phaseDown
	})
	return wasUp
}

func (sh *shard) releaseWaiters() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for token, ch := range sh.waiters {
		close(ch)
		delete(sh.waiters, token)
	}
}

// isUp reports whether the connection is up with every channel subscribed.
func (sh *shard) isUp() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.phase == phaseUp
}

// downError returns why the connection is down, or nil if it is connected
// or not known to be down.
func (sh *shard) downError() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lastErr
}

// barrier waits until Redis has processed every command written so far on
// the shard's connection: a PING with a fresh token, whose PONG Redis sends
// in order. A shard still making its first connection is waited for first.
// It gives up silently after about a read timeout, or when the connection
// is lost (the shard will then subscribe everything again), and returns an
// error only if ctx ends first.
func (sh *shard) barrier(ctx context.Context) error {
	r := sh.r
	start := time.NewTimer(r.opts.DialTimeout + r.opts.WriteTimeout + r.opts.ReadTimeout)
	defer start.Stop()
	select {
	case <-sh.settled:
	case <-start.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}

	token := r.newToken()
	ch := make(chan struct{})
	sh.mu.Lock()
	if sh.phase != phaseUp {
		sh.mu.Unlock()
		return nil
	}
	sh.waiters[token] = ch
	sh.mu.Unlock()
	defer func() {
		sh.mu.Lock()
		delete(sh.waiters, token)
		sh.mu.Unlock()
	}()

	r.subMu.Lock()
	c := sh.conn
	r.subMu.Unlock()
	if c == nil || c.send([]string{"PING", token}) != nil {
		return nil
	}
	t := time.NewTimer(r.opts.ReadTimeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// subscribeCommands returns the commands that subscribe channels: for a
// cluster one SSUBSCRIBE per slot (Redis refuses channels of several slots
// in one), for a single server SUBSCRIBEs of up to 512 channels each.
func (r *Redis) subscribeCommands(cmd string, channels []string) [][]string {
	if len(channels) == 0 {
		return nil
	}
	var cmds [][]string
	if r.cluster != nil {
		bySlot := make(map[int][]string)
		for _, ch := range channels {
			s := keySlot(ch)
			bySlot[s] = append(bySlot[s], ch)
		}
		for _, chs := range bySlot {
			cmds = append(cmds, append([]string{cmd}, chs...))
		}
		return cmds
	}
	for len(channels) > 0 {
		n := min(len(channels), 512)
		cmds = append(cmds, append([]string{cmd}, channels[:n]...))
		channels = channels[n:]
	}
	return cmds
}

// keysOf returns m's keys, sorted.
func keysOf(m map[string]struct{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
