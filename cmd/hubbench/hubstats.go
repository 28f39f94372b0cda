package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// runtimeStats are Go runtime figures of a hub process, where the hub
// exposes them.
type runtimeStats struct {
	Mallocs    float64 // cumulative count of heap objects allocated
	HeapInuse  float64 // bytes in in-use heap spans
	StackInuse float64 // bytes of goroutine stacks
	Goroutines float64

	// What the runtime holds from the OS, for the idle rows: the heap's
	// live objects (and garbage not yet swept), its spans that hold none
	// (HeapIdle, of which HeapReleased is returned to the OS), the stacks'
	// spans with those free (StackSys), the runtime's own metadata
	// (spans, caches, GC bitmaps, profiling buckets, other: MetaSys) and
	// the heap size the next collection starts at (NextGC).
	HeapAlloc, HeapIdle, HeapReleased, StackSys, MetaSys, NextGC float64
}

// statsSource reads a hub's runtime figures: from /metrics (Prometheus text:
// go_memstats_mallocs_total, go_memstats_heap_inuse_bytes, go_goroutines
// and go_memstats_stack_inuse_bytes) when the hub serves it, else from
// /debug/pprof (the instrumented twin).
// A hub that offers neither has no source: its figures are reported as not
// measured.
type statsSource struct {
	base  string // http://host:port
	pprof bool   // read /debug/pprof instead of /metrics
	// scrape is the allocation count of one read of the figures, which the
	// hub makes to answer it; subtracted from deltas.
	scrape float64
}

var statsClient = &http.Client{Timeout: 10 * time.Second}

// findStats probes the hub at addr and returns a source of its runtime
// figures, or nil when it offers none.
func findStats(ctx context.Context, addr string) *statsSource {
	for _, s := range []*statsSource{{base: "http://" + addr}, {base: "http://" + addr, pprof: true}} {
		a, err := s.read(ctx)
		if err != nil {
			continue
		}
		b, err := s.read(ctx)
		if err != nil {
			continue
		}
		s.scrape = max(b.Mallocs-a.Mallocs, 0)
		return s
	}
	return nil
}

// read reads the figures once.
func (s *statsSource) read(ctx context.Context) (runtimeStats, error) {
	if !s.pprof {
		body, err := get(ctx, s.base+"/metrics")
		if err != nil {
			return runtimeStats{}, err
		}
		return parseMetrics(body)
	}
	heap, err := get(ctx, s.base+"/debug/pprof/heap?debug=1")
	if err != nil {
		return runtimeStats{}, err
	}
	gor, err := get(ctx, s.base+"/debug/pprof/goroutine?debug=1")
	if err != nil {
		return runtimeStats{}, err
	}
	return parsePprof(heap, gor)
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := statsClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return string(b), nil
}

// parseMetrics reads the runtime figures from Prometheus text exposition.
// All of them must be present.
func parseMetrics(text string) (runtimeStats, error) {
	want := map[string]*float64{}
	var st runtimeStats
	want["go_memstats_mallocs_total"] = &st.Mallocs
	want["go_memstats_heap_inuse_bytes"] = &st.HeapInuse
	want["go_goroutines"] = &st.Goroutines
	want["go_memstats_stack_inuse_bytes"] = &st.StackInuse
	want["go_memstats_heap_alloc_bytes"] = &st.HeapAlloc
	want["go_memstats_heap_idle_bytes"] = &st.HeapIdle
	want["go_memstats_heap_released_bytes"] = &st.HeapReleased
	want["go_memstats_stack_sys_bytes"] = &st.StackSys
	want["go_memstats_next_gc_bytes"] = &st.NextGC
	meta := make([]float64, 5)
	for i, name := range metaMetrics {
		want[name] = &meta[i]
	}
	found := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		p := want[name]
		if !ok || p == nil {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			return st, fmt.Errorf("metric %s: %w", name, err)
		}
		*p = v
		delete(want, name)
		found++
	}
	if len(want) > 0 {
		return st, fmt.Errorf("/metrics lacks %d of the Go runtime metrics", len(want))
	}
	for _, v := range meta {
		st.MetaSys += v
	}
	return st, nil
}

// metaMetrics are the runtime's metadata, summed into MetaSys: /metrics'
// names, and runtime.MemStats' in the heap profile's text.
var (
	metaMetrics = []string{"go_memstats_mspan_sys_bytes", "go_memstats_mcache_sys_bytes", "go_memstats_gc_sys_bytes",
		"go_memstats_buck_hash_sys_bytes", "go_memstats_other_sys_bytes"}
	metaMemStats = []string{"MSpan", "MCache", "GCSys", "BuckHashSys", "OtherSys"}
)

// parsePprof reads the runtime figures from the text forms (debug=1) of the
// heap profile, which ends with runtime.MemStats ("# Mallocs = 123"), and of
// the goroutine profile ("goroutine profile: total 12").
func parsePprof(heap, goroutine string) (runtimeStats, error) {
	var st runtimeStats
	// field reads "# Name = v", or "# Name = inuse / sys": the first
	// figure, or with sys set the last.
	field := func(name string, sys bool) (float64, error) {
		i := strings.Index(heap, "\n# "+name+" = ")
		if i < 0 {
			return 0, fmt.Errorf("heap profile lacks %s", name)
		}
		rest, _, _ := strings.Cut(heap[i+len(name)+6:], "\n")
		inuse, total, _ := strings.Cut(rest, "/")
		if sys {
			return strconv.ParseFloat(strings.TrimSpace(total), 64)
		}
		return strconv.ParseFloat(strings.TrimSpace(inuse), 64)
	}
	for _, f := range []struct {
		name string
		sys  bool
		to   *float64
	}{
		{"Mallocs", false, &st.Mallocs}, {"HeapInuse", false, &st.HeapInuse}, {"Stack", false, &st.StackInuse},
		{"HeapAlloc", false, &st.HeapAlloc}, {"HeapIdle", false, &st.HeapIdle}, {"HeapReleased", false, &st.HeapReleased},
		{"Stack", true, &st.StackSys}, {"NextGC", false, &st.NextGC},
	} {
		v, err := field(f.name, f.sys)
		if err != nil {
			return st, err
		}
		*f.to = v
	}
	for _, name := range metaMemStats {
		sys := name == "MSpan" || name == "MCache" // "inuse / sys"
		v, err := field(name, sys)
		if err != nil {
			return st, err
		}
		st.MetaSys += v
	}
	var err error
	first, _, _ := strings.Cut(goroutine, "\n")
	n, ok := strings.CutPrefix(first, "goroutine profile: total ")
	if !ok {
		return st, fmt.Errorf("goroutine profile starts %q", first)
	}
	st.Goroutines, err = strconv.ParseFloat(strings.TrimSpace(n), 64)
	return st, err
}
