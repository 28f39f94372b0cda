//go:build !unix

package cli

import "io"

// pollable: elsewhere standard input is used as it is.
func pollable(r io.Reader) (io.Reader, func()) { return r, func() {} }
