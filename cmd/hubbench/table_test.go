package main

import (
	"strings"
	"testing"
	"time"

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

func TestVerdicts_targets(t *testing.T) {
	t.Parallel()
	hub := func(sh shape, rateRatio, p99Ratio float64) *callResult {
		return &callResult{endpoint: epHub, shape: sh, payload: payloads[0], rateRatio: rateRatio, p99Ratio: p99Ratio}
	}
	r := &report{
		cells: [][]*callResult{
			{hub(shape{64, 16}, 0.5, 9)},
			{hub(shape{1, 1}, 0.1, 3.01)},
			{hub(shape{16, 1}, 0.1, 9)}, // no target
			{{endpoint: epRaw, shape: shape{64, 16}}},
		},
		fanout: []*fanoutResult{
			{setting: "1 instance", instances: 1, subs: 1000, p99: time.Second}, // not the largest: no target
			{setting: "1 instance", instances: 1, subs: 10000, p99: 100 * time.Millisecond, rate: 300000, delivered: 5, expected: 5},
			{setting: "2 instances", instances: 2, subs: 10000, p99: 151 * time.Millisecond, rate: 1, delivered: 4, expected: 5},
		},
		idle: &idleResult{conns: 10000, rssBefore: 0, rssAfter: 10000 * 20 << 10},
	}
	vs := r.verdicts()
	assert.Equal(t, "ops/s >= 0.5x raw PASS", verdictCell(vs[0]))
	assert.Equal(t, "p99 <= 100 ms PASS; >= 300,000/s PASS", verdictCell(vs[2], vs[3]))
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	assert.Equal(t, []string{
		"PASS  tools/call 64x16 100 B through the hub: 0.50x raw echo calls/s (target >= 0.5x)",
		"MISS  tools/call 1x1 100 B through the hub: p99 3.01x raw echo p99 (target <= 3x)",
		"PASS  fan-out to 10,000 subscribers, 1 instance: p99 100 ms (target <= 100 ms)",
		"PASS  fan-out to 10,000 subscribers, 1 instance: 300,000/s (target >= 300,000/s)",
		"MISS  fan-out to 10,000 subscribers, 2 instances: p99 151 ms (target <= 150 ms) (only 4 of 5 delivered)",
		"MISS  fan-out to 10,000 subscribers, 2 instances: 1/s (target >= 300,000/s)",
		"PASS  idle connection: 20.0 KiB RSS (target <= 20.0 KiB)",
	}, got)
}
