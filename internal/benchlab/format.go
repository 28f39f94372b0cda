package benchlab

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// FormatDuration prints a latency with three significant digits in the unit
// that suits it: 87 µs, 1.23 ms, 45.6 ms, 1.20 s.
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + " ns"
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + " µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + " ms"
	}
	return sig3(d.Seconds()) + " s"
}

// sig3 prints x (>= 1) with three significant digits, or as an integer when
// it has more than three.
func sig3(x float64) string {
	switch {
	case x < 10:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 100:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
}

// FormatCount prints an integer with thousands separators: 12,345.
func FormatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}

// FormatRate prints a rate per second, rounded: 12,345/s.
func FormatRate(r float64) string { return FormatCount(int64(math.Round(r))) + "/s" }

// FormatRatio prints a ratio to a baseline: 0.52x; "-" when it is not a
// number.
func FormatRatio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 2, 64) + "x"
}

// FormatBytes prints a size in bytes with a binary unit: 980 B, 13.1 KiB, 2.40 MiB.
func FormatBytes(b float64) string {
	switch a := math.Abs(b); {
	case a < 1024:
		return strconv.FormatFloat(b, 'f', 0, 64) + " B"
	case a < 1<<20:
		return fmt.Sprintf("%.1f KiB", b/1024)
	case a < 1<<30:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", b/(1<<30))
}

// FormatPerOp prints a count per operation: 312, 45.2, 0.21.
func FormatPerOp(x float64) string {
	switch a := math.Abs(x); {
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}
