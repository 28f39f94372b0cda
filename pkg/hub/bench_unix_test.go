//go:build unix

package hub

import (
	"syscall"
	"time"
)

// processCPU is the user and system CPU time the process has used: under
// other work on the machine it says more about a change than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
