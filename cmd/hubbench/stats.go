package main

import (
	"math"
	"slices"
	"time"
)

// latencies summarises a set of round-trip or delivery times.
type latencies struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

// summarize sorts d in place and returns its percentiles.
func summarize(d []time.Duration) latencies {
	slices.Sort(d)
	if len(d) == 0 {
		return latencies{}
	}
	return latencies{
		N:    len(d),
		P50:  percentile(d, 0.50),
		P99:  percentile(d, 0.99),
		P999: percentile(d, 0.999),
		Max:  d[len(d)-1],
	}
}

// percentile returns the q-quantile (0 <= q <= 1) of sorted by the
// nearest-rank method: the smallest value such that at least q of the
// values are less than or equal to it. It never interpolates, so the figure
// is always a time some call actually took.
func percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// medianLatencies returns the median of each figure over rounds (N is the
// total).
func medianLatencies(rounds []latencies) latencies {
	var out latencies
	var p50, p99, p999, mx []time.Duration
	for _, r := range rounds {
		out.N += r.N
		p50, p99, p999, mx = append(p50, r.P50), append(p99, r.P99), append(p999, r.P999), append(mx, r.Max)
	}
	out.P50, out.P99, out.P999, out.Max = medianDuration(p50), medianDuration(p99), medianDuration(p999), medianDuration(mx)
	return out
}

// median returns the median of xs (the mean of the two middle values for an
// even count), without modifying xs; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// medianDuration is median for durations.
func medianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}
