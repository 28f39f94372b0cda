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
