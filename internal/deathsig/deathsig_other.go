//go:build !linux

package deathsig

import "syscall"

// Attr returns nil: without Pdeathsig, a child outlives a parent that dies
// without stopping it.
func Attr() *syscall.SysProcAttr { return nil }
