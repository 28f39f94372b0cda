package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func sampleTable() *table {
	t := newTable(2, "what", "shape", "ops/s", "target")
	t.section("calls")
	t.add("raw ws echo", "1x1", "12,345/s")
	t.add("hub", "64x16", "9/s", ">= 0.5x MISS")
	t.section("fan-out")
	t.add("a|b", "µs", "1/s", "", "dropped")
	return t
}

func TestTable_text(t *testing.T) {
	t.Parallel()
	want := strings.Join([]string{
		"what         shape     ops/s        target",
		"-----------  -----  --------  ------------",
		"calls",
		"raw ws echo  1x1    12,345/s",
		"hub          64x16       9/s  >= 0.5x MISS",
		"",
		"fan-out",
		"a|b          µs          1/s",
		"",
	}, "\n")
	assert.Equal(t, want, sampleTable().text())
}

func TestTable_markdown(t *testing.T) {
	t.Parallel()
	want := strings.Join([]string{
		"| what | shape | ops/s | target |",
		"|---|---|---:|---:|",
		"| **calls** |  |  |  |",
		"| raw ws echo | 1x1 | 12,345/s |  |",
		"| hub | 64x16 | 9/s | >= 0.5x MISS |",
		"| **fan-out** |  |  |  |",
		`| a\|b | µs | 1/s |  |`,
		"",
	}, "\n")
	assert.Equal(t, want, sampleTable().markdown())
}
