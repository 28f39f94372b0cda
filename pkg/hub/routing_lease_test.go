package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// untaggedServer is a server as the official SDKs write them on stdio:
// its tool asks the client for sampling without naming the call it serves
// (no _meta["switchboard/relatedRequest"]). hold, when set, keeps each call
// open until it is closed; in counts the calls in the tool now.
func untaggedServer(hold <-chan struct{}, in *atomic.Int32) *mcp.Server {
	s := sessionServer("untagged", nil)
	s.AddTool(&mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		if in != nil {
			in.Add(1)
			defer in.Add(-1)
		}
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var res mcp.CreateMessageResult
		err := req.Session.Peer().Call(ctx, mcp.MethodSamplingCreateMessage, &mcp.CreateMessageParams{MaxTokens: 5,
			Messages: []mcp.SamplingMessage{{Role: "user", Content: mcp.TextContent("who?")}}}, &res)
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(res.Content.Text)}}, nil
	})
	return s
}

// runLeased dials s out to th as a replica of name that asks to be leased
// (as `hub connect` does for a stdio server), and waits until th lists n
// replicas of name.
func (th *testHub) runLeased(s *mcp.Server, name string, n int) (stop func()) {
	th.t.Helper()
	stop = th.dial(s, "?name="+name+"&lease=client")
	th.waitServer(name, n)
	return stop
}

// callAll makes calls concurrent calls of tool from each client and
// returns their texts, by client, or fails.
func callAll(t *testing.T, clients []*mcp.Client, tool string, calls int) [][]string {
	t.Helper()
	out := make([][]string, len(clients))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, c := range clients {
		for range calls {
			wg.Go(func() {
				res, err := c.CallTool(ctxFor(t), tool, nil, nil)
				if !assert.NoError(t, err, "client %d", i) || !assert.NotEmpty(t, res.Content) {
					return
				}
				mu.Lock()
				out[i] = append(out[i], res.Content[0].Text)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return out
}

// TestHub_leasedReplicasServeOneClientAtATime: a server whose requests
// cannot name their call, with two replicas and four clients making five
// calls each at once: every sampling request reaches the client whose call
// asked (it refused them all as soon as two clients had calls in flight).
func TestHub_leasedReplicasServeOneClientAtATime(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runLeased(untaggedServer(nil, nil), "u", 1)
	th.runLeased(untaggedServer(nil, nil), "u", 2)
	for _, ri := range th.reg.view().servers["u"] {
		assert.True(t, ri.Leased)
	}
	names := []string{"ada", "bob", "cy", "dee"}
	var clients []*mcp.Client
	for _, n := range names {
		clients = append(clients, sampler(th, n))
	}
	for round := range 3 {
		for i, texts := range callAll(t, clients, "u__ask", 5) {
			assert.Len(t, texts, 5, "round %d, client %s", round, names[i])
			for _, text := range texts {
				assert.Equal(t, names[i]+" answers who?", text, "round %d: the request reached the client whose call asked", round)
			}
		}
	}
	assert.Zero(t, th.leases.waitingFor("u"))
}

// TestHub_taggedReplicaServesEveryClientAtOnce: a replica that did not ask
// to be leased keeps serving every client's calls at the same time.
func TestHub_taggedReplicaServesEveryClientAtOnce(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	hold := make(chan struct{})
	var in atomic.Int32
	th.runServer(untaggedServer(hold, &in), "tagged")
	assert.False(t, th.reg.view().servers["tagged"][0].Leased)
	a, b := sampler(th, "ada"), sampler(th, "bob")
	for _, c := range []*mcp.Client{a, b} {
		go c.CallTool(context.Background(), "tagged__ask", nil, nil)
	}
	require.Eventually(t, func() bool { return in.Load() == 2 }, wait, time.Millisecond, "both calls at the server at once")
	close(hold)
}

// TestHub_leaseQueue: with the only replica leased to one client, another
// client's calls wait for it, in order, each within its own timeout and
// cancellation; beyond MaxLeaseQueue, a call is refused at once with -32004
// and data.retryAfterMs; a replica that joins takes the waiting calls.
func TestHub_leaseQueue(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{MaxLeaseQueue: 2, CallTimeout: 2 * time.Second})
	hold := make(chan struct{})
	var in atomic.Int32
	th.runLeased(untaggedServer(hold, &in), "q", 1)
	ada, bob, cy := sampler(th, "ada"), sampler(th, "bob"), sampler(th, "cy")

	adaDone := make(chan string, 2)
	for range 2 {
		go func() {
			res, err := ada.CallTool(ctxFor(t), "q__ask", nil, nil)
			if assert.NoError(t, err) {
				adaDone <- res.Content[0].Text
			}
		}()
	}
	require.Eventually(t, func() bool { return in.Load() == 2 }, wait, time.Millisecond, "ada's two calls share the lease")

	// bob waits; a cancelled wait leaves the queue.
	cancelled, cancel := context.WithCancel(ctxFor(t))
	gaveUp := make(chan error, 1)
	go func() {
		_, err := bob.CallTool(cancelled, "q__ask", nil, nil)
		gaveUp <- err
	}()
	require.Eventually(t, func() bool { return th.leases.waitingFor("q") == 1 }, wait, time.Millisecond)
	cancel()
	require.Error(t, <-gaveUp)
	require.Eventually(t, func() bool { return th.leases.waitingFor("q") == 0 }, wait, time.Millisecond, "a cancelled call leaves the queue")

	// Two wait; the third is refused at once.
	bobDone := make(chan string, 1)
	go func() {
		res, err := bob.CallTool(ctxFor(t), "q__ask", nil, nil)
		if assert.NoError(t, err) {
			bobDone <- res.Content[0].Text
		}
	}()
	require.Eventually(t, func() bool { return th.leases.waitingFor("q") == 1 }, wait, time.Millisecond)
	cyDone := make(chan string, 1)
	go func() {
		res, err := cy.CallTool(ctxFor(t), "q__ask", nil, nil)
		if assert.NoError(t, err) {
			cyDone <- res.Content[0].Text
		}
	}()
	require.Eventually(t, func() bool { return th.leases.waitingFor("q") == 2 }, wait, time.Millisecond)
	_, err := cy.CallTool(ctxFor(t), "q__ask", nil, nil)
	require.Error(t, err)
	var rpcErr *jsonrpc.Error
	require.ErrorAs(t, err, &rpcErr)
	assert.Equal(t, mcp.CodeRateLimited, rpcErr.Code)
	assert.Contains(t, rpcErr.Message, `every replica of server "q" serves another client's calls and 2 calls wait already`)
	var data struct {
		Server       string `json:"server"`
		RetryAfterMs int64  `json:"retryAfterMs"`
	}
	require.NoError(t, json.Unmarshal(rpcErr.Data, &data))
	assert.Equal(t, "q", data.Server)
	assert.Positive(t, data.RetryAfterMs)

	// A second replica takes the oldest waiting call (bob's), while ada
	// still holds the first.
	th.runLeased(untaggedServer(nil, nil), "q", 2)
	assert.Equal(t, "bob answers who?", <-bobDone)
	assert.Equal(t, "cy answers who?", <-cyDone, "then cy's, once bob's lease ended")
	close(hold)
	for range 2 {
		assert.Equal(t, "ada answers who?", <-adaDone)
	}
	assert.Zero(t, th.leases.waitingFor("q"))
}

// TestHub_leaseWaitTimesOut: a call that waits for a lease longer than the
// call timeout fails with -32001, and the queue lets it go.
func TestHub_leaseWaitTimesOut(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CallTimeout: 200 * time.Millisecond})
	hold := make(chan struct{})
	defer close(hold)
	var in atomic.Int32
	th.runLeased(untaggedServer(hold, &in), "slow", 1)
	ada, bob := sampler(th, "ada"), sampler(th, "bob")
	go ada.CallTool(context.Background(), "slow__ask", nil, nil)
	require.Eventually(t, func() bool { return in.Load() == 1 }, wait, time.Millisecond)
	_, err := bob.CallTool(ctxFor(t), "slow__ask", nil, nil)
	assert.Equal(t, mcp.CodeRequestTimeout, rpcCode(err), "%v", err)
	assert.Zero(t, th.leases.waitingFor("slow"))
}

// TestHub_leaseWaitEndsWhenTheServerLeaves: calls waiting for the only
// replica fail as calls to a server that left when it leaves.
func TestHub_leaseWaitEndsWhenTheServerLeaves(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	hold := make(chan struct{})
	defer close(hold)
	var in atomic.Int32
	stop := th.runLeased(untaggedServer(hold, &in), "gone", 1)
	ada, bob := sampler(th, "ada"), sampler(th, "bob")
	go ada.CallTool(context.Background(), "gone__ask", nil, nil)
	require.Eventually(t, func() bool { return in.Load() == 1 }, wait, time.Millisecond)
	failed := make(chan error, 1)
	go func() {
		_, err := bob.CallTool(ctxFor(t), "gone__ask", nil, nil)
		failed <- err
	}()
	require.Eventually(t, func() bool { return th.leases.waitingFor("gone") == 1 }, wait, time.Millisecond)
	stop()
	err := <-failed
	assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "%v", err)
	assert.Contains(t, fmt.Sprint(err), `server "gone" disconnected`)
}

// TestCluster_leasedAcrossInstances: clients on two instances, the leased
// server's replicas on one: the calls from the other instance are leased
// there too, and every request reaches the client whose call asked.
func TestCluster_leasedAcrossInstances(t *testing.T) {
	t.Parallel()
	_, hubs := startCluster(t, 2)
	a, b := hubs[0], hubs[1]
	b.runLeased(untaggedServer(nil, nil), "u", 1)
	b.runLeased(untaggedServer(nil, nil), "u", 2)
	a.waitServer("u", 2)
	for _, ri := range a.reg.view().servers["u"] {
		assert.True(t, ri.Leased, "the other instance knows the replicas are leased")
	}
	var clients []*mcp.Client
	names := []string{"ada", "bob", "cy", "dee"}
	for i, n := range names {
		clients = append(clients, sampler(hubs[i%2], n))
	}
	for i, texts := range callAll(t, clients, "u__ask", 5) {
		assert.Len(t, texts, 5, "client %s", names[i])
		for _, text := range texts {
			assert.Equal(t, names[i]+" answers who?", text)
		}
	}
}
