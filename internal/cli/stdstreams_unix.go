//go:build unix

package cli

import (
	"io"
	"os"
	"syscall"
)

// pollable returns the process's standard input in a form whose Close
// unblocks a Read in progress (Go's poller handles it), when it is a pipe
// or a socket, as it is for a client that launched `hub stdio`: then the
// command can end on a signal or a refusal without waiting for the client
// to write. A terminal is left as it is (its mode is shared with the
// shell). restore puts the descriptor back in blocking mode.
func pollable(r io.Reader) (io.Reader, func()) {
	if r != os.Stdin {
		return r, func() {}
	}
	st, err := os.Stdin.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return r, func() {}
	}
	if err := syscall.SetNonblock(0, true); err != nil {
		return r, func() {}
	}
	return os.NewFile(0, "stdin"), func() { _ = syscall.SetNonblock(0, false) }
}

// interruptible returns the process's standard output in a form whose
// Close unblocks a Write in progress, when it is a pipe or a socket: then
// `hub stdio` can end on a signal even while its client reads nothing and
// the pipe is full. It writes through a duplicate of the descriptor, which
// Close closes (Go's poller wakes the Write): standard output itself stays
// open until the process exits. Anything else (a terminal, a file) is
// returned without a Close. restore puts the descriptor back in blocking
// mode.
func interruptible(w io.Writer) (io.Writer, func()) {
	if w != os.Stdout {
		return writerOnly{w}, func() {}
	}
	st, err := os.Stdout.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return writerOnly{w}, func() {}
	}
	fd, err := syscall.Dup(1)
	if err != nil {
		return writerOnly{w}, func() {}
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return writerOnly{w}, func() {}
	}
	f := os.NewFile(uintptr(fd), "stdout")
	return f, func() {
		_ = syscall.SetNonblock(1, false) // the duplicate shares the mode
		_ = f.Close()
	}
}
