package connect_test

import (
	"context"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// What passes through the connector besides calls and their answers:
// cancellation both ways, elicitation, the server's requests outside any
// call, and a session that outlives the hub it started on. The server is
// this test binary as a child process, which says on stderr what it saw.

// TestRun_clientCancellationReachesTheChild: a client that cancels its call
// has the child's request cancelled, named by the id the child got it
// under.
func TestRun_clientCancellationReachesTheChild(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, nil)
	waitTool(t, c, "fake__wait", true)

	ctx, cancel := context.WithCancel(ctxFor(t))
	called := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "fake__wait", nil, nil)
		called <- err
	}()
	r.log.waitLog(t, 1, "server stderr", "wait started id=")
	m := regexp.MustCompile(`wait started id=(\S+?)"`).FindStringSubmatch(r.log.String())
	require.NotNil(t, m, r.log.String())
	cancel()
	assert.ErrorIs(t, <-called, context.Canceled)
	r.log.waitLog(t, 1, "server stderr", "wait cancelled id="+m[1]+`"`)

	res, err := c.CallTool(ctxFor(t), "fake__echo", map[string]string{"text": "after"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "after", text(t, res), "the child serves on")
	assert.Len(t, r.pids(), 1, "and was not restarted")
}

// TestRun_elicitationBothWays: the child's elicitation reaches the calling
// client and its answer returns; when the child gives up on it, the
// client's request is cancelled.
func TestRun_elicitationBothWays(t *testing.T) {
	th := startHub(t, hub.Config{})
	runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: th.url("/mcp/server")})
	hold := make(chan bool, 1) // true: wait until cancelled
	asked := make(chan string, 2)
	cancelled := make(chan struct{})
	c := th.client(t, &mcp.ClientOptions{Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		asked <- p.Message
		if <-hold {
			<-ctx.Done() // only a cancellation naming this request ends it
			close(cancelled)
			return nil, ctx.Err()
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}})
	waitTool(t, c, "fake__elicit", true)
	ctx := ctxFor(t)

	hold <- false
	res, err := c.CallTool(ctx, "fake__elicit", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "accept Ada", text(t, res), "the client's answer reached the child")
	assert.Equal(t, "Your name?", <-asked)

	hold <- true
	called := make(chan string, 1)
	go func() {
		res, err := c.CallTool(ctx, "fake__elicit", nil, nil)
		if err != nil {
			called <- err.Error()
			return
		}
		called <- res.Content[0].Text
	}()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the second elicitation never reached the client")
	}
	res, err = c.CallTool(ctx, "fake__abandon", nil, nil)
	require.NoError(t, err)
	require.Equal(t, "abandoned", text(t, res))
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("the child gave up on its elicitation, and the client's request was never cancelled")
	}
	assert.Contains(t, <-called, "elicitation ended: context canceled")
}

// TestRun_requestsOutsideAnyCall: sampling and elicitation that a child
// asks for outside any client's call get a clear error, -32601 saying why
// and what to do, instead of waiting for an answer that cannot come.
func TestRun_requestsOutsideAnyCall(t *testing.T) {
	th := startHub(t, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("alone", "alone")}, connect.Options{URL: th.url("/mcp/server")})
	for _, method := range []string{mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate} {
		r.log.waitLog(t, 1, "server=alone", method+" outside a call: code=-32601",
			method+" outside a client's call: no client can answer it (make it while serving a call")
	}
}

// TestRun_reconnectsToANewHub: when the hub goes away in the middle of a
// session (a call in flight), the connector stops the child, dials until a
// hub listens at the address again, and the server is on the new hub with
// a fresh child.
func TestRun_reconnectsToANewHub(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	first := startHubOn(t, ln, hub.Config{})
	r := runConnector(t, []connect.Server{selfServer("fake", "server")}, connect.Options{URL: first.url("/mcp/server")})
	c := first.client(t, nil)
	waitTool(t, c, "fake__wait", true)
	called := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctxFor(t), "fake__wait", nil, nil)
		called <- err
	}()
	r.log.waitLog(t, 1, "server stderr", "wait started id=")

	first.stop()
	assert.Error(t, <-called, "the call in flight fails with the hub")
	r.log.waitLog(t, 1, "lost the hub; stopped the server and will reconnect", "server=fake")
	pids := r.pids()
	require.Len(t, pids, 1)
	require.Eventually(t, func() bool { return processGone(pids[0]) }, wait, 10*time.Millisecond, "the child of the lost session was stopped")
	r.log.waitLog(t, 1, "cannot reach the hub", "retrying") // nobody listens now

	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err, "listening again on %s", addr)
	second := startHubOn(t, ln, hub.Config{})
	c = second.client(t, nil)
	waitTool(t, c, "fake__echo", true)
	res, err := c.CallTool(ctxFor(t), "fake__echo", map[string]string{"text": "on the new hub"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "on the new hub", text(t, res))
	assert.Len(t, r.pids(), 2, "a fresh child for the new session")
}
