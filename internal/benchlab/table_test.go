package benchlab

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func sampleTable() *Table {
	t := NewTable(2, "what", "shape", "ops/s", "target")
	t.Section("calls")
	t.Add("raw ws echo", "1x1", "12,345/s")
	t.Add("hub", "64x16", "9/s", ">= 0.5x MISS")
	t.Section("fan-out")
	t.Add("a|b", "µs", "1/s", "", "dropped")
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
	assert.Equal(t, want, sampleTable().Text())
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
	assert.Equal(t, want, sampleTable().Markdown())
}
