package hub

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// An instance that stops hearing another drops it, and with it (once it
// has not heard it again for missedHeartbeats intervals more) the
// subscriptions it kept for it; the other may still hear the first all
// along (a Redis Cluster shard down for one of them, or a partition one
// way), so it has no reason to ask again. The subscription used to stay
// lost after the first rejoined: updates never reached the second's
// clients (seen in TestRedisCluster_shardMasterKilled under load). A hello
// now makes every instance ask again for what the newcomer keeps for it.
//
// Heartbeats are an hour apart and B's missed ones are counted on a clock
// moved past them: with real ones 50 ms apart, a loaded machine could make
// A miss B's too (make stress), and A, which was to hear B throughout,
// dropped B's server. B hears not even its own heartbeats: it excuses that
// for missedHeartbeats intervals as a lag of its own (expire), so the clock
// moves past twice that.
func TestSubscriptions_renewedWhenTheCoordinatorRejoins(t *testing.T) {
	t.Parallel()
	a, b, _, hb := startPair(t, Config{})
	b.runServer(demo.New(&demo.Options{Name: "far", ClockInterval: time.Hour}).Server, "far")
	a.waitServer("far", 1)
	notes := newNotes()
	c := a.client(&mcp.ClientOptions{OnNotification: notes.add})
	require.NoError(t, c.Subscribe(ctxFor(t), demo.CounterURI))
	_, replicas := b.subs.coordOf(demo.CounterURI)
	require.Equal(t, 1, replicas, "B keeps the subscription for A")

	// B hears nothing, and misses A's heartbeats: it drops A, keeps what
	// it kept for it for missedHeartbeats intervals (A may only lag), then
	// releases it. A hears B all along and keeps its servers.
	hb.deaf.Store(true)
	dropped := time.Now().Add(2*missedHeartbeats*time.Hour + time.Minute)
	b.cluster.expire(dropped)
	require.False(t, b.cluster.knows(a.ID()), "B dropped A")
	_, replicas = b.subs.coordOf(demo.CounterURI)
	require.Equal(t, 1, replicas, "B keeps A's subscription while A may only lag")
	b.cluster.expire(dropped.Add(missedHeartbeats*time.Hour + time.Minute))
	_, replicas = b.subs.coordOf(demo.CounterURI)
	require.Zero(t, replicas, "B dropped A's subscription")
	require.Len(t, a.reg.view().servers["far"], 1, "A still lists B's server")

	// B's broker connection comes back: it says hello.
	hb.deaf.Store(false)
	b.cluster.state <- false
	b.cluster.state <- true

	require.Eventually(t, func() bool {
		_, replicas := b.subs.coordOf(demo.CounterURI)
		return replicas == 1 && b.subs.told(demo.CounterURI)
	}, wait, time.Millisecond, "A asked B again for its subscription, and B its server")
	_, err := c.CallTool(ctxFor(t), "far__increment", nil, nil)
	require.NoError(t, err)
	notes.wait(t, mcp.NotificationResourceUpdated, 1, func(p json.RawMessage) bool {
		return string(p) == `{"uri":"demo://counter"}`
	})
}
