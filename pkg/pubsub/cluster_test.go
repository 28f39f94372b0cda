package pubsub_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

func TestRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	testBroker(t, redisBackend(c))
}

// TestRedisCluster_channelsLiveOnTheirShard: each topic's channel is
// subscribed on the master of its slot only, with sharded pub/sub, so that
// a message reaches the nodes of one shard instead of every node.
func TestRedisCluster_channelsLiveOnTheirShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, c, prefix), newRedis(t, c, prefix)
	const topics = 12
	recs := make([]*recorder, topics)
	for i := range recs {
		recs[i] = newRecorder()
		subscribe(t, a, fmt.Sprint("topic-", i), recs[i].handle)
	}
	for i := range topics {
		require.NoError(t, b.Publish(ctx, fmt.Sprint("topic-", i), []byte(fmt.Sprint("to ", i))))
	}
	for i, rec := range recs {
		assert.Equal(t, fmt.Sprint("to ", i), rec.next(t).payload)
	}

	masters := map[*redistest.Server]bool{}
	for i := range topics {
		channel := fmt.Sprint(prefix, "topic-", i)
		owner := c.MasterFor(channel)
		masters[owner] = true
		for _, n := range c.Nodes() {
			want := int64(0)
			if n == owner {
				want = 1
			}
			assert.Equal(t, want, shardNumSub(t, n, channel), "subscribers of %s on %s", channel, n.Addr())
		}
	}
	assert.Len(t, masters, 3, "the topics spread over every master")
}

// TestRedisCluster_masterKilled: the master of a subscribed topic's shard is
// killed; its replica takes over, the broker follows it there, Watch
// reports the loss and the recovery, and deliveries resume.
func TestRedisCluster_masterKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartClusterConfig(t, redistest.ClusterConfig{Masters: 3, Replicas: 1})
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, c, prefix), newRedis(t, c, prefix)
	states := make(chan bool, 16)
	stop := a.Watch(func(up bool) { states <- up })
	defer stop()
	live, other := newRecorder(), newRecorder()
	subscribe(t, a, "live", live.handle)
	// A topic on another shard, unaffected.
	otherTopic := topicOnAnotherMaster(t, c, prefix, "live")
	subscribe(t, a, otherTopic, other.handle)

	master := c.MasterFor(prefix + "live")
	master.Stop()
	killed := time.Now()
	assert.False(t, receive(t, states), "the loss is reported")
	require.True(t, receiveWithin(t, states, 30*time.Second), "then the recovery")
	t.Logf("master killed: recovery reported after %v", time.Since(killed).Round(time.Millisecond))
	// The broker follows the node that told it first; the others may hear
	// of the failover a little later.
	c.WaitHealthy()
	assert.NotEqual(t, master, c.MasterFor(prefix+"live"), "a replica took over")
	require.NoError(t, a.Ready(ctx))

	// Once the recovery is reported the subscription is in place: the
	// first message that b manages to publish is delivered.
	publishUntilDelivered(t, b, "live", live, time.Now())
	require.NoError(t, b.Publish(ctx, otherTopic, []byte("still here")))
	assert.Equal(t, "still here", other.next(t).payload)

	// The old master comes back as a replica: nothing to report.
	master.Restart()
	c.WaitHealthy()
	require.NoError(t, b.Publish(ctx, "live", []byte("after the rejoin")))
	for m := live.next(t); m.payload != "after the rejoin"; m = live.next(t) {
	}
	select {
	case up := <-states:
		t.Errorf("unexpected report %v", up)
	default:
	}
}

// TestRedisCluster_masterRestarted: without replicas, a killed master's
// slots are lost until it comes back; the broker waits for it, as for a
// single server's outage.
func TestRedisCluster_masterRestarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, c, prefix), newRedis(t, c, prefix)
	states := make(chan bool, 16)
	stop := a.Watch(func(up bool) { states <- up })
	defer stop()
	live := newRecorder()
	subscribe(t, a, "live", live.handle)

	master := c.MasterFor(prefix + "live")
	master.Stop()
	assert.False(t, receive(t, states))
	err := a.Publish(ctx, "live", []byte("lost"))
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.ErrorIs(t, err, pubsub.ErrNotSent, "the shard is known down: not even tried")
	assert.ErrorIs(t, a.Ready(ctx), pubsub.ErrUnavailable)

	master.Restart()
	restarted := time.Now()
	require.True(t, receive(t, states))
	deliveredAfter := publishUntilDelivered(t, b, "live", live, restarted)
	t.Logf("after the master's restart: first delivery in %v", deliveredAfter.Round(time.Millisecond))
}

// TestRedisCluster_slotMoved: when the slot of a subscribed channel moves
// to another master (a resharding), Redis drops the subscription; the
// broker subscribes it where the slot went, reporting the gap.
func TestRedisCluster_slotMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, c, prefix), newRedis(t, c, prefix)
	states := make(chan bool, 16)
	stop := a.Watch(func(up bool) { states <- up })
	defer stop()
	live := newRecorder()
	subscribe(t, a, "live", live.handle)

	channel := prefix + "live"
	from := c.MasterFor(channel)
	to := c.MasterFor(prefix + topicOnAnotherMaster(t, c, prefix, "live"))
	c.MoveSlot(channel, to)
	assert.False(t, receive(t, states))
	require.True(t, receive(t, states))
	assert.Equal(t, int64(1), shardNumSub(t, to, channel))
	assert.Equal(t, int64(0), shardNumSub(t, from, channel))
	require.NoError(t, b.Publish(ctx, "live", []byte("moved")))
	assert.Equal(t, "moved", live.next(t).payload)
}

// TestRedisCluster_wholeClusterDown: every node killed and restarted is an
// outage like a single server's.
func TestRedisCluster_wholeClusterDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	a := newRedis(t, c, prefix)
	states := make(chan bool, 16)
	stop := a.Watch(func(up bool) { states <- up })
	defer stop()
	live := newRecorder()
	subscribe(t, a, "live", live.handle)

	c.Stop()
	assert.False(t, receive(t, states))
	_, err := a.Claim(ctx, "name", "me", time.Minute)
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	c.Restart()
	restarted := time.Now()
	require.True(t, receive(t, states))
	publishUntilDelivered(t, a, "live", live, restarted)
	holder, err := a.Claim(ctx, "name", "me", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "me", holder)
}

// TestRedisCluster_password: a cluster that requires a password, given in
// the URL, which no error or log shows.
func TestRedisCluster_password(t *testing.T) {
	t.Parallel()
	const password = "s3cr3t-Cl-Pa55"
	ctx := context.Background()
	c := redistest.StartClusterConfig(t, redistest.ClusterConfig{Masters: 3, Password: password})
	var logs syncBuffer
	b, err := pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: c.URL(), KeyPrefix: redistest.Prefix(t),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	rec := newRecorder()
	subscribe(t, b, "t", rec.handle)
	require.NoError(t, b.Publish(ctx, "t", []byte("x")))
	assert.Equal(t, "x", rec.next(t).payload)

	wrong := strings.Replace(c.URL(), password, "wrong-"+password, 1)
	_, err = pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: wrong})
	assert.ErrorIs(t, err, pubsub.ErrUnavailable)
	assert.NotContains(t, err.Error(), password)
	require.NoError(t, b.Close())
	assert.NotContains(t, logs.String(), password)
}

// topicOnAnotherMaster returns a topic whose channel is served by another
// master than topic's.
func topicOnAnotherMaster(t *testing.T, c *redistest.Cluster, prefix, topic string) string {
	t.Helper()
	master := c.MasterFor(prefix + topic)
	for i := range 100 {
		other := fmt.Sprint(topic, "-elsewhere-", i)
		if c.MasterFor(prefix+other) != master {
			return other
		}
	}
	t.Fatal("no topic on another master")
	return ""
}

// shardNumSub asks node n how many connections subscribe to the sharded
// channel.
func shardNumSub(t *testing.T, n *redistest.Server, channel string) int64 {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Protocol: 2, DisableIdentity: true})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	counts, err := cl.PubSubShardNumSub(ctx, channel).Result()
	require.NoError(t, err)
	return counts[channel]
}

// receiveWithin waits up to d for a value on ch.
func receiveWithin[T any](t testing.TB, ch <-chan T, d time.Duration) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("nothing received within %v", d)
		panic("unreachable")
	}
}

// TestRedisCluster_subscribeOnAStaleSlotMap: a topic subscribed after its
// slot moved, before the broker heard of it, is refused with MOVED by the
// old master; the broker subscribes it where the slot went.
func TestRedisCluster_subscribeOnAStaleSlotMap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.StartCluster(t, 3)
	prefix := redistest.Prefix(t)
	a, b := newRedis(t, c, prefix), newRedis(t, c, prefix)
	from := c.MasterFor(prefix + "late")
	// Another topic keeps a connection to the old master open.
	var anchor string
	for i := range 1000 {
		cand := fmt.Sprint("anchor-", i)
		if c.MasterFor(prefix+cand) == from && c.Slot(prefix+cand) != c.Slot(prefix+"late") {
			anchor = cand
			break
		}
	}
	require.NotEmpty(t, anchor)
	anchored := newRecorder()
	subscribe(t, a, anchor, anchored.handle)
	states := make(chan bool, 16)
	stop := a.Watch(func(up bool) { states <- up })
	defer stop()

	to := c.MasterFor(prefix + topicOnAnotherMaster(t, c, prefix, "late"))
	c.MoveSlot(prefix+"late", to)
	late := newRecorder()
	subscribe(t, a, "late", late.handle)
	publishUntilDelivered(t, b, "late", late, time.Now())
	assert.Equal(t, int64(1), shardNumSub(t, to, prefix+"late"))
	assert.Equal(t, int64(0), shardNumSub(t, from, prefix+"late"))
	// The refusal left a gap, which Watch reported.
	assert.False(t, receive(t, states))
	assert.True(t, receive(t, states))

	require.NoError(t, b.Publish(ctx, anchor, []byte("unaffected")))
	assert.Equal(t, "unaffected", anchored.next(t).payload)
}
