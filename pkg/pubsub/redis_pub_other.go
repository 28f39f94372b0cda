//go:build !unix

package pubsub

import "net"

// closedByPeer cannot tell here: a batch on a connection the server closed
// fails, and the next one connects again.
func closedByPeer(net.Conn) bool { return false }
