package connect_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
)

// TestRun_poolGrowsAndShrinks: a pool of 1..2 children, each leased to one
// client at a time by the hub. While one client's call holds the first
// child, another client's call waits at the hub; the connector sees every
// child busy and starts a second, which takes it; a third client waits for
// a free child (the pool is full). Once idle for PoolIdle, the second child
// is stopped; the first stays.
func TestRun_poolGrowsAndShrinks(t *testing.T) {
	th := startHub(t, hub.Config{})
	srv := selfServer("fake", "server")
	srv.Pool = connect.Pool{Min: 1, Max: 2}
	r := runConnector(t, []connect.Server{srv}, connect.Options{URL: th.url("/mcp/server"), PoolIdle: 300 * time.Millisecond})
	ada, bob, cy := th.client(t, nil), th.client(t, nil), th.client(t, nil)
	waitTool(t, ada, "fake__wait", true)
	require.Len(t, r.pids(), 1, "MIN children at first")
	assert.Contains(t, r.log.String(), "run=1", "a pool's log names each run")

	held, release := context.WithCancel(ctxFor(t))
	adaDone := make(chan error, 1)
	go func() {
		_, err := ada.CallTool(held, "fake__wait", nil, nil)
		adaDone <- err
	}()
	r.log.waitLog(t, 1, "wait started")

	res, err := bob.CallTool(ctxFor(t), "fake__pid", nil, nil)
	require.NoError(t, err, "bob's call waited for the second child")
	require.Len(t, r.pids(), 2, "the pool grew to serve bob; the log:\n%s", r.log)
	assert.NotEqual(t, r.pids()[0], atoi(t, text(t, res)), "bob's call went to the new child, ada still holds the first")

	// With the pool full, cy's call waits for a child to come free: bob's
	// lease ended with his call.
	res, err = cy.CallTool(ctxFor(t), "fake__pid", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, r.pids()[1], atoi(t, text(t, res)))
	assert.Len(t, r.pids(), 2, "no third child")

	release()
	require.Error(t, <-adaDone)
	r.log.waitLog(t, 1, "the pool shrinks", "run=2")
	require.Eventually(t, func() bool { return processGone(r.pids()[1]) }, wait, 10*time.Millisecond, "the idle child was stopped")
	assert.False(t, processGone(r.pids()[0]), "MIN children stay")
	res, err = bob.CallTool(ctxFor(t), "fake__pid", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, r.pids()[0], atoi(t, text(t, res)), "the server serves on with its first child")
	assert.Zero(t, r.log.count("restarting"), "nothing restarted; the log:\n%s", r.log)
}

// TestRun_poolKeepsMin: MIN children start at once and a dead one is
// restarted.
func TestRun_poolKeepsMin(t *testing.T) {
	th := startHub(t, hub.Config{})
	srv := selfServer("fake", "server")
	// MIN = MAX: a pool that may grow does so whenever every child is busy
	// for a moment (the hub re-lists a server when one of its replicas
	// leaves), and then more than the replacement would start.
	srv.Pool = connect.Pool{Min: 2, Max: 2}
	r := runConnector(t, []connect.Server{srv}, connect.Options{URL: th.url("/mcp/server")})
	c := th.client(t, nil)
	waitTool(t, c, "fake__pid", true)
	r.log.waitLog(t, 2, "answered the hub's initialize")
	require.Len(t, r.pids(), 2)
	_, err := c.CallTool(ctxFor(t), "fake__exit", nil, nil)
	require.Error(t, err, "a child exits mid-call")
	r.log.waitLog(t, 1, "exited with status 1; restarting")
	r.log.waitLog(t, 3, "answered the hub's initialize")
	assert.Len(t, r.pids(), 3, "the dead child was replaced")
}

func TestParsePool(t *testing.T) {
	for in, want := range map[string]connect.Pool{"1..4": {Min: 1, Max: 4}, " 2 .. 2 ": {Min: 2, Max: 2}, "3": {Min: 3, Max: 3}} {
		p, err := connect.ParsePool(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, p, in)
	}
	for in, want := range map[string]string{
		"":        "neither MIN..MAX",
		"a..b":    "neither MIN..MAX",
		"0..2":    "at least one run",
		"3..2":    "MAX must be at least MIN",
		"1..-1":   "MAX must be at least MIN",
		"1..1000": "at most 256",
	} {
		_, err := connect.ParsePool(in)
		assert.ErrorContains(t, err, want, in)
	}
	servers, err := connect.ParseConfig([]byte("mcpServers: {a: {command: x, pool: 1..3, shared: true, session: true}}"))
	require.NoError(t, err)
	assert.Equal(t, connect.Pool{Min: 1, Max: 3}, servers[0].Pool)
	assert.True(t, servers[0].Shared)
	assert.True(t, servers[0].Session)
	_, err = connect.ParseConfig([]byte("mcpServers: {a: {command: x, pool: lots}}"))
	assert.ErrorContains(t, err, `server "a": pool "lots"`)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	require.NoError(t, err)
	return n
}

// FuzzParsePool: any text either parses into bounds Run accepts (at least
// one run, MAX >= MIN, at most MaxPool) that print back as MIN..MAX, or is
// refused with an error.
func FuzzParsePool(f *testing.F) {
	for _, s := range []string{"1..4", "3", " 2 .. 2 ", "0..1", "2..1", "..", "1..", "9999999999999999999..1", "-1..-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := connect.ParsePool(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, p.Min, 1)
		require.GreaterOrEqual(t, p.Max, p.Min)
		require.LessOrEqual(t, p.Max, connect.MaxPool)
		again, err := connect.ParsePool(p.String())
		require.NoError(t, err)
		require.Equal(t, p, again)
	})
}
