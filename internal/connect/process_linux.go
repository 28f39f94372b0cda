//go:build linux

package connect

import (
	"os"
	"syscall"
)

// sysProcAttr puts the child in a process group of its own, so that
// stopping it stops whatever it started too (npx starts a shell that starts
// node), and makes the kernel kill it if the connector dies without
// stopping it (a crash, SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to the child's process group.
func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }

// groupAlive reports whether any process of the child's group is left.
func groupAlive(p *os.Process) bool { return syscall.Kill(-p.Pid, 0) == nil }
