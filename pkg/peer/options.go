package peer

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Defaults for Options.
const (
	DefaultMaxConcurrent  = 16
	DefaultMaxPending     = 256
	DefaultSendQueue      = 1024
	DefaultSendQueueBytes = 64 << 20
	DefaultFlushTimeout   = 5 * time.Second
)

// maxSendQueueBytes bounds Options.SendQueueBytes: a Peer counts the bytes
// queued in 32 bits.
const maxSendQueueBytes = 1 << 30

// Options configure a Peer. The zero value is usable.
type Options struct {
	// Handler answers incoming requests; nil answers every call with
	// "method not found".
	Handler Handler
	// MaxConcurrent bounds the handlers running at once for calls. Calls
	// beyond it wait in a queue, answered in any order as they finish.
	MaxConcurrent int
	// MaxPending bounds the calls accepted and not yet answered, queued or
	// running. Calls beyond it are answered at once with Overloaded.
	MaxPending int
	// Overloaded is the error for calls beyond MaxPending. Default: -32603
	// "too many requests in flight".
	Overloaded *jsonrpc.Error
	// SendQueue and SendQueueBytes bound the frames waiting for the writer
	// (SendQueueBytes to 1 GiB at most). A peer that does not read until
	// they overflow is closed with 1008 "slow consumer", so that it never
	// blocks anyone else.
	SendQueue      int
	SendQueueBytes int
	// FlushTimeout bounds how long Close waits for queued frames to be
	// written before closing the connection.
	FlushTimeout time.Duration
	// Limits bound each incoming frame (see jsonrpc.Limits).
	Limits jsonrpc.Limits
	// CloseOnInvalid closes the connection with 1008 on the first frame
	// that is not valid JSON-RPC, instead of answering it with an error:
	// for a peer that is a program and should never send one.
	CloseOnInvalid bool
	// LendRequests lends each call Handle serves its request: on a conn
	// that reads into the peer's pools of buffers (a WebSocket), a call
	// that comes alone in its frame is read into a pooled buffer, which
	// goes back to the pools once the call's answer has been written (or
	// the call ended without one). The request, its params and anything
	// sliced from them are then valid only until the answer is written:
	// the handler's result may refer to them (it is encoded into the
	// answer first), but a handler that keeps any of it beyond that (a
	// goroutine it starts, a cache, a log kept in memory) copies what it
	// keeps. Notifications, the calls of a batch and calls an
	// AsyncHandler takes are not lent (a Reply has its own rule: see
	// Reply.Release). Without it, a call's bytes are the handler's to
	// keep, and a 16 KiB call costs a fresh 16 KiB buffer for the garbage
	// collector.
	LendRequests bool
	// OnCancel is called when the context of an outgoing call ends before
	// its answer came. The call has already left the pending map; MCP sends
	// notifications/cancelled from here.
	OnCancel func(id jsonrpc.ID, cause error)
	// OnClose runs once when the peer starts closing, with the reason, on
	// a goroutine of the peer's: the place to forget it. OnDone runs once
	// when the last goroutine of the closed peer ends, so that an owner can
	// wait for peers without holding a goroutine for each.
	OnClose func(err error)
	OnDone  func()
	// (A Handler may take these three as methods instead: see Hooks.)
	// Logger receives debug logs (unsolicited responses, handler errors).
	// Nil discards them.
	Logger *slog.Logger
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Handler == nil {
		v.Handler = HandlerFunc(func(context.Context, *jsonrpc.Request) (any, error) {
			return nil, jsonrpc.ErrMethodNotFound
		})
	}
	if v.MaxConcurrent <= 0 {
		v.MaxConcurrent = DefaultMaxConcurrent
	}
	if v.MaxPending <= 0 {
		v.MaxPending = DefaultMaxPending
	}
	if v.Overloaded == nil {
		v.Overloaded = jsonrpc.NewError(jsonrpc.CodeInternalError, "too many requests in flight")
	}
	if v.SendQueue <= 0 {
		v.SendQueue = DefaultSendQueue
	}
	if v.SendQueueBytes <= 0 {
		v.SendQueueBytes = DefaultSendQueueBytes
	}
	v.SendQueueBytes = min(v.SendQueueBytes, maxSendQueueBytes)
	if v.FlushTimeout <= 0 {
		v.FlushTimeout = DefaultFlushTimeout
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	return v
}

// Hooks is implemented by a Handler that takes OnCancel, OnClose and OnDone
// as its methods: the peer calls them where Options leaves those funcs
// nil. An owner that makes a peer per connection, or per request, then
// makes no func value for them (an allocation each).
type Hooks interface {
	OnCancel(id jsonrpc.ID, cause error)
	OnClose(err error)
	OnDone()
}

// onCancel runs Options.OnCancel, or the Handler's Hooks method.
func (p *Peer) onCancel(id jsonrpc.ID, cause error) {
	if p.opts.OnCancel != nil {
		p.opts.OnCancel(id, cause)
	} else if h, ok := p.opts.Handler.(Hooks); ok {
		h.OnCancel(id, cause)
	}
}

// onClose runs Options.OnClose, or the Handler's Hooks method.
func (p *Peer) onClose(err error) {
	if p.opts.OnClose != nil {
		p.opts.OnClose(err)
	} else if h, ok := p.opts.Handler.(Hooks); ok {
		h.OnClose(err)
	}
}

// hasOnDone reports whether the peer has an OnDone to run.
func (p *Peer) hasOnDone() bool {
	_, ok := p.opts.Handler.(Hooks)
	return p.opts.OnDone != nil || ok
}

// onDone runs Options.OnDone, or the Handler's Hooks method.
func (p *Peer) onDone() {
	if p.opts.OnDone != nil {
		p.opts.OnDone()
	} else if h, ok := p.opts.Handler.(Hooks); ok {
		h.OnDone()
	}
}
