//go:build linux

package main

import "syscall"

// sysProcAttr makes the kernel kill a child if hubbench dies without
// cleaning up (a panic, SIGKILL): nothing it started outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
