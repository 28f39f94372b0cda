//go:build !linux

package jaegertest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
