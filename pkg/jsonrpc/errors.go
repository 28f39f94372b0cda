package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Code is a JSON-RPC error code.
type Code int64

// The error codes defined by JSON-RPC 2.0. Codes from -32000 to -32099 are
// left to implementations; packages above this one define their own there.
const (
	CodeParseError     Code = -32700
	CodeInvalidRequest Code = -32600
	CodeMethodNotFound Code = -32601
	CodeInvalidParams  Code = -32602
	CodeInternalError  Code = -32603
)

// Error is a JSON-RPC error object. It is also a Go error: a handler returns
// one to choose the code, message and data its caller sees.
type Error struct {
	Code    Code
	Message string
	Data    json.RawMessage // optional; must be valid JSON when set
}

// Sentinel errors, one per code of the specification. Compare with errors.Is,
// which matches any *Error with the same code.
var (
	ErrParse          = &Error{Code: CodeParseError, Message: "Parse error"}
	ErrInvalidRequest = &Error{Code: CodeInvalidRequest, Message: "Invalid Request"}
	ErrMethodNotFound = &Error{Code: CodeMethodNotFound, Message: "Method not found"}
	ErrInvalidParams  = &Error{Code: CodeInvalidParams, Message: "Invalid params"}
	ErrInternal       = &Error{Code: CodeInternalError, Message: "Internal error"}
)

// NewError returns an *Error with the code and a formatted message.
func NewError(code Code, format string, args ...any) *Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &Error{Code: code, Message: msg}
}

// Errorf returns an error with the code of base and the message of base
// followed by a formatted detail, e.g.
// Errorf(ErrInvalidParams, "unknown tool %q", name).
func Errorf(base *Error, format string, args ...any) *Error {
	return &Error{Code: base.Code, Message: base.Message + ": " + fmt.Sprintf(format, args...)}
}

// WithData returns a copy of e whose data is v encoded as JSON. A value that
// cannot be encoded leaves the data empty.
func (e *Error) WithData(v any) *Error {
	c := *e
	c.Data = nil
	if raw, ok := v.(json.RawMessage); ok {
		c.Data = raw
	} else if b, err := json.Marshal(v); err == nil {
		c.Data = b
	}
	return &c
}

// Error implements the error interface.
func (e *Error) Error() string {
	return "jsonrpc error " + strconv.FormatInt(int64(e.Code), 10) + ": " + e.Message
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, ErrInvalidParams) matches any invalid-params error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t != nil && e != nil && t.Code == e.Code
}

// ErrorCoder is implemented by errors that choose their own wire code without
// being an *Error.
type ErrorCoder interface {
	error
	ErrorCode() Code
}

// ErrorOf maps any error to the error object sent on the wire. An *Error in
// the chain is returned as is; an [ErrorCoder] keeps its code and message;
// anything else becomes a generic internal error, because its text may hold
// details (paths, addresses) that must not reach a peer. ErrorOf(nil) is nil.
func ErrorOf(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e
	}
	var c ErrorCoder
	if errors.As(err, &c) {
		return &Error{Code: c.ErrorCode(), Message: c.Error()}
	}
	return ErrInternal
}

// CodeOf returns the wire code of err, as [ErrorOf] maps it; 0 for nil.
func CodeOf(err error) Code {
	if e := ErrorOf(err); e != nil {
		return e.Code
	}
	return 0
}
