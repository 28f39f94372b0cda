package pubsub

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatchers_foldAndOrder(t *testing.T) {
	t.Parallel()
	var ws watchers
	calls := make(chan bool, 8)
	release := make(chan struct{})
	var running atomic.Int32
	stop := ws.add(func(up bool) {
		running.Add(1)
		defer running.Add(-1)
		calls <- up
		if !up {
			<-release // the first call, a loss, blocks
		}
	}, true)

	ws.notify(true) // no change: not reported
	ws.notify(false)
	require.False(t, recv(t, calls))
	// While fn is busy with the loss: recovery, loss, recovery, loss,
	// recovery. Only "recovered" remains to tell.
	for range 2 {
		ws.notify(true)
		ws.notify(false)
	}
	ws.notify(true)
	close(release)
	assert.True(t, recv(t, calls))

	ws.notify(false)
	ws.notify(true)
	assert.False(t, recv(t, calls))
	assert.True(t, recv(t, calls))

	stop()
	stop() // idempotent
	assert.Zero(t, running.Load())
	ws.notify(false)
	select {
	case up := <-calls:
		t.Fatalf("fn called with %v after stop", up)
	default:
	}
}

func TestWatchers_stopWaitsForARunningCall(t *testing.T) {
	t.Parallel()
	var ws watchers
	entered := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	stop := ws.add(func(bool) {
		close(entered)
		<-release
		finished.Store(true)
	}, true)
	ws.notify(false)
	<-entered
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	close(release)
	<-stopped
	assert.True(t, finished.Load(), "stop returned while fn was running")
}

func TestWatchers_closeStopsAll(t *testing.T) {
	t.Parallel()
	var ws watchers
	calls := make(chan bool, 4)
	stop := ws.add(func(up bool) { calls <- up }, true)
	ws.close()
	ws.notify(false)
	later := ws.add(func(up bool) { calls <- up }, true)
	ws.notify(true)
	stop()
	later()
	assert.Empty(t, calls)
}

func recv(t *testing.T, ch <-chan bool) bool {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("fn not called")
		return false
	}
}
