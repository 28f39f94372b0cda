//go:build !linux

package benchlab

import "syscall"

// sysProcAttr: without Pdeathsig, children are only stopped by the
// supervisor's own cleanup.
func sysProcAttr() *syscall.SysProcAttr { return nil }
