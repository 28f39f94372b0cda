package oauth

import "errors"

// Every refusal of Verify wraps exactly one of these errors, so that a caller
// can tell them apart with errors.Is; the text around it says what was
// wrong with this token (never the token itself). All of them mean the same
// to the client, "invalid_token" (RFC 6750): Describe gives a short reason
// fit to send to it.
var (
	// ErrNoToken: the credential is empty.
	ErrNoToken = errors.New("no access token")
	// ErrTooLarge: the token is longer than Config.MaxTokenSize; it was
	// refused before any parsing.
	ErrTooLarge = errors.New("access token too large")
	// ErrMalformed: the token is neither a well-formed signed JWT nor, with
	// introspection configured, an opaque token; or a JWT lacks a claim an
	// access token must have (iss, sub, exp).
	ErrMalformed = errors.New("malformed access token")
	// ErrAlgorithm: the JWT's "alg" is not on the allow-list ("none", an HMAC
	// algorithm, or one Config.Algorithms leaves out).
	ErrAlgorithm = errors.New("signature algorithm not allowed")
	// ErrUntrustedIssuer: the token's "iss" is none of the trusted issuers.
	// Nothing is fetched from an untrusted issuer.
	ErrUntrustedIssuer = errors.New("untrusted issuer")
	// ErrUnknownKey: no key of the issuer's key set has the token's "kid"
	// (and algorithm), even after fetching the set again (at most once every
	// KeyRefreshInterval per issuer).
	ErrUnknownKey = errors.New("unknown signing key")
	// ErrSignature: the signature does not verify with the issuer's key.
	ErrSignature = errors.New("invalid signature")
	// ErrExpired: "exp" has passed, beyond the allowed clock skew.
	ErrExpired = errors.New("access token expired")
	// ErrNotYetValid: "nbf" (or "iat") lies in the future, beyond the
	// allowed clock skew.
	ErrNotYetValid = errors.New("access token not yet valid")
	// ErrAudience: "aud" names neither the resource asked for nor any of
	// Config.Audiences.
	ErrAudience = errors.New("access token not meant for this resource")
	// ErrInactive: introspection said the opaque token is not active
	// (revoked, expired, unknown to the issuer).
	ErrInactive = errors.New("access token not active")
	// ErrUnavailable: something needed from an issuer (its metadata, its
	// keys, its introspection endpoint) could not be had: it is unreachable
	// or answered nonsense. Not the client's fault, but its token could not
	// be verified either.
	ErrUnavailable = errors.New("authorization server unavailable")
)

// ErrIntrospectionRefused is wrapped, beside ErrUnavailable, when an
// issuer's introspection endpoint refuses the resource server's own
// credentials (a wrong client id or secret): a configuration error for the
// operator, not the client's fault. Status reports it until the endpoint
// takes them.
var ErrIntrospectionRefused = errors.New("the introspection endpoint refused the resource server's credentials")

// refusals lists the errors Verify returns, each with the description a
// client may see.
var refusals = []struct {
	err  error
	desc string
}{
	{ErrNoToken, "no access token"},
	{ErrTooLarge, "the access token is too large"},
	{ErrMalformed, "the access token is malformed"},
	{ErrAlgorithm, "the token's signature algorithm is not accepted"},
	{ErrUntrustedIssuer, "the token's issuer is not trusted"},
	{ErrUnknownKey, "the token is signed with an unknown key"},
	{ErrSignature, "the token's signature is invalid"},
	{ErrExpired, "the access token expired"},
	{ErrNotYetValid, "the access token is not valid yet"},
	{ErrAudience, "the access token is not meant for this resource"},
	{ErrInactive, "the access token is not active"},
	{ErrUnavailable, "the token could not be verified now: the authorization server is unavailable"},
}

// Describe returns a short reason for a refusal of Verify, fit for the
// error_description of a WWW-Authenticate challenge: it names what was
// wrong, and never holds the token, a URL or other detail of the error's
// text. An error that is none of this package's gets "invalid access token".
func Describe(err error) string {
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.desc
		}
	}
	return "invalid access token"
}
