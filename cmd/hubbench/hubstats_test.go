package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMetrics(t *testing.T) {
	t.Parallel()
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_memstats_heap_inuse_bytes 1.2582912e+07
go_memstats_mallocs_total 123456
go_memstats_stack_inuse_bytes 65536
go_memstats_heap_alloc_bytes 1e+07
go_memstats_heap_idle_bytes 4e+06
go_memstats_heap_released_bytes 1e+06
go_memstats_stack_sys_bytes 131072
go_memstats_next_gc_bytes 2e+07
go_memstats_mspan_sys_bytes 100
go_memstats_mcache_sys_bytes 20
go_memstats_gc_sys_bytes 3000
go_memstats_buck_hash_sys_bytes 4
go_memstats_other_sys_bytes 500
switchboard_connections{role="client"} 3
`
	st, err := parseMetrics(text)
	require.NoError(t, err)
	assert.Equal(t, runtimeStats{Mallocs: 123456, HeapInuse: 12582912, StackInuse: 65536, Goroutines: 42,
		HeapAlloc: 1e7, HeapIdle: 4e6, HeapReleased: 1e6, StackSys: 131072, NextGC: 2e7, MetaSys: 3624}, st)
	_, err = parseMetrics("go_goroutines 1\n")
	assert.Error(t, err, "the allocation counter is missing")
}

func TestParsePprof(t *testing.T) {
	t.Parallel()
	heap := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 1\n# Mallocs = 9876\n# Frees = 5\n" +
		"# HeapAlloc = 3000\n# HeapIdle = 8192\n# HeapInuse = 4096\n# HeapReleased = 2048\n# Stack = 32768 / 65536\n" +
		"# MSpan = 10 / 100\n# MCache = 2 / 20\n# BuckHashSys = 4\n# GCSys = 3000\n# OtherSys = 500\n# NextGC = 16384\n"
	st, err := parsePprof(heap, "goroutine profile: total 17\n1 @ 0x1\n")
	require.NoError(t, err)
	assert.Equal(t, runtimeStats{Mallocs: 9876, HeapInuse: 4096, StackInuse: 32768, Goroutines: 17,
		HeapAlloc: 3000, HeapIdle: 8192, HeapReleased: 2048, StackSys: 65536, NextGC: 16384, MetaSys: 3624}, st)
	_, err = parsePprof("no stats", "goroutine profile: total 1\n")
	assert.Error(t, err)
}
