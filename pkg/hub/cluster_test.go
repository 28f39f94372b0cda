package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

const testHeartbeat = 100 * time.Millisecond

// startCluster starts n hub instances sharing one real redis-server.
func startCluster(t *testing.T, n int) (*redistest.Server, []*testHub) {
	t.Helper()
	rs := redistest.Start(t)
	return rs, startClusterOn(t, rs, n)
}

// startClusterOn starts n hub instances sharing rs: a redis-server or a
// Redis Cluster.
func startClusterOn(t *testing.T, rs redistest.Redis, n int) []*testHub {
	t.Helper()
	prefix := redistest.Prefix(t)
	hubs := make([]*testHub, n)
	for i := range hubs {
		hubs[i] = startHubOn(t, rs, prefix, Config{})
	}
	// Every instance knows every other one's servers once it holds their
	// snapshots; with no servers yet, wait until each has heard the others.
	for _, th := range hubs {
		require.Eventually(t, func() bool { return len(th.remoteInstances()) == n-1 }, wait, 10*time.Millisecond,
			"instance %s never heard the others", shortID(th.ID()))
	}
	return hubs
}

func startHubOn(t *testing.T, rs redistest.Redis, prefix string, cfg Config) *testHub {
	t.Helper()
	broker, err := pubsub.NewRedis(context.Background(), pubsub.RedisOptions{
		URL: rs.URL(), KeyPrefix: prefix, Logger: testLogger(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { broker.Close() })
	cfg.Broker = broker
	if cfg.RateLimit == 0 {
		cfg.RateLimit = -1 // the outage test drives thousands of calls a second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = testHeartbeat
	}
	return startHub(t, cfg)
}

// waitServer waits until th lists server with n replicas.
func (th *testHub) waitServer(name string, n int) {
	th.t.Helper()
	th.waitFor(fmt.Sprintf("%s with %d replicas on %s", name, n, shortID(th.ID())),
		func(v *view) bool { return len(v.servers[name]) == n })
}

func TestCluster_callAcrossInstances(t *testing.T) {
	t.Parallel()
	_, hubs := startCluster(t, 2)
	a, b := hubs[0], hubs[1]
	b.runServer(demo.New(nil).Server, "")
	a.waitServer("demo", 1)

	c := a.client(&mcp.ClientOptions{Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: mcp.TextContent("from A's client")}, nil
	}})
	ctx := ctxFor(t)
	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	assert.Len(t, tools, 5, "A lists B's server")

	res, err := c.CallTool(ctx, "demo__add", map[string]int{"a": 1, "b": 2}, nil)
	require.NoError(t, err)
	assert.Equal(t, "3", res.Content[0].Text)

	read, err := c.ReadResource(ctx, "demo://greeting/bob")
	require.NoError(t, err)
	assert.Equal(t, "Hello, bob!", read.Contents[0].Text)

	prompt, err := c.GetPrompt(ctx, "demo__greet", map[string]string{"name": "x"})
	require.NoError(t, err)
	assert.NotEmpty(t, prompt.Messages)

	comp, err := c.Complete(ctx, &mcp.CompleteParams{Ref: mcp.CompleteRef{Type: "ref/prompt", Name: "demo__greet"},
		Argument: mcp.CompleteArgument{Name: "style", Value: "ca"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"casual"}, comp.Completion.Values)

	// Progress crosses back with the client's own token.
	var steps atomic.Int64
	res, err = c.CallTool(ctx, "demo__slow", map[string]int{"steps": 3, "delayMs": 5},
		&mcp.CallOptions{Progress: func(p *mcp.ProgressParams) { steps.Add(1) }})
	require.NoError(t, err)
	assert.Equal(t, "done after 3 steps", res.Content[0].Text)
	assert.Equal(t, int64(3), steps.Load())

	// Sampling finds the client on the other instance.
	res, err = c.CallTool(ctx, "demo__ask", map[string]string{"question": "?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "from A's client", res.Content[0].Text)

	// Errors keep their codes.
	_, err = c.ReadResource(ctx, "demo://nothing-here")
	assert.Equal(t, mcp.CodeResourceNotFound, rpcCode(err))
}

func TestCluster_cancelAndTimeoutAcrossInstances(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a := startHubOn(t, rs, prefix, Config{CallTimeout: 300 * time.Millisecond})
	b := startHubOn(t, rs, prefix, Config{})
	blk := newBlocker("b")
	b.runServer(blk.Server, "b")
	a.waitServer("b", 1)
	c := a.client(nil)

	ctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	go func() { _, err := c.CallTool(ctx, "b__block", nil, nil); errc <- err }()
	<-blk.started
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	select {
	case err := <-blk.cancelled:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(wait):
		t.Fatal("the cancellation never crossed to the server's instance")
	}

	_, err := c.CallTool(ctxFor(t), "b__block", nil, nil)
	assert.Equal(t, mcp.CodeRequestTimeout, rpcCode(err), "got %v", err)
	select {
	case <-blk.cancelled:
	case <-time.After(wait):
		t.Fatal("the timed-out call was not cancelled on the server's instance")
	}
}

func TestCluster_fanOutAndSubscriptions(t *testing.T) {
	t.Parallel()
	_, hubs := startCluster(t, 3)
	a, b, c := hubs[0], hubs[1], hubs[2]
	na, nc := newNotes(), newNotes()
	ca := a.client(&mcp.ClientOptions{OnNotification: na.add})
	cc := c.client(&mcp.ClientOptions{OnNotification: nc.add})

	d := demo.New(&demo.Options{ClockInterval: time.Hour})
	b.runServer(d.Server, "")
	// list_changed reaches every instance's clients.
	na.wait(t, mcp.NotificationToolsListChanged, 1, nil)
	nc.wait(t, mcp.NotificationToolsListChanged, 1, nil)

	ctx := ctxFor(t)
	require.NoError(t, ca.Subscribe(ctx, demo.CounterURI))
	require.NoError(t, cc.Subscribe(ctx, demo.CounterURI))
	instances, replicas := b.subs.coordOf(demo.CounterURI)
	require.Equal(t, 1, replicas, "B's replica coordinates the subscription")
	assert.Equal(t, 2, instances, "A and C asked; the server was asked once")

	_, err := ca.CallTool(ctx, "demo__increment", nil, nil)
	require.NoError(t, err)
	isCounter := func(p json.RawMessage) bool { return string(p) == `{"uri":"demo://counter"}` }
	na.wait(t, mcp.NotificationResourceUpdated, 1, isCounter)
	nc.wait(t, mcp.NotificationResourceUpdated, 1, isCounter)

	require.NoError(t, ca.Unsubscribe(ctx, demo.CounterURI))
	require.Eventually(t, func() bool {
		instances, replicas := b.subs.coordOf(demo.CounterURI)
		return replicas == 1 && instances == 1
	}, wait, 10*time.Millisecond, "A's release reached the coordinator")
	cc.Close()
	require.Eventually(t, func() bool {
		_, replicas := b.subs.coordOf(demo.CounterURI)
		return replicas == 0
	}, wait, 10*time.Millisecond, "the last instance's release unsubscribed upstream")
}

func TestCluster_replicasOnTwoInstancesShareTheLoad(t *testing.T) {
	t.Parallel()
	_, hubs := startCluster(t, 2)
	a, b := hubs[0], hubs[1]
	var served [2]atomic.Int64
	for i, th := range hubs {
		s := mcp.NewServer(mcp.Implementation{Name: "rep", Version: "1"}, nil)
		s.AddTool(&mcp.Tool{Name: "who"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			served[i].Add(1)
			return &mcp.CallToolResult{}, nil
		})
		th.runServer(s, "rep")
	}
	a.waitServer("rep", 2)
	b.waitServer("rep", 2)
	c := a.client(nil)
	for range 20 {
		_, err := c.CallTool(ctxFor(t), "rep__who", nil, nil)
		require.NoError(t, err)
	}
	assert.Positive(t, served[0].Load(), "the local replica served calls")
	assert.Positive(t, served[1].Load(), "the remote replica served calls")
}

func TestCluster_silentInstanceIsDropped(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a := startHubOn(t, rs, prefix, Config{})
	// B gets a broker of its own, so that the test can cut it off as if the
	// process had died: no goodbye, no more heartbeats.
	brokerB, err := pubsub.NewRedis(context.Background(), pubsub.RedisOptions{URL: rs.URL(), KeyPrefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	b := startHub(t, Config{Broker: brokerB, HeartbeatInterval: testHeartbeat})
	b.runServer(demo.New(nil).Server, "")
	a.waitServer("demo", 1)
	n := newNotes()
	a.client(&mcp.ClientOptions{OnNotification: n.add})

	start := time.Now()
	brokerB.Close()
	a.waitServer("demo", 0)
	// How soon is TestCluster_expireAfterMissedHeartbeats's to say: here the
	// machine's load decides when A's heartbeat tick runs.
	t.Logf("a silent instance left the others' lists after %v (heartbeat %v)", time.Since(start), testHeartbeat)
	n.wait(t, mcp.NotificationToolsListChanged, 1, nil)
}

// TestCluster_expireAfterMissedHeartbeats: an instance is dropped once it
// has been silent for more than missedHeartbeats heartbeats, not before.
func TestCluster_expireAfterMissedHeartbeats(t *testing.T) {
	t.Parallel()
	c, seen := heardOther(t)
	limit := time.Duration(missedHeartbeats) * time.Hour
	// This instance's own heartbeats come back on time: the last, sent an
	// interval ago, a millisecond after it left.
	echo(c, seen.Add(limit-time.Hour+time.Millisecond))
	c.expire(seen.Add(limit))
	assert.True(t, c.knows("other"), "silent for exactly %d heartbeats: kept", missedHeartbeats)
	c.expire(seen.Add(limit + time.Millisecond))
	assert.False(t, c.knows("other"), "silent for longer: dropped")
}

// TestCluster_exchangesWithALaggingInstanceWaitForIt: an instance dropped
// for its silence may only lag; the requests sent to it and relayed to it
// go on, and so do the tasks whose call it holds; they end (errInstanceGone,
// a lost relay, a failed task) only once it has not been heard for
// missedHeartbeats intervals more. A request held for it, never
// sent, fails at the drop, as before.
func TestCluster_exchangesWithALaggingInstanceWaitForIt(t *testing.T) {
	t.Parallel()
	c, seen := heardOther(t)
	limit := time.Duration(missedHeartbeats) * time.Hour
	c.mu.Lock()
	c.upSince = seen.Add(-limit - time.Hour) // settled: one it does not hear is gone
	c.mu.Unlock()
	held := &taskRecord{ID: "t", Instance: "other"}
	ended := map[string]error{}
	var mu sync.Mutex
	call := func(name string, started bool) *outCall {
		return &outCall{instance: "other", started: started, sent: make(chan struct{}), done: func(_ json.RawMessage, err error) {
			mu.Lock()
			ended[name] = err
			mu.Unlock()
		}}
	}
	rl := &relay{instance: "other", parts: make(chan *httpPart, 1), lost: make(chan struct{})}
	c.mu.Lock()
	c.calls[1], c.calls[2] = call("sent", true), call("held", false)
	c.relays[3] = rl
	c.mu.Unlock()
	endedNow := func(name string) (error, bool) {
		mu.Lock()
		defer mu.Unlock()
		err, ok := ended[name]
		return err, ok
	}

	dropped := seen.Add(limit + time.Millisecond)
	echo(c, dropped)
	c.expire(dropped)
	require.False(t, c.knows("other"), "dropped for its silence")
	_, ok := endedNow("sent")
	assert.False(t, ok, "the call sent to it waits for it")
	select {
	case <-rl.lost:
		t.Fatal("the request relayed to it was given up at the drop")
	default:
	}
	assert.False(t, c.hub.tasks.holderGone(held), "the task whose call it holds waits for it")
	err, ok := endedNow("held")
	require.True(t, ok, "the request held for it fails at the drop")
	assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err))

	c.expire(dropped.Add(limit))
	_, ok = endedNow("sent")
	assert.False(t, ok, "still within missedHeartbeats intervals of the drop")
	c.expire(dropped.Add(limit + time.Millisecond))
	err, ok = endedNow("sent")
	require.True(t, ok, "not heard again in time: the call fails")
	assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err))
	select {
	case <-rl.lost:
	default:
		t.Fatal("the relayed request is given up with it")
	}
	assert.True(t, c.hub.tasks.holderGone(held), "and the task fails")
}

// lagPair starts two instances on one redis-server that heard each other,
// their heartbeats a second apart: one that the other drops for a lag
// (dropForALag) is not heard again by chance at once.
func lagPair(t *testing.T) (a, b *testHub) {
	t.Helper()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	cfg := Config{HeartbeatInterval: time.Second}
	a, b = startHubOn(t, rs, prefix, cfg), startHubOn(t, rs, prefix, cfg)
	for _, th := range []*testHub{a, b} {
		require.Eventually(t, func() bool { return len(th.remoteInstances()) == 1 }, wait, 10*time.Millisecond)
	}
	return a, b
}

// farClientOfALagPair starts a lagPair with the demo server "far" on b, and
// a client of a, with the notifications it gets.
func farClientOfALagPair(t *testing.T) (a, b *testHub, c *mcp.Client, notes *notes) {
	t.Helper()
	a, b = lagPair(t)
	b.runServer(demo.New(&demo.Options{Name: "far", ClockInterval: time.Hour}).Server, "far")
	a.waitServer("far", 1)
	notes = newNotes()
	return a, b, a.client(&mcp.ClientOptions{OnNotification: notes.add}), notes
}

// dropForALag makes th drop other as it would for a stall on other's side
// (its heartbeats judged missed), at th's next heartbeat.
func (th *testHub) dropForALag(other *testHub) {
	th.t.Helper()
	th.cluster.expire(time.Now().Add(10 * th.cfg.HeartbeatInterval))
	require.False(th.t, th.cluster.knows(other.ID()), "%s dropped %s", shortID(th.ID()), shortID(other.ID()))
}

// TestCluster_subscriptionsOutliveALag: an instance that drops another for
// a silence that was only a lag keeps the subscriptions it keeps for that
// one's clients, which would not know to ask again (it never left, and it
// says no hello): its clients go on hearing of updates. They were released
// at the drop, and the resource unsubscribed upstream for good.
func TestCluster_subscriptionsOutliveALag(t *testing.T) {
	t.Parallel()
	a, b, c, notes := farClientOfALagPair(t)
	require.NoError(t, c.Subscribe(ctxFor(t), demo.CounterURI))
	require.Eventually(t, func() bool {
		instances, replicas := b.subs.coordOf(demo.CounterURI)
		return instances == 1 && replicas == 1 && b.subs.told(demo.CounterURI)
	}, wait, 10*time.Millisecond, "B keeps the counter subscribed for A")

	b.dropForALag(a)
	instances, replicas := b.subs.coordOf(demo.CounterURI)
	assert.Equal(t, 1, instances, "B still keeps the subscription for A")
	assert.Equal(t, 1, replicas)
	assert.True(t, b.subs.told(demo.CounterURI), "and did not unsubscribe upstream")
	_, err := c.CallTool(ctxFor(t), "far__increment", nil, nil)
	require.NoError(t, err)
	notes.wait(t, mcp.NotificationResourceUpdated, 1, func(p json.RawMessage) bool {
		return string(p) == `{"uri":"demo://counter"}`
	})
}

// TestCluster_aLagTakesNoToolsAway: while an instance is dropped for a
// silence that was only a lag, its servers' tools stay on the others'
// lists (their clients hear no list_changed) and calls to them go through;
// heard again, nothing changes either. A lag of a few seconds used to take
// them away and give them back, and calls meanwhile failed.
func TestCluster_aLagTakesNoToolsAway(t *testing.T) {
	t.Parallel()
	a, b, c, notes := farClientOfALagPair(t)

	a.dropForALag(b)
	res, err := c.CallTool(ctxFor(t), "far__echo", map[string]any{"text": "through the lag"}, nil)
	require.NoError(t, err, "a call to a lagging instance's server goes through")
	assert.Equal(t, "through the lag", res.Content[0].Text)
	assert.Zero(t, notes.count(mcp.NotificationToolsListChanged), "told before the answer, had the tools left")

	require.Eventually(t, func() bool { return a.cluster.knows(b.ID()) }, wait, 10*time.Millisecond, "B heard again")
	require.Eventually(t, func() bool {
		a.cluster.mu.Lock()
		defer a.cluster.mu.Unlock()
		r := a.cluster.remotes[b.ID()]
		return r != nil && r.snap != nil
	}, wait, 10*time.Millisecond, "B's snapshot taken again")
	_, err = c.CallTool(ctxFor(t), "far__echo", map[string]any{"text": "after"}, nil)
	require.NoError(t, err)
	assert.Zero(t, notes.count(mcp.NotificationToolsListChanged), "nothing changed for the client")
}

// TestCluster_anOwnerNotHeardYetIsWaitedFor: an instance that has not yet
// heard everyone (it started, or its broker connection came back, less
// than missedHeartbeats intervals ago) waits for the owner of a session it
// was asked to serve, rather than answer 404 for a session that is alive;
// one it has not heard once settled is none. Time here is synctest's.
func TestCluster_anOwnerNotHeardYetIsWaitedFor(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(&Hub{cfg: Config{HeartbeatInterval: time.Second}})
		c.brokerUp, c.upSince = true, time.Now() // just started
		found := make(chan bool, 1)
		go func() { found <- c.awaitOwner(context.Background(), "newcomer") }()
		synctest.Wait()
		select {
		case ok := <-found:
			t.Fatalf("awaitOwner answered %v before the owner was heard", ok)
		default:
		}
		c.heard("newcomer", time.Now(), hearsNow)
		assert.True(t, <-found, "heard while this instance settles: found")

		start := time.Now()
		assert.False(t, c.awaitOwner(context.Background(), "nobody"), "never heard: none")
		assert.Equal(t, time.Duration(missedHeartbeats)*time.Second, time.Since(start), "once settled")
		assert.False(t, c.awaitOwner(context.Background(), "nobody"), "settled: none at once")
		assert.Zero(t, time.Since(start)-time.Duration(missedHeartbeats)*time.Second)
	})
}

// settle makes th's instance one that has been in the cluster long
// enough to have heard every live instance (cluster.settled).
func (th *testHub) settle() {
	c := th.cluster
	c.mu.Lock()
	c.upSince = c.upSince.Add(-time.Duration(missedHeartbeats+1) * c.hub.cfg.HeartbeatInterval)
	c.mu.Unlock()
}

// heardOther starts an instance whose own heartbeat ticks never run (the
// test plays them, and its expiry, with times of its own) and that heard
// another, "other", at the time it returns.
func heardOther(t *testing.T) (*cluster, time.Time) {
	t.Helper()
	th := startHub(t, Config{HeartbeatInterval: time.Hour})
	c := th.Hub.cluster
	seen := time.Now()
	c.mu.Lock()
	c.remotes["other"] = &remoteInstance{lastSeen: seen}
	c.mu.Unlock()
	return c, seen
}

// echo records this instance's own heartbeat coming back at when, as
// onRegistry does.
func echo(c *cluster, when time.Time) {
	c.mu.Lock()
	c.echoed = when
	c.mu.Unlock()
}

// TestCluster_ownStallIsExcused: when this instance stalls (its heartbeat
// tick comes late, the others' heartbeats wait unread in its
// subscription), the others are not dropped for the time it did not run;
// one that stays silent once it runs again still is, missedHeartbeats
// intervals later.
func TestCluster_ownStallIsExcused(t *testing.T) {
	t.Parallel()
	c, seen := heardOther(t)
	echo(c, seen)

	// The tick due at seen+1h comes 5h late: the loop excuses the delay,
	// then publishes its heartbeat and expires.
	tick := seen.Add(6 * time.Hour)
	c.excuse(5*time.Hour, tick)
	c.expire(tick)
	require.True(t, c.knows("other"), "an instance heard just before this one stalled is kept")

	// Nothing comes from it afterwards while this instance's own heartbeats
	// come back each tick: it is dropped after missedHeartbeats intervals
	// of silence counted from before the stall, less the stall.
	for range missedHeartbeats - 1 {
		echo(c, tick)
		tick = tick.Add(time.Hour)
		c.excuse(0, tick)
		c.expire(tick)
		require.True(t, c.knows("other"), "silent for at most %d intervals while running: kept", missedHeartbeats)
	}
	echo(c, tick)
	tick = tick.Add(time.Hour)
	c.expire(tick)
	assert.False(t, c.knows("other"), "silent for longer once running again: dropped")
}

// TestCluster_silenceIsJudgedAsFarAsRead: while this instance's own
// heartbeat has not come back through the broker, its subscription lags
// (what the others sent may be waiting unread) and their silence is not
// judged past an interval after its last echo; once its echo is back, what
// they sent before it has been read, and one that sent nothing is dropped.
func TestCluster_silenceIsJudgedAsFarAsRead(t *testing.T) {
	t.Parallel()
	c, seen := heardOther(t)
	echo(c, seen)
	c.expire(seen.Add(5 * time.Hour)) // its ticks came on time; its echoes did not
	require.True(t, c.knows("other"), "judged while this instance's own subscription lags")

	echo(c, seen.Add(5*time.Hour))
	c.expire(seen.Add(5 * time.Hour))
	assert.False(t, c.knows("other"), "silent in what this instance has read: dropped")
}

// TestCluster_aLaggingInstancesServersStayListed: the servers of an
// instance dropped for a silence that may only be a lag stay listed
// (clients are not told its tools left, then came back), and calls go to
// them only when no instance heard has the server; once it is not heard
// again within missedHeartbeats intervals they leave, unless it was heard
// again meanwhile. (They left at the drop: a lag of a few seconds made
// list_changed twice for every client, and calls failed as for a server
// that does not exist.)
func TestCluster_aLaggingInstancesServersStayListed(t *testing.T) {
	t.Parallel()
	c, seen := heardOther(t)
	h := c.hub
	h.reg.setRemote("other", []*replicaInfo{{ID: "other/1", Name: "far", Instance: "other"}}, nil)
	c.heard("third", seen, hearsNow)
	h.reg.setRemote("third", []*replicaInfo{{ID: "third/1", Name: "far", Instance: "third"}}, nil)
	replicas := func() []*replicaInfo { return h.reg.view().servers["far"] }
	require.Len(t, replicas(), 2)
	tick := func(at time.Time) {
		echo(c, at)
		c.heard("third", at, hearsNow)
		c.expire(at)
	}

	at := seen.Add(4 * time.Hour) // four intervals without a word from other
	tick(at)
	require.False(t, c.knows("other"), "dropped for its silence")
	assert.Len(t, replicas(), 2, "its server stays listed while it may only lag")
	for range 4 {
		assert.Equal(t, "third/1", h.pick(replicas()).ID, "calls go to the instance heard")
	}

	at = at.Add(4 * time.Hour) // and four more: gone
	tick(at)
	require.Len(t, replicas(), 1, "not heard again in time: its server leaves")
	assert.Equal(t, "third/1", replicas()[0].ID)

	// Back (its hello and snapshot), then silent again, and heard again
	// within the window: nothing leaves, then or after the window.
	h.reg.setRemote("other", []*replicaInfo{{ID: "other/1", Name: "far", Instance: "other"}}, nil)
	c.heard("other", at, hearsNow)
	at = at.Add(4 * time.Hour)
	tick(at)
	require.False(t, c.knows("other"), "dropped for its silence again")
	at = at.Add(time.Hour)
	c.heard("other", at, hearsNow)
	tick(at)
	at = at.Add(4 * time.Hour)
	c.heard("other", at, hearsNow)
	tick(at)
	assert.True(t, c.knows("other"))
	assert.Len(t, replicas(), 2, "heard again within the window: its server never left")
}

// TestCluster_callsToAnInstanceGoneForGoodFailAtOnce: a call to a replica
// of an instance dropped for its silence waits for it, and fails when it
// is not heard again in time; one that reaches the cluster after that,
// from a view read before the instance's servers left, fails at once: it
// would otherwise be registered after the calls to that instance were
// ended, and wait for its timeout.
func TestCluster_callsToAnInstanceGoneForGoodFailAtOnce(t *testing.T) {
	t.Parallel()
	c, seen := heardOther(t)
	call := func() chan error {
		out := make(chan error, 1)
		c.startRequest("other", &envelope{Kind: envCall, Method: mcp.MethodToolsCall}, nil, true,
			func(_ json.RawMessage, err error) { out <- err })
		return out
	}
	at := seen.Add(4 * time.Hour)
	echo(c, at)
	c.expire(at)
	require.False(t, c.knows("other"), "dropped for its silence")
	waiting := call()
	select {
	case err := <-waiting:
		t.Fatalf("a call to an instance that may only lag ended: %v", err)
	default:
	}

	at = at.Add(4 * time.Hour)
	echo(c, at)
	c.expire(at)
	select {
	case err := <-waiting:
		assert.ErrorIs(t, err, errInstanceGone, "not heard again in time")
	case <-time.After(wait):
		t.Fatal("the call to an instance gone for good still waits")
	}
	select {
	case err := <-call():
		assert.ErrorIs(t, err, errInstanceGone, "a call after it is gone fails at once")
	default:
		t.Fatal("a call to an instance gone for good was taken, to wait for its timeout")
	}
}

// TestCluster_lostSubscriptionStillJudges: a subscription that stays
// silent, this instance's own heartbeats included, for missedHeartbeats
// intervals past the others' limit is lost, not lagging: this instance
// hears no one, and drops them.
func TestCluster_lostSubscriptionStillJudges(t *testing.T) {
	t.Parallel()
	c, seen := heardOther(t)
	echo(c, seen)
	limit := time.Duration(missedHeartbeats) * time.Hour
	c.expire(seen.Add(2 * limit))
	require.True(t, c.knows("other"), "within the lag excused: kept")
	c.expire(seen.Add(2*limit + time.Millisecond))
	assert.False(t, c.knows("other"), "past it: dropped")
}

// TestCluster_ownHeartbeatEchoes: an instance's own heartbeat comes back to
// it through the broker, and it takes note (expire judges by it).
func TestCluster_ownHeartbeatEchoes(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{HeartbeatInterval: time.Hour})
	c := th.Hub.cluster
	c.mu.Lock()
	before := c.echoed
	c.mu.Unlock()
	c.heartbeat()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.echoed.After(before)
	}, wait, time.Millisecond, "the heartbeat never came back")
}

func TestCluster_goodbyeIsImmediate(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a := startHubOn(t, rs, prefix, Config{HeartbeatInterval: time.Hour})
	b := startHubOn(t, rs, prefix, Config{HeartbeatInterval: time.Hour})
	b.runServer(demo.New(nil).Server, "")
	a.waitServer("demo", 1)
	require.NoError(t, b.Close())
	a.waitServer("demo", 0) // an hour-long heartbeat: only the goodbye can do it
}

// TestCluster_redisOutage stops Redis for a couple of seconds under
// traffic: local calls go on untouched, the instances report not ready,
// cross-instance calls fail fast, and once Redis is back everything resumes
// by itself: lists, calls and subscriptions.
func TestCluster_redisOutage(t *testing.T) {
	t.Parallel()
	rs, hubs := startCluster(t, 2)
	a, b := hubs[0], hubs[1]
	// far registers first, so it keeps the resources both list.
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
	assert.Equal(t, http.StatusOK, readyz(t, a))

	rs.Stop()
	stopped := time.Now()
	require.Eventually(t, func() bool { return readyz(t, a) == http.StatusServiceUnavailable }, wait, 20*time.Millisecond,
		"/readyz reports the outage")

	var slowest time.Duration
	crossCalls := 0
	localCalls := 0
	for time.Since(stopped) < 3*time.Second { // several seconds, under load
		require.NoError(t, call("local__echo"), "local calls keep working during the outage")
		localCalls++
		if localCalls%20 == 0 {
			start := time.Now()
			err := call("far__echo")
			slowest = max(slowest, time.Since(start))
			require.Error(t, err, "a cross-instance call cannot succeed without Redis")
			code := rpcCode(err)
			assert.True(t, code == mcp.CodeConnectionClosed || code == jsonrpc.CodeInvalidParams,
				"a clear error: server unreachable, or no longer listed: %v", err)
			crossCalls++
		}
	}
	t.Logf("during a %v outage: %d local calls succeeded, %d cross-instance calls failed, the slowest in %v",
		time.Since(stopped).Round(time.Millisecond), localCalls, crossCalls, slowest)
	assert.Less(t, slowest, time.Second, "cross-instance calls fail fast")
	a.waitServer("far", 0) // the unreachable instance left A's lists

	rs.Restart()
	back := time.Now()
	a.waitServer("far", 1)
	require.Eventually(t, func() bool { return call("far__echo") == nil }, wait, 10*time.Millisecond,
		"cross-instance calls resume after Redis comes back")
	resumed := time.Since(back)
	t.Logf("cross-instance traffic resumed %v after Redis came back", resumed.Round(time.Millisecond))
	assert.Less(t, resumed, 2*time.Second)
	assert.Equal(t, http.StatusOK, readyz(t, a))

	// The subscription was renewed at the server's instance by itself, and
	// its server subscribed again (coordOf counts a coordination before
	// its replica is told: an update before that had no subscriber
	// upstream, and the test waited for it in vain under load).
	require.Eventually(t, func() bool {
		_, replicas := b.subs.coordOf(demo.CounterURI)
		return replicas == 1 && b.subs.told(demo.CounterURI)
	}, wait, 10*time.Millisecond, "A asked B again for its subscription")
	require.NoError(t, call("far__increment"))
	notes.wait(t, mcp.NotificationResourceUpdated, 1, func(p json.RawMessage) bool {
		return string(p) == `{"uri":"demo://counter"}`
	})
}

func readyz(t *testing.T, th *testHub) int {
	resp, err := http.Get(th.srv.URL + "/readyz")
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestEnvelopeWire: an envelope's params or result travel raw after its
// header, come back as they were, and a body that is not valid JSON, or
// that the header does not announce, makes the whole message invalid.
func TestEnvelopeWire(t *testing.T) {
	t.Parallel()
	for _, env := range []*envelope{
		{Kind: envCall, From: "a", Call: 7, Method: "tools/call", Params: json.RawMessage(`{"name":"x","arguments":{"s":"line\nbreak"}}`)},
		{Kind: envResult, From: "b", Call: 7, Result: json.RawMessage(` {"content":[]} `)},
		{Kind: envResult, From: "b", Call: 8, Error: &wireError{Code: -32602, Message: "bad"}},
		{Kind: envHeartbeat, From: "c", Version: 3},
	} {
		b, err := env.encode()
		require.NoError(t, err)
		got, ok := decodeEnvelope(b)
		require.True(t, ok, "%s", b)
		got.Body = ""
		assert.Equal(t, env, got)
	}
	for _, bad := range []string{
		"{\"k\":\"call\",\"f\":\"a\",\"b\":\"p\"}\n{\"name\":",
		"{\"k\":\"call\",\"f\":\"a\",\"b\":\"p\"}",
		"{\"k\":\"call\",\"f\":\"a\"}\n{}",
		"{\"k\":\"call\",\"f\":\"a\",\"b\":\"zz\"}\n{}",
		"{\"k\":\"call\"}",
	} {
		_, ok := decodeEnvelope([]byte(bad))
		assert.False(t, ok, bad)
	}
}

// A server that leaves keeps its place on every instance alike, one that
// joins later included, and gets it back on whichever instance it returns
// to: every instance computes the same owner for each URI.
func TestCluster_aDepartedServersPlaceIsKeptEverywhere(t *testing.T) {
	t.Parallel()
	shared := pubsub.NewMemory()
	t.Cleanup(func() { shared.Close() })
	tokens := writeTokens(t, `
tokens:
  - {name: weather, token: weather-secret, roles: [server], servers: [weather]}
  - {name: aaa, token: aaa-secret, roles: [server], servers: [aaa]}
  - {name: app, token: app-secret, roles: [client]}
`)
	instance := func() *testHub {
		return startHub(t, Config{Broker: shared, HeartbeatInterval: time.Hour, Tokens: tokens})
	}
	a, b := instance(), instance()
	caps := `{"resources":{}}`
	weather := resourcesOf("weather", []string{"weather://report"}, []string{"weather://city/{name}"})
	owner := startRawServerWith(a, "weather", "weather-secret", caps, weather)
	startRawServerWith(b, "aaa", "aaa-secret", caps, resourcesOf("aaa", []string{"weather://report"}, []string{"weather://{+y}"}))
	servedBy := func(th *testHub, server string) {
		t.Helper()
		th.waitFor(fmt.Sprintf("weather's resources with %s on %s", server, shortID(th.ID())), func(v *view) bool {
			for _, uri := range []string{"weather://report", "weather://city/lyon"} {
				if got, ok := v.serverOfURI(uri); !ok || got != server {
					return false
				}
			}
			return len(v.servers["aaa"]) == 1
		})
	}
	for _, th := range []*testHub{a, b} {
		servedBy(th, "weather")
	}

	owner.conn.Close(peer.CloseGoingAway, "redeploying")
	c := instance() // joins while weather is away: it learns the place from the others' snapshots
	for _, th := range []*testHub{a, b, c} {
		th.waitFor("weather gone", func(v *view) bool { return len(v.servers["weather"]) == 0 && v.reservation("weather") != nil })
		servedBy(th, "weather")
		_, err := readText(t, th.tokenClient("app-secret", nil), "weather://report")
		assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "on %s: %v", shortID(th.ID()), err)
	}

	startRawServerWith(c, "weather", "weather-secret", caps, weather) // back, on another instance
	for _, th := range []*testHub{a, b, c} {
		th.waitFor("weather back", func(v *view) bool { return len(v.servers["weather"]) == 1 })
		servedBy(th, "weather")
		text, err := readText(t, th.tokenClient("app-secret", nil), "weather://report")
		require.NoError(t, err)
		assert.Equal(t, "from weather", text, "on %s", shortID(th.ID()))
	}
}
