package benchlab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCPUSplit(t *testing.T) {
	t.Parallel()
	var s CPUSplit
	before := map[string]time.Duration{"hub": time.Second, "load": 0, "redis": 0}
	after := map[string]time.Duration{"hub": 2 * time.Second, "load": 500 * time.Millisecond, "redis": 10 * time.Millisecond, "new": time.Millisecond}
	s.Add(before, after, time.Second)
	ours, _ := s.Busy()
	assert.InDelta(t, 1.511, ours, 1e-9)
	assert.Equal(t, "hub 1.00 ms, load 500 µs", s.PerOp(1000), "under 2% of the total is left out")
	assert.Equal(t, "-", s.PerOp(0))
	ours, machine := (&CPUSplit{}).Busy()
	assert.Equal(t, [2]float64{0, 0}, [2]float64{ours, machine})
	s.Add(map[string]time.Duration{machineKey: time.Second}, map[string]time.Duration{machineKey: 3 * time.Second}, time.Second)
	_, machine = s.Busy()
	assert.InDelta(t, 1.0, machine, 1e-9, "2 s of busy cores over 2 s of windows")
}
