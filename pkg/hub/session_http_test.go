package hub

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTP_idleSessionsHoldNoGoroutine: a Streamable HTTP session that has
// nothing in flight holds no goroutine of the hub's (its peer is fed by the
// handlers of its POSTs and told when the session ends): thousands of idle
// sessions cost memory, not goroutines. (Its peer had a read loop each,
// waiting for the next POST.) Not parallel: it counts the process's
// goroutines.
func TestHTTP_idleSessionsHoldNoGoroutine(t *testing.T) {
	th := startHub(t, Config{})
	endpoint := th.srv.URL + "/mcp"
	// The count once it has stood still for longer than a peer's idle
	// worker lingers (half a second), polled under a deadline.
	settled := func() int {
		defaultTransport.CloseIdleConnections() // the keep-alive connections' goroutines, both ends
		n, since := runtime.NumGoroutine(), time.Now()
		for deadline := time.Now().Add(wait); time.Now().Before(deadline) && time.Since(since) < 700*time.Millisecond; {
			time.Sleep(20 * time.Millisecond)
			if m := runtime.NumGoroutine(); m != n {
				n, since = m, time.Now()
			}
		}
		return n
	}
	before := settled()
	const sessions = 40
	for range sessions {
		_, err := benchHTTPSession(endpoint, nil)
		require.NoError(t, err)
	}
	after := settled()
	assert.Less(t, float64(after-before)/sessions, 0.25, "goroutines per idle session (%d before, %d after)", before, after)
}
