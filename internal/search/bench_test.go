package search_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/search"
)

// The targets: a search over 10,000 tools takes at most 1 ms at the median
// and 5 ms at the 99th percentile; indexing a server with 500 tools that
// joins them, at most 50 ms. The tools are the corpus's, copied under
// other server names until there are 10,000; the queries are the corpus's.

const benchTools = 10_000

func benchIndex(b *testing.B) (*search.Index, map[string][]search.Tool) {
	b.Helper()
	corpus := loadCorpus(b)
	n := 0
	for _, ts := range corpus {
		n += len(ts)
	}
	x := indexCorpus(corpus, (benchTools+n-1)/n)
	if x.Len() < benchTools {
		b.Fatalf("indexed %d tools, want %d", x.Len(), benchTools)
	}
	return x, corpus
}

// BenchmarkSearch reports the latency of one search (limit 10) over the
// 10,000 tools, as its median and 99th percentile besides the mean.
func BenchmarkSearch(b *testing.B) {
	x, _ := benchIndex(b)
	qs := loadQueries(b)
	b.ReportMetric(float64(x.Len()), "tools")
	var lat []time.Duration
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		x.Search(qs[i%len(qs)].Query, 10, search.Filter{})
		lat = append(lat, time.Since(start))
		i++
	}
	reportPercentiles(b, lat, 1, 5)
}

// BenchmarkSearchFiltered is BenchmarkSearch for a principal allowed a
// third of the servers and refused a tool in two.
func BenchmarkSearchFiltered(b *testing.B) {
	x, _ := benchIndex(b)
	qs := loadQueries(b)
	f := search.Filter{
		Server: func(s string) bool { return len(s)%3 == 0 },
		Tool:   func(t *search.Tool) bool { return len(t.Name)%2 == 0 },
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		x.Search(qs[i%len(qs)].Query, 10, f)
		lat = append(lat, time.Since(start))
		i++
	}
	reportPercentiles(b, lat, 1, 5)
}

// BenchmarkServerJoins reports how long indexing a server with 500 tools
// takes when it joins 10,000 others (and, untimed, leaves again).
func BenchmarkServerJoins(b *testing.B) {
	x, corpus := benchIndex(b)
	var pool []search.Tool
	for _, name := range sortedServers(corpus) {
		pool = append(pool, corpus[name]...)
	}
	tools := slices.Clone(pool[:500])
	for i := range tools {
		tools[i].Name = "joiner__t" + strconv.Itoa(i)
		tools[i].Server = "joiner"
	}
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		x.SetServer("joiner", tools)
		lat = append(lat, time.Since(start))
		b.StopTimer()
		x.RemoveServer("joiner")
		b.StartTimer()
	}
	reportPercentiles(b, lat, 50, 50)
}

// reportPercentiles reports the median and 99th percentile in ms, and
// fails the benchmark past the targets given (ms).
func reportPercentiles(b *testing.B, lat []time.Duration, p50Max, p99Max float64) {
	b.Helper()
	slices.Sort(lat)
	pct := func(p int) float64 { return float64(lat[(len(lat)-1)*p/100]) / float64(time.Millisecond) }
	p50, p99 := pct(50), pct(99)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	if p50 > p50Max || p99 > p99Max {
		b.Errorf("p50 %.3f ms (target %.0f), p99 %.3f ms (target %.0f)", p50, p50Max, p99, p99Max)
	}
}
