// Package proctest starts the helper processes that tests run beside the
// code under test (redis-server in internal/redistest, Jaeger in
// internal/jaegertest): on free loopback ports, with their output kept for
// the failure message, waited for until they serve, and killed by the kernel
// if the test binary dies without stopping them.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/deathsig"
)

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
// Another process may take it before the helper binds it: callers retry a
// start that fails.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Proc is a started helper process.
type Proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	out    *Buffer
}

// Start starts cmd, with its standard output and error kept (Output), and
// polls ready every 10ms until it returns nil. It fails, with the last lines
// the process wrote, when the process exits first, or when timeout passes
// (killing it). name says what the process is in those errors.
func Start(cmd *exec.Cmd, name string, ready func() error, timeout time.Duration) (*Proc, error) {
	p := &Proc{cmd: cmd, exited: make(chan struct{}), out: &Buffer{}}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	cmd.SysProcAttr = deathsig.Attr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ready()
		if err == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited: %s", name, p.Tail(30))
		case <-deadline.C:
			p.Kill()
			return nil, fmt.Errorf("%s was not ready within %v: %v\n%s", name, timeout, err, p.Tail(30))
		case <-tick.C:
		}
	}
}

// Kill kills the process (SIGKILL, as in a crash) and waits for it to exit.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Pid returns the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Output returns what the process wrote so far.
func (p *Proc) Output() string { return p.out.String() }

// Tail returns the last n lines the process wrote.
func (p *Proc) Tail(n int) string {
	lines := strings.Split(strings.TrimSpace(p.out.String()), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Buffer is a bytes.Buffer that one goroutine may write while another reads
// it: a process's output, or a test's log.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
