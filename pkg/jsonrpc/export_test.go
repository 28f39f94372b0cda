package jsonrpc

// Valid exposes the validator to the external tests (without a depth limit).
func Valid(b []byte) bool {
	ok, _ := validate(b, 0)
	return ok
}
