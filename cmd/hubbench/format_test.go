package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormat_figures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{fmtDuration(0), "0"},
		{fmtDuration(850 * time.Nanosecond), "850 ns"},
		{fmtDuration(87 * time.Microsecond), "87.0 µs"},
		{fmtDuration(1234 * time.Microsecond), "1.23 ms"},
		{fmtDuration(45600 * time.Microsecond), "45.6 ms"},
		{fmtDuration(456 * time.Millisecond), "456 ms"},
		{fmtDuration(1200 * time.Millisecond), "1.20 s"},
		{fmtCount(0), "0"},
		{fmtCount(999), "999"},
		{fmtCount(1000), "1,000"},
		{fmtCount(1234567), "1,234,567"},
		{fmtCount(-12345), "-12,345"},
		{fmtRate(12344.6), "12,345/s"},
		{fmtRatio(0.5249), "0.52x"},
		{fmtRatio(3), "3.00x"},
		{fmtBytes(980), "980 B"},
		{fmtBytes(13.1 * 1024), "13.1 KiB"},
		{fmtBytes(2.4 * (1 << 20)), "2.40 MiB"},
		{fmtPerOp(312.4), "312"},
		{fmtPerOp(45.25), "45.2"},
		{fmtPerOp(0.214), "0.21"},
		{passMiss(true), "PASS"},
		{passMiss(false), "MISS"},
	} {
		assert.Equal(t, tc.want, tc.got)
	}
}

func TestFormat_ratioOfNothing(t *testing.T) {
	t.Parallel()
	zero := 0.0
	assert.Equal(t, "-", fmtRatio(zero/zero))
	assert.Equal(t, "-", fmtRatio(1/zero))
}

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a parenthesis; utime 150, stime 50 ticks.
	stat := "4242 (hub (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 50 0 0 20 0 9 0 123 456 789"
	d, err := parseStatCPU(stat)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, d)
	_, err = parseStatCPU("4242 (hub) S 1")
	assert.Error(t, err)
}

func TestParseMachineCPU(t *testing.T) {
	t.Parallel()
	// user nice system idle iowait irq softirq steal: busy = 100+1+50+2+3+4 ticks.
	d, err := parseMachineCPU("cpu  100 1 50 9000 70 2 3 4 0 0\ncpu0 1 2 3\n")
	require.NoError(t, err)
	assert.Equal(t, 160*clockTick, d)
	_, err = parseMachineCPU("intr 1 2 3\n")
	assert.Error(t, err)
}

func TestParseKB(t *testing.T) {
	t.Parallel()
	n, err := parseKB("  12345 kB")
	require.NoError(t, err)
	assert.Equal(t, int64(12345*1024), n)
	_, err = parseKB("lots")
	assert.Error(t, err)
}

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 1.2582912e+07
go_memstats_mallocs_total 123456
switchboard_connections{role="client"} 3
`
	st, err := parseMetrics(text)
	require.NoError(t, err)
	assert.Equal(t, runtimeStats{Mallocs: 123456, HeapInuse: 12582912, Goroutines: 42}, st)
	_, err = parseMetrics("go_goroutines 1\n")
	assert.Error(t, err, "the allocation counter is missing")
}

func TestParsePprof(t *testing.T) {
	t.Parallel()
	heap := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 1\n# Mallocs = 9876\n# Frees = 5\n# HeapInuse = 4096\n"
	st, err := parsePprof(heap, "goroutine profile: total 17\n1 @ 0x1\n")
	require.NoError(t, err)
	assert.Equal(t, runtimeStats{Mallocs: 9876, HeapInuse: 4096, Goroutines: 17}, st)
	_, err = parsePprof("no stats", "goroutine profile: total 1\n")
	assert.Error(t, err)
}

func TestCallParams_exactSize(t *testing.T) {
	t.Parallel()
	for _, size := range []int{100, 16 << 10} {
		p := callParams(size)
		args := p[len(`{"name":"`+echoTool+`","arguments":`) : len(p)-1]
		assert.Len(t, args, size)
		assert.Contains(t, string(callFrame(p)), `"method":"tools/call"`)
	}
}
