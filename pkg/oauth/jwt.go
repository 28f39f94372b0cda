package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// isJWT reports whether a token has the shape of a JWS compact
// serialization (three parts): anything else is taken for an opaque token.
// A JWE (five parts) is opaque here too: this package does not decrypt.
func isJWT(token string) bool {
	return strings.Count(token, ".") == 2
}

// verifyJWT verifies a JWT access token, all but its audience, and returns
// its principal.
func (v *Verifier) verifyJWT(ctx context.Context, token string, now time.Time) (*Principal, error) {
	tok, alg, err := v.parseJWT(token)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := tok.UnsafeClaimsWithoutVerification(&claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", ErrMalformed, err)
	}
	// The issuer is read before the signature is checked, to know whose
	// keys check it; nothing is fetched for an issuer not configured.
	iss := claimString(claims, "iss")
	is := v.issuers[iss]
	if is == nil {
		return nil, fmt.Errorf("%w: %q", ErrUntrustedIssuer, iss)
	}
	keys, err := is.key(ctx, tok.Headers[0].KeyID, alg)
	if err != nil {
		return nil, err
	}
	if !verifiedBy(tok, keys) {
		return nil, fmt.Errorf("%w: by issuer %s's key %q", ErrSignature, iss, tok.Headers[0].KeyID)
	}
	// The claims read above are the payload whose signature just verified
	// (go-jose keeps one copy), so they need not be decoded again.
	exp, err := v.checkTimes(claims, now)
	if err != nil {
		return nil, err
	}
	p := principalOf(iss, claims, exp)
	if p.Subject == "" {
		return nil, fmt.Errorf(`%w: no "sub" nor client id`, ErrMalformed)
	}
	return p, nil
}

// parseJWT parses a JWS compact serialization with the allow-list of
// algorithms, and says why one is refused.
func (v *Verifier) parseJWT(token string) (*jwt.JSONWebToken, jose.SignatureAlgorithm, error) {
	tok, err := jwt.ParseSigned(token, v.algs)
	var unexpected *jose.ErrUnexpectedSignatureAlgorithm
	switch {
	case errors.As(err, &unexpected):
		return nil, "", algorithmRefused(string(unexpected.Got))
	case err != nil:
		return nil, "", fmt.Errorf("%w: %w", ErrMalformed, err)
	case len(tok.Headers) != 1:
		return nil, "", fmt.Errorf("%w: %d signatures", ErrMalformed, len(tok.Headers))
	}
	return tok, jose.SignatureAlgorithm(tok.Headers[0].Algorithm), nil
}

// algorithmRefused says why alg is not accepted.
func algorithmRefused(alg string) error {
	switch {
	case alg == "none" || alg == "":
		return fmt.Errorf("%w: %q: the token is not signed", ErrAlgorithm, alg)
	case strings.HasPrefix(alg, "HS"):
		return fmt.Errorf("%w: %q: an HMAC algorithm, refused because the issuers' keys are public", ErrAlgorithm, alg)
	}
	return fmt.Errorf("%w: %q", ErrAlgorithm, alg)
}

// verifiedBy reports whether the signature verifies with one of keys.
func verifiedBy(tok *jwt.JSONWebToken, keys []jose.JSONWebKey) bool {
	for _, k := range keys {
		if tok.Claims(k.Key) == nil {
			return true
		}
	}
	return false
}

// checkTimes checks "exp" (required), "nbf" and "iat" against now with the
// leeway, and returns the expiry.
func (v *Verifier) checkTimes(claims map[string]any, now time.Time) (time.Time, error) {
	exp, ok := claimTime(claims, "exp")
	if !ok {
		return time.Time{}, fmt.Errorf(`%w: no numeric "exp"`, ErrMalformed)
	}
	if now.After(exp.Add(v.leeway)) {
		return time.Time{}, fmt.Errorf("%w at %s (now %s, leeway %s)", ErrExpired,
			exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), v.leeway)
	}
	for _, name := range []string{"nbf", "iat"} {
		if _, there := claims[name]; !there {
			continue
		}
		t, ok := claimTime(claims, name)
		if !ok {
			return time.Time{}, fmt.Errorf(`%w: %q is not a number`, ErrMalformed, name)
		}
		if t.After(now.Add(v.leeway)) {
			return time.Time{}, fmt.Errorf("%w: %q is %s (now %s, leeway %s)", ErrNotYetValid, name,
				t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), v.leeway)
		}
	}
	return exp, nil
}

// decodeClaims decodes a JSON object of claims. Numbers stay float64, as
// encoding/json decodes them into an any.
func decodeClaims(b []byte) (map[string]any, error) {
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		return nil, err
	}
	if claims == nil {
		return nil, errors.New("claims are not a JSON object")
	}
	return claims, nil
}
