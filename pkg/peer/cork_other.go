//go:build !unix

package peer

// readAhead reads the socket straight into p where there is no way to wait
// for it without a buffer.
func (c *corkConn) readAhead(p []byte) (int, error) { return c.Conn.Read(p) }
