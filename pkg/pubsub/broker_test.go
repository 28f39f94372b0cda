package pubsub_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testQueueSize is the per-subscription queue of every broker of the
// contract suite: small, so that the slow-handler test fills it quickly, and
// no smaller than the bursts the other tests publish without waiting.
const testQueueSize = 64

// waitTimeout bounds every wait for something that should happen: tests
// fail instead of hanging, and never sleep to synchronise.
const waitTimeout = 5 * time.Second

func TestMemory(t *testing.T) {
	t.Parallel()
	newMemory := func(t *testing.T) pubsub.Broker {
		b := pubsub.NewMemoryWithOptions(pubsub.MemoryOptions{QueueSize: testQueueSize})
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	testBroker(t, backend{
		newBroker: newMemory,
		// The instances of one process share one Memory broker.
		newGroup: func(t *testing.T, n int) []pubsub.Broker {
			b := newMemory(t)
			group := make([]pubsub.Broker, n)
			for i := range group {
				group[i] = b
			}
			return group
		},
	})
}

func TestRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	testBroker(t, redisBackend(srv))
}

// redisBackend returns the contract suite's backend on a Redis server (or
// cluster): each broker or group gets a prefix of its own.
func redisBackend(srv urlSource) backend {
	return backend{
		newBroker: func(t *testing.T) pubsub.Broker { return newRedis(t, srv, redistest.Prefix(t)) },
		newGroup: func(t *testing.T, n int) []pubsub.Broker {
			prefix := redistest.Prefix(t)
			group := make([]pubsub.Broker, n)
			for i := range group {
				group[i] = newRedis(t, srv, prefix)
			}
			return group
		},
	}
}

// urlSource is a Redis server or cluster started for a test.
type urlSource interface{ URL() string }

// newRedis returns a Redis broker on srv, closed when t ends.
func newRedis(t testing.TB, srv urlSource, prefix string) *pubsub.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	b, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{
		URL:       srv.URL(),
		KeyPrefix: prefix,
		QueueSize: testQueueSize,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// backend is what the contract suite needs of a Broker implementation.
type backend struct {
	// newBroker returns a fresh broker, isolated from every other, whose
	// subscriptions queue testQueueSize messages; it is closed when t ends.
	newBroker func(t *testing.T) pubsub.Broker
	// newGroup returns n brokers that share topics and leases, as the
	// instances of one deployment do, isolated from every other.
	newGroup func(t *testing.T, n int) []pubsub.Broker
}

// testBroker is the contract every Broker meets.
func testBroker(t *testing.T, be backend) {
	newBroker := be.newBroker
	t.Run("leases", func(t *testing.T) {
		t.Parallel()
		testLeases(t, be)
	})
	t.Run("store", func(t *testing.T) {
		t.Parallel()
		testStore(t, be)
	})
	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		require.NoError(t, b.Ready(ctx))
		rec := newRecorder()
		subscribe(t, b, "greetings", rec.handle)

		buf := []byte("hello")
		require.NoError(t, b.Publish(ctx, "greetings", buf))
		buf[0] = 'j' // Publish must not retain the caller's buffer.

		m := rec.next(t)
		assert.Equal(t, "greetings", m.topic)
		assert.Equal(t, "hello", m.payload)
	})

	t.Run("watch is silent while all is well", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		calls := make(chan bool, 4)
		stop := b.Watch(func(up bool) { calls <- up })
		rec := newRecorder()
		sub := subscribe(t, b, "quiet", rec.handle)
		require.NoError(t, b.Publish(ctx, "quiet", []byte("x")))
		rec.next(t)
		require.NoError(t, sub.Close())
		stop()
		stop() // idempotent

		other := b.Watch(func(up bool) { calls <- up })
		require.NoError(t, b.Close(), "Close stops the watches")
		other()
		b.Watch(func(up bool) { calls <- up })() // after Close: harmless
		assert.Empty(t, calls)
	})

	t.Run("publish without subscribers", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		require.NoError(t, b.Publish(context.Background(), "nobody", []byte("x")))
	})

	t.Run("every subscriber of a topic receives", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		recs := []*recorder{newRecorder(), newRecorder(), newRecorder()}
		for _, r := range recs {
			subscribe(t, b, "fan", r.handle)
		}
		require.NoError(t, b.Publish(context.Background(), "fan", []byte("all")))
		for _, r := range recs {
			assert.Equal(t, "all", r.next(t).payload)
		}
	})

	t.Run("topics are isolated", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		a, c := newRecorder(), newRecorder()
		subscribe(t, b, "a", a.handle)
		subscribe(t, b, "c", c.handle)
		require.NoError(t, b.Publish(ctx, "c", []byte("for c")))
		require.NoError(t, b.Publish(ctx, "other", []byte("for nobody")))
		require.NoError(t, b.Publish(ctx, "a", []byte("for a")))
		require.NoError(t, b.Publish(ctx, "a", []byte("end")))

		assert.Equal(t, "for a", a.next(t).payload)
		assert.Equal(t, "end", a.next(t).payload)
		assert.Equal(t, "for c", c.next(t).payload)
		// Both "a" messages arrived after "for c" was published: had
		// anything else reached a, it would be queued by now.
		a.none(t)
		c.none(t)
	})

	t.Run("order of one publisher is kept", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		rec := newRecorder()
		subscribe(t, b, "seq", rec.handle)
		for i := range testQueueSize {
			require.NoError(t, b.Publish(ctx, "seq", []byte(fmt.Sprint(i))))
		}
		for i := range testQueueSize {
			require.Equal(t, fmt.Sprint(i), rec.next(t).payload)
		}
	})

	t.Run("async publishes keep order with publishes and report once", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		ap, ok := b.(pubsub.AsyncPublisher)
		require.True(t, ok, "every broker publishes asynchronously")
		rec := newRecorder()
		subscribe(t, b, "seq", rec.handle)
		outcomes := make(chan error, testQueueSize)
		for i := range testQueueSize {
			if i%3 == 0 {
				require.NoError(t, b.Publish(ctx, "seq", []byte(fmt.Sprint(i))))
				continue
			}
			ap.PublishAsync("seq", []byte(fmt.Sprint(i)), func(err error) { outcomes <- err })
		}
		for i := range testQueueSize {
			require.Equal(t, fmt.Sprint(i), rec.next(t).payload)
		}
		for i := range testQueueSize {
			if i%3 != 0 {
				assert.NoError(t, receive(t, outcomes))
			}
		}
		select {
		case err := <-outcomes:
			t.Fatalf("an outcome reported twice: %v", err)
		default:
		}
		ap.PublishAsync("seq", []byte("no one asks"), nil)
		assert.Equal(t, "no one asks", rec.next(t).payload)

		require.NoError(t, b.Close())
		ap.PublishAsync("seq", []byte("closed"), func(err error) { outcomes <- err })
		err := receive(t, outcomes)
		assert.ErrorIs(t, err, pubsub.ErrClosed)
		assert.ErrorIs(t, err, pubsub.ErrNotSent)
	})

	t.Run("handler context keeps values, not cancellation", func(t *testing.T) {
		t.Parallel()
		type key struct{}
		b := newBroker(t)
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		got := make(chan context.Context, 1)
		sub, err := b.Subscribe(ctx, "ctx", func(hctx context.Context, _ string, _ []byte) { got <- hctx })
		require.NoError(t, err)
		cancel()
		require.NoError(t, b.Publish(context.Background(), "ctx", []byte("x")))
		hctx := receive(t, got)
		assert.Equal(t, "v", hctx.Value(key{}))
		assert.NoError(t, hctx.Err(), "the Subscribe context ended, not the subscription")
		require.NoError(t, sub.Close())
		assert.Error(t, hctx.Err(), "Close cancels the handler context")
	})

	t.Run("publish with a done context is not sent", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		rec := newRecorder()
		subscribe(t, b, "t", rec.handle)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := b.Publish(ctx, "t", []byte("never"))
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, pubsub.ErrNotSent)
		require.NoError(t, b.Publish(context.Background(), "t", []byte("sent")))
		assert.Equal(t, "sent", rec.next(t).payload)
	})

	t.Run("subscribe with a done context fails", func(t *testing.T) {
		t.Parallel()
		b := newBroker(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := b.Subscribe(ctx, "t", newRecorder().handle)
		assert.ErrorIs(t, err, context.Canceled)
	})

	t.Run("subscription close stops delivery and waits for the handler", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		entered := make(chan struct{}, 1)
		var running, calls atomic.Int32
		sub, err := b.Subscribe(ctx, "topic", func(hctx context.Context, _ string, _ []byte) {
			running.Add(1)
			defer running.Add(-1)
			calls.Add(1)
			entered <- struct{}{}
			<-hctx.Done() // blocks until Close cancels it
		})
		require.NoError(t, err)
		witness := newRecorder()
		subscribe(t, b, "topic", witness.handle)

		require.NoError(t, b.Publish(ctx, "topic", []byte("1")))
		receive(t, entered)
		require.NoError(t, b.Publish(ctx, "topic", []byte("2"))) // queued behind the blocked handler
		witness.next(t)
		witness.next(t)

		within(t, waitTimeout, "Subscription.Close", func() { assert.NoError(t, sub.Close()) })
		assert.Zero(t, running.Load(), "handler still running after Close returned")

		require.NoError(t, b.Publish(ctx, "topic", []byte("3")))
		assert.Equal(t, "3", witness.next(t).payload)
		assert.Equal(t, int32(1), calls.Load(), "handler called after Close (the queued message must be discarded)")
		assert.NoError(t, sub.Close(), "Close is idempotent")
	})

	t.Run("resubscribing a topic after its last subscriber left", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		for range 10 {
			s1 := subscribe(t, b, "churn", newRecorder().handle)
			s2 := subscribe(t, b, "churn", newRecorder().handle)
			require.NoError(t, s1.Close())
			require.NoError(t, s2.Close())
		}
		rec := newRecorder()
		subscribe(t, b, "churn", rec.handle)
		require.NoError(t, b.Publish(ctx, "churn", []byte("still here")))
		assert.Equal(t, "still here", rec.next(t).payload)
	})

	t.Run("broker close stops everything", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		entered := make(chan struct{}, 1)
		returned := make(chan struct{})
		sub, err := b.Subscribe(ctx, "topic", func(hctx context.Context, _ string, _ []byte) {
			defer close(returned)
			entered <- struct{}{}
			<-hctx.Done()
		})
		require.NoError(t, err)
		require.NoError(t, b.Publish(ctx, "topic", []byte("1")))
		receive(t, entered)

		within(t, waitTimeout, "Broker.Close", func() { assert.NoError(t, b.Close()) })
		select {
		case <-returned:
		default:
			t.Fatal("handler still running after the broker's Close returned")
		}
		err = b.Publish(ctx, "topic", []byte("2"))
		assert.ErrorIs(t, err, pubsub.ErrClosed)
		assert.ErrorIs(t, err, pubsub.ErrNotSent)
		_, err = b.Subscribe(ctx, "topic", newRecorder().handle)
		assert.ErrorIs(t, err, pubsub.ErrClosed)
		assert.ErrorIs(t, b.Ready(ctx), pubsub.ErrClosed)
		assert.NoError(t, sub.Close())
		assert.NoError(t, b.Close(), "Close is idempotent")
	})

	t.Run("slow handler blocks neither publish nor others", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		release := make(chan struct{})
		entered := make(chan struct{}, 1)
		slow := newRecorder()
		subscribe(t, b, "topic", func(hctx context.Context, topic string, p []byte) {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
				slow.handle(hctx, topic, p)
			case <-hctx.Done(): // the test failed early
			}
		})
		fast := newRecorder()
		subscribe(t, b, "topic", fast.handle)

		// Message 0 blocks the slow handler; 1..testQueueSize fill its queue;
		// the extra ones are dropped for it, and for it only.
		const extra = 5
		for i := range testQueueSize + 1 + extra {
			start := time.Now()
			require.NoError(t, b.Publish(ctx, "topic", []byte(fmt.Sprint(i))))
			require.Less(t, time.Since(start), time.Second, "Publish waited for a slow handler")
			require.Equal(t, fmt.Sprint(i), fast.next(t).payload)
			if i == 0 {
				receive(t, entered)
			}
		}
		dc, ok := b.(pubsub.DropCounter)
		require.True(t, ok, "%T does not count drops", b)
		// The fast subscriber's having a message does not mean the slow one
		// was offered it yet (a broker offers a message to its subscribers
		// one after the other, and the fast one may take it first): every
		// drop counted says the slow one was offered all.
		require.Eventually(t, func() bool { return dc.Dropped() >= extra }, waitTimeout, time.Millisecond,
			"the extra messages were dropped for the slow subscriber")
		assert.Equal(t, uint64(extra), dc.Dropped())

		close(release)
		for i := range testQueueSize + 1 {
			require.Equal(t, fmt.Sprint(i), slow.next(t).payload)
		}
		require.NoError(t, b.Publish(ctx, "topic", []byte("after")))
		assert.Equal(t, "after", slow.next(t).payload, "the slow subscriber lost the dropped messages only")
	})

	t.Run("concurrent publishers", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := newBroker(t)
		const publishers, each = 8, testQueueSize / 8
		recs := []*recorder{newRecorder(), newRecorder()}
		for _, r := range recs {
			subscribe(t, b, "busy", r.handle)
		}
		var wg sync.WaitGroup
		for p := range publishers {
			wg.Go(func() {
				for i := range each {
					assert.NoError(t, b.Publish(ctx, "busy", fmt.Appendf(nil, "%d/%d", p, i)))
				}
			})
		}
		wg.Wait()
		for _, r := range recs {
			next := make([]int, publishers) // next expected sequence number per publisher
			for range publishers * each {
				var p, i int
				_, err := fmt.Sscanf(r.next(t).payload, "%d/%d", &p, &i)
				require.NoError(t, err)
				require.Equal(t, next[p], i, "publisher %d out of order", p)
				next[p]++
			}
			r.none(t)
		}
	})
}

// message is one delivery seen by a recorder.
type message struct {
	topic   string
	payload string
}

// recorder is a Handler that never blocks: it records what it is given.
type recorder struct {
	ch chan message
}

func newRecorder() *recorder {
	return &recorder{ch: make(chan message, 4*testQueueSize)}
}

func (r *recorder) handle(_ context.Context, topic string, payload []byte) {
	r.ch <- message{topic: topic, payload: string(payload)}
}

// next waits for the next message.
func (r *recorder) next(t testing.TB) message {
	t.Helper()
	return receive(t, r.ch)
}

// none checks that no message is waiting.
func (r *recorder) none(t testing.TB) {
	t.Helper()
	select {
	case m := <-r.ch:
		t.Errorf("unexpected message %q on %q", m.payload, m.topic)
	default:
	}
}

// receive waits up to waitTimeout for a value on ch.
func receive[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("nothing received within %v", waitTimeout)
		panic("unreachable")
	}
}

// within fails t if f does not return within d. f runs on another
// goroutine, so it must report with assert, not require. If f hangs it keeps
// running: the test is lost anyway, and goleak reports the goroutine.
func within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// subscribe subscribes h to topic and closes the subscription when t ends.
func subscribe(t testing.TB, b pubsub.Broker, topic string, h pubsub.Handler) pubsub.Subscription {
	t.Helper()
	sub, err := b.Subscribe(context.Background(), topic, h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}
