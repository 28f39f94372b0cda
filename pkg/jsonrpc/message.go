package jsonrpc

import "encoding/json"

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

// Marshal encodes v as JSON for params or results: a json.RawMessage or []byte
// holding JSON is used as is, nil becomes nil (absent), anything else goes
// through encoding/json.
func Marshal(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	default:
		return json.Marshal(v)
	}
}
