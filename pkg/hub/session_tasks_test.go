package hub

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// tasksTokens: two clients and the test servers.
const tasksTokens = `
tokens:
  - {name: alice, token: alice-secret, roles: [client]}
  - {name: bob, token: bob-secret, roles: [client]}
  - {name: slow, token: slow-secret, roles: [server], servers: [slow, sized]}
`

// TestTasks_getFloodIsRateLimited: tasks/get draws on the rate limit like
// any request; a flood of them is refused (-32004), and another client
// beside it is not hurt.
func TestTasks_getFloodIsRateLimited(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 20 * time.Millisecond, RateLimit: 20, RateBurst: 20, Tokens: writeTokens(t, tasksTokens)})
	release := make(chan struct{})
	th.runServerWith(slowServer(release, nil), "slow", "slow-secret")
	alice := th.tasksClient("/mcp", &mcp.ClientOptions{Token: "alice-secret"})
	bob := th.tasksClient("/mcp", &mcp.ClientOptions{Token: "bob-secret"})
	task := startTask(t, alice, "slow__slow", map[string]any{})

	var limited, ok atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 8 {
		wg.Go(func() {
			for range 25 {
				_, err := alice.GetTask(ctxFor(t), task.TaskID)
				switch rpcCode(err) {
				case 0:
					ok.Add(1)
				case mcp.CodeRateLimited:
					limited.Add(1)
				default:
					t.Errorf("a flooded tasks/get: %v", err)
				}
			}
		})
	}
	// The well-behaved client, meanwhile: a task of its own, followed.
	mine := startTask(t, bob, "slow__slow", map[string]any{})
	wg.Wait()
	took := time.Since(began)
	t.Logf("a flood of 200 tasks/get in %v: %d answered, %d refused", took, ok.Load(), limited.Load())
	// The bucket held at most its burst when the flood began and gained
	// the rate for as long as it lasted (longer on a loaded machine): no
	// more than that may be answered, and the rest is refused.
	allowed := int64(20 + math.Ceil(20*took.Seconds()))
	assert.LessOrEqual(t, ok.Load(), allowed, "the flood is rate limited")
	assert.Positive(t, limited.Load(), "the flood is rate limited")
	close(release)
	res, err := bob.AwaitTask(ctxFor(t), mine.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "slow and done", res.Content[0].Text)
}

// sizedServer answers its tool "sized" with a text of the given length n,
// once released: by small for n up to 1000, by release for longer ones.
func sizedServer(small, release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(mcp.Implementation{Name: "sized", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "sized", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				N int `json:"n"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			gate := release
			if args.N <= 1000 {
				gate = small
			}
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(strings.Repeat("x", args.N))}}, nil
		})
	return s
}

// TestTasks_limits: a principal's tasks and kept result bytes are bounded
// on an instance. A result that does not fit fails its task with a clear
// error; past MaxTasks a long call is not made a task (it goes on as a
// call). Another principal has limits of its own.
func TestTasks_limits(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 20 * time.Millisecond, MaxTaskBytes: 4000, MaxTasks: 2, Tokens: writeTokens(t, tasksTokens)})
	first, release := make(chan struct{}), make(chan struct{})
	th.runServerWith(sizedServer(first, release), "sized", "slow-secret")
	alice := th.tasksClient("/mcp", &mcp.ClientOptions{Token: "alice-secret"})
	bob := th.tasksClient("/mcp", &mcp.ClientOptions{Token: "bob-secret"})
	start := func(c *mcp.Client, n int) string {
		task := startTask(t, c, "sized__sized", map[string]any{"n": n})
		return task.TaskID
	}
	small, large := start(alice, 1000), start(alice, 3500)
	theirs := start(bob, 3500)

	// Alice has two tasks: a third long call of hers stays a call.
	third := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, task, err := alice.StartTool(ctxFor(t), "sized__sized", map[string]any{"n": 10}, nil)
		assert.NoError(t, err)
		assert.Nil(t, task, "past MaxTasks, no task")
		third <- res
	}()
	require.Eventually(t, func() bool { return th.tasks.running(identity("token:alice")) == 2 }, wait, 5*time.Millisecond)
	close(first)
	select {
	case res := <-third:
		require.NotNil(t, res)
		assert.Len(t, res.Content[0].Text, 10, "answered as a call")
	case <-time.After(wait):
		t.Fatal("the call past MaxTasks was never answered")
	}

	res, err := alice.AwaitTask(ctxFor(t), small)
	require.NoError(t, err)
	assert.Len(t, res.Content[0].Text, 1000)
	close(release)
	_, err = alice.AwaitTask(ctxFor(t), large)
	require.Error(t, err, "the result does not fit beside the first")
	assert.Equal(t, jsonrpc.CodeInternalError, rpcCode(err))
	assert.Contains(t, err.Error(), "does not fit in what the hub keeps")
	got, err := alice.GetTask(ctxFor(t), large)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskFailed, got.Status)
	res, err = bob.AwaitTask(ctxFor(t), theirs)
	require.NoError(t, err, "bob's bytes are his own")
	assert.Len(t, res.Content[0].Text, 3500)
}

// TestTasks_overStreamableHTTP: tasks over Streamable HTTP, requests of
// 2026-07-28 without a session (the client sets Mcp-Name to the task id),
// on /mcp and on a server's own endpoint, which declares the extension
// when its server speaks it or the hub holds its long calls.
func TestTasks_overStreamableHTTP(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 20 * time.Millisecond})
	release := make(chan struct{})
	tasker := taskServer(release)
	th.runServer(tasker, "tasker")
	t.Cleanup(func() { shutdownServer(t, tasker) })
	th.runServer(slowServer(release, nil), "slow")
	connect := func(path string) *mcp.Client {
		c, err := mcp.Connect(ctxFor(t), th.srv.URL+path, &mcp.ClientOptions{Tasks: true, ProtocolVersion: mcp.ModernVersion})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, tc := range []struct{ path, tool string }{
		{"/mcp", "tasker__build"}, {"/mcp", "slow__slow"}, {"/servers/tasker/mcp", "build"}, {"/servers/slow/mcp", "slow"},
	} {
		c := connect(tc.path)
		task := startTask(t, c, tc.tool, map[string]any{})
		got, err := c.GetTask(ctxFor(t), task.TaskID)
		require.NoError(t, err)
		assert.Equal(t, mcp.TaskWorking, got.Status)
	}
	// A server's endpoint has only its own tasks.
	onTasker := connect("/servers/tasker/mcp")
	_, task, err := connect("/mcp").StartTool(ctxFor(t), "slow__slow", map[string]any{}, nil)
	require.NoError(t, err)
	_, err = onTasker.GetTask(ctxFor(t), task.TaskID)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err), "another server's task, on tasker's endpoint")
	close(release)
}

// TestTasks_holderShutsDown: an instance that shuts down fails the tasks
// whose calls it holds, with a clear error, before it goes: read through
// another instance at once.
func TestTasks_holderShutsDown(t *testing.T) {
	t.Parallel()
	sc := heldAcross(t, nil)
	require.NoError(t, sc.b.Close())
	got, err := sc.onA.GetTask(ctxFor(t), sc.task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskFailed, got.Status)
	require.NotNil(t, got.Error)
	assert.Contains(t, got.Error.Message, "shut down before the call ended")
}

// running returns the tasks owner has on this instance.
func (ts *tasks) running(owner identity) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if u := ts.use[owner]; u != nil {
		return u.tasks
	}
	return 0
}

// TestTasks_listenToAServersTask: a listen stream follows a server's task
// (the hub polls it while someone here follows it) and hears it change:
// waiting for input, then completed with its result, always under the
// hub's id. A request without the extension cannot ask for tasks
// (-32021), and a task that is not the principal's is not honoured.
func TestTasks_listenToAServersTask(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	s := taskServer(nil)
	th.runServer(s, "tasker")
	t.Cleanup(func() { shutdownServer(t, s) })
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	rc := th.rawClient(false)
	rc.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tasker__ask",` + meta + `}}`)
	resp := rc.recvResponse()
	require.Nil(t, resp.Error)
	id, _ := jsonrpc.StringMember(resp.Result, "taskId")
	require.True(t, validTaskID(id), "a hub id: %s", resp.Result)

	rc.send(`{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + id + `","` + newTaskID() + `"]},` + meta + `}}`)
	ack := rc.recv()
	assert.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":["`+id+`"]},"_meta":{"io.modelcontextprotocol/subscriptionId":2}}}`, ack,
		"only the principal's own task is honoured")
	var seen []mcp.TaskStatus
	for len(seen) == 0 || !seen[len(seen)-1].Terminal() {
		var note struct {
			Method string               `json:"method"`
			Params mcp.TaskStatusParams `json:"params"`
		}
		require.NoError(t, json.Unmarshal([]byte(rc.recv()), &note))
		if note.Method == "" {
			continue // tasks/update's acknowledgement
		}
		require.Equal(t, mcp.NotificationTasks, note.Method)
		assert.Equal(t, id, note.Params.TaskID, "under the hub's id")
		assert.EqualValues(t, 2, note.Params.Meta[mcp.MetaSubscriptionID], "tagged with the stream")
		seen = append(seen, note.Params.Status)
		if note.Params.Status == mcp.TaskInputRequired {
			rc.send(`{"jsonrpc":"2.0","id":3,"method":"tasks/update","params":{"taskId":"` + id + `","inputResponses":{"ok":{"action":"decline"}},` + meta + `}}`)
		}
		if note.Params.Status == mcp.TaskCompleted {
			assert.JSONEq(t, `{"content":[{"type":"text","text":"answer: decline"}],"resultType":"complete"}`, string(stripMeta(t, note.Params.Result)))
		}
	}
	assert.Contains(t, seen, mcp.TaskInputRequired)
	assert.Equal(t, mcp.TaskCompleted, seen[len(seen)-1])

	rc.send(`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + id + `"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	for {
		r := rc.recvResponse()
		if r.ID.String() == "4" {
			require.NotNil(t, r.Error)
			assert.Equal(t, mcp.CodeMissingClientCapability, r.Error.Code)
			break
		}
	}
}

// stripMeta returns a result without its _meta (a server's serverInfo).
func stripMeta(t *testing.T, raw json.RawMessage) json.RawMessage {
	o, err := mcp.ParseObject(raw)
	require.NoError(t, err)
	delete(o, "_meta")
	return o.Raw()
}

// TestTasks_onAVirtualServer: a virtual server's endpoint declares the
// extension and has its members' tasks, under its own names, and no
// other server's.
func TestTasks_onAVirtualServer(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{TaskAfter: 20 * time.Millisecond, CatalogFile: writeCatalog(t, `
virtualServers:
  - name: desk
    tools: [{server: slow, tool: slow, as: wait}]
`)})
	release := make(chan struct{})
	th.runServer(slowServer(release, nil), "slow")
	tasker := taskServer(release)
	th.runServer(tasker, "tasker")
	t.Cleanup(func() { shutdownServer(t, tasker) })
	desk := th.tasksClient("/servers/desk/mcp", nil)
	assert.Contains(t, desk.InitializeResult().Capabilities.Extensions, mcp.ExtensionTasks)
	task := startTask(t, desk, "wait", map[string]any{})
	got, err := desk.GetTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskWorking, got.Status)

	_, other, err := th.tasksClient("/mcp", nil).StartTool(ctxFor(t), "tasker__build", map[string]any{}, nil)
	require.NoError(t, err)
	_, err = desk.GetTask(ctxFor(t), other.TaskID)
	assert.Equal(t, jsonrpc.CodeInvalidParams, rpcCode(err), "a server that is no member's task")
	close(release)
	res, err := desk.AwaitTask(ctxFor(t), task.TaskID)
	require.NoError(t, err)
	assert.Equal(t, "slow and done", res.Content[0].Text)
}
