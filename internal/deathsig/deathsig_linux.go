//go:build linux

package deathsig

import "syscall"

// Attr returns the attributes of a child that dies with its parent.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
