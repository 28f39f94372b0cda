package hub

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The cross-instance tests of cluster_test.go, on a Redis Cluster: the
// instances' topics (the registry, each inbox) live on the shards their
// slots map to, through sharded pub/sub.

// TestRedisCluster_crossInstance: on a three-master cluster, three
// instances route calls (with progress, sampling and cancellation) to a
// server on one of them, and resource updates and list_changed reach the
// clients of every instance.
func TestRedisCluster_crossInstance(t *testing.T) {
	t.Parallel()
	hubs := startClusterOn(t, redistest.StartCluster(t, 3), 3)
	a, b, c := hubs[0], hubs[1], hubs[2]
	na, nc := newNotes(), newNotes()
	ca := a.client(&mcp.ClientOptions{
		OnNotification: na.add,
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("from A's client")}, nil
		},
	})
	cc := c.client(&mcp.ClientOptions{OnNotification: nc.add})

	b.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	blk := newBlocker("blk")
	b.runServer(blk.Server, "blk")
	a.waitServer("demo", 1)
	c.waitServer("demo", 1)
	a.waitServer("blk", 1)
	na.wait(t, mcp.NotificationToolsListChanged, 1, nil)
	nc.wait(t, mcp.NotificationToolsListChanged, 1, nil)

	ctx := ctxFor(t)
	res, err := ca.CallTool(ctx, "demo__add", map[string]int{"a": 1, "b": 2}, nil)
	require.NoError(t, err)
	assert.Equal(t, "3", res.Content[0].Text)

	var steps atomic.Int64
	res, err = ca.CallTool(ctx, "demo__slow", map[string]int{"steps": 3, "delayMs": 5},
		&mcp.CallOptions{Progress: func(p *mcp.ProgressParams) { steps.Add(1) }})
	require.NoError(t, err)
	assert.Equal(t, "done after 3 steps", res.Content[0].Text)
	assert.Equal(t, int64(3), steps.Load(), "progress crosses back")

	res, err = ca.CallTool(ctx, "demo__ask", map[string]string{"question": "?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "from A's client", res.Content[0].Text, "sampling finds the client on the other instance")

	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := ca.CallTool(cctx, "blk__block", nil, nil); errc <- err }()
	<-blk.started
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	select {
	case err := <-blk.cancelled:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(wait):
		t.Fatal("the cancellation never crossed to the server's instance")
	}

	require.NoError(t, ca.Subscribe(ctx, demo.CounterURI))
	require.NoError(t, cc.Subscribe(ctx, demo.CounterURI))
	instances, replicas := b.subs.coordOf(demo.CounterURI)
	require.Equal(t, 1, replicas, "B's replica coordinates the subscription")
	assert.Equal(t, 2, instances, "A and C asked; the server was asked once")
	_, err = cc.CallTool(ctx, "demo__increment", nil, nil)
	require.NoError(t, err)
	isCounter := func(p json.RawMessage) bool { return string(p) == `{"uri":"demo://counter"}` }
	na.wait(t, mcp.NotificationResourceUpdated, 1, isCounter)
	nc.wait(t, mcp.NotificationResourceUpdated, 1, isCounter)
}

// TestRedisCluster_shardMasterKilled kills, under traffic, the master of
// the shard that holds the inbox of the server's instance. It is survived
// like an outage of a single Redis: local calls go on untouched,
// cross-instance calls fail fast with a clear error while the shard has no
// master, and once the replica has taken over, calls and subscriptions
// resume by themselves.
func TestRedisCluster_shardMasterKilled(t *testing.T) {
	t.Parallel()
	rc := redistest.StartClusterConfig(t, redistest.ClusterConfig{Masters: 3, Replicas: 1})
	prefix := redistest.Prefix(t)
	a := startHubOn(t, rc, prefix, Config{})
	b := startHubOn(t, rc, prefix, Config{})
	b.runServer(demo.New(&demo.Options{Name: "far", ClockInterval: time.Hour}).Server, "far")
	a.waitServer("far", 1)
	a.runServer(demo.New(&demo.Options{Name: "local", ClockInterval: time.Hour}).Server, "local")
	notes := newNotes()
	c := a.client(&mcp.ClientOptions{OnNotification: notes.add})
	call := func(tool string) error {
		_, err := c.CallTool(ctxFor(t), tool, map[string]string{"text": "x"}, nil)
		return err
	}
	require.NoError(t, call("far__echo"))
	require.NoError(t, c.Subscribe(ctxFor(t), demo.CounterURI))

	master := rc.MasterFor(prefix + topicInboxPrefix + b.ID())
	master.Stop()
	killed := time.Now()

	// Until calls to B succeed again: local calls never fail, and calls to
	// B fail fast and clearly while its inbox's shard has no master.
	var slowest time.Duration
	local, failed := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.NoError(t, call("local__echo"), "local calls keep working while a shard is down")
		local++
		start := time.Now()
		err := call("far__echo")
		if err == nil {
			break
		}
		failed++
		slowest = max(slowest, time.Since(start))
		code := rpcCode(err)
		assert.True(t, code == mcp.CodeConnectionClosed || code == jsonrpc.CodeInvalidParams,
			"a clear error: server unreachable, or no longer listed: %v", err)
		require.True(t, time.Now().Before(deadline), "calls to B never resumed after the failover")
	}
	t.Logf("shard master killed: cross-instance calls resumed after %v; meanwhile %d local calls succeeded, %d cross-instance calls failed, the slowest in %v",
		time.Since(killed).Round(time.Millisecond), local, failed, slowest)
	rc.WaitHealthy() // every node has heard of the failover, not only the one the hub asked
	assert.NotEqual(t, master, rc.MasterFor(prefix+topicInboxPrefix+b.ID()), "a replica took over")
	assert.Less(t, slowest, 2*time.Second, "cross-instance calls fail fast")

	// The subscription was kept, or renewed at B, by itself.
	require.Eventually(t, func() bool {
		_, replicas := b.subs.coordOf(demo.CounterURI)
		return replicas == 1
	}, wait, 10*time.Millisecond, "B holds A's subscription")
	require.Eventually(t, func() bool {
		if call("far__increment") != nil {
			return false
		}
		return notes.count(mcp.NotificationResourceUpdated) > 0
	}, wait, 50*time.Millisecond, "resource updates cross again")
}
