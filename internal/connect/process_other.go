//go:build !unix

package connect

import (
	"os"
	"os/exec"
	"syscall"
)

// sysProcAttr: no process groups here; only the child itself is stopped.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup stops the child: there is no gentler signal to send.
func signalGroup(p *os.Process, sig syscall.Signal) error { return p.Kill() }

// groupAlive cannot tell; the child's own exit is waited for instead.
func groupAlive(p *os.Process) bool { return false }

// keeper: without process groups there is nothing for a keeper to kill;
// the command runs as the connector's own child.
type keeper struct{}

func keepCommand(*exec.Cmd) (*keeper, error)         { return nil, nil }
func (k *keeper) started(cmd *exec.Cmd) (int, error) { return cmd.Process.Pid, nil }
func (k *keeper) close()                             {}
