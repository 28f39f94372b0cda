package benchlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/deathsig"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
)

// Time limits of the process supervisor.
const (
	readyTimeout = 30 * time.Second // a child must be ready this soon
	stopGrace    = 2 * time.Second  // after SIGTERM, before SIGKILL
)

// Supervisor starts the processes a benchmark measures and stops them all,
// in every case: its owner defers StopAll (which runs on errors and on
// Ctrl-C too), and each child also has Pdeathsig set on Linux, so that not
// even a crash of the owner leaves one behind. The zero value is ready to
// use.
type Supervisor struct {
	// Self names this process in CPUByProcess ("" leaves it out): the load
	// generator's own CPU is part of what a run costs.
	Self string

	mu       sync.Mutex
	children []*Child
	redis    []*redistest.Server
	stopped  bool
}

// Child is one process started by the supervisor.
type Child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	out  *lineTail
}

// PID returns the child's process ID.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// exited reports whether the child has ended.
func (c *Child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// errorf wraps an error about the child with the tail of its output.
func (c *Child) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s; last output:\n%s", c.name, fmt.Sprintf(format, args...), c.out.String())
}

// Start runs argv as a child named name, with env as its environment (nil
// inherits this process's). When ready is set, Start waits until a line of
// the child's output (stdout or stderr) matches it and returns its last
// submatch (an address); it fails if the child exits or 30 s pass first.
func (s *Supervisor) Start(ctx context.Context, name string, argv, env []string, ready *regexp.Regexp) (*Child, string, error) {
	found := make(chan string, 1)
	out := &lineTail{max: 40}
	if ready != nil {
		out.watch = func(line string) bool {
			if m := ready.FindStringSubmatch(line); m != nil {
				found <- m[len(m)-1]
				return true
			}
			return false
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = deathsig.Attr()
	c := &Child{name: name, cmd: cmd, done: make(chan struct{}), out: out}

	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, "", errors.New("supervisor stopped")
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return nil, "", fmt.Errorf("start %s: %w", name, err)
	}
	s.children = append(s.children, c)
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	if ready == nil {
		return c, "", nil
	}
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case addr := <-found:
		return c, addr, nil
	case <-c.done:
		return nil, "", c.errorf("exited before it was ready (%v)", cmd.ProcessState)
	case <-t.C:
		return nil, "", c.errorf("not ready after %v", readyTimeout)
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// machineKey holds, in CPUByProcess, the busy time of the whole machine,
// whoever ran.
const machineKey = "(machine)"

// CPUByProcess returns the CPU time used so far by this process (named
// Self) and by every child still running, by name, and the machine's busy
// time: the whole machine's work for the run. CPUSplit.Add takes two of
// them.
func (s *Supervisor) CPUByProcess() map[string]time.Duration {
	s.mu.Lock()
	pids := map[string]int{}
	if s.Self != "" {
		pids[s.Self] = os.Getpid()
	}
	for _, c := range s.children {
		if !c.exited() {
			pids[c.name] = c.PID()
		}
	}
	for _, rs := range s.redis {
		if pid := rs.PID(); pid != 0 {
			pids["redis-server"] = pid
		}
	}
	s.mu.Unlock()
	out := make(map[string]time.Duration, len(pids)+1)
	for name, pid := range pids {
		out[name], _ = CPUTime(pid)
	}
	out[machineKey], _ = MachineCPU()
	return out
}

// StopAll stops every child: SIGTERM, then SIGKILL for those still running
// after stopGrace, and reaps them all; redis-server, which keeps nothing,
// is killed at once. It may be called more than once, and the supervisor
// starts nothing after it.
func (s *Supervisor) StopAll() {
	s.mu.Lock()
	s.stopped = true
	children, redis := s.children, s.redis
	s.children, s.redis = nil, nil
	s.mu.Unlock()
	for _, rs := range redis {
		rs.Stop()
	}
	stop(children)
}

// Mark returns a mark of the children started so far, for StopSince.
func (s *Supervisor) Mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.children)
}

// StopSince stops the children started after mark (Mark), as StopAll
// does: a part of a run ends with the processes it started, which then
// wake no more while the next part measures.
func (s *Supervisor) StopSince(mark int) {
	s.mu.Lock()
	var children []*Child
	if mark < len(s.children) {
		children = slices.Clone(s.children[mark:])
		s.children = s.children[:mark]
	}
	s.mu.Unlock()
	stop(children)
}

// stop stops children: SIGTERM, then SIGKILL for those still running after
// stopGrace; it returns once all are reaped.
func stop(children []*Child) {
	for _, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(stopGrace)
	defer deadline.Stop()
	for _, c := range children {
		select {
		case <-c.done:
		case <-deadline.C:
			for _, k := range children {
				_ = k.cmd.Process.Kill()
			}
			<-c.done
		}
	}
}

// lineTail keeps the last lines a child wrote and shows each to watch until
// watch returns true. os/exec calls Write from one goroutine at a time when
// Stdout and Stderr are the same writer.
type lineTail struct {
	max   int
	watch func(line string) bool

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (t *lineTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		line := string(t.partial[:i])
		t.partial = t.partial[i+1:]
		if t.watch != nil && t.watch(line) {
			t.watch = nil
		}
		t.lines = append(t.lines, line)
		if len(t.lines) > t.max {
			t.lines = t.lines[len(t.lines)-t.max:]
		}
	}
	if len(t.partial) > 64<<10 {
		t.partial = t.partial[:0] // a runaway line: drop it
	}
	return len(p), nil
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return "  " + strings.Join(t.lines, "\n  ")
}

// StartRedis starts redis-server in dir as the tests do (internal/redistest:
// a free loopback port, no persistence) and returns its address. The
// supervisor owns it: StopAll stops it, and its CPU time counts.
func (s *Supervisor) StartRedis(dir string) (string, error) {
	rs, err := redistest.Launch(dir)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		rs.Stop()
		return "", errors.New("supervisor stopped")
	}
	s.redis = append(s.redis, rs)
	return rs.Addr(), nil
}

// RedisPID returns the process ID of the redis-server StartRedis started
// at addr, or 0.
func (s *Supervisor) RedisPID(addr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range s.redis {
		if rs.Addr() == addr {
			return rs.PID()
		}
	}
	return 0
}

// Poll calls check every 10 ms until it succeeds, the child c (if not nil)
// exits, ctx ends or 30 s pass. It is how a benchmark waits for readiness:
// never by sleeping a fixed time.
func Poll(ctx context.Context, c *Child, check func() error) error {
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var done <-chan struct{}
	if c != nil {
		done = c.done
	}
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return c.errorf("exited (%v)", c.cmd.ProcessState)
		case <-deadline.C:
			if c != nil {
				return c.errorf("not ready after %v: %v", readyTimeout, err)
			}
			return fmt.Errorf("not ready after %v: %w", readyTimeout, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// WaitHTTP polls url until it answers 200 (see Poll).
func WaitHTTP(ctx context.Context, c *Child, url string) error {
	return Poll(ctx, c, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
		}
		return nil
	})
}
