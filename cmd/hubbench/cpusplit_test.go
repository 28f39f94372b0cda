package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCPUSplit(t *testing.T) {
	t.Parallel()
	var s cpuSplit
	before := map[string]time.Duration{"hub": time.Second, "load": 0, "redis": 0}
	after := map[string]time.Duration{"hub": 2 * time.Second, "load": 500 * time.Millisecond, "redis": 10 * time.Millisecond, "new": time.Millisecond}
	s.add(before, after, time.Second)
	ours, _ := s.busy()
	assert.InDelta(t, 1.511, ours, 1e-9)
	assert.Equal(t, "hub 1.00 ms, load 500 µs", s.perOp(1000), "under 2% of the total is left out")
	assert.Equal(t, "-", s.perOp(0))
	ours, machine := (&cpuSplit{}).busy()
	assert.Equal(t, [2]float64{0, 0}, [2]float64{ours, machine})
	s.add(map[string]time.Duration{machineKey: time.Second}, map[string]time.Duration{machineKey: 3 * time.Second}, time.Second)
	_, machine = s.busy()
	assert.InDelta(t, 1.0, machine, 1e-9, "2 s of busy cores over 2 s of windows")
}
