package oauth

import (
	"errors"
	"net/http"
	"strings"
)

// ErrBadRequest is BearerToken's refusal of a request whose Authorization
// header is malformed or given twice: answer it with HTTP 400 and a Bearer
// challenge of ErrorInvalidRequest.
var ErrBadRequest = errors.New("malformed Authorization header")

// BearerToken returns the access token of a request's Authorization header
// (RFC 6750 section 2.1: "Bearer" in any case, then the token), and whether
// there is one. No Authorization header, or another scheme, is no token
// and no error. Two Authorization headers, or a Bearer credential that is
// not a b64token, are ErrBadRequest. Tokens in a query string or a form
// body are never read: they end up in logs.
func BearerToken(h http.Header) (string, bool, error) {
	values := h.Values("Authorization")
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", false, ErrBadRequest
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, nil
	}
	token = strings.TrimLeft(token, " ")
	if !isB64Token(token) {
		return "", false, ErrBadRequest
	}
	return token, true, nil
}

// isB64Token reports whether s is a b64token (RFC 6750 section 2.1):
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; !isAlnum(c) && strings.IndexByte("-._~+/", c) < 0 {
			return false
		}
	}
	return true
}
