package benchlab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPercentile_nearestRank(t *testing.T) {
	t.Parallel()
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1) // 1..100
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{7}, 0.99, 7},
		{"p50 of 100", hundred, 0.50, 50},
		{"p99 of 100", hundred, 0.99, 99},
		{"p999 of 100 is the max", hundred, 0.999, 100},
		{"p0 is the min", hundred, 0, 1},
		{"p100 is the max", hundred, 1, 100},
		{"p50 of 4 is the 2nd", []time.Duration{1, 2, 3, 4}, 0.5, 2},
		{"p51 of 4 is the 3rd", []time.Duration{1, 2, 3, 4}, 0.51, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, Percentile(tc.in, tc.q))
		})
	}
}

func TestSummarize_sortsAndReports(t *testing.T) {
	t.Parallel()
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration(1000 - i) // descending: summarize must sort
	}
	s := Summarize(d)
	assert.Equal(t, Latencies{N: 1000, P50: 500, P99: 990, P999: 999, Max: 1000}, s)
	assert.Equal(t, Latencies{}, Summarize(nil))
}

func TestMedianLatencies(t *testing.T) {
	t.Parallel()
	got := MedianLatencies([]Latencies{
		{N: 10, P50: 1, P99: 9, P999: 10, Max: 10},
		{N: 20, P50: 3, P99: 30, P999: 90, Max: 99},
		{N: 30, P50: 2, P99: 20, P999: 20, Max: 20},
	})
	assert.Equal(t, Latencies{N: 60, P50: 2, P99: 20, P999: 20, Max: 20}, got)
	assert.Equal(t, Latencies{}, MedianLatencies(nil))
}

func TestMedian(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 0.0, Median(nil))
	assert.Equal(t, 3.0, Median([]float64{5, 3, 1}))
	assert.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	xs := []float64{3, 1, 2}
	Median(xs)
	assert.Equal(t, []float64{3, 1, 2}, xs, "median must not reorder its input")
	assert.Equal(t, 20*time.Millisecond, MedianDuration([]time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}))
}
