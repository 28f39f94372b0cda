package pubsub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisOptions configures a Redis broker. Only URL is required; a zero
// duration or size means its default.
type RedisOptions struct {
	// URL locates the server: redis://[user:password@]host:port/db, or
	// rediss:// for TLS. The password is never logged nor put in an error.
	// Timeouts and retry counts given in its query are overridden by the
	// fields below, which keep every call short.
	URL string
	// KeyPrefix is prepended to every topic to make the Redis channel name,
	// so that several deployments (or tests) can share one server. Brokers
	// see each other's messages only if their prefixes are equal. It is used
	// as is: include a separator, e.g. "switchboard:".
	KeyPrefix string

	// DialTimeout bounds one attempt to connect. Default 500ms.
	DialTimeout time.Duration
	// ReadTimeout bounds the wait for one reply, including the health-check
	// PING of the subscriber connection. Default 500ms.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one command. Default 500ms.
	WriteTimeout time.Duration
	// CommandTimeout bounds each Publish and Ready call as a whole, even
	// when its ctx has no deadline: Redis being down makes them fail within
	// this time rather than hang. Default 1s.
	CommandTimeout time.Duration
	// HealthCheckInterval is how long the subscriber connection may stay
	// silent before the broker PINGs Redis to find out whether it is still
	// there. A PING unanswered within ReadTimeout counts as a lost
	// connection. Default 1s.
	HealthCheckInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait between two reconnection
	// attempts, which doubles from MinBackoff up to MaxBackoff (with
	// jitter). Defaults 50ms and 1s.
	MinBackoff, MaxBackoff time.Duration

	// QueueSize is how many messages each subscription buffers while its
	// Handler is busy; further messages are dropped and counted. Zero means
	// DefaultQueueSize.
	QueueSize int
	// Logger receives connection-state changes (lost, restored) at Warn and
	// Info level. Nil means slog.Default().
	Logger *slog.Logger
}

func (o RedisOptions) withDefaults() RedisOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.DialTimeout, 500*time.Millisecond)
	def(&o.ReadTimeout, 500*time.Millisecond)
	def(&o.WriteTimeout, 500*time.Millisecond)
	def(&o.CommandTimeout, time.Second)
	def(&o.HealthCheckInterval, time.Second)
	def(&o.MinBackoff, 50*time.Millisecond)
	def(&o.MaxBackoff, time.Second)
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Redis is a Broker backed by Redis pub/sub, for hubs that run as several
// instances: every instance whose KeyPrefix is the same sees every message.
//
// Each Redis holds one pub/sub connection for all its subscriptions,
// subscribing a Redis channel when a topic gets its first local subscriber
// and unsubscribing it when the last one leaves, and a small pool for
// PUBLISH and PING; one goroutine writes the PUBLISHes, those waiting at the
// time as one pipeline. A single goroutine reads the pub/sub connection and
// hands each message to the bounded queue of each local subscriber, whose
// own goroutine runs the Handler: a slow Handler loses messages (counted by
// Dropped) but delays nothing else.
//
// When the connection is lost, that goroutine reconnects with backoff and
// resubscribes every live topic; meanwhile Ready and Publish report
// ErrUnavailable and messages published elsewhere are lost for this
// instance, as the at-most-once contract allows.
type Redis struct {
	opts     RedisOptions
	addr     string // host:port, safe to log
	password string // to scrub from error text; never logged
	log      *slog.Logger

	client *redis.Client
	ps     *redis.PubSub

	ctx      context.Context // the broker's lifetime, cancelled by Close
	cancel   context.CancelFunc
	loopDone chan struct{}
	pubq     chan *pubReq // Publish -> the publisher goroutine
	pubDone  chan struct{}
	tokens   atomic.Uint64
	dropped  atomic.Uint64

	// subMu serialises changes of a topic's first/last subscriber with the
	// SUBSCRIBE or UNSUBSCRIBE they cause, so that commands reach Redis in
	// the order of the map changes. It is held across that I/O; mu is not,
	// so the receive loop never waits for a SUBSCRIBE to be written.
	subMu sync.Mutex

	// mu guards closed and topics. The receive loop holds it for reading
	// while it offers a message, so a subscription removed under the write
	// lock is never offered one afterwards.
	mu        sync.RWMutex
	closed    bool
	topics    map[string]map[*subscription]struct{}
	closeDone chan struct{}

	// watchers are told of every change of state.up, under the state lock.
	watchers watchers

	// state guards the connection state the receive loop maintains.
	state struct {
		sync.Mutex
		up      bool
		everUp  bool
		lastErr error
		upCh    chan struct{}            // closed while up
		waiters map[string]chan struct{} // PING token -> closed on its PONG, or when the connection is lost
	}
}

var (
	_ Broker      = (*Redis)(nil)
	_ DropCounter = (*Redis)(nil)
)

// NewRedis connects to the Redis server at opts.URL and returns a broker
// that is ready: the server answered a PING and the pub/sub connection is
// established. It fails, with an error wrapping ErrUnavailable, when the
// server does not answer within ctx's deadline or opts.CommandTimeout,
// whichever comes first; a malformed URL is reported without its password.
func NewRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	opts = opts.withDefaults()
	ro, err := parseRedisURL(opts.URL)
	if err != nil {
		return nil, err
	}
	ro.DialTimeout = opts.DialTimeout
	ro.ReadTimeout = opts.ReadTimeout
	ro.WriteTimeout = opts.WriteTimeout
	ro.PoolTimeout = opts.CommandTimeout
	ro.ContextTimeoutEnabled = true
	// Fail fast: the caller of Publish decides whether to retry, and the
	// receive loop has its own backoff. go-redis would otherwise retry each
	// command 3 times and each dial 5 times.
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	// RESP2 keeps pub/sub replies plain arrays, and skips the handshakes
	// (HELLO, CLIENT SETINFO, CLIENT MAINT_NOTIFICATIONS) that older
	// servers reject or that add round trips to every reconnection.
	ro.Protocol = 2
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	bctx, cancel := context.WithCancel(context.Background())
	r := &Redis{
		opts:      opts,
		addr:      ro.Addr,
		password:  ro.Password,
		log:       opts.Logger.With("component", "pubsub", "redis", ro.Addr),
		client:    redis.NewClient(ro),
		ctx:       bctx,
		cancel:    cancel,
		loopDone:  make(chan struct{}),
		pubq:      make(chan *pubReq, maxPublishBatch),
		pubDone:   make(chan struct{}),
		topics:    make(map[string]map[*subscription]struct{}),
		closeDone: make(chan struct{}),
	}
	r.state.upCh = make(chan struct{})
	r.state.waiters = make(map[string]chan struct{})

	cctx, ccancel := context.WithTimeout(ctx, opts.CommandTimeout)
	defer ccancel()
	if err := r.client.Ping(cctx).Err(); err != nil {
		_ = r.client.Close()
		cancel()
		return nil, r.unavailable("connect", err)
	}
	// No channels yet, so no I/O: the receive loop makes the connection.
	r.ps = r.client.Subscribe(bctx)
	go r.loop()
	go r.publisher()

	r.state.Lock()
	upCh := r.state.upCh
	r.state.Unlock()
	select {
	case <-upCh:
		return r, nil
	case <-cctx.Done():
	}
	err = r.lastError()
	if err == nil {
		err = cctx.Err()
	}
	_ = r.Close()
	return nil, r.unavailable("connect", err)
}

// parseRedisURL wraps redis.ParseURL so that no error repeats the URL: a
// *url.Error quotes it whole, password included.
func parseRedisURL(raw string) (*redis.Options, error) {
	if raw == "" {
		return nil, errors.New("pubsub: redis URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("pubsub: invalid redis URL: %s", scrub(err.Error(), raw))
	}
	ro, err := redis.ParseURL(raw)
	if err != nil {
		msg := err.Error()
		if p, ok := u.User.Password(); ok {
			msg = scrub(msg, p)
		}
		return nil, fmt.Errorf("pubsub: invalid redis URL %s: %s", u.Redacted(), scrub(msg, raw))
	}
	return ro, nil
}

// Publish sends payload to the subscribers of topic on every instance with
// the same KeyPrefix, and returns once Redis has answered the PUBLISH.
//
// It fails fast: at once while the broker knows that Redis is unreachable
// (Ready reports it), which spares a recovering server a burst of
// connections and the caller a timeout per message; otherwise within
// CommandTimeout, or ctx's deadline if sooner. Such errors wrap
// ErrUnavailable; ErrClosed is returned once the broker is closed, and
// ctx's error when ctx is cancelled.
//
// An error wrapping ErrNotSent means the message was certainly not sent:
// the broker was closed or knew Redis down, ctx ended before the message
// left the queue of the publishing goroutine, or no connection could be
// made. Any other error leaves the outcome unknown: the PUBLISH may have
// been written, and the message delivered, before ctx ended or the
// connection failed.
//
// Concurrent Publish calls share round trips: one goroutine writes every
// message waiting at the time as one pipeline (up to maxPublishBatch), so
// that under load a PUBLISH costs a fraction of a system call and of a
// round trip.
func (r *Redis) Publish(ctx context.Context, topic string, payload []byte) error {
	if r.isClosed() {
		return notSent(ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	if err := r.downError(); err != nil {
		return notSent(r.unavailable("publish", err))
	}
	pctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	// The copy lets the caller reuse payload even when Publish returns
	// before the publisher has written it.
	req := &pubReq{ctx: pctx, channel: r.opts.KeyPrefix + topic, payload: bytes.Clone(payload), done: make(chan error, 1)}
	select {
	case r.pubq <- req:
	case <-pctx.Done():
		return r.publishError(ctx, notSent(pctx.Err()))
	case <-r.ctx.Done():
		return notSent(ErrClosed)
	}
	var err error
	select {
	case err = <-req.done:
	case <-pctx.Done():
		err = pctx.Err()
		if req.abandon() {
			err = notSent(err)
		}
	case <-r.ctx.Done():
		if req.abandon() {
			return notSent(ErrClosed)
		}
		return ErrClosed
	}
	if err == nil {
		return nil
	}
	return r.publishError(ctx, err)
}

// publishError explains the failure of a Publish whose ctx was ctx, keeping
// ErrNotSent when err has it.
func (r *Redis) publishError(ctx context.Context, err error) error {
	sure := errors.Is(err, ErrNotSent)
	switch {
	case r.isClosed():
		err = ErrClosed
	case errors.Is(ctx.Err(), context.Canceled):
		err = fmt.Errorf("pubsub: publish: %w", ctx.Err())
	default:
		err = r.unavailable("publish", err)
	}
	if sure && !errors.Is(err, ErrNotSent) {
		return notSent(err)
	}
	return err
}

// maxPublishBatch bounds the messages written as one pipeline.
const maxPublishBatch = 256

// pubReq is a message waiting for the publisher.
type pubReq struct {
	ctx     context.Context
	channel string
	payload []byte
	done    chan error // buffered: the publisher never waits on it

	// state is reqQueued until the publisher takes the message to write it
	// (reqTaken), or until the caller, or the publisher finding ctx done,
	// gives it up (reqAbandoned): then it is certainly not sent.
	state atomic.Int32
}

const (
	reqQueued = iota
	reqTaken
	reqAbandoned
)

// abandon gives the message up unless the publisher took it first, and
// reports whether it is certainly not sent.
func (req *pubReq) abandon() bool {
	req.state.CompareAndSwap(reqQueued, reqAbandoned)
	return req.state.Load() == reqAbandoned
}

// publisher writes the waiting messages, as one pipeline per round trip,
// until the broker is closed.
func (r *Redis) publisher() {
	defer close(r.pubDone)
	batch := make([]*pubReq, 0, maxPublishBatch)
	cmds := make([]*redis.IntCmd, 0, maxPublishBatch)
	for {
		select {
		case <-r.ctx.Done():
			return
		case req := <-r.pubq:
			batch = append(batch[:0], req)
		}
	more:
		for len(batch) < maxPublishBatch {
			select {
			case req := <-r.pubq:
				batch = append(batch, req)
			default:
				break more
			}
		}
		cmds = r.publishBatch(batch, cmds[:0])
		clear(batch)
		clear(cmds)
	}
}

// publishBatch publishes the messages of batch whose callers still wait,
// and tells each how it went.
func (r *Redis) publishBatch(batch []*pubReq, cmds []*redis.IntCmd) []*redis.IntCmd {
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.CommandTimeout)
	defer cancel()
	pipe := r.client.Pipeline()
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil && req.abandon() {
			req.done <- notSent(err)
		}
		if !req.state.CompareAndSwap(reqQueued, reqTaken) {
			cmds = append(cmds, nil) // abandoned
			continue
		}
		cmds = append(cmds, pipe.Publish(ctx, req.channel, req.payload))
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // each command carries its own error
	}
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		err := cmd.Err()
		if isDialError(err) {
			err = notSent(err)
		}
		batch[i].done <- err
	}
	return cmds
}

// isDialError reports whether err is a failure to connect, after which
// nothing was written.
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// Subscribe calls h for every message published on topic, by any instance
// with the same KeyPrefix, until the Subscription or the broker is closed.
//
// While Redis is reachable, Subscribe returns once Redis has processed the
// SUBSCRIBE, so a message published after it returns is delivered. While
// Redis is unreachable it still succeeds, after at most about DialTimeout:
// the topic is subscribed when the connection comes back, and the messages
// published meanwhile are lost. If ctx ends before the SUBSCRIBE is
// confirmed, the subscription is closed and ctx's error returned.
func (r *Redis) Subscribe(ctx context.Context, topic string, h Handler) (Subscription, error) {
	if h == nil {
		return nil, errors.New("pubsub: nil Handler")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := newSubscription(ctx, topic, h, r.opts.QueueSize, &r.dropped, r.detach)

	r.subMu.Lock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.subMu.Unlock()
		s.Close()
		return nil, ErrClosed
	}
	subs := r.topics[topic]
	first := subs == nil
	if first {
		subs = make(map[*subscription]struct{})
		r.topics[topic] = subs
	}
	subs[s] = struct{}{}
	r.mu.Unlock()
	if first {
		sctx, cancel := r.commandContext(ctx)
		// An error leaves the channel recorded in r.ps, which subscribes it
		// again on the next connection: nothing to undo.
		_ = r.ps.Subscribe(sctx, r.opts.KeyPrefix+topic)
		cancel()
	}
	r.subMu.Unlock()

	// Also when the topic was already subscribed: its SUBSCRIBE may still be
	// in flight on behalf of a concurrent Subscribe.
	if err := r.barrier(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if r.isClosed() {
		s.Close()
		return nil, ErrClosed
	}
	return s, nil
}

func (r *Redis) detach(s *subscription) {
	r.subMu.Lock()
	defer r.subMu.Unlock()
	r.mu.Lock()
	subs, ok := r.topics[s.topic]
	delete(subs, s)
	last := ok && len(subs) == 0
	if last {
		delete(r.topics, s.topic)
	}
	closed := r.closed
	r.mu.Unlock()
	if last && !closed {
		uctx, cancel := r.commandContext(context.Background())
		// As in Subscribe, r.ps forgets the channel even if this fails.
		_ = r.ps.Unsubscribe(uctx, r.opts.KeyPrefix+s.topic)
		cancel()
	}
}

// commandContext returns the context for a SUBSCRIBE or UNSUBSCRIBE on the
// pub/sub connection. go-redis dials from inside these calls when it has no
// connection; while the broker knows Redis is down, an already cancelled
// context makes that dial fail at once, and the command is only recorded
// for the receive loop's next connection. Holding subMu for a dial timeout
// per call would stall every Subscribe and Close during an outage.
func (r *Redis) commandContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), r.opts.DialTimeout+r.opts.WriteTimeout)
	if !r.isUp() {
		cancel()
	}
	return ctx, cancel
}

// barrier waits until Redis has processed every command written so far on
// the pub/sub connection, by sending a PING with a fresh token and waiting
// for its PONG, which Redis sends in order. It gives up silently after
// ReadTimeout or when the connection is lost (the receive loop will then
// resubscribe), and returns an error only if ctx ends first.
func (r *Redis) barrier(ctx context.Context) error {
	token := r.newToken()
	ch := make(chan struct{})
	r.state.Lock()
	if !r.state.up {
		r.state.Unlock()
		return nil
	}
	r.state.waiters[token] = ch
	r.state.Unlock()
	defer func() {
		r.state.Lock()
		delete(r.state.waiters, token)
		r.state.Unlock()
	}()

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.WriteTimeout)
	err := r.ps.Ping(pctx, token)
	cancel()
	if err != nil {
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

// Ready returns nil while the pub/sub connection is up and Redis answers a
// PING within CommandTimeout; otherwise an error wrapping ErrUnavailable
// (or ErrClosed once the broker is closed).
func (r *Redis) Ready(ctx context.Context) error {
	if r.isClosed() {
		return ErrClosed
	}
	if err := r.downError(); err != nil {
		return r.unavailable("subscriber connection", err)
	}
	pctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	if err := r.client.Ping(pctx).Err(); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return fmt.Errorf("pubsub: ready: %w", ctx.Err())
		}
		return r.unavailable("ping", err)
	}
	return nil
}

// claimScript takes a lease (KEYS[1]) for an owner (ARGV[1]) for ARGV[2]
// milliseconds, unless another owner holds it; it returns the holder. Redis
// runs a script atomically, and expires the key by itself.
var claimScript = redis.NewScript(`
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
	return holder
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
`)

// releaseScript deletes a lease (KEYS[1]) if its owner is ARGV[1].
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('DEL', KEYS[1])
end
return 0
`)

// Claim takes the lease on key for owner, as Broker.Claim describes. The
// lease is the Redis key KeyPrefix+"lease:"+key, holding the owner, which
// Redis expires after ttl; one Lua script reads and sets it atomically.
// Like Publish, it fails at once with ErrUnavailable while the broker knows
// Redis is unreachable, and within CommandTimeout otherwise.
func (r *Redis) Claim(ctx context.Context, key, owner string, ttl time.Duration) (string, error) {
	if err := checkLease(key, owner, ttl); err != nil {
		return "", err
	}
	if err := r.usable(ctx, "claim"); err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	holder, err := claimScript.Run(cctx, r.client, []string{r.leaseKey(key)}, owner, ttl.Milliseconds()).Text()
	if err != nil {
		return "", r.commandError(ctx, "claim", err)
	}
	return holder, nil
}

// Release ends owner's lease on key, if owner holds it, with the same
// error rules as Claim.
func (r *Redis) Release(ctx context.Context, key, owner string) error {
	if err := checkLease(key, owner, time.Millisecond); err != nil {
		return err
	}
	if err := r.usable(ctx, "release"); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	if err := releaseScript.Run(cctx, r.client, []string{r.leaseKey(key)}, owner).Err(); err != nil {
		return r.commandError(ctx, "release", err)
	}
	return nil
}

func (r *Redis) leaseKey(key string) string {
	return r.opts.KeyPrefix + "lease:" + key
}

// usable returns why a command should not even be tried: the broker is
// closed, ctx is done, or Redis is known to be unreachable.
func (r *Redis) usable(ctx context.Context, op string) error {
	if r.isClosed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.downError(); err != nil {
		return r.unavailable(op, err)
	}
	return nil
}

// commandError explains the failure of a command tried with ctx.
func (r *Redis) commandError(ctx context.Context, op string, err error) error {
	switch {
	case r.isClosed():
		return ErrClosed
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("pubsub: %s: %w", op, ctx.Err())
	default:
		return r.unavailable(op, err)
	}
}

// Watch reports when the pub/sub connection is lost (fn(false)) and when it
// is back with every topic subscribed again (fn(true)), as Broker.Watch
// describes. The health check finds a silent connection lost within
// HealthCheckInterval plus ReadTimeout.
func (r *Redis) Watch(fn func(up bool)) (stop func()) {
	r.state.Lock()
	defer r.state.Unlock()
	return r.watchers.add(fn, r.state.up)
}

// Dropped returns how many messages were dropped, summed over all
// subscriptions, because a subscription's queue was full.
func (r *Redis) Dropped() uint64 {
	return r.dropped.Load()
}

// Close closes every subscription, waiting for running Handlers to return
// (their contexts are cancelled first), unsubscribes, stops the receive
// loop and closes the connections. Publish and Subscribe then return
// ErrClosed. It stops every Watch. A second Close waits for the first and
// returns nil.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.closeDone
		return nil
	}
	r.closed = true
	var all []*subscription
	for _, subs := range r.topics {
		for s := range subs {
			all = append(all, s)
		}
	}
	clear(r.topics)
	r.mu.Unlock()
	defer close(r.closeDone)

	for _, s := range all {
		s.Close()
	}
	if r.ps != nil { // nil when NewRedis failed before creating it
		if r.isUp() {
			uctx, cancel := context.WithTimeout(context.Background(), r.opts.WriteTimeout)
			_ = r.ps.Unsubscribe(uctx)
			cancel()
		}
		r.cancel()
		// Closing the connection also wakes the loop from a blocking read.
		_ = r.ps.Close()
		<-r.loopDone
	}
	r.cancel()
	if r.ps != nil {
		<-r.pubDone
	}
	r.watchers.close()
	r.state.Lock()
	for token, ch := range r.state.waiters {
		close(ch)
		delete(r.state.waiters, token)
	}
	r.state.Unlock()
	if err := r.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return r.redact(err)
	}
	return nil
}

// loop owns reading the pub/sub connection for the broker's lifetime:
// it dispatches messages, wakes barriers, checks the connection's health
// when it is silent and reconnects when it is lost.
//
// go-redis's PubSub redials by itself when a read fails and SUBSCRIBEs
// again to every channel it knows, but it tries once per read, with no
// backoff, and a silent connection (a frozen server, a dropped route) is
// never noticed: a read timeout is not an error for it. The loop adds both:
// a PING when the connection is silent for HealthCheckInterval, and a
// deadline on its PONG after which go-redis closes the connection; and a
// backoff between failed reconnections. It also tells "up" from "down": the
// connection is up once the PONG of a PING written after the resubscription
// comes back, hence every channel is subscribed again.
func (r *Redis) loop() {
	defer close(r.loopDone)
	backoff := r.opts.MinBackoff
	var (
		probe         string // token of the health PING in flight, "" if none
		probeDeadline time.Time
	)
	sendProbe := func() error {
		token := r.newToken()
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.DialTimeout+r.opts.WriteTimeout)
		defer cancel()
		// Ping dials and resubscribes first if there is no connection.
		if err := r.ps.Ping(ctx, token); err != nil {
			return err
		}
		probe, probeDeadline = token, time.Now().Add(r.opts.ReadTimeout)
		return nil
	}
	fail := func(err error) bool {
		probe = ""
		if r.setDown(err) {
			return true // first failure: try again at once
		}
		t := time.NewTimer(jitter(backoff))
		defer t.Stop()
		backoff = min(2*backoff, r.opts.MaxBackoff)
		select {
		case <-t.C:
			return true
		case <-r.ctx.Done():
			return false
		}
	}

	for r.ctx.Err() == nil {
		if probe == "" && !r.isUp() {
			if err := sendProbe(); err != nil {
				if r.ctx.Err() != nil || !fail(err) {
					return
				}
				continue
			}
		}

		var msg any
		var err error
		if probe != "" {
			// With a deadline from ctx and no timeout of its own, a read
			// timeout is a bad connection to go-redis: it closes it.
			ctx, cancel := context.WithDeadline(r.ctx, probeDeadline)
			msg, err = r.ps.Receive(ctx)
			cancel()
		} else {
			msg, err = r.ps.ReceiveTimeout(r.ctx, r.opts.HealthCheckInterval)
		}
		if r.ctx.Err() != nil {
			return
		}

		var ne net.Error
		switch {
		case err == nil:
			switch m := msg.(type) {
			case *redis.Message:
				r.dispatch(m)
			case *redis.Pong:
				if probe != "" && m.Payload == probe {
					probe = ""
					if r.setUp() {
						backoff = r.opts.MinBackoff
					}
				} else {
					r.wake(m.Payload)
				}
			}
		case probe == "" && errors.As(err, &ne) && ne.Timeout():
			// Silent for HealthCheckInterval: is anyone there?
			if err := sendProbe(); err != nil && !fail(err) {
				return
			}
		default:
			if !fail(err) {
				return
			}
		}
	}
}

func (r *Redis) dispatch(m *redis.Message) {
	topic, ok := strings.CutPrefix(m.Channel, r.opts.KeyPrefix)
	if !ok {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	subs := r.topics[topic]
	if len(subs) == 0 {
		return
	}
	p := []byte(m.Payload)
	for s := range subs {
		s.offer(p)
	}
}

// setUp records that the pub/sub connection is up; it reports whether it
// was down.
func (r *Redis) setUp() bool {
	r.state.Lock()
	defer r.state.Unlock()
	if r.state.up {
		return false
	}
	r.state.up = true
	r.state.lastErr = nil
	close(r.state.upCh)
	r.watchers.notify(true)
	if r.state.everUp {
		r.log.Info("pubsub: Redis connection restored; topics resubscribed")
	}
	r.state.everUp = true
	return true
}

// setDown records that the pub/sub connection is lost and releases the
// barriers waiting on it; it reports whether it was up.
func (r *Redis) setDown(err error) bool {
	r.state.Lock()
	defer r.state.Unlock()
	r.state.lastErr = err
	for token, ch := range r.state.waiters {
		close(ch)
		delete(r.state.waiters, token)
	}
	if !r.state.up {
		return false
	}
	r.state.up = false
	r.state.upCh = make(chan struct{})
	r.watchers.notify(false)
	r.log.Warn("pubsub: Redis connection lost; reconnecting", "err", r.redact(err))
	return true
}

func (r *Redis) wake(token string) {
	r.state.Lock()
	defer r.state.Unlock()
	if ch, ok := r.state.waiters[token]; ok {
		close(ch)
		delete(r.state.waiters, token)
	}
}

func (r *Redis) isUp() bool {
	r.state.Lock()
	defer r.state.Unlock()
	return r.state.up
}

// downError returns why the pub/sub connection is down, or nil if it is up.
func (r *Redis) downError() error {
	r.state.Lock()
	defer r.state.Unlock()
	switch {
	case r.state.up:
		return nil
	case r.state.lastErr != nil:
		return fmt.Errorf("connection lost: %w", r.state.lastErr)
	default:
		return errors.New("not connected")
	}
}

func (r *Redis) lastError() error {
	r.state.Lock()
	defer r.state.Unlock()
	return r.state.lastErr
}

func (r *Redis) isClosed() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.closed
}

func (r *Redis) newToken() string {
	return "switchboard-pubsub-" + strconv.FormatUint(r.tokens.Add(1), 10)
}

// unavailable wraps err, scrubbed of the password, with ErrUnavailable.
func (r *Redis) unavailable(op string, err error) error {
	return fmt.Errorf("%w: redis %s at %s: %w", ErrUnavailable, op, r.addr, r.redact(err))
}

func (r *Redis) redact(err error) error {
	if err == nil || r.password == "" {
		return err
	}
	return redactedError{err: err, secret: r.password}
}

// redactedError hides a secret from an error's text while keeping the error
// itself reachable for errors.Is and errors.As.
type redactedError struct {
	err    error
	secret string
}

func (e redactedError) Error() string { return scrub(e.err.Error(), e.secret) }
func (e redactedError) Unwrap() error { return e.err }

func scrub(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "xxxxx")
}

// jitter spreads d over [0.8d, 1.2d) so that instances that lost Redis
// together do not all knock at the same instant.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
