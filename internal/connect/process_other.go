//go:build !unix

package connect

import (
	"os"
	"syscall"
)

// sysProcAttr: no process groups here; only the child itself is stopped.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup stops the child: there is no gentler signal to send.
func signalGroup(p *os.Process, sig syscall.Signal) error { return p.Kill() }

// groupAlive cannot tell; the child's own exit is waited for instead.
func groupAlive(p *os.Process) bool { return false }
