package hub

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// The coalescer passes on at most one event per key and interval, the
// first of a burst at once, and always the last. Time here is synctest's:
// the events happen at exact instants.
func TestCoalescer_oncePerIntervalAndAlwaysTheLast(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	for _, tc := range []struct {
		name   string
		events []time.Duration // when "k" fires
		stopAt time.Duration   // 0: never stopped
		want   []time.Duration // when "k" is sent
	}{
		{"one event goes at once", []time.Duration{0}, 0, []time.Duration{0}},
		{"a burst is the first, then one at the end of the interval",
			[]time.Duration{0, 10 * ms, 20 * ms, 50 * ms, 90 * ms, 99 * ms}, 0, []time.Duration{0, 100 * ms}},
		{"an event after a quiet interval goes at once", []time.Duration{0, 150 * ms}, 0, []time.Duration{0, 150 * ms}},
		{"an event in the window the last one opened waits for its end",
			[]time.Duration{0, 50 * ms, 120 * ms, 130 * ms}, 0, []time.Duration{0, 100 * ms, 200 * ms}},
		{"stop drops what is pending", []time.Duration{0, 50 * ms}, 60 * ms, []time.Duration{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var mu sync.Mutex
				var sent []time.Duration
				var others int
				c := newCoalescer(100*ms, func(key string) {
					mu.Lock()
					defer mu.Unlock()
					if key == "k" {
						sent = append(sent, time.Since(start))
					} else {
						others++
					}
				})
				defer c.stop()
				c.fire("other") // another key has windows of its own
				for _, at := range tc.events {
					time.Sleep(at - time.Since(start))
					c.fire("k")
				}
				if tc.stopAt > 0 {
					time.Sleep(tc.stopAt - time.Since(start))
					c.stop()
				}
				time.Sleep(time.Second)
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				assert.Equal(t, tc.want, sent)
				assert.Equal(t, 1, others, "another key's event went once, whatever k did")
			})
		})
	}
}
