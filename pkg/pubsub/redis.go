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
	// rediss:// for TLS. For a Redis Cluster (Redis 7 or later, whose
	// sharded pub/sub the broker uses) it names some of its nodes:
	// redis+cluster://[user:password@]host:port,host:port (rediss+cluster://
	// for TLS), or go-redis's form, redis://host:port?addr=host:port&addr=...
	// The password is never logged nor put in an error. Timeouts and retry
	// counts given in its query are overridden by the fields below, which
	// keep every call short.
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
// It works with a single Redis server, or with a Redis Cluster, where it
// uses sharded pub/sub (see RedisOptions.URL).
//
// Each Redis holds a small go-redis pool for lease scripts, PING and a
// cluster's SPUBLISH, one goroutine that writes the PUBLISHes waiting at
// the time as one pipeline (on a connection of its own to a single
// server), and subscriber connections: one to a single server, or one to
// each cluster master that serves the slot of a subscribed topic. A topic's
// channel is subscribed when the topic gets its first local subscriber and
// unsubscribed when the last one leaves. One goroutine per subscriber
// connection reads it and hands each message to the bounded queue of each
// local subscriber, whose own goroutine runs the Handler: a slow Handler
// loses messages (counted by Dropped) but delays nothing else.
//
// When a subscriber connection is lost, its goroutine reconnects with
// backoff and subscribes its channels again; for a cluster, the broker also
// reloads the slot map and moves the channels whose slot changed master
// (a failover, a resharding). Meanwhile Ready reports ErrUnavailable, Watch
// has reported false, and messages published elsewhere on those channels
// are lost for this instance, as the at-most-once contract allows.
type Redis struct {
	opts     RedisOptions
	addr     string // host:port, or the cluster's addresses; safe to log
	password string // to scrub from error text; never logged
	log      *slog.Logger

	client redis.UniversalClient // a *redis.Client or a *redis.ClusterClient
	conn   connConfig            // how subscriber connections are made
	// The commands and replies of pub/sub, or of sharded pub/sub.
	subCmd, unsubCmd, msgKind, unsubKind string
	msgHead                              []byte // messageHead(msgKind)

	cluster *clusterState // nil for a single server
	single  *shard        // the one shard of a single server; nil for a cluster

	ctx    context.Context // the broker's lifetime, cancelled by Close
	cancel context.CancelFunc
	pubq   chan *pubReq // Publish -> the publisher goroutine
	// enqueueMu orders PublishAsync's queueing before the publisher's last
	// look at the queue (see PublishAsync).
	enqueueMu sync.RWMutex

	chanMu   sync.RWMutex
	channels map[string]string // topic -> KeyPrefix+topic

	// The publisher goroutine's own, for a single server (redis_pub.go).
	pubConn  *subConn
	pubPeek  *peeker // pubConn's
	pubTaken []*pubReq
	// beforeWrite, when set (by tests), runs as the publisher writes a
	// batch.
	beforeWrite func()
	// goroutines are the publisher and, for a cluster, the resolver.
	goroutines sync.WaitGroup
	tokens     atomic.Uint64
	dropped    atomic.Uint64

	// subMu serialises changes of a topic's first/last subscriber, of the
	// slot map and of the shards, with the SUBSCRIBE or UNSUBSCRIBE they
	// cause, so that commands reach Redis in the order of the map changes.
	// It is held across that I/O (writes only, bounded by WriteTimeout);
	// mu is not, so that dispatching never waits for a write.
	subMu  sync.Mutex
	shards map[string]*shard // by node address
	where  map[string]*shard // subscribed channel -> its shard; nil while its slot has no master

	// mu guards closed and topics. The receive loops hold it for reading
	// while they offer a message, so a subscription removed under the
	// write lock is never offered one afterwards.
	mu        sync.RWMutex
	closed    bool
	topics    map[string]map[*subscription]struct{}
	closeDone chan struct{}

	// watchers are told of every change of state.up, under the state lock.
	watchers watchers

	// state is the broker's connection state: up while no shard is down
	// (lost, or owing resubscriptions) and every channel has a master.
	state struct {
		sync.Mutex
		up      bool
		down    int // shards that count as down
		pending int // channels whose slot has no known master
		lastErr error
	}
}

var (
	_ Broker         = (*Redis)(nil)
	_ DropCounter    = (*Redis)(nil)
	_ AsyncPublisher = (*Redis)(nil)
)

// NewRedis connects to the Redis server or cluster at opts.URL and returns
// a broker that is ready: the server answered a PING and the subscriber
// connection is established (for a cluster: a node told where the slots
// are). It fails, with an error wrapping ErrUnavailable, when Redis does
// not answer within ctx's deadline or opts.CommandTimeout, whichever comes
// first; a malformed URL is reported without its password.
func NewRedis(ctx context.Context, opts RedisOptions) (*Redis, error) {
	opts = opts.withDefaults()
	if opts.URL == "" {
		return nil, errors.New("pubsub: redis URL is empty")
	}
	co, isCluster, err := parseClusterURL(opts.URL)
	if err != nil {
		return nil, urlError(opts.URL, err)
	}
	bctx, cancel := context.WithCancel(context.Background())
	r := &Redis{
		opts:      opts,
		ctx:       bctx,
		cancel:    cancel,
		pubq:      make(chan *pubReq, maxPublishBatch),
		channels:  make(map[string]string),
		shards:    make(map[string]*shard),
		where:     make(map[string]*shard),
		topics:    make(map[string]map[*subscription]struct{}),
		closeDone: make(chan struct{}),
	}
	r.state.up = true
	if isCluster {
		r.setupCluster(co)
	} else if err := r.setupSingle(opts.URL); err != nil {
		cancel()
		return nil, err
	}
	r.log = opts.Logger.With("component", "pubsub", "redis", r.addr)

	cctx, ccancel := context.WithTimeout(ctx, opts.CommandTimeout)
	defer ccancel()
	if err := r.connect(cctx); err != nil {
		_ = r.Close()
		return nil, r.unavailable("connect", err)
	}
	r.goroutines.Go(r.publisher)
	return r, nil
}

// setupSingle prepares a broker for the single server at rawURL.
func (r *Redis) setupSingle(rawURL string) error {
	ro, err := parseRedisURL(rawURL)
	if err != nil {
		return err
	}
	o := r.opts
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	ro.PoolTimeout = o.CommandTimeout
	ro.ContextTimeoutEnabled = true
	// Fail fast: the caller of Publish decides whether to retry, and the
	// subscriber connections have their own backoff. go-redis would
	// otherwise retry each command 3 times and each dial 5 times.
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	// RESP2 keeps replies plain, and skips the handshakes (HELLO, CLIENT
	// SETINFO, CLIENT MAINT_NOTIFICATIONS) that older servers reject or
	// that add round trips to every reconnection.
	ro.Protocol = 2
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	r.addr, r.password = ro.Addr, ro.Password
	r.client = redis.NewClient(ro)
	r.conn = connConfig{network: ro.Network, username: ro.Username, password: ro.Password, db: ro.DB, tls: ro.TLSConfig}
	r.conn.dialTimeout, r.conn.readTimeout, r.conn.writeTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	r.subCmd, r.unsubCmd, r.msgKind, r.unsubKind = "SUBSCRIBE", "UNSUBSCRIBE", "message", "unsubscribe"
	r.msgHead = messageHead(r.msgKind)
	return nil
}

// setupCluster prepares a broker for the Redis Cluster of co.
func (r *Redis) setupCluster(co *redis.ClusterOptions) {
	o := r.opts
	co.DialTimeout, co.ReadTimeout, co.WriteTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	co.PoolTimeout = o.CommandTimeout
	co.ContextTimeoutEnabled = true
	co.MaxRetries = -1 // as for a single server; MOVED is still followed
	co.DialerRetries = 1
	co.Protocol = 2
	co.DisableIdentity = true
	co.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	r.addr, r.password = strings.Join(co.Addrs, ","), co.Password
	r.client = redis.NewClusterClient(co)
	r.conn = connConfig{network: "tcp", username: co.Username, password: co.Password, tls: co.TLSConfig}
	r.conn.dialTimeout, r.conn.readTimeout, r.conn.writeTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	r.subCmd, r.unsubCmd, r.msgKind, r.unsubKind = "SSUBSCRIBE", "SUNSUBSCRIBE", "smessage", "sunsubscribe"
	r.msgHead = messageHead(r.msgKind)
	r.cluster = &clusterState{
		seeds: co.Addrs,
		wake:  make(chan struct{}, 1),
	}
}

// connect makes the first connections: for a single server, a PING and
// the subscriber connection; for a cluster, the slot map, from the first
// node of the URL that answers.
func (r *Redis) connect(ctx context.Context) error {
	if r.cluster != nil {
		m, err := r.loadSlots(ctx)
		if err != nil {
			return err
		}
		r.subMu.Lock()
		r.publishView(m)
		r.subMu.Unlock()
		r.goroutines.Go(r.resolver)
		return nil
	}
	if err := r.client.Ping(ctx).Err(); err != nil {
		return err
	}
	r.single = r.newShard(r.addr)
	r.shards[r.addr] = r.single
	r.single.start()
	select {
	case <-r.single.settled:
		if r.single.isUp() {
			return nil
		}
	case <-ctx.Done():
	}
	if err := r.single.downError(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("subscriber connection not established")
}

// parseRedisURL wraps redis.ParseURL so that no error repeats the URL: a
// *url.Error quotes it whole, password included.
func parseRedisURL(raw string) (*redis.Options, error) {
	ro, err := redis.ParseURL(raw)
	if err != nil {
		return nil, urlError(raw, err)
	}
	return ro, nil
}

// urlError reports err, about the URL raw, without raw's password.
func urlError(raw string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // a *url.Error quotes the URL whole
	}
	msg := scrub(err.Error(), raw)
	shown := raw
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		authority, _, _ := strings.Cut(rest, "/")
		if at := strings.LastIndexByte(authority, '@'); at > 0 {
			userinfo := authority[:at]
			if user, pw, ok := strings.Cut(userinfo, ":"); ok {
				msg = scrub(msg, userinfo)
				msg = scrub(msg, pw)
				if dec, err := url.PathUnescape(pw); err == nil {
					msg = scrub(msg, dec)
				}
				shown = strings.Replace(raw, userinfo+"@", user+":xxxxx@", 1)
			}
		}
	}
	return fmt.Errorf("pubsub: invalid redis URL %s: %s", shown, msg)
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
	channel := r.channel(topic)
	if err := r.failFast(channel); err != nil {
		return notSent(r.unavailable("publish", err))
	}
	pctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	// The copy lets the caller reuse payload even when Publish returns
	// before the publisher has written it.
	req := &pubReq{ctx: pctx, channel: channel, payload: bytes.Clone(payload), done: make(chan error, 1)}
	// Publish waits, and takes the outcome, here.
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

// PublishAsync publishes payload on topic as Publish does, within
// CommandTimeout, and tells done the outcome instead of waiting for it, as
// AsyncPublisher describes. It shares the pipelined round trips of
// Publish, in one queue: the messages of one caller keep their order.
func (r *Redis) PublishAsync(topic string, payload []byte, done func(error)) {
	fail := func(err error) {
		if done != nil {
			done(err)
		}
	}
	if r.isClosed() {
		fail(notSent(ErrClosed))
		return
	}
	channel := r.channel(topic)
	if err := r.failFast(channel); err != nil {
		fail(notSent(r.unavailable("publish", err)))
		return
	}
	// Held while queueing: the publisher, once the broker closes, takes the
	// write lock before it fails what is queued, so that nothing is queued
	// after that. Once queued, the message is the publisher's (it recycles
	// it once done is told).
	if err := r.enqueue(channel, payload, done); err != nil {
		fail(err) // outside the lock: done may do anything
	}
}

// enqueue queues a PublishAsync's message, or returns why it cannot.
func (r *Redis) enqueue(channel string, payload []byte, done func(error)) error {
	r.enqueueMu.RLock()
	defer r.enqueueMu.RUnlock()
	if r.ctx.Err() != nil {
		return notSent(ErrClosed)
	}
	req := pubReqPool.Get().(*pubReq)
	req.deadline, req.channel, req.payload, req.cb = time.Now().Add(r.opts.CommandTimeout), channel, payload, done
	req.state.Store(reqQueued)
	select {
	case r.pubq <- req:
		return nil
	default:
	}
	// The queue is full: wait for room, within the same time limit.
	t := time.NewTimer(time.Until(req.deadline))
	defer t.Stop()
	select {
	case r.pubq <- req:
		return nil
	case <-t.C:
		return notSent(r.unavailable("publish", context.DeadlineExceeded))
	case <-r.ctx.Done():
		return notSent(ErrClosed)
	}
}

// pubReqPool recycles the messages of PublishAsync, one per message
// between instances otherwise.
var pubReqPool = sync.Pool{New: func() any { return new(pubReq) }}

// channel returns the Redis channel of topic: KeyPrefix+topic, from a small
// cache, since the hub publishes on a few topics over and over.
func (r *Redis) channel(topic string) string {
	r.chanMu.RLock()
	c, ok := r.channels[topic]
	r.chanMu.RUnlock()
	if ok {
		return c
	}
	c = r.opts.KeyPrefix + topic
	r.chanMu.Lock()
	if len(r.channels) < maxCachedChannels {
		r.channels[topic] = c
	}
	r.chanMu.Unlock()
	return c
}

// maxCachedChannels bounds the cache of channel names: topics named after
// instances come and go.
const maxCachedChannels = 256

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
	// ctx bounds a Publish; a PublishAsync has a deadline instead.
	ctx      context.Context
	deadline time.Time
	channel  string
	payload  []byte
	done     chan error  // Publish's, buffered: the publisher never waits on it
	cb       func(error) // or PublishAsync's; nil when no one wants the outcome

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

// expired returns why the message may no longer be sent, if it may not.
func (req *pubReq) expired() error {
	if req.ctx != nil {
		return req.ctx.Err()
	}
	if time.Now().After(req.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// finish tells the caller the outcome: Publish, which explains it itself,
// or PublishAsync's done, with the error Publish would have returned.
//
// A PublishAsync's message is recycled: whoever finishes it must not touch
// it afterwards.
func (r *Redis) finish(req *pubReq, err error) {
	if req.done != nil {
		req.done <- err
		return
	}
	if cb := req.cb; cb != nil {
		if err != nil {
			err = r.publishError(context.Background(), err)
		}
		cb(err)
	}
	req.channel, req.payload, req.cb = "", nil, nil
	pubReqPool.Put(req)
}

// giveUp gives the message up unless someone took it or gave it up first,
// and reports whether this call did: the one that did tells the caller.
func (req *pubReq) giveUp() bool {
	return req.state.CompareAndSwap(reqQueued, reqAbandoned)
}

// abandon gives the message up unless the publisher took it first, and
// reports whether it is certainly not sent.
func (req *pubReq) abandon() bool {
	req.state.CompareAndSwap(reqQueued, reqAbandoned)
	return req.state.Load() == reqAbandoned
}

// publisher writes the waiting messages, as one pipeline per round trip,
// until the broker is closed.
func (r *Redis) publisher() {
	defer r.dropPubConn()
	batch := make([]*pubReq, 0, maxPublishBatch)
	cmds := make([]*redis.IntCmd, 0, maxPublishBatch)
	for {
		select {
		case <-r.ctx.Done():
			// The broker is closed: what is still queued is not sent. The
			// lock waits for PublishAsync calls queueing now; later ones
			// see the broker closed.
			r.enqueueMu.Lock()
			defer r.enqueueMu.Unlock()
			for {
				select {
				case req := <-r.pubq:
					if req.giveUp() {
						r.finish(req, notSent(ErrClosed))
					}
				default:
					return
				}
			}
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
		if r.cluster == nil {
			r.publishDirect(batch)
		} else {
			cmds = r.publishBatch(batch, cmds[:0])
			clear(cmds)
		}
		clear(batch)
	}
}

// publishBatch publishes the messages of batch whose callers still wait,
// and tells each how it went.
func (r *Redis) publishBatch(batch []*pubReq, cmds []*redis.IntCmd) []*redis.IntCmd {
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.CommandTimeout)
	defer cancel()
	pipe := r.client.Pipeline()
	for _, req := range batch {
		if err := req.expired(); err != nil && req.giveUp() {
			r.finish(req, notSent(err))
			cmds = append(cmds, nil) // finished, and perhaps recycled: not to be touched
			continue
		}
		if !req.state.CompareAndSwap(reqQueued, reqTaken) {
			cmds = append(cmds, nil) // abandoned
			continue
		}
		if r.cluster != nil {
			cmds = append(cmds, pipe.SPublish(ctx, req.channel, req.payload))
		} else {
			cmds = append(cmds, pipe.Publish(ctx, req.channel, req.payload))
		}
	}
	if pipe.Len() > 0 {
		if r.beforeWrite != nil {
			r.beforeWrite()
		}
		_, _ = pipe.Exec(ctx) // each command carries its own error
	}
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		err := cmd.Err()
		r.commandFailed(err)
		if isDialError(err) {
			err = notSent(err)
		}
		r.finish(batch[i], err)
	}
	return cmds
}

// isDialError reports whether err is a failure to connect, after which
// nothing was written.
func isDialError(err error) bool {
	if err == nil {
		return false // before oe, which escapes: no allocation for a success
	}
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
// published meanwhile are lost (Ready and Watch report it). If ctx ends
// before the SUBSCRIBE is confirmed, the subscription is closed and ctx's
// error returned.
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
	channel := r.opts.KeyPrefix + topic
	if first {
		r.addChannel(channel)
	}
	sh := r.where[channel]
	r.subMu.Unlock()

	// Also when the topic was already subscribed: its SUBSCRIBE may still be
	// in flight on behalf of a concurrent Subscribe.
	if sh != nil {
		if err := sh.barrier(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	if r.isClosed() {
		s.Close()
		return nil, ErrClosed
	}
	return s, nil
}

// addChannel subscribes channel on the shard of its node, starting that
// shard if needed. Called under subMu.
func (r *Redis) addChannel(channel string) {
	sh := r.single
	if r.cluster != nil {
		v := r.cluster.view.Load()
		addr := ""
		if v != nil && v.slots != nil {
			addr = v.slots.master(keySlot(channel))
		}
		if addr == "" {
			// No master known for its slot: subscribed once the resolver
			// finds one; meanwhile the broker is down.
			r.where[channel] = nil
			r.adjust(0, 1, errors.New("a subscribed channel's slot has no master"))
			r.resolveSoon()
			return
		}
		if sh = r.shards[addr]; sh == nil {
			sh = r.newShard(addr)
			r.shards[addr] = sh
			r.publishView(nil)
			sh.start() // its connection subscribes the channel
		}
	}
	sh.channels[channel] = struct{}{}
	r.where[channel] = sh
	if c := sh.conn; c != nil {
		// An error closes the connection: the shard reconnects and
		// subscribes every channel again.
		_ = c.send(r.subscribeCommands(r.subCmd, []string{channel})...)
	}
}

// dropChannel unsubscribes channel from sh. Called under subMu.
func (r *Redis) dropChannel(sh *shard, channel string) {
	delete(sh.channels, channel)
	delete(sh.dirty, channel)
	if c := sh.conn; c != nil {
		c.unsubs[channel]++
		_ = c.send([]string{r.unsubCmd, channel})
	}
}

func (r *Redis) detach(s *subscription) {
	r.subMu.Lock()
	r.mu.Lock()
	subs, ok := r.topics[s.topic]
	delete(subs, s)
	last := ok && len(subs) == 0
	if last {
		delete(r.topics, s.topic)
	}
	closed := r.closed
	r.mu.Unlock()
	if !last || closed {
		r.subMu.Unlock()
		return
	}
	channel := r.opts.KeyPrefix + s.topic
	sh, known := r.where[channel]
	delete(r.where, channel)
	var idle *shard
	switch {
	case !known:
	case sh == nil:
		r.adjust(0, -1, nil)
	default:
		r.dropChannel(sh, channel)
		if r.cluster != nil && len(sh.channels) == 0 {
			delete(r.shards, sh.addr)
			r.publishView(nil)
			sh.remove()
			idle = sh
		}
	}
	r.subMu.Unlock()
	if idle != nil {
		idle.stop()
	}
}

// Ready returns nil while every subscriber connection is up with all its
// channels subscribed, and Redis answers a PING within CommandTimeout (for
// a cluster: every master does); otherwise an error wrapping
// ErrUnavailable (or ErrClosed once the broker is closed).
func (r *Redis) Ready(ctx context.Context) error {
	if r.isClosed() {
		return ErrClosed
	}
	if err := r.downError(); err != nil {
		return r.unavailable("subscriber connection", err)
	}
	pctx, cancel := context.WithTimeout(ctx, r.opts.CommandTimeout)
	defer cancel()
	var err error
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(pctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	} else {
		err = r.client.Ping(pctx).Err()
	}
	if err != nil {
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
	if err := r.usable(ctx, "claim", r.leaseKey(key)); err != nil {
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
	if err := r.usable(ctx, "release", r.leaseKey(key)); err != nil {
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

// usable returns why a command on key should not even be tried: the
// broker is closed, ctx is done, or the node serving key is known to be
// unreachable.
func (r *Redis) usable(ctx context.Context, op, key string) error {
	if r.isClosed() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.failFast(key); err != nil {
		return r.unavailable(op, err)
	}
	return nil
}

// commandFailed reacts to the error of a command: for a cluster, a node
// that fails may have been replaced by its replica, which go-redis, left to
// itself, notices only at its next periodic reload of the slots (a minute)
// unless a node answers MOVED. go-redis reloads once at a time.
func (r *Redis) commandFailed(err error) {
	if err == nil || r.cluster == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return
	}
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		cc.ReloadState(r.ctx)
	}
}

// commandError explains the failure of a command tried with ctx.
func (r *Redis) commandError(ctx context.Context, op string, err error) error {
	r.commandFailed(err)
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
// (their contexts are cancelled first), stops the subscriber connections
// and the goroutines, and closes the connections. Publish and Subscribe
// then return ErrClosed. It stops every Watch. A second Close waits for the
// first and returns nil.
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
	r.subMu.Lock()
	shards := make([]*shard, 0, len(r.shards))
	for _, sh := range r.shards {
		shards = append(shards, sh)
	}
	r.subMu.Unlock()
	// Cancelling the broker's context stops every goroutine: the shards'
	// connections are closed, which wakes their blocking reads.
	r.cancel()
	for _, sh := range shards {
		<-sh.done
	}
	r.goroutines.Wait()
	r.watchers.close()
	if r.client == nil {
		return nil
	}
	if err := r.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return r.redact(err)
	}
	return nil
}

// dispatch hands a message on channel to the local subscribers of its
// topic.
func (r *Redis) dispatch(channel, payload []byte) {
	topic, ok := bytes.CutPrefix(channel, []byte(r.opts.KeyPrefix))
	if !ok {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	subs := r.topics[string(topic)]
	if len(subs) == 0 {
		return
	}
	if payload == nil {
		payload = []byte{}
	}
	for s := range subs {
		s.offer(payload)
	}
}

// adjust changes the counts of shards down and of channels without a
// master, and tells the watchers when the broker's state changes. err, if
// not nil, is the latest reason for being down.
func (r *Redis) adjust(down, pending int, err error) {
	r.state.Lock()
	defer r.state.Unlock()
	r.state.down += down
	r.state.pending += pending
	if err != nil {
		r.state.lastErr = err
	}
	up := r.state.down == 0 && r.state.pending == 0
	if up == r.state.up {
		return
	}
	r.state.up = up
	r.watchers.notify(up)
}

func (r *Redis) isUp() bool {
	r.state.Lock()
	defer r.state.Unlock()
	return r.state.up
}

// downError returns why the broker is down, or nil if it is up.
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

// failFast returns why a command on key is not worth trying: the
// subscriber connection to the node serving key is known to be lost.
func (r *Redis) failFast(key string) error {
	sh := r.single
	if r.cluster != nil {
		sh = r.cluster.view.Load().shardFor(key)
	}
	if sh == nil {
		return nil
	}
	if err := sh.downError(); err != nil {
		return fmt.Errorf("connection lost: %w", err)
	}
	return nil
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
