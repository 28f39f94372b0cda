//go:build linux

package benchlab

import "syscall"

// sysProcAttr makes the kernel kill a child if its supervisor dies without
// cleaning up (a panic, SIGKILL): nothing it started outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
