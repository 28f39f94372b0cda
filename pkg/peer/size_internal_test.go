package peer

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestPeer_fitsItsSizeClass keeps the Peer within the allocator's 512-byte
// size class, the largest whose objects need no header: every connection,
// idle ones too, holds one, and a field more makes it 640 bytes (576 and
// the header's 8).
func TestPeer_fitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Peer{}), uintptr(512))
}

// TestCorkConn_fitsItsSizeClass keeps the socket wrapper of an accepted
// WebSocket within the allocator's 288-byte size class: every WebSocket
// client holds one, idle ones too.
func TestCorkConn_fitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(corkConn{}), uintptr(288))
}
