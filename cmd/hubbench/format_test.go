package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
