package oauth

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Principal is who a verified access token speaks for, and what it grants.
// Verify returns the same *Principal for every use of a cached token:
// treat it as read-only.
type Principal struct {
	// Issuer is the authorization server that issued the token, as
	// configured (the token's "iss").
	Issuer string
	// Subject is the token's "sub": the user, or for a machine token (client
	// credentials) usually the client. For an introspected token without
	// "sub", the client id. Issuer and Subject together name the principal.
	Subject string
	// ClientID is the OAuth client the token was issued to: "client_id"
	// (RFC 9068), else "azp" (Keycloak, Google, Entra ID v2), "appid"
	// (Entra ID v1) or "cid" (Okta). Empty when the token names none.
	ClientID string
	// Scopes are the granted scopes: "scope" (a space-separated string),
	// else "scp" (Entra ID's string, Okta's array).
	Scopes []string
	// Audience is the token's "aud".
	Audience []string
	// Expiry is the token's "exp".
	Expiry time.Time
	// Claims holds every claim of the token (of the introspection answer,
	// for an opaque token) as encoding/json decodes them, for a policy to
	// read ("groups", "roles", ...). See ClaimStrings.
	Claims map[string]any
}

// HasScope reports whether the token grants scope.
func (p *Principal) HasScope(scope string) bool {
	return slices.Contains(p.Scopes, scope)
}

// ClaimStrings returns a claim as a list of strings: a string claim is a
// list of one, an array keeps its string members (others are left out),
// anything else (or no such claim) is nil. Groups and roles come either way
// depending on the identity provider.
func (p *Principal) ClaimStrings(name string) []string {
	return stringsOf(p.Claims[name])
}

// stringsOf returns v (as encoding/json decodes it into an any) as strings.
func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// claimString returns a string claim, or "".
func claimString(claims map[string]any, name string) string {
	s, _ := claims[name].(string)
	return s
}

// claimTime returns a NumericDate claim (seconds since the epoch, maybe
// with a fraction), and whether it is there and a plausible number (not
// negative, before the year 36812).
func claimTime(claims map[string]any, name string) (time.Time, bool) {
	f, ok := claims[name].(float64)
	if !ok || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// scopesOf returns the scopes a token grants: "scope" (RFC 9068, RFC 7662:
// space-separated), else "scp" (a string or an array).
func scopesOf(claims map[string]any) []string {
	if s, ok := claims["scope"].(string); ok {
		return strings.Fields(s)
	}
	switch v := claims["scp"].(type) {
	case string:
		return strings.Fields(v)
	case []any:
		return stringsOf(v)
	}
	return nil
}

// clientOf returns the client a token was issued to, under whichever claim
// its issuer uses.
func clientOf(claims map[string]any) string {
	for _, name := range []string{"client_id", "azp", "appid", "cid"} {
		if s := claimString(claims, name); s != "" {
			return s
		}
	}
	return ""
}

// principalOf builds the Principal of verified claims. The caller has
// checked iss, exp and aud.
func principalOf(issuer string, claims map[string]any, exp time.Time) *Principal {
	p := &Principal{
		Issuer:   issuer,
		Subject:  claimString(claims, "sub"),
		ClientID: clientOf(claims),
		Scopes:   scopesOf(claims),
		Audience: stringsOf(claims["aud"]),
		Expiry:   exp,
		Claims:   claims,
	}
	if p.Subject == "" {
		p.Subject = p.ClientID
	}
	return p
}
