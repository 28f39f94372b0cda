package proctest

import "syscall"

// sysProcAttr makes the kernel kill the process if the test binary dies
// without running its cleanups (a panic, a timeout, go test -failfast).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
