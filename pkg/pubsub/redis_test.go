package pubsub_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// recoveryLimit is how soon after Redis comes back deliveries must resume.
const recoveryLimit = 2 * time.Second

func TestRedis_instancesWithOnePrefixShareMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, srv, prefix), newRedis(t, srv, prefix)
	ra, rb := newRecorder(), newRecorder()
	subscribe(t, a, "news", ra.handle)
	subscribe(t, b, "news", rb.handle)

	require.NoError(t, a.Publish(ctx, "news", []byte("from a")))
	assert.Equal(t, "from a", ra.next(t).payload)
	assert.Equal(t, "from a", rb.next(t).payload)
	require.NoError(t, b.Publish(ctx, "news", []byte("from b")))
	assert.Equal(t, "from b", ra.next(t).payload)
	assert.Equal(t, "from b", rb.next(t).payload)
}

// TestRedis_concurrentPublishes: publishes from many goroutines, which the
// broker gathers into pipelines, all arrive, each goroutine's in its order,
// and a payload reused as soon as Publish returns is not disturbed.
func TestRedis_concurrentPublishes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	const publishers, each = 8, 100
	a := newRedis(t, srv, prefix)
	b, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: srv.URL(), KeyPrefix: prefix, QueueSize: publishers * each,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	got := make(chan string, publishers*each)
	subscribe(t, b, "load", func(_ context.Context, _ string, payload []byte) { got <- string(payload) })

	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			buf := make([]byte, 0, 16)
			for i := range each {
				buf = fmt.Appendf(buf[:0], "%d/%03d", p, i)
				if err := a.Publish(ctx, "load", buf); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	last := map[string]int{}
	for range publishers * each {
		m := receive(t, got)
		who, seq, _ := strings.Cut(m, "/")
		n, err := strconv.Atoi(seq)
		require.NoError(t, err, m)
		prev, seen := last[who]
		require.True(t, !seen && n == 0 || seen && n == prev+1, "publisher %s: %d after %d", who, n, prev)
		last[who] = n
	}
	assert.Len(t, last, publishers)
	assert.Zero(t, b.Dropped())
}

func TestRedis_prefixesIsolate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	a, b := newRedis(t, srv, redistest.Prefix(t)), newRedis(t, srv, redistest.Prefix(t))
	ra, rb := newRecorder(), newRecorder()
	subscribe(t, a, "news", ra.handle)
	subscribe(t, b, "news", rb.handle)

	require.NoError(t, a.Publish(ctx, "news", []byte("for a")))
	require.NoError(t, b.Publish(ctx, "news", []byte("for b")))
	// Redis pushes messages to a subscriber in the order it ran the
	// PUBLISHes: had "for a" reached b, it would come before "for b".
	assert.Equal(t, "for b", rb.next(t).payload)
	assert.Equal(t, "for a", ra.next(t).payload)
	ra.none(t)
	rb.none(t)
}

func TestRedis_outageAndRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	b := newRedis(t, srv, prefix)
	rec := newRecorder()
	subscribe(t, b, "live", rec.handle)
	gone := subscribe(t, b, "gone", newRecorder().handle)
	require.NoError(t, b.Publish(ctx, "live", []byte("before")))
	require.Equal(t, "before", rec.next(t).payload)

	srv.Stop()

	start := time.Now()
	err := b.Publish(ctx, "live", []byte("lost"))
	took := time.Since(start)
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.Less(t, took, 2*time.Second, "Publish must fail fast")
	t.Logf("Publish with Redis down failed in %v: %v", took.Round(time.Millisecond), err)

	eventually(t, 2*time.Second, "Ready reports the outage", func() bool {
		return errors.Is(b.Ready(ctx), pubsub.ErrUnavailable)
	})
	// Now that the outage is known, Publish does not even try.
	start = time.Now()
	err = b.Publish(ctx, "live", []byte("lost"))
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.ErrorIs(t, err, pubsub.ErrNotSent)
	assert.Less(t, time.Since(start), 100*time.Millisecond)
	// And so do leases.
	start = time.Now()
	_, err = b.Claim(ctx, "name", "me", time.Minute)
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.ErrorIs(t, b.Release(ctx, "name", "me"), pubsub.ErrUnavailable)
	assert.Less(t, time.Since(start), 100*time.Millisecond)
	// And so does the store.
	start = time.Now()
	_, err = b.Get(ctx, "key")
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.ErrorIs(t, b.Update(ctx, "key", func([]byte) ([]byte, time.Duration, error) { return []byte("v"), time.Minute, nil }),
		pubsub.ErrUnavailable)
	assert.Less(t, time.Since(start), 100*time.Millisecond)

	// Subscribing and unsubscribing still work, locally, during the outage.
	during := newRecorder()
	within(t, 2*time.Second, "Subscribe during the outage", func() {
		sub, err := b.Subscribe(ctx, "during", during.handle)
		if assert.NoError(t, err) {
			t.Cleanup(func() { _ = sub.Close() })
		}
	})
	within(t, 2*time.Second, "Subscription.Close during the outage", func() { assert.NoError(t, gone.Close()) })

	srv.Restart()
	restarted := time.Now()

	readyAfter := eventually(t, recoveryLimit, "Ready after the restart", func() bool { return b.Ready(ctx) == nil })
	deliveredAfter := publishUntilDelivered(t, b, "live", rec, restarted)
	t.Logf("after the Redis restart: Ready in %v, first delivery in %v",
		readyAfter.Round(time.Millisecond), deliveredAfter.Round(time.Millisecond))
	assert.Less(t, deliveredAfter, recoveryLimit)

	// The topic subscribed during the outage is live; the one closed during
	// it was not subscribed again.
	require.NoError(t, b.Publish(ctx, "during", []byte("hi")))
	assert.Equal(t, "hi", during.next(t).payload)
	assert.Equal(t, map[string]int64{prefix + "live": 1, prefix + "during": 1, prefix + "gone": 0},
		numSub(t, srv, prefix+"live", prefix+"during", prefix+"gone"))
}

// TestRedis_watchReportsOutages: Watch reports a lost connection, then its
// recovery, in order; once it reports the recovery, every subscription is
// in place: a message another instance publishes then is delivered.
func TestRedis_watchReportsOutages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		fail, recover func(*redistest.Server)
	}{
		{"server killed", (*redistest.Server).Stop, (*redistest.Server).Restart},
		{"server frozen", (*redistest.Server).Pause, (*redistest.Server).Resume},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := redistest.Start(t)
			prefix := redistest.Prefix(t)
			a, b := newRedis(t, srv, prefix), newRedis(t, srv, prefix)
			states := make(chan bool, 16)
			stop := a.Watch(func(up bool) { states <- up })
			defer stop()
			rec := newRecorder()
			subscribe(t, a, "live", rec.handle)

			for round := range 2 {
				tc.fail(srv)
				assert.False(t, receive(t, states), "round %d: the loss is reported first", round)
				assert.ErrorIs(t, a.Ready(ctx), pubsub.ErrUnavailable)
				tc.recover(srv)
				require.True(t, receive(t, states), "round %d: then the recovery", round)
				assert.NoError(t, a.Ready(ctx), "Ready succeeds once the recovery is reported")

				// b may not have noticed the outage yet, or not be back.
				eventually(t, recoveryLimit, "the publisher is back", func() bool { return b.Ready(ctx) == nil })
				msg := fmt.Sprint("after recovery ", round)
				require.NoError(t, b.Publish(ctx, "live", []byte(msg)))
				assert.Equal(t, msg, rec.next(t).payload)
			}
			select {
			case up := <-states:
				t.Errorf("unexpected report %v", up)
			default:
			}
		})
	}
}

// TestRedis_leaseIsAKeyUnderThePrefix: a lease is the Redis key
// <prefix>lease:<key>, holding its owner, which Redis expires.
func TestRedis_leaseIsAKeyUnderThePrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	b := newRedis(t, srv, prefix)
	holder, err := b.Claim(ctx, "server/echo", "instance-1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "instance-1", holder)

	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	v, err := c.Get(ctx, prefix+"lease:server/echo").Result()
	require.NoError(t, err)
	assert.Equal(t, "instance-1", v)
	ttl, err := c.PTTL(ctx, prefix+"lease:server/echo").Result()
	require.NoError(t, err)
	assert.True(t, ttl > 0 && ttl <= time.Minute, "PTTL %v", ttl)

	require.NoError(t, b.Release(ctx, "server/echo", "instance-1"))
	assert.ErrorIs(t, c.Get(ctx, prefix+"lease:server/echo").Err(), redis.Nil)
}

// TestRedis_longOutage measures the worst case: an outage long enough for
// the reconnection backoff to reach its maximum (1s by default).
func TestRedis_longOutage(t *testing.T) {
	t.Parallel()
	const outage = 3 * time.Second
	ctx := context.Background()
	srv := redistest.Start(t)
	b := newRedis(t, srv, redistest.Prefix(t))
	rec := newRecorder()
	subscribe(t, b, "live", rec.handle)

	srv.Stop()
	<-time.After(outage) // the outage itself: nothing to wait for
	require.ErrorIs(t, b.Ready(ctx), pubsub.ErrUnavailable)
	srv.Restart()
	restarted := time.Now()
	deliveredAfter := publishUntilDelivered(t, b, "live", rec, restarted)
	t.Logf("after a %v outage: first delivery %v after the restart", outage, deliveredAfter.Round(time.Millisecond))
	assert.Less(t, deliveredAfter, recoveryLimit)
}

func TestRedis_frozenServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	var logs syncBuffer
	b, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{
		URL:       srv.URL(),
		KeyPrefix: redistest.Prefix(t),
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	rec := newRecorder()
	subscribe(t, b, "live", rec.handle)
	require.NoError(t, b.Publish(ctx, "live", []byte("before")))
	require.Equal(t, "before", rec.next(t).payload)

	// A frozen server keeps its connections open and answers nothing: only
	// timeouts and the health check can tell.
	srv.Pause()
	paused := true
	t.Cleanup(func() {
		if paused {
			srv.Resume()
		}
	})

	start := time.Now()
	err = b.Publish(ctx, "live", []byte("maybe lost"))
	took := time.Since(start)
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.Less(t, took, 2*time.Second, "Publish must not hang")
	t.Logf("Publish to a frozen Redis failed in %v", took.Round(time.Millisecond))

	assert.ErrorIs(t, b.Ready(ctx), pubsub.ErrUnavailable)
	// The pub/sub connection is silent, not broken: only the health check
	// (a PING after 1s of silence, unanswered for 500ms) can find out.
	eventually(t, 3*time.Second, "the health check notices", func() bool {
		return strings.Contains(logs.String(), "connection lost")
	})
	t.Logf("frozen server noticed by the health check %v after the freeze", time.Since(start).Round(time.Millisecond))

	srv.Resume()
	paused = false
	resumed := time.Now()
	deliveredAfter := publishUntilDelivered(t, b, "live", rec, resumed)
	t.Logf("after the server resumed: first delivery in %v", deliveredAfter.Round(time.Millisecond))
	assert.Less(t, deliveredAfter, recoveryLimit)
}

// TestRedis_asyncPublishToAFrozenServer: messages published without
// waiting to a server that answers nothing each get their outcome within
// the time limit, and those still queued when the broker closes get one
// too, once.
func TestRedis_asyncPublishToAFrozenServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := newRedis(t, srv, redistest.Prefix(t))
	subscribe(t, b, "t", newRecorder().handle)
	srv.Pause()
	defer srv.Resume()

	const n = 100
	outcomes := make(chan error, 2*n)
	start := time.Now()
	for range n {
		b.PublishAsync("t", []byte("x"), func(err error) { outcomes <- err })
	}
	for range n {
		assert.ErrorIs(t, receive(t, outcomes), pubsub.ErrUnavailable)
	}
	took := time.Since(start)
	assert.Less(t, took, 2*time.Second, "every outcome within the time limit")
	t.Logf("%d messages to a frozen Redis failed within %v", n, took.Round(time.Millisecond))

	for range n {
		b.PublishAsync("t", []byte("y"), func(err error) { outcomes <- err })
	}
	within(t, 2*time.Second, "Close with messages queued", func() { assert.NoError(t, b.Close()) })
	for range n {
		err := receive(t, outcomes)
		assert.True(t, errors.Is(err, pubsub.ErrClosed) || errors.Is(err, pubsub.ErrUnavailable), "%v", err)
	}
	select {
	case err := <-outcomes:
		t.Fatalf("an outcome reported twice: %v", err)
	default:
	}
}

func TestRedis_closeWhileDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := newRedis(t, srv, redistest.Prefix(t))
	subscribe(t, b, "t", newRecorder().handle)
	srv.Stop()
	within(t, 2*time.Second, "Close with Redis down", func() { assert.NoError(t, b.Close()) })
	assert.ErrorIs(t, b.Publish(context.Background(), "t", nil), pubsub.ErrClosed)
}

func TestRedis_closeWhileFrozen(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := newRedis(t, srv, redistest.Prefix(t))
	subscribe(t, b, "t", newRecorder().handle)
	srv.Pause()
	defer srv.Resume()
	within(t, 2*time.Second, "Close with Redis frozen", func() { assert.NoError(t, b.Close()) })
}

func TestRedis_newFailsFastWhenUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.Stop()
	start := time.Now()
	b, err := pubsub.NewRedis(context.Background(), pubsub.RedisOptions{URL: srv.URL()})
	assert.Nil(t, b)
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestRedis_passwordNeverShown(t *testing.T) {
	t.Parallel()
	const password = "s3cr3t-Pa55"
	ctx := context.Background()

	t.Run("bad URLs", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{
			"redis://user:" + password + "@127.0.0.1:notaport/0",
			"redis://user:" + password + "@127.0.0.1:6379/notadb",
			"redis://user:" + password + "@127.0.0.1:6379/0?dial_timeout=soon",
			"ftp://user:" + password + "@127.0.0.1:6379/0",
			"redis://user:" + password + "@127.0.0.1:6379/0\x7f",
			"redis+cluster://user:" + password + "@127.0.0.1:7000/3",
			"redis+cluster://user:" + password + "@127.0.0.1:7000,127.0.0.1:7001?dial_timeout=soon",
			"rediss+cluster://user:" + password + "@[::1]:7000,[::1]:7001?x=%zz",
			"redis://user:" + password + "@127.0.0.1:7000?addr=127.0.0.1:7001&dial_timeout=soon",
		} {
			_, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: u})
			if assert.Error(t, err, u) {
				assert.NotContains(t, err.Error(), password)
			}
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, "--requirepass", "the-right-one")
		_, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: withPassword(srv.URL(), password)})
		assert.ErrorIs(t, err, pubsub.ErrUnavailable)
		assert.NotContains(t, err.Error(), password)
	})

	t.Run("outage", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, "--requirepass", password)
		var logs syncBuffer
		b, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{
			URL:       withPassword(srv.URL(), password),
			KeyPrefix: redistest.Prefix(t),
			Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Close() })
		rec := newRecorder()
		subscribe(t, b, "t", rec.handle)

		srv.Stop()
		err = b.Publish(ctx, "t", []byte("x"))
		require.ErrorIs(t, err, pubsub.ErrUnavailable)
		assert.NotContains(t, err.Error(), password)
		eventually(t, 2*time.Second, "Ready reports the outage", func() bool {
			err := b.Ready(ctx)
			if err == nil {
				return false
			}
			assert.NotContains(t, err.Error(), password)
			return errors.Is(err, pubsub.ErrUnavailable)
		})

		srv.Restart()
		publishUntilDelivered(t, b, "t", rec, time.Now())
		require.NoError(t, b.Close())
		assert.Contains(t, logs.String(), "connection lost")
		assert.Contains(t, logs.String(), "restored")
		assert.NotContains(t, logs.String(), password)
	})
}

// publishUntilDelivered publishes on topic every 10ms until rec receives
// one of these messages, and returns the time from since to that delivery.
// It fails t after recoveryLimit+waitTimeout, so that a slow recovery is
// measured and reported rather than cut short.
func publishUntilDelivered(t *testing.T, b pubsub.Broker, topic string, rec *recorder, since time.Time) time.Duration {
	t.Helper()
	const probe = "probe after the outage"
	deadline := time.NewTimer(recoveryLimit + waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = b.Publish(ctx, topic, []byte(probe)) // fails until Redis is back
		cancel()
		select {
		case m := <-rec.ch:
			if m.payload == probe {
				return time.Since(since)
			}
			// A message published before the outage, late: allowed.
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("no delivery on %q within %v of the recovery", topic, recoveryLimit+waitTimeout)
		}
	}
}

// eventually polls cond every 5ms until it holds, and returns how long that
// took; it fails t if cond does not hold within d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return time.Since(start)
		}
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		case <-tick.C:
		}
	}
}

// numSub asks Redis how many connections subscribe to each channel.
func numSub(t *testing.T, srv *redistest.Server, channels ...string) map[string]int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	n, err := c.PubSubNumSub(ctx, channels...).Result()
	require.NoError(t, err)
	return n
}

func withPassword(rawURL, password string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(err)
	}
	u.User = url.UserPassword("", password)
	return u.String()
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRedis_tls: the broker works over TLS (rediss://), its subscriber
// connection included, and survives a restart there too.
func TestRedis_tls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.StartTLS(t, "--requirepass", "pw")
	url := strings.Replace(srv.TLSURL(), "rediss://", "rediss://:pw@", 1)
	b, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: url, KeyPrefix: redistest.Prefix(t),
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	rec := newRecorder()
	subscribe(t, b, "t", rec.handle)
	require.NoError(t, b.Publish(ctx, "t", []byte("over TLS")))
	assert.Equal(t, "over TLS", rec.next(t).payload)

	srv.Restart()
	publishUntilDelivered(t, b, "t", rec, time.Now())
}

// TestRedis_unixSocket: a server reached through a Unix socket, unix://.
func TestRedis_unixSocket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "redis.sock")
	redistest.Start(t, "--unixsocket", sock, "--unixsocketperm", "700")
	b, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: "unix://" + sock + "?db=2", KeyPrefix: redistest.Prefix(t),
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	rec := newRecorder()
	subscribe(t, b, "t", rec.handle)
	require.NoError(t, b.Publish(ctx, "t", []byte("through the socket")))
	assert.Equal(t, "through the socket", rec.next(t).payload)
}
