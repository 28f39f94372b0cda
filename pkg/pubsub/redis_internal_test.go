package pubsub

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
)

// TestRedis_publishErrorsSayWhetherSent: a message whose ctx ends while it
// waits in the publisher's queue is certainly not sent (ErrNotSent); one
// whose PUBLISH was written before its ctx ended may have been delivered,
// and its error does not claim otherwise.
func TestRedis_publishErrorsSayWhetherSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, r, got := subscribedRedis(t)

	srv.Pause()
	paused := true
	t.Cleanup(func() {
		if paused {
			srv.Resume()
		}
	})
	// The publisher takes "written" and blocks on the frozen server...
	started := make(chan struct{}, 1)
	r.beforeWrite = func() {
		select {
		case started <- struct{}{}:
		default:
		}
	}
	writtenErr := make(chan error, 1)
	go func() { writtenErr <- r.Publish(ctx, "t", []byte("written")) }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the publisher did not write the first message")
	}
	// ... so "queued" waits behind it until its ctx ends.
	qctx, cancel := context.WithCancel(ctx)
	queuedErr := make(chan error, 1)
	go func() { queuedErr <- r.Publish(qctx, "t", []byte("queued")) }()
	waitFor(t, "the second message is queued", func() bool { return len(r.pubq) == 1 })
	cancel()
	err := <-queuedErr
	assert.ErrorIs(t, err, ErrNotSent)
	assert.ErrorIs(t, err, context.Canceled)

	err = <-writtenErr // after CommandTimeout
	assert.ErrorIs(t, err, ErrUnavailable)
	assert.NotErrorIs(t, err, ErrNotSent, "the PUBLISH was written: the outcome is unknown")

	srv.Resume()
	paused = false
	// Whether "written" reaches the subscriber is up to Redis; "queued"
	// never does. Publish a marker until it arrives, then look.
	var seen []string
	waitFor(t, "a delivery after the freeze", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_ = r.Publish(pctx, "t", []byte("marker"))
		cancel()
		for {
			select {
			case m := <-got:
				seen = append(seen, m)
				if m == "marker" {
					return true
				}
			default:
				return false
			}
		}
	})
	assert.NotContains(t, seen, "queued")
}

// waitFor polls cond every 5ms for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// TestRedis_publishAsyncAfterARestart: a message published without
// waiting after the server restarted goes out on a new connection, and is
// delivered: the publisher finds the old one closed before writing (where
// the write would have left the outcome unknown, and the message lost).
func TestRedis_publishAsyncAfterARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, r, got := subscribedRedis(t)

	publish := func(m string) error {
		outcome := make(chan error, 1)
		r.PublishAsync("t", []byte(m), func(err error) { outcome <- err })
		return receiveWithin(t, outcome)
	}
	require.NoError(t, publish("before"))
	assert.Equal(t, "before", receiveWithin(t, got))

	srv.Restart()
	waitFor(t, "the broker back", func() bool { return r.Ready(ctx) == nil })
	require.NoError(t, publish("after"), "published on a new connection")
	assert.Equal(t, "after", receiveWithin(t, got))
}

// receiveWithin receives from ch, or fails the test after 10s.
func receiveWithin[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received within 10s")
		panic("unreachable")
	}
}

// subscribedRedis starts a redis-server and a broker on it subscribed to
// "t", whose messages got receives.
func subscribedRedis(t *testing.T) (*redistest.Server, *Redis, chan string) {
	t.Helper()
	srv := redistest.Start(t)
	r, err := NewRedis(context.Background(), RedisOptions{URL: srv.URL(), KeyPrefix: redistest.Prefix(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	got := make(chan string, 8)
	sub, err := r.Subscribe(context.Background(), "t", func(_ context.Context, _ string, p []byte) { got <- string(p) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return srv, r, got
}
