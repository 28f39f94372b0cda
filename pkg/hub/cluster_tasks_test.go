package hub

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Tasks across instances sharing a real redis-server: a task's handle
// resolves on every instance as soon as it was given out, outlives the
// instance of its client, fails clearly with the instance holding its
// call, and survives Redis restarting empty.

// taskCluster starts two instances on rs, with cfg (its broker aside),
// each on a broker of its own so that a test can kill one as if its
// process died.
func taskCluster(t *testing.T, rs redistest.Redis, cfg Config) (a, b *testHub, brokerA, brokerB *pubsub.Redis) {
	t.Helper()
	prefix := redistest.Prefix(t)
	start := func() (*testHub, *pubsub.Redis) {
		broker, err := pubsub.NewRedis(context.Background(), pubsub.RedisOptions{URL: rs.URL(), KeyPrefix: prefix, Logger: testLogger()})
		require.NoError(t, err)
		t.Cleanup(func() { broker.Close() })
		c := cfg
		c.Broker = broker
		c.HeartbeatInterval = testHeartbeat
		return startHub(t, c), broker
	}
	a, brokerA = start()
	b, brokerB = start()
	for _, th := range []*testHub{a, b} {
		require.Eventually(t, func() bool { return len(th.remoteInstances()) == 1 }, wait, 10*time.Millisecond,
			"instance %s never heard the other", shortID(th.ID()))
	}
	return a, b, brokerA, brokerB
}

// TestTasks_readOnAnotherInstanceAtOnce: a task given out through A is
// read through B with no wait, whether a server made it (on A) or the hub
// holds it (its call on B), and followed there to its end.
func TestTasks_readOnAnotherInstanceAtOnce(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a, b, _, _ := taskCluster(t, rs, Config{TaskAfter: 50 * time.Millisecond, TaskPollInterval: 20 * time.Millisecond})
	release := make(chan struct{})
	tasker := taskServer(release)
	a.runServer(tasker, "tasker")
	t.Cleanup(func() { shutdownServer(t, tasker) })
	b.runServer(slowServer(release, nil), "slow")
	a.waitServer("slow", 1)
	b.waitServer("tasker", 1)
	onA, onB := a.tasksClient("/mcp", nil), b.tasksClient("/mcp", nil)

	var ids []string
	for _, tool := range []string{"tasker__build", "slow__slow"} {
		task := startTask(t, onA, tool, map[string]any{})
		got, err := onB.GetTask(ctxFor(t), task.TaskID)
		require.NoError(t, err, "%s: tasks/get on the other instance at once", tool)
		assert.Equal(t, mcp.TaskWorking, got.Status, tool)
		ids = append(ids, task.TaskID)
	}
	close(release)
	for i, want := range []string{"built", "slow and done"} {
		res, err := onB.AwaitTask(ctxFor(t), ids[i])
		require.NoError(t, err)
		assert.Equal(t, want, res.Content[0].Text)
	}
}

// killInstance ends an instance as a crash would: its broker goes first,
// so that it says no goodbye and the others only hear its heartbeats stop.
func killInstance(th *testHub, broker *pubsub.Redis) {
	broker.Close()
	th.srv.CloseClientConnections()
}

// heldScene is two instances on a redis-server of their own, the slow
// server on B, and a task of a client on A, whose call B holds.
type heldScene struct {
	a, b             *testHub
	brokerA, brokerB *pubsub.Redis
	onA              *mcp.Client
	task             *mcp.Task
}

// heldAcross sets the scene; release answers the slow server's calls (nil
// for never).
func heldAcross(t *testing.T, release <-chan struct{}) *heldScene {
	t.Helper()
	var sc heldScene
	sc.a, sc.b, sc.brokerA, sc.brokerB = taskCluster(t, redistest.Start(t), Config{TaskAfter: 30 * time.Millisecond})
	sc.b.runServer(slowServer(release, nil), "slow")
	sc.a.waitServer("slow", 1)
	sc.onA = sc.a.tasksClient("/mcp", nil)
	sc.task = startTask(t, sc.onA, "slow__slow", map[string]any{})
	return &sc
}

// TestTasks_clientsInstanceDies: the call of a hub-held task lives on its
// server's instance, so the client's instance may die: the client comes
// back through the other and reads the result there.
func TestTasks_clientsInstanceDies(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	sc := heldAcross(t, release)
	killInstance(sc.a, sc.brokerA)
	b := sc.b
	b.waitFor("A dropped", func(*view) bool { return len(b.remoteInstances()) == 0 })
	close(release)
	onB := b.tasksClient("/mcp", nil)
	res, err := onB.AwaitTask(ctxFor(t), sc.task.TaskID)
	require.NoError(t, err, "the task outlived its client's instance")
	assert.Equal(t, "slow and done", res.Content[0].Text)
}

// TestTasks_holdersInstanceDies: the instance holding a task's call dies;
// read through the other, the task ends failed with a clear error within
// the heartbeat window, never working for ever. The window is twice
// missedHeartbeats intervals: the holder is dropped for its silence after
// the first, and its tasks, which would outlive a lag, fail after the
// second.
func TestTasks_holdersInstanceDies(t *testing.T) {
	t.Parallel()
	sc := heldAcross(t, nil)
	onA, task := sc.onA, sc.task
	killed := time.Now()
	killInstance(sc.b, sc.brokerB)
	var got *mcp.DetailedTask
	var err error
	require.Eventually(t, func() bool {
		got, err = onA.GetTask(ctxFor(t), task.TaskID)
		require.NoError(t, err)
		return got.Status != mcp.TaskWorking
	}, wait, 10*time.Millisecond, "the task ends")
	took := time.Since(killed)
	t.Logf("the task failed %v after its holder died (heartbeat %v)", took.Round(time.Millisecond), testHeartbeat)
	assert.Equal(t, mcp.TaskFailed, got.Status)
	require.NotNil(t, got.Error)
	assert.Equal(t, mcp.CodeConnectionClosed, got.Error.Code)
	assert.Contains(t, got.Error.Message, "hub instance that held this task's call is gone")
	assert.LessOrEqual(t, took, (2*missedHeartbeats+3)*testHeartbeat, "within the heartbeat window")
	_, err = onA.AwaitTask(ctxFor(t), task.TaskID)
	assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "AwaitTask ends with the task's error")
}

// TestTasks_redisRestarted: Redis restarts empty mid-task. Meanwhile
// tasks/get fails at once with a clear error; once it is back, the
// instances write again the records they keep, and the tasks go on to
// their end: a hub-held one (its holder writes it) and a server's
// (its handle's creator does).
func TestTasks_redisRestarted(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	a, b, _, _ := taskCluster(t, rs, Config{TaskAfter: 30 * time.Millisecond})
	release := make(chan struct{})
	b.runServer(slowServer(release, nil), "slow")
	tasker := taskServer(release)
	b.runServer(tasker, "tasker")
	t.Cleanup(func() { shutdownServer(t, tasker) })
	a.waitServer("slow", 1)
	a.waitServer("tasker", 1)
	onA := a.tasksClient("/mcp", nil)
	var ids []string
	for _, tool := range []string{"slow__slow", "tasker__build"} {
		task := startTask(t, onA, tool, map[string]any{})
		ids = append(ids, task.TaskID)
	}

	rs.Stop()
	require.Eventually(t, func() bool { return readyz(t, a) != 200 }, wait, 10*time.Millisecond)
	start := time.Now()
	_, err := onA.GetTask(ctxFor(t), ids[0])
	assert.Less(t, time.Since(start), time.Second, "no hang while Redis is down")
	require.Error(t, err)
	assert.Equal(t, jsonrpc.CodeInternalError, rpcCode(err))
	assert.Contains(t, err.Error(), "cannot reach its task records")

	rs.Restart()
	for _, id := range ids {
		require.Eventually(t, func() bool {
			got, err := onA.GetTask(ctxFor(t), id)
			return err == nil && got.Status == mcp.TaskWorking
		}, wait, 20*time.Millisecond, "the record is back")
	}
	close(release)
	for i, want := range []string{"slow and done", "built"} {
		res, err := onA.AwaitTask(ctxFor(t), ids[i])
		require.NoError(t, err)
		assert.Equal(t, want, res.Content[0].Text)
	}
}

// TestTasks_otherPrincipals: a task belongs to its principal. Another's
// tasks/get, tasks/update and tasks/cancel of its id get what an unknown
// id gets (-32602, the same words), and leave it as it was; so do forged
// and malformed ids; the owner goes on undisturbed.
func TestTasks_otherPrincipals(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 30 * time.Millisecond, Tokens: writeTokens(t, `
tokens:
  - {name: alice, token: alice-secret, roles: [client]}
  - {name: bob, token: bob-secret, roles: [client]}
  - {name: slow, token: slow-secret, roles: [server], servers: [slow]}
`)})
	release := make(chan struct{})
	th.runServerWith(slowServer(release, nil), "slow", "slow-secret")
	alice := th.tasksClient("/mcp", &mcp.ClientOptions{Token: "alice-secret"})
	bob := th.tasksClient("/mcp", &mcp.ClientOptions{Token: "bob-secret"})
	task := startTask(t, alice, "slow__slow", map[string]any{})

	_, unknown := bob.GetTask(ctxFor(t), newTaskID())
	require.Error(t, unknown)
	for name, try := range map[string]func() error{
		"get":    func() error { _, err := bob.GetTask(ctxFor(t), task.TaskID); return err },
		"update": func() error { return bob.UpdateTask(ctxFor(t), task.TaskID, nil) },
		"cancel": func() error { return bob.CancelTask(ctxFor(t), task.TaskID) },
	} {
		err := try()
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err), name)
		assert.Equal(t, unknown.Error(), err.Error(), "%s: another's task reads as an unknown one", name)
	}
	for _, forged := range []string{task.TaskID[:21] + "x", task.TaskID + "=", "../" + task.TaskID, strings.Repeat("a", 1<<12)} {
		_, err := alice.GetTask(ctxFor(t), forged)
		assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err), "forged id %.30q", forged)
	}

	got, err := alice.GetTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskWorking, got.Status, "bob's cancel did not touch it")
	close(release)
	res, err := alice.AwaitTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "slow and done", res.Content[0].Text)
}

// TestTasks_expired: a hub-held task outlives its TTL: its call is
// cancelled at the server, and its id names nothing any more (-32602).
func TestTasks_expired(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 20 * time.Millisecond, TaskTTL: 300 * time.Millisecond})
	cancelled := make(chan struct{})
	s := mcp.NewServer(mcp.Implementation{Name: "forever"}, nil)
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: []byte(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			close(cancelled)
			return nil, ctx.Err()
		})
	th.runServer(s, "forever")
	c := th.tasksClient("/mcp", nil)
	task := startTask(t, c, "forever__wait", map[string]any{})
	select {
	case <-cancelled:
	case <-time.After(wait):
		t.Fatal("the call outlived its task's TTL at the server")
	}
	require.Eventually(t, func() bool {
		_, err := c.GetTask(ctxFor(t), task.TaskID)
		return rpcCode(err) == jsonrpc.CodeInvalidParams
	}, wait, 20*time.Millisecond, "an expired task is no task")
}

// TestTasks_followedOnAnotherInstance: a listen stream on A follows a task
// whose call B holds: B's writes reach it through the broker's tasks topic.
func TestTasks_followedOnAnotherInstance(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	sc := heldAcross(t, release)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	rc := sc.a.rawClient(false)
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + sc.task.TaskID + `"]},` + meta + `}}`)
	require.Contains(t, rc.recv(), `"taskIds":["`+sc.task.TaskID+`"]`, "acknowledged")
	next := func() mcp.TaskStatusParams {
		var note struct {
			Params mcp.TaskStatusParams `json:"params"`
		}
		require.NoError(t, json.Unmarshal([]byte(rc.recv()), &note))
		return note.Params
	}
	assert.Equal(t, mcp.TaskWorking, next().Status, "how it stands, at once")
	close(release)
	done := next()
	assert.Equal(t, mcp.TaskCompleted, done.Status, "its end, from the other instance")
	assert.Contains(t, string(done.Result), "slow and done")
}
