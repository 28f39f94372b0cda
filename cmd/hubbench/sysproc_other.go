//go:build !linux

package main

import "syscall"

// sysProcAttr: without Pdeathsig, children are only stopped by hubbench's
// own cleanup.
func sysProcAttr() *syscall.SysProcAttr { return nil }
