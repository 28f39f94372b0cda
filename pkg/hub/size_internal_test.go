package hub

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestSession_fitsItsSizeClass keeps a client's session within the
// allocator's 320-byte size class: every client holds one while it is
// idle, and a field more moves it to the 352-byte class.
func TestSession_fitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(session{}), uintptr(320))
}
