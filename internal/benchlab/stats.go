package benchlab

import (
	"math"
	"slices"
	"time"
)

// Latencies summarises a set of round-trip or delivery times.
type Latencies struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

// Summarize sorts d in place and returns its percentiles.
func Summarize(d []time.Duration) Latencies {
	slices.Sort(d)
	if len(d) == 0 {
		return Latencies{}
	}
	return Latencies{
		N:    len(d),
		P50:  Percentile(d, 0.50),
		P99:  Percentile(d, 0.99),
		P999: Percentile(d, 0.999),
		Max:  d[len(d)-1],
	}
}

// Percentile returns the q-quantile (0 <= q <= 1) of sorted by the
// nearest-rank method: the smallest value such that at least q of the
// values are less than or equal to it. It never interpolates, so the figure
// is always a time some call actually took.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// MedianLatencies returns the median of each figure over rounds (N is the
// total).
func MedianLatencies(rounds []Latencies) Latencies {
	var out Latencies
	var p50, p99, p999, mx []time.Duration
	for _, r := range rounds {
		out.N += r.N
		p50, p99, p999, mx = append(p50, r.P50), append(p99, r.P99), append(p999, r.P999), append(mx, r.Max)
	}
	out.P50, out.P99, out.P999, out.Max = MedianDuration(p50), MedianDuration(p99), MedianDuration(p999), MedianDuration(mx)
	return out
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), without modifying xs; 0 for none.
func Median(xs []float64) float64 {
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

// MedianDuration is Median for durations.
func MedianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(Median(xs))
}
