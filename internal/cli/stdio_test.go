package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `hub stdio` whose client does not read its output: a signal still ends
// it, at once when its output is a pipe, within stdioStopGrace when
// nothing can interrupt the write (a terminal); a second signal ends it at
// once whatever it is doing.

// startWedgedStdio runs `hub stdio` on th with stdout, which nobody reads,
// and writes to its stdin until it is stuck: pings the hub answers and
// lines the command answers itself (-32700), so that both the hub's side
// and the client's side end up writing to stdout. Stuck is when it reads
// no more and stuck says so.
func startWedgedStdio(t *testing.T, th *testHub, stdout *os.File, stuck func(*proc) bool) *proc {
	t.Helper()
	p := startHubCommand(t, nil, "stdio", "--hub", th.base())
	stdinR, stdinW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { stdinW.Close() })
	p.cmd.Stdin, p.cmd.Stdout = stdinR, stdout
	p.start(t)
	stdinR.Close()
	stdout.Close()
	p.stderr.waitFor(t, 1, "connected to the hub at "+th.base()+"/mcp")

	lines := []byte(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\nnot JSON\n", 64))
	for written := 0; ; written += len(lines) {
		require.Less(t, written, 64<<20, "hub stdio kept reading 64 MiB without anyone reading its output")
		require.NoError(t, stdinW.SetWriteDeadline(time.Now().Add(500*time.Millisecond)))
		_, err := stdinW.Write(lines)
		if err == nil {
			continue
		}
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		if stuck(p) {
			return p
		}
	}
}

// outputStill reports whether the bytes waiting in a pipe stay the same a
// while: nothing more is written to it. (The command writes a pipe without
// blocking a thread: Go's poller waits for room.)
func outputStill(t *testing.T, pipe *os.File) func(*proc) bool {
	return func(*proc) bool {
		before := pending(t, pipe)
		time.Sleep(300 * time.Millisecond) // a sample, not a synchronisation: still is nothing happening
		return pending(t, pipe) == before
	}
}

// pending returns the bytes waiting to be read from a pipe.
func pending(t *testing.T, f *os.File) int {
	t.Helper()
	var n int32
	raw, err := f.SyscallConn()
	require.NoError(t, err)
	var errno syscall.Errno
	require.NoError(t, raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}))
	require.Zero(t, errno)
	return int(n)
}

// writingStdout reports whether a thread of the process is blocked in
// write(2) on its standard output, as /proc shows it: where nothing
// interrupts it.
func writingStdout(p *proc) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", p.cmd.Process.Pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		if strings.HasPrefix(string(b), fmt.Sprintf("%d 0x1 ", syscall.SYS_WRITE)) {
			return true
		}
	}
	return false
}

// exited waits up to within for the process to end.
func (p *proc) exited(within time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(within):
		return false
	}
}

// TestStdio_signalWhileTheClientDoesNotRead: with a pipe for output that
// nobody reads, SIGTERM and SIGINT end `hub stdio` at once, exit 0.
func TestStdio_signalWhileTheClientDoesNotRead(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			th := startHub(t)
			stdoutR, stdoutW, err := os.Pipe()
			require.NoError(t, err)
			t.Cleanup(func() { stdoutR.Close() })
			p := startWedgedStdio(t, th, stdoutW, outputStill(t, stdoutR))

			require.NoError(t, p.cmd.Process.Signal(sig))
			require.True(t, p.exited(stdioStopGrace), "hub stdio ignored %v while its client did not read; its log:\n%s", sig, p.stderr)
			assert.Equal(t, 0, p.state.ExitCode())
			assert.NotContains(t, p.stderr.String(), "without waiting", "a pipe's write is interrupted: no need to abandon it")
		})
	}
}

// TestStdio_signalWhileATerminalDoesNotRead: with a terminal for output
// that nobody reads, whose write nothing interrupts, SIGTERM ends `hub
// stdio` within stdioStopGrace, and a second SIGTERM at once.
func TestStdio_signalWhileATerminalDoesNotRead(t *testing.T) {
	t.Run("one signal", func(t *testing.T) {
		p := startWedgedStdio(t, startHub(t), openTerminal(t), writingStdout)
		start := time.Now()
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.True(t, p.exited(stdioStopGrace+5*time.Second), "hub stdio ignored SIGTERM; its log:\n%s", p.stderr)
		assert.GreaterOrEqual(t, time.Since(start), stdioStopGrace, "it waited for the write first")
		assert.Equal(t, 0, p.state.ExitCode())
		assert.Contains(t, p.stderr.String(), "stopping without waiting for the client: it does not read what it was sent")
	})
	t.Run("two signals", func(t *testing.T) {
		p := startWedgedStdio(t, startHub(t), openTerminal(t), writingStdout)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.False(t, p.exited(300*time.Millisecond), "still waiting for the write after one signal; %v; its log:\n%s", p.state, p.stderr)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.True(t, p.exited(stdioStopGrace/2), "a second SIGTERM did not end hub stdio at once; its log:\n%s", p.stderr)
		ws, ok := p.state.Sys().(syscall.WaitStatus)
		require.True(t, ok)
		assert.Equal(t, syscall.SIGTERM, ws.Signal(), "the second signal ended it")
	})
}

// openTerminal opens a pseudo-terminal and returns its slave end; nobody
// reads its master end, which stays open until the test ends.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err, "no pseudo-terminals here (/dev/ptmx)")
	t.Cleanup(func() { master.Close() })
	var unlock int32
	var n uint32
	for _, op := range []struct {
		req uintptr
		arg unsafe.Pointer
	}{{syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)}, {syscall.TIOCGPTN, unsafe.Pointer(&n)}} {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), op.req, uintptr(op.arg)); errno != 0 {
			t.Fatalf("setting up a pseudo-terminal: %v", errno)
		}
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	return slave
}
