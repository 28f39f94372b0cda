package benchlab

import (
	"sort"
	"strings"
	"time"
)

// CPUSplit is the CPU every process of the run spent while an operation was
// measured: how busy the machine was, and where the work went. The zero
// value is empty.
type CPUSplit struct {
	measured time.Duration            // total length of the measured windows
	all      time.Duration            // CPU of every process, the load generator included
	by       map[string]time.Duration // by process name
	machine  time.Duration            // busy time of all cores, other users' work included
}

// Add adds one window of length d, given the processes' CPU times at its
// start and at its end (Supervisor.CPUByProcess).
func (s *CPUSplit) Add(before, after map[string]time.Duration, d time.Duration) {
	if s.by == nil {
		s.by = map[string]time.Duration{}
	}
	s.measured += d
	for name, t := range after {
		if name == machineKey {
			s.machine += t - before[name]
			continue
		}
		if dt := t - before[name]; dt > 0 {
			s.all += dt
			s.by[name] += dt
		}
	}
}

// MinMeasured is the least measured time whose CPU figures are shown: /proc
// counts CPU time in 10 ms ticks.
const MinMeasured = 200 * time.Millisecond

// Enough reports whether the windows were long enough for CPU figures.
func (s *CPUSplit) Enough() bool { return s.measured >= MinMeasured }

// Measured returns the total length of the windows.
func (s *CPUSplit) Measured() time.Duration { return s.measured }

// All returns the CPU every process spent in the windows.
func (s *CPUSplit) All() time.Duration { return s.all }

// Busy returns the average number of cores the run's processes kept busy
// during the windows, and how many the whole machine did (other users
// included).
func (s *CPUSplit) Busy() (ours, machine float64) {
	if s.measured <= 0 {
		return 0, 0
	}
	return s.all.Seconds() / s.measured.Seconds(), s.machine.Seconds() / s.measured.Seconds()
}

// PerOp lists the processes that took at least 2% of the CPU, costliest
// first, with their CPU per operation: "hub 29.2 µs, hubbench (load) 14.1 µs".
func (s *CPUSplit) PerOp(ops int64) string {
	if ops <= 0 {
		return "-"
	}
	type share struct {
		name string
		d    time.Duration
	}
	var shares []share
	for name, d := range s.by {
		if d*50 >= s.all {
			shares = append(shares, share{name, d})
		}
	}
	sort.Slice(shares, func(i, j int) bool {
		if shares[i].d != shares[j].d {
			return shares[i].d > shares[j].d
		}
		return shares[i].name < shares[j].name
	})
	parts := make([]string, len(shares))
	for i, sh := range shares {
		parts[i] = sh.name + " " + FormatDuration(sh.d/time.Duration(ops))
	}
	return strings.Join(parts, ", ")
}
