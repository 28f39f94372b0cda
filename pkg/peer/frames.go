package peer

import (
	"math/bits"
	"sync"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// The frames of the calls and answers a peer encodes itself are encoded
// into buffers it takes back once its conn wrote them, when the conn keeps
// nothing of a frame after writing it (a WebSocket, stdio): a tool call of
// 16 KiB then costs no 16 KiB allocation, nor the clearing of one, at each
// hop, and the garbage collector has that much less to do. Frames others
// encode (notifications fanned out to many peers share one) are never
// taken back. Small frames come from the allocator, which makes them as
// cheaply.

// frameForgetter is implemented by conns that keep nothing of a frame once
// Write or WriteBatch returned: they copied it to the socket, or to a
// buffer of their own.
type frameForgetter interface {
	forgetsFrames()
}

// Sizes of the pooled frame buffers: powers of two from minPooledFrame to
// maxPooledFrame.
const (
	minPooledShift = 11 // 2 KiB
	minPooledFrame = 1 << minPooledShift
	maxPooledFrame = DefaultReadLimit
	pooledClasses  = 12 // 2 KiB .. 4 MiB
)

var (
	framePools [pooledClasses]sync.Pool // of *[]byte, by class
	// frameHolders recycles the *[]byte that carry buffers through the
	// pools: putting a bare slice in a sync.Pool would allocate.
	frameHolders = sync.Pool{New: func() any { return new([]byte) }}
)

// frameClass returns the class of buffers of at least n bytes, and false
// when n is too small or too large for the pools.
func frameClass(n int) (int, bool) {
	if n <= minPooledFrame/2 || n > maxPooledFrame {
		return 0, false
	}
	c := bits.Len(uint(n-1)) - minPooledShift
	return max(c, 0), true
}

// frameBuffer returns an empty buffer for a frame of about n bytes: from
// the pools when pooled is set and n is within their sizes.
func frameBuffer(n int, pooled bool) []byte {
	c, ok := frameClass(n)
	if !pooled || !ok {
		return make([]byte, 0, n)
	}
	if h, _ := framePools[c].Get().(*[]byte); h != nil {
		b := (*h)[:0]
		*h = nil
		frameHolders.Put(h)
		return b
	}
	return make([]byte, 0, 1<<(c+minPooledShift))
}

// poolOf returns the class of the pool whose buffers are n bytes long,
// and false when no pool's are.
func poolOf(n int) (int, bool) {
	c, ok := frameClass(n)
	return c, ok && n == 1<<(c+minPooledShift)
}

// recycleFrame takes back the buffer of a frame written, or of one read
// that nothing refers to any longer. Buffers of other sizes than the
// pools' (a frame that outgrew its buffer) are left to the collector.
func recycleFrame(b []byte) {
	c, ok := poolOf(cap(b))
	if !ok {
		return
	}
	h := frameHolders.Get().(*[]byte)
	*h = b[:0]
	framePools[c].Put(h)
}

// encodeRequest encodes a call of the peer's own, in a pooled buffer when
// its conn forgets frames.
func (p *Peer) encodeRequest(r *jsonrpc.Request) []byte {
	return r.AppendJSON(frameBuffer(r.SizeHint(), p.recycles))
}

// encodeRenamed encodes a call of the peer's own with a member of its
// params renamed (Request.AppendJSONRenamed), as encodeRequest.
func (p *Peer) encodeRenamed(r *jsonrpc.Request, old []byte, name string) ([]byte, bool) {
	b := frameBuffer(r.SizeHint()+len(name)+2, p.recycles)
	out, ok := r.AppendJSONRenamed(b, old, name)
	if !ok {
		p.recycle(b)
	}
	return out, ok
}

// sizeHinter is implemented by results that know about how large their
// encoding is (mcp.CallToolResult): their frame then comes from the pools
// at its size, rather than grown as they are written.
type sizeHinter interface {
	SizeHint() int
}

// encodeResult encodes an answer of the peer's own whose result encodes
// itself (jsonrpc.AppendResult), as encodeRequest.
func (p *Peer) encodeResult(id jsonrpc.ID, a jsonrpc.Appender) ([]byte, error) {
	n := 64
	if h, ok := a.(sizeHinter); ok {
		n += h.SizeHint()
	}
	b := frameBuffer(n, p.recycles)
	frame, err := jsonrpc.AppendResult(b, id, a)
	if err != nil {
		p.recycle(b)
		return nil, err
	}
	return frame, nil
}

// encodeResponse encodes an answer of the peer's own, as encodeRequest.
func (p *Peer) encodeResponse(r *jsonrpc.Response) []byte {
	return r.AppendJSON(frameBuffer(r.SizeHint(), p.recycles))
}

// recycle takes back the buffer of a frame of the peer's own, once it is
// written or will not be.
func (p *Peer) recycle(frame []byte) {
	if p.recycles {
		recycleFrame(frame)
	}
}
