// Package jsonrpc is a strict, allocation-lean codec for JSON-RPC 2.0.
//
// It knows nothing of transports or of MCP: it turns one frame of bytes into
// messages and messages back into bytes, with the exact semantics of the
// JSON-RPC 2.0 specification (https://www.jsonrpc.org/specification).
//
// # Messages
//
// A [Message] is either a [*Request] (a call when it has an ID, a notification
// when it does not) or a [*Response] (a result or an [*Error]). Params and
// results stay raw JSON ([encoding/json.RawMessage]) so that a router can pass
// them on without decoding them; unknown members of the envelope are ignored.
//
// An [ID] keeps a string or number exactly as it was sent (integers beyond
// 2^53, "", 0, negative numbers) and is comparable, so it can key a map.
//
// # Decoding
//
// [Limits.Decode] reads one frame and returns a [Frame]: the valid messages,
// and the error responses owed for whatever was invalid. Invalid JSON gives
// -32700 with a null id; a well-formed value that is not a valid message gives
// -32600, with the id when it can be read. An empty batch gives a single
// -32600, and every invalid element of a batch its own. Frames over the byte,
// batch or nesting limits are refused with -32600 before any large allocation.
//
// # Errors
//
// [*Error] carries a wire [Code]. Its code survives %w wrapping:
// errors.Is(err, [ErrInvalidParams]) holds for any error whose chain contains
// an *Error with that code. [ErrorOf] maps any error to the *Error sent on the
// wire; errors that carry no code become a generic internal error, so that
// internal detail (file paths, addresses) never reaches a peer.
//
// # Implementation notes
//
// Where the specification leaves room, this package decides as follows:
//   - "jsonrpc" must be the string "2.0"; "method" a string; "params", when
//     present, an object or an array (a null params is invalid).
//   - An id may be a string, a number (kept as its literal text) or null.
//   - A member that appears twice in one message makes the message invalid, so
//     that two readers can never disagree about what it says.
//   - A message carrying both "method" and "result"/"error", or "result" and
//     "error" together, is invalid.
//   - An invalid message that looks like a response is answered with a null
//     id, never with its own id: that id belongs to the peer's outgoing
//     requests, and an error under it would be taken for their answer.
//
// # Files
//
//	doc.go       this overview
//	message.go   Message, Request, Response; NewResult, NewErrorResponse,
//	             Appender, Marshal
//	id.go        ID: a string, a number as its literal text, or null;
//	             comparable, a map key
//	errors.go    Code, Error and the standard errors; ErrorCoder, ErrorOf,
//	             CodeOf
//	decode.go    Limits, Frame, Decode, Decoder (one connection's, reusing
//	             and interning), DecodeMessage: a frame, single or a batch
//	validate.go  Valid: JSON checked in one pass, without allocating, noting
//	             a top-level object's members
//	swar.go      strings crossed a word at a time, or whole
//	encode.go    messages appended as JSON (AppendJSON, a method renamed in
//	             passing), Encode, SizeHint
//	member.go    a raw object's members read and edited as bytes: Member,
//	             Members, Unquote, Splice, SetMember, WithoutMembers
package jsonrpc
