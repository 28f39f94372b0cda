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
switchboard_connections{role="client"} 3
`
	st, err := parseMetrics(text)
	require.NoError(t, err)
	assert.Equal(t, runtimeStats{Mallocs: 123456, HeapInuse: 12582912, StackInuse: 65536, Goroutines: 42}, st)
	_, err = parseMetrics("go_goroutines 1\n")
	assert.Error(t, err, "the allocation counter is missing")
}

func TestParsePprof(t *testing.T) {
	t.Parallel()
	heap := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 1\n# Mallocs = 9876\n# Frees = 5\n# HeapInuse = 4096\n# Stack = 32768 / 65536\n"
	st, err := parsePprof(heap, "goroutine profile: total 17\n1 @ 0x1\n")
	require.NoError(t, err)
	assert.Equal(t, runtimeStats{Mallocs: 9876, HeapInuse: 4096, StackInuse: 32768, Goroutines: 17}, st)
	_, err = parsePprof("no stats", "goroutine profile: total 1\n")
	assert.Error(t, err)
}
