//go:build unix && !linux

package connect

import (
	"os"
	"syscall"
)

// sysProcAttr puts the keeper (and with it the server's command) in a
// process group of its own, so that stopping it stops whatever it started
// too.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the child's process group.
func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }

// groupAlive reports whether any process of the child's group is left.
func groupAlive(p *os.Process) bool { return syscall.Kill(-p.Pid, 0) == nil }

// executable is the running program, for its keepers.
func executable() (string, error) { return os.Executable() }

// becomeSubreaper: there are no subreapers here; the keeper kills its group.
func becomeSubreaper() {}

// descendants cannot be listed here: the keeper kills its group only.
func descendants(int) []int { return nil }
