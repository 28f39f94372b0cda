package oauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's signing keys, as its JWKS last gave them.
type keySet []jose.JSONWebKey

// ParseKeySet decodes a JWK Set document (RFC 7517 section 5) into the
// public signing keys it holds, and says how many of its members it left
// out: keys for encryption ("use": "enc"), symmetric keys (never: the
// issuer's keys are public, and an HMAC "key" known to everyone would sign
// anything), keys of a type or curve this package does not verify with,
// and members that do not decode. A private key is reduced to its public
// half. The document itself must be a JSON object with a "keys" array.
func ParseKeySet(body []byte) (keys []jose.JSONWebKey, skipped int, err error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, 0, fmt.Errorf("key set: %w", err)
	}
	if doc.Keys == nil {
		return nil, 0, errors.New(`key set: no "keys" array`)
	}
	for _, raw := range doc.Keys {
		var k jose.JSONWebKey
		// Each member on its own: go-jose refuses a whole set for one key
		// it cannot read (a post-quantum key beside the others, say).
		if json.Unmarshal(raw, &k) != nil || !k.Valid() || (k.Use != "" && k.Use != "sig") {
			skipped++
			continue
		}
		if !k.IsPublic() {
			k = k.Public()
		}
		if keyFamily(k.Key) == "" {
			skipped++
			continue
		}
		keys = append(keys, k)
	}
	return keys, skipped, nil
}

// keyFamily names what a public key can verify: "RSA" (RS*, PS*),
// "P-256", "P-384", "P-521" (ES256, ES384, ES512), "Ed25519" (EdDSA); or ""
// for anything else.
func keyFamily(key any) string {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return k.Curve.Params().Name
		}
	case ed25519.PublicKey:
		return "Ed25519"
	}
	return ""
}

// algFamily is the key family an algorithm of the allow-list needs.
var algFamily = map[jose.SignatureAlgorithm]string{
	jose.RS256: "RSA", jose.RS384: "RSA", jose.RS512: "RSA",
	jose.PS256: "RSA", jose.PS384: "RSA", jose.PS512: "RSA",
	jose.ES256: "P-256", jose.ES384: "P-384", jose.ES512: "P-521",
	jose.EdDSA: "Ed25519",
}

// find returns the keys that may have signed a token with this key id (any
// when kid is empty: RFC 7515 leaves it optional) and algorithm: a key of
// the algorithm's family, whose own "alg", if it has one, is the same.
func (s keySet) find(kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range s {
		if kid != "" && k.KeyID != kid {
			continue
		}
		if keyFamily(k.Key) != algFamily[alg] || (k.Algorithm != "" && k.Algorithm != string(alg)) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// hasKeyID reports whether any key has this id, whatever its type.
func (s keySet) hasKeyID(kid string) bool {
	for _, k := range s {
		if k.KeyID == kid {
			return true
		}
	}
	return false
}

// KeysMaxAge bounds how long an issuer's keys are used before they are
// fetched again, whatever the JWKS's cache headers say; KeysMinAge is the
// least, even for "no-cache"; KeysDefaultAge applies without cache headers.
// Keys that turn up between two fetches (rotation) are fetched on demand,
// when a token names one.
const (
	KeysMinAge     = time.Minute
	KeysMaxAge     = 24 * time.Hour
	KeysDefaultAge = 15 * time.Minute
)

// keysMaxAge reads how long a JWKS response may be cached (Cache-Control's
// max-age, else Expires against Date), kept within [KeysMinAge,
// KeysMaxAge]; KeysDefaultAge when the headers say nothing usable.
func keysMaxAge(h http.Header, now time.Time) time.Duration {
	age, ok := cacheMaxAge(h, now)
	if !ok {
		return KeysDefaultAge
	}
	return min(max(age, KeysMinAge), KeysMaxAge)
}

// cacheMaxAge returns the freshness lifetime the headers give, if they
// give one: 0 for no-cache and no-store.
func cacheMaxAge(h http.Header, now time.Time) (time.Duration, bool) {
	for _, cc := range h.Values("Cache-Control") {
		for _, d := range strings.Split(cc, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-cache", "no-store":
				return 0, true
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(value, `"`), 10, 64)
				if err != nil || n < 0 {
					continue
				}
				return time.Duration(min(n, int64(KeysMaxAge/time.Second))) * time.Second, true
			}
		}
	}
	if exp := h.Get("Expires"); exp != "" {
		t, err := http.ParseTime(exp)
		if err != nil {
			return 0, true // an invalid Expires means already expired (RFC 9111 section 5.3)
		}
		if d, err := http.ParseTime(h.Get("Date")); err == nil {
			now = d
		}
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
