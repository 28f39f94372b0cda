package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Every decoder of this package has a fuzz target: the token's header and
// claims (through Verify, offline), the JWKS, the authorization server's
// and the resource's metadata, an introspection answer, the cache headers
// of a JWKS, WWW-Authenticate challenges, Authorization headers, and the
// error of an introspection endpoint's refusal.

// FuzzVerify: any string given as a token is refused with one of the
// package's errors, or accepted only if its issuer's key signed it for the
// resource; Verify never panics.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	keys := []jose.JSONWebKey{publicJWK(&testKeys.rsa.PublicKey, "r1", ""), publicJWK(&testKeys.ec.PublicKey, "e1", "")}
	good := signed(f, jose.RS256, testKeys.rsa, "r1", validClaims(now))
	f.Add(good)
	f.Add(signed(f, jose.ES256, testKeys.ec, "e1", validClaims(now)))
	f.Add(signed(f, jose.ES256, testKeys.ec, "", map[string]any{"iss": testIssuer, "exp": "x"}))
	f.Add(good[:strings.LastIndex(good, ".")+1])
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2lzc3Vlci50ZXN0In0.")
	f.Add("eyJhbGciOiJIUzI1NiJ9.e30.c2ln")
	f.Add("opaque")
	f.Add("a.b.c.d.e")
	f.Fuzz(func(t *testing.T, token string) {
		v := offlineVerifier(t, now, keys...)
		p, err := v.Verify(context.Background(), token, testResource)
		if err != nil {
			if p != nil {
				t.Fatal("a principal with an error")
			}
			if Describe(err) == "invalid access token" {
				t.Fatalf("an error that is none of the package's: %v", err)
			}
			return
		}
		if p.Issuer != testIssuer || !slices.Contains(p.Audience, testResource) || p.Subject == "" {
			t.Fatalf("accepted %+v", p)
		}
		// Accepted: it must verify by one of the keys, on its own.
		tok, err := jose.ParseSigned(token, v.algs)
		if err != nil {
			t.Fatalf("accepted what go-jose cannot parse: %v", err)
		}
		if _, err := tok.Verify(&jose.JSONWebKeySet{Keys: keys}); err != nil && tok.Signatures[0].Header.KeyID != "" {
			t.Fatalf("accepted a token no key verifies: %v", err)
		}
	})
}

func FuzzParseKeySet(f *testing.F) {
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		publicJWK(&testKeys.rsa.PublicKey, "r1", "RS256"), publicJWK(&testKeys.ec.PublicKey, "e1", ""),
	}})
	f.Add(set)
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h"},{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"},{"kty":"AKP","alg":"ML-DSA-44","pub":"AA"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		keys, skipped, err := ParseKeySet(body)
		if err != nil {
			return
		}
		if skipped < 0 {
			t.Fatal("negative skipped")
		}
		for _, k := range keys {
			if !k.IsPublic() || keyFamily(k.Key) == "" || (k.Use != "" && k.Use != "sig") {
				t.Fatalf("kept %+v", k)
			}
		}
	})
}

func FuzzParseServerMetadata(f *testing.F) {
	f.Add([]byte(`{"issuer":"https://issuer.test","jwks_uri":"https://issuer.test/jwks","token_endpoint":"https://issuer.test/token"}`))
	f.Add([]byte(`{"issuer":"https://issuer.test","jwks_uri":"http://evil.test/jwks"}`))
	f.Add([]byte(`{"issuer":["x"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ParseServerMetadata(body, testIssuer)
		if err != nil {
			return
		}
		if m.Issuer != testIssuer {
			t.Fatalf("issuer %q", m.Issuer)
		}
		if m.JWKSURI != "" && checkEndpoint(m.JWKSURI) != nil {
			t.Fatalf("jwks_uri %q", m.JWKSURI)
		}
	})
}

func FuzzParseResourceMetadata(f *testing.F) {
	f.Add([]byte(`{"resource":"https://hub.test/mcp","authorization_servers":["https://issuer.test"],"bearer_methods_supported":["header"]}`), testResource)
	f.Add([]byte(`{"resource":"https://hub.test","authorization_servers":["http://x"]}`), "https://hub.test/servers/a/mcp")
	f.Add([]byte(`{"resource":"https://hub.test/mc"}`), testResource)
	f.Fuzz(func(t *testing.T, body []byte, requested string) {
		m, err := ParseResourceMetadata(body, requested)
		if err != nil {
			return
		}
		if !ResourceCovers(m.Resource, requested) {
			t.Fatalf("resource %q for %q", m.Resource, requested)
		}
		if _, err := ResourceMetadataURL(m.Resource); err != nil {
			t.Fatalf("accepted resource %q: %v", m.Resource, err)
		}
	})
}

func FuzzParseIntrospection(f *testing.F) {
	f.Add([]byte(`{"active":true,"client_id":"c","scope":"a b","exp":1800003600,"iss":"https://issuer.test","aud":"https://hub.test/mcp"}`))
	f.Add([]byte(`{"active":"true"}`))
	f.Add([]byte(`{"active":false}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		claims, active, err := ParseIntrospection(body)
		if err != nil {
			if active {
				t.Fatal("active with an error")
			}
			return
		}
		if active != (claims["active"] == true) {
			t.Fatalf("active %v for %v", active, claims["active"])
		}
		// What Verify makes of an active answer must be one of its errors
		// or a principal of the issuer.
		v := offlineVerifier(t, time.Unix(1_800_000_000, 0))
		p, err := v.activeToken(v.order[0], claims, time.Unix(1_800_000_000, 0))
		if err == nil && (p.Issuer != testIssuer || p.Subject == "") {
			t.Fatalf("principal %+v", p)
		}
		if err != nil && Describe(err) == "invalid access token" {
			t.Fatalf("an error that is none of the package's: %v", err)
		}
	})
}

// FuzzOAuthErrorCode: what an introspection endpoint's refusal says goes
// into a log line and a readiness probe's body only as a short code of
// visible ASCII without quotes, or not at all.
func FuzzOAuthErrorCode(f *testing.F) {
	f.Add([]byte(`{"error":"invalid_client","error_description":"client authentication failed"}`))
	f.Add([]byte(`{"error":"a\nb"}`))
	f.Add([]byte(`{"error":"\"quoted\""}`))
	f.Add([]byte(`{"error":7}`))
	f.Add([]byte(`<html>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		code := oauthErrorCode(body)
		if len(code) > 64 || strings.ContainsFunc(code, func(r rune) bool { return r < 0x21 || r > 0x7e || r == '"' || r == '\\' }) {
			t.Fatalf("code %q of %q", code, body)
		}
	})
}

func FuzzKeysMaxAge(f *testing.F) {
	f.Add("max-age=3600", "", "")
	f.Add("no-cache, max-age=60", "", "")
	f.Add("", "Thu, 01 Jan 2026 00:00:00 GMT", "Wed, 31 Dec 2025 23:00:00 GMT")
	f.Fuzz(func(t *testing.T, cc, expires, date string) {
		h := http.Header{}
		h.Set("Cache-Control", cc)
		h.Set("Expires", expires)
		h.Set("Date", date)
		if d := keysMaxAge(h, time.Unix(1_800_000_000, 0)); d < KeysMinAge || d > KeysMaxAge {
			t.Fatalf("max age %s", d)
		}
	})
}

// FuzzParseChallenges: what parses prints back (Challenge.String) to a
// header that parses to the same challenges.
func FuzzParseChallenges(f *testing.F) {
	f.Add(`Bearer resource_metadata="https://hub.test/.well-known/oauth-protected-resource/mcp", scope="mcp:client", error="invalid_token"`)
	f.Add(`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`)
	f.Add(`Negotiate abc+/=, Bearer`)
	f.Add(`Bearer realm="a\`)
	f.Fuzz(func(t *testing.T, header string) {
		cs, err := ParseChallenges(header)
		if err != nil {
			return
		}
		var parts []string
		for _, c := range cs {
			for _, p := range c.Params {
				if strings.ContainsFunc(p.Value, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
					return // String replaces these: no round trip
				}
			}
			parts = append(parts, c.String())
		}
		again, err := ParseChallenges(strings.Join(parts, ", "))
		if err != nil {
			t.Fatalf("%q printed as %q: %v", header, strings.Join(parts, ", "), err)
		}
		if len(again) != len(cs) {
			t.Fatalf("%q: %d challenges, then %d", header, len(cs), len(again))
		}
		for i := range cs {
			if cs[i].Scheme != again[i].Scheme || cs[i].Token68 != again[i].Token68 || !slices.Equal(cs[i].Params, again[i].Params) {
				t.Fatalf("%q: %+v, then %+v", header, cs[i], again[i])
			}
		}
	})
}

// FuzzBearerToken: a token is returned only from a single Bearer header,
// as a b64token; a malformed one is ErrBadRequest.
func FuzzBearerToken(f *testing.F) {
	f.Add("Bearer abc.def", "")
	f.Add("bearer  a==", "")
	f.Add("Bearer a", "Bearer b")
	f.Add("Basic x", "")
	f.Fuzz(func(t *testing.T, first, second string) {
		h := http.Header{}
		h.Add("Authorization", first)
		if second != "" {
			h.Add("Authorization", second)
		}
		token, ok, err := BearerToken(h)
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Fatalf("error %v", err)
		}
		if ok && (second != "" || !isB64Token(token) || !strings.HasSuffix(first, token)) {
			t.Fatalf("token %q from %q, %q", token, first, second)
		}
	})
}
