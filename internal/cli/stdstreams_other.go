//go:build !unix

package cli

import "io"

// pollable: elsewhere standard input is used as it is.
func pollable(r io.Reader) (io.Reader, func()) { return r, func() {} }

// interruptible: elsewhere standard output is used as it is.
func interruptible(w io.Writer) (io.Writer, func()) { return writerOnly{w}, func() {} }
