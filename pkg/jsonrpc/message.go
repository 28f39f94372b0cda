package jsonrpc

import (
	"encoding/json"
	"math"
)

// Message is a JSON-RPC message: a [*Request] or a [*Response]. The set is
// closed; no other type implements Message.
type Message interface {
	isMessage()
	// AppendJSON appends the message's compact JSON encoding to b.
	AppendJSON(b []byte) []byte
}

// Request is a call (ID present) or a notification (ID absent).
type Request struct {
	ID     ID
	Method string
	Params json.RawMessage // nil when absent; otherwise an object or array

	// metaFree, when not nil, is where the Params the decoder made start,
	// and metaFreeLen their length: params that hold no _meta member
	// (ParamsWithoutMeta).
	metaFree    *byte
	metaFreeLen uint32
}

// Response answers a call: exactly one of Result and Error is set. A nil
// Result in a success response encodes as null.
type Response struct {
	ID     ID
	Result json.RawMessage
	Error  *Error
}

func (*Request) isMessage()  {}
func (*Response) isMessage() {}

// IsCall reports whether the request expects a response.
func (r *Request) IsCall() bool { return r.ID.IsValid() }

// ParamsWithoutMeta reports whether Params are known to hold no top-level
// _meta member: they are the params of a message decoded alone (not in a
// batch), in which the decoder, reading every key of params as it
// validated them, found no key that is or may spell _meta. Otherwise (a
// request made in code, Params replaced since, a batch's, a _meta found) it
// reports false, and Params are to be read for the member as usual. Routers
// ask it to skip a search of large params for a _meta they rarely hold.
func (r *Request) ParamsWithoutMeta() bool {
	return r.metaFree != nil && len(r.Params) > 0 && &r.Params[0] == r.metaFree && len(r.Params) == int(r.metaFreeLen)
}

// noteParamsWithoutMeta notes that Params, as they are, hold no _meta.
func (r *Request) noteParamsWithoutMeta() {
	if n := len(r.Params); n > 0 && uint64(n) <= math.MaxUint32 {
		r.metaFree, r.metaFreeLen = &r.Params[0], uint32(n)
	}
}

// IsNotification reports whether the request is a notification.
func (r *Request) IsNotification() bool { return !r.ID.IsValid() }

// NewResult returns a success response for id carrying result, which is
// encoded unless it is already a json.RawMessage.
func NewResult(id ID, result any) (*Response, error) {
	raw, err := Marshal(result)
	if err != nil {
		return nil, err
	}
	return &Response{ID: id, Result: raw}, nil
}

// NewErrorResponse returns an error response for id; err is mapped to its wire
// form by [ErrorOf].
func NewErrorResponse(id ID, err error) *Response {
	return &Response{ID: id, Error: ErrorOf(err)}
}

// Appender is implemented by params and results that encode themselves. It
// exists for values that carry raw JSON: encoding/json re-scans and compacts
// every raw byte it embeds, which for a large tool argument costs more than
// everything else about the call.
type Appender interface {
	// AppendJSON appends the value's JSON encoding to b. Raw JSON it embeds
	// must be valid (see [Valid]).
	AppendJSON(b []byte) ([]byte, error)
}

// Marshal encodes v as JSON for params or results: a json.RawMessage holding
// JSON is used as is, nil becomes nil (absent), an [Appender] encodes itself,
// anything else goes through encoding/json.
func Marshal(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	case Appender:
		return v.AppendJSON(nil)
	default:
		return json.Marshal(v)
	}
}
