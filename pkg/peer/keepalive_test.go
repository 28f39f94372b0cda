package peer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFirstPing_spreadsConsecutiveConns(t *testing.T) {
	const interval = 30 * time.Second
	const n, bins = 1000, 10
	var count [bins]int
	for i := range uint64(n) {
		d := firstPing(interval, i)
		require.GreaterOrEqual(t, d, interval/2, "conn %d", i)
		require.Less(t, d, interval, "conn %d", i)
		count[(d-interval/2)*bins/(interval/2)]++
	}
	for b, got := range count {
		assert.InDelta(t, n/bins, got, n/bins/10, "conns first pinged in tenth %d of the window", b)
	}
	assert.Equal(t, firstPing(interval, 7), firstPing(interval, 7), "the same place, the same delay")
}

// A burst of clients is first pinged over half the interval, not all at
// once an interval after each connected; each is pinged again, and leaves
// the sweeper's heap as it closes.
func TestKeepalive_burstSpreadOverInterval(t *testing.T) {
	t.Parallel()
	const interval, n = 600 * time.Millisecond, 16
	accepted := make(chan *WebSocket, n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		opts := &AcceptOptions{WebSocketOptions: WebSocketOptions{PingInterval: interval, PingTimeout: 5 * time.Second}}
		if c, err := Accept(w, r, opts); err == nil {
			accepted <- c
		}
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	pinged := make([][]time.Time, n)
	connected := make([]time.Time, n)
	var readers sync.WaitGroup
	for i := range n {
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
			mu.Lock()
			pinged[i] = append(pinged[i], time.Now())
			mu.Unlock()
			return true
		}})
		require.NoError(t, err)
		connected[i] = time.Now()
		defer c.CloseNow()
		readers.Go(func() { _, _, _ = c.Read(context.Background()) }) // answers pings
	}
	defer readers.Wait()
	servers := make([]*WebSocket, n)
	for i := range n {
		servers[i] = <-accepted
		readers.Go(func() { _, _ = servers[i].Read(context.Background()) }) // reads the pongs
	}

	twice := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !slices.ContainsFunc(pinged, func(p []time.Time) bool { return len(p) < 2 })
	}
	for !twice() {
		select {
		case <-ctx.Done():
			t.Fatal("not every client was pinged twice")
		case <-time.After(20 * time.Millisecond):
		}
	}
	offsets := make([]time.Duration, n)
	for i := range n {
		offsets[i] = pinged[i][0].Sub(connected[i])
		assert.Less(t, offsets[i], interval+2*time.Second, "client %d first pinged late", i)
	}
	spread := slices.Max(offsets) - slices.Min(offsets)
	assert.GreaterOrEqual(t, spread, interval/4, "first pings after connecting: %v", offsets)

	for _, s := range servers {
		require.NoError(t, s.Close(CloseNormal, ""))
		pings.mu.Lock()
		idx := s.pingIdx
		pings.mu.Unlock()
		assert.Equal(t, -1, idx, "a closed conn left in the sweeper's heap")
	}
}
