//go:build unix && !linux

package connect

import (
	"os"
	"syscall"
)

// sysProcAttr puts the child in a process group of its own, so that
// stopping it stops whatever it started too. Without Pdeathsig, a child
// outlives a connector that crashes.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the child's process group.
func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }

// groupAlive reports whether any process of the child's group is left.
func groupAlive(p *os.Process) bool { return syscall.Kill(-p.Pid, 0) == nil }
