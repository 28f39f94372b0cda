package benchlab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
