//go:build linux

package connect

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts the keeper (and with it the server's command) in a
// process group of its own, so that stopping it stops whatever it started
// too (npx starts a shell that starts node).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the child's process group.
func signalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }

// groupAlive reports whether any process of the child's group is left.
func groupAlive(p *os.Process) bool { return syscall.Kill(-p.Pid, 0) == nil }

// executable is the running program, for its keepers: /proc/self/exe,
// which still works when the file was replaced meanwhile (an upgrade).
func executable() (string, error) { return "/proc/self/exe", nil }

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

// becomeSubreaper makes the processes under the keeper that lose their
// parent its own children, instead of init's: killAll finds them so.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// descendants returns the processes under pid, from /proc.
func descendants(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		files, _ := filepath.Glob("/proc/" + strconv.Itoa(p) + "/task/*/children")
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, field := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(field); err == nil {
					out = append(out, n)
					queue = append(queue, n)
				}
			}
		}
	}
	return out
}
