package benchlab

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Machine describes where the figures were measured.
type Machine struct {
	CPU    string
	Cores  int
	RAM    string
	Go     string
	OS     string
	Commit string // short hash, with "+ uncommitted changes" when the tree differs
	Load   string // /proc/loadavg's 1, 5 and 15 minute averages as the run started
}

// ReadMachine describes this machine, and the commit of the git checkout
// at root (see gitCommit for report).
func ReadMachine(ctx context.Context, root, report string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", RAM: "unknown", OS: runtime.GOOS}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPU = v
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		if b, err := parseKB(v); err == nil {
			m.RAM = FormatBytes(float64(b))
		}
	}
	if v := osRelease(); v != "" {
		m.OS = v
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += ", Linux " + strings.TrimSpace(string(b))
	}
	m.Commit = gitCommit(ctx, root, report)
	m.Load = LoadAverage()
	return m
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// LoadAverage returns the 1, 5 and 15 minute load averages: other work on
// the machine shows there, and shows in the figures.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// osRelease returns the PRETTY_NAME of /etc/os-release, or "".
func osRelease() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// gitCommit returns `git rev-parse --short HEAD`, marked when the working
// tree has changes (tracked or not): the figures are then of that tree. The
// report itself (a path relative to root, or "-") does not count: a run
// rewrites the previous run's.
func gitCommit(ctx context.Context, root, report string) string {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	head, err := git("rev-parse", "--short", "HEAD")
	if err != nil {
		return "unknown (not a git checkout)"
	}
	args := []string{"status", "--porcelain", "--", "."}
	if report != "-" && !filepath.IsAbs(report) {
		args = append(args, ":(exclude)"+filepath.ToSlash(report))
	}
	if st, err := git(args...); err == nil && st != "" {
		head += " + uncommitted changes"
	}
	return head
}
