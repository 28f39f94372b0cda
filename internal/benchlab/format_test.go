package benchlab

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFormat_figures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ got, want string }{
		{FormatDuration(0), "0"},
		{FormatDuration(850 * time.Nanosecond), "850 ns"},
		{FormatDuration(87 * time.Microsecond), "87.0 µs"},
		{FormatDuration(1234 * time.Microsecond), "1.23 ms"},
		{FormatDuration(45600 * time.Microsecond), "45.6 ms"},
		{FormatDuration(456 * time.Millisecond), "456 ms"},
		{FormatDuration(1200 * time.Millisecond), "1.20 s"},
		{FormatCount(0), "0"},
		{FormatCount(999), "999"},
		{FormatCount(1000), "1,000"},
		{FormatCount(1234567), "1,234,567"},
		{FormatCount(-12345), "-12,345"},
		{FormatRate(12344.6), "12,345/s"},
		{FormatRatio(0.5249), "0.52x"},
		{FormatRatio(3), "3.00x"},
		{FormatBytes(980), "980 B"},
		{FormatBytes(13.1 * 1024), "13.1 KiB"},
		{FormatBytes(2.4 * (1 << 20)), "2.40 MiB"},
		{FormatPerOp(312.4), "312"},
		{FormatPerOp(45.25), "45.2"},
		{FormatPerOp(0.214), "0.21"},
	} {
		assert.Equal(t, tc.want, tc.got)
	}
}

func TestFormat_ratioOfNothing(t *testing.T) {
	t.Parallel()
	zero := 0.0
	assert.Equal(t, "-", FormatRatio(zero/zero))
	assert.Equal(t, "-", FormatRatio(1/zero))
}
