package benchlab

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSupervisor_redis: the supervisor starts redis-server through
// internal/redistest, counts its CPU time with the children's, and stops
// it with them.
func TestSupervisor_redis(t *testing.T) {
	t.Parallel()
	sup := &Supervisor{}
	defer sup.StopAll()
	addr, err := sup.StartRedis(t.TempDir())
	require.NoError(t, err)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err, "redis-server listens")
	c.Close()
	assert.Contains(t, sup.CPUByProcess(), "redis-server")

	sup.StopAll()
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "stopped with the supervisor")
	_, err = sup.StartRedis(t.TempDir())
	assert.Error(t, err, "a stopped supervisor starts nothing")
}

// TestSupervisor_children: a child is ready when its output says so, its
// CPU time is counted under its name beside the supervisor's own (Self),
// and StopAll ends it; waiting on a child that has exited fails at once,
// naming it.
func TestSupervisor_children(t *testing.T) {
	t.Parallel()
	sup := &Supervisor{Self: "bench"}
	defer sup.StopAll()
	ctx := context.Background()
	c, addr, err := sup.Start(ctx, "listener", []string{"/bin/sh", "-c", "echo ready addr=127.0.0.1:9; exec sleep 60"}, nil,
		regexp.MustCompile(`^ready addr=(\S+)`))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9", addr)
	cpu := sup.CPUByProcess()
	assert.Contains(t, cpu, "listener")
	assert.Contains(t, cpu, "bench")
	assert.Contains(t, cpu, machineKey)

	quitter, _, err := sup.Start(ctx, "quitter", []string{"/bin/sh", "-c", "exit 3"}, nil, nil)
	require.NoError(t, err)
	err = Poll(ctx, quitter, func() error { return errors.New("never ready") })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "quitter: exited")

	sup.StopAll()
	assert.True(t, c.exited(), "StopAll reaps its children")
	assert.NotContains(t, sup.CPUByProcess(), "listener")
}

// TestSupervisor_stopSince: the children a part of a run started end with
// it; those started before it go on until StopAll.
func TestSupervisor_stopSince(t *testing.T) {
	t.Parallel()
	sup := &Supervisor{}
	defer sup.StopAll()
	ctx := context.Background()
	start := func(name string) *Child {
		c, _, err := sup.Start(ctx, name, []string{"/bin/sh", "-c", "exec sleep 60"}, nil, nil)
		require.NoError(t, err)
		return c
	}
	before := start("before")
	mark := sup.Mark()
	during := start("during")
	sup.StopSince(mark)
	assert.True(t, during.exited(), "stopped and reaped")
	assert.False(t, before.exited(), "started before the mark: still running")
	assert.NotContains(t, sup.CPUByProcess(), "during")
	sup.StopSince(sup.Mark()) // nothing since
	assert.False(t, before.exited())
	sup.StopAll()
	assert.True(t, before.exited())
}

// TestWaitHTTP: ready once the URL answers 200.
func TestWaitHTTP(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	require.NoError(t, WaitHTTP(context.Background(), nil, srv.URL))
	assert.Equal(t, int32(3), calls.Load())
}
