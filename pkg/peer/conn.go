package peer

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// Conn carries whole frames, one JSON-RPC message or batch each.
//
// Concurrency: Read is called by one goroutine at a time, and so is Write;
// one Read and one Write may run at the same time. Close may be called at any
// time, from any goroutine, more than once; it unblocks a Read or Write in
// progress, which then return an error.
type Conn interface {
	// Read returns the next frame. The frame belongs to the caller.
	Read(ctx context.Context) ([]byte, error)
	// Write sends one frame. The conn does not keep frame after returning.
	Write(ctx context.Context, frame []byte) error
	// Close closes the connection, telling the other side code and reason
	// where the transport can.
	Close(code CloseCode, reason string) error
}

// CloseCode is a WebSocket close status code (RFC 6455, section 7.4). The
// in-memory pipe carries the same codes, so tests can check them without a
// socket.
type CloseCode int

// Close codes used by the peer and the hub.
const (
	CloseNormal          CloseCode = 1000
	CloseGoingAway       CloseCode = 1001
	CloseProtocolError   CloseCode = 1002
	CloseUnsupportedData CloseCode = 1003 // a binary frame
	CloseAbnormal        CloseCode = 1006 // never sent: the connection dropped without a close frame
	CloseInvalidData     CloseCode = 1007 // a text frame that is not UTF-8
	ClosePolicyViolation CloseCode = 1008 // e.g. a slow consumer
	CloseMessageTooBig   CloseCode = 1009
	CloseInternalError   CloseCode = 1011
	CloseTryAgainLater   CloseCode = 1013
)

// CloseError says how a connection was closed: by the other side, or locally
// for a reason the conn detected (a binary frame, invalid UTF-8, a frame over
// the read limit, a missed keepalive).
type CloseError struct {
	Code   CloseCode
	Reason string
}

// Error implements the error interface.
func (e *CloseError) Error() string {
	s := "connection closed with status " + strconv.Itoa(int(e.Code))
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is makes a close for a slow consumer (1008 "slow consumer...", whichever
// side closed: a queue that overflowed, a write that timed out) match
// ErrSlowConsumer.
func (e *CloseError) Is(target error) bool {
	return target == ErrSlowConsumer && e.Code == ClosePolicyViolation && strings.HasPrefix(e.Reason, "slow consumer")
}

// CloseStatus returns the close code in err's chain, or -1 when there is none.
func CloseStatus(err error) CloseCode {
	var ce *CloseError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}
