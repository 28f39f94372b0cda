package benchlab

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which is 100 on every Linux that Go supports (Go cannot call sysconf
// without cgo).
const clockTick = 10 * time.Millisecond

// CPUTime returns the user plus system CPU time that process pid has used,
// all its threads included (/proc/PID/stat).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields", len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat: utime %q stime %q", f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// CPUTimes sums CPUTime over pids; a process that cannot be read counts 0.
func CPUTimes(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		d, _ := CPUTime(pid)
		sum += d
	}
	return sum
}

// MachineCPU returns the CPU time all cores have spent busy since boot
// (user, nice, system, irq, softirq and steal of /proc/stat's cpu line),
// whoever ran.
func MachineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseMachineCPU(string(b))
}

func parseMachineCPU(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat starts %q", line)
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %q", v)
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// procStatus returns the fields of /proc/PID/status (VmRSS, Threads, ...).
func procStatus(pid int) (map[string]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}

// ProcMemory is what /proc/PID/status says of a process's memory, in
// bytes.
type ProcMemory struct {
	RSS     int64 // VmRSS
	PeakRSS int64 // VmHWM: the most RSS was since the process started
	Anon    int64 // RssAnon: of RSS, what no file backs (the heap, stacks)
	File    int64 // RssFile: of RSS, mapped files (the executable's pages)
}

// Memory returns the memory figures of process pid.
func Memory(pid int) (ProcMemory, error) {
	st, err := procStatus(pid)
	if err != nil {
		return ProcMemory{}, err
	}
	var m ProcMemory
	for _, f := range []struct {
		name string
		to   *int64
	}{{"VmRSS", &m.RSS}, {"VmHWM", &m.PeakRSS}, {"RssAnon", &m.Anon}, {"RssFile", &m.File}} {
		if *f.to, err = parseKB(st[f.name]); err != nil {
			return m, fmt.Errorf("/proc/%d/status %s: %w", pid, f.name, err)
		}
	}
	return m, nil
}

// parseKB reads "12345 kB" as bytes.
func parseKB(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(s), " kB"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a size in kB: %q", s)
	}
	return n << 10, nil
}

// RaiseNoFile raises the soft limit of open files to the hard limit, and
// the hard limit first to want where the process may (it has the
// privilege), and returns the soft limit. Setting it explicitly (rather
// than relying on the Go runtime, which raises it for itself only) makes
// every child process inherit it: 10,000 connections need 10,000
// descriptors on each side.
func RaiseNoFile(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if want > lim.Max {
		if raised := (syscall.Rlimit{Cur: want, Max: want}); syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want, nil
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}
