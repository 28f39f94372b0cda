// Package oauth makes a server an OAuth 2.1 resource server, and a client
// of one: the parts of the MCP authorization specification that do not
// depend on MCP. It verifies access tokens (JWTs by their issuer's keys,
// opaque ones by introspection), builds the Protected Resource Metadata
// and the WWW-Authenticate challenges that lead a client to its
// authorization server, and, on the client side, finds that server and
// gets machine tokens from it. It knows nothing of MCP or of the hub.
//
// # A resource server
//
// A Verifier trusts one or more authorization servers (issuers):
//
//	v, err := oauth.New(oauth.Config{
//		Issuers:   []oauth.IssuerConfig{{Issuer: "https://login.example.com/realms/mcp"}},
//		Audiences: nil, // extra accepted "aud" values, for servers without resource indicators
//	})
//	go v.Run(ctx) // optional: fetch keys ahead of need, retry an issuer that is down
//
// Each request's token is checked against the resource it was sent to, the
// resource identifier of RFC 8707 (the URL of the endpoint, as clients
// know it):
//
//	token, ok, err := oauth.BearerToken(r.Header)  // ErrBadRequest: 400
//	p, err := v.Verify(ctx, token, "https://hub.example.com/mcp")
//
// No token is answered 401 with a challenge pointing at the resource's
// metadata; a refused token, 401 with error="invalid_token"; a token
// lacking a scope, 403 with error="insufficient_scope" (step-up):
//
//	md, _ := oauth.ResourceMetadataURL("https://hub.example.com/mcp")
//	w.Header().Set("WWW-Authenticate", oauth.Bearer{
//		ResourceMetadata: md, Scope: []string{"mcp:client"},
//		Error: oauth.ErrorInvalidToken, Description: oauth.Describe(err),
//	}.String())
//
// and the metadata itself (ResourceMetadata, RFC 9728) is served at md.
// The package's Example is such a server.
//
// # How a JWT is verified
//
// In this order, each failure its own error (see errors.go), all of them
// "invalid_token" to the client:
//
//  1. Its length: more than Config.MaxTokenSize (16 KiB) is refused before
//     anything is parsed (ErrTooLarge).
//  2. The verified-token cache: a token verified before and not expired is
//     accepted at the cost of a map lookup (about 200 ns), its audience
//     checked again for this resource.
//  3. Its form and algorithm, by go-jose: a JWS compact serialization whose
//     "alg" is on the allow-list, asymmetric only (ErrAlgorithm for "none",
//     for HMAC, for anything left out).
//  4. Its "iss", read before the signature (to know whose keys check it):
//     an issuer not configured is refused and never contacted
//     (ErrUntrustedIssuer).
//  5. The key: the issuer's JWKS member with the token's "kid" and of the
//     algorithm's family (an RSA key for RS256, a P-256 key for ES256...),
//     whose own "alg", if any, agrees. Unknown: the JWKS is fetched again,
//     at most once every KeyRefreshInterval (30 s) per issuer, then
//     ErrUnknownKey. That fetch begins after the token came: one already
//     under way (the keys fetched ahead of their age) may predate a
//     rotation, so it is queued behind it. A token that comes while that
//     fetch is queued or runs waits for it (a rotation brings many tokens
//     of the new key at once).
//  6. The signature, by go-jose (ErrSignature).
//  7. "exp" (required), "nbf" and "iat", with Config.Leeway of skew, 60 s at
//     most (ErrExpired, ErrNotYetValid); "sub" or a client id present.
//  8. "aud": the resource asked for, or one of Config.Audiences
//     (ErrAudience).
//
// The result is a Principal: issuer and subject (who), client id, scopes,
// audience, expiry, and every claim for a policy to read.
//
// # Keys and issuers
//
// An issuer's metadata is found by RFC 8414 or OpenID Connect Discovery
// (MetadataURLs lists the addresses tried, path insertion included) when
// a token first needs it, or when Run starts. Its keys are kept as long as
// the JWKS response's Cache-Control allows, between KeysMinAge and
// KeysMaxAge (KeysDefaultAge without a header), and fetched again when a
// token names a key id they lack, which is how a rotation is seen at once.
//
// Nothing fails for an issuer that is down: New fetches nothing; Verify
// refuses its tokens with ErrUnavailable, at once while a retry is not due
// (the wait grows from 1 s to a minute); Ready and Status say why, for a
// readiness probe; Run retries in the background. Once keys are at hand,
// a JWKS endpoint that fails changes nothing for tokens signed by them:
// the keys are kept, however old, until a fetch succeeds. A token signed
// by a new key is then refused with an error that says both (ErrUnknownKey
// and ErrUnavailable).
//
// # Opaque tokens
//
// A token that is not a three-part JWS is opaque. With
// IssuerConfig.Introspection set, it is checked at that issuer's
// introspection endpoint (RFC 7662) with the resource server's own client
// credentials; the answer's "active", "iss", "token_type", "exp", "nbf",
// "iat" and "aud" are checked as a JWT's claims. An active token's answer
// is trusted for Introspection.CacheFor (DefaultIntrospectionCache, a
// minute), or until the token expires if sooner: a revoked token is
// refused within that period. An inactive one is remembered for 30 s (so
// that a client repeating a dead token costs the issuer one request).
//
// An endpoint that refuses the resource server's own credentials (a wrong
// client id or secret) makes every opaque token ErrUnavailable, with
// ErrIntrospectionRefused beside it: logged once, reported by Status and
// Ready, and asked again only after a growing wait (1 s to a minute). Run
// checks the credentials at start, with a made-up token, so that a
// readiness probe fails before any client's token meets them.
//
// # Cache
//
// Verified tokens (and inactive opaque ones) are kept, keyed by the token
// itself, until their expiry plus the leeway (an introspected one, at
// most its issuer's CacheFor), up to Config.CacheEntries;
// beyond that expired entries are swept and arbitrary ones displaced.
// A cached token stays valid even if its key is retired meanwhile: until
// it expires, as a token verified by every request would not be.
//
// # The client side
//
// A client that meets a 401 finds where to get a token with
// DiscoverResource (the challenge's resource_metadata, else the well-known
// addresses; then the authorization server's metadata), and a machine
// client gets tokens by client credentials:
//
//	d, err := oauth.DiscoverResource(ctx, http.DefaultClient, upstreamURL, resp.Header.Values("WWW-Authenticate"))
//	secret, err := oauth.SecretFromFile("/run/secrets/client")
//	src, err := (&oauth.ClientCredentials{
//		TokenURL: d.Server.TokenEndpoint, ClientID: "connector", Secret: secret,
//		Scopes: d.Scope, Resource: d.Resource.Resource,
//	}).TokenSource(ctx)
//	tok, err := src.Token() // renewed RenewBefore its expiry
//
// A Secret prints as "[redacted]" everywhere but Reveal.
//
// # Files
//
//	doc.go        this overview
//	errors.go     the refusals of Verify, and Describe
//	verifier.go   Config, New, Verifier: Verify, Status, Ready, Run
//	jwt.go        JWT verification: algorithm, issuer, key, signature, times
//	introspect.go opaque tokens: RFC 7662
//	issuer.go     one issuer's metadata and keys: fetching, aging, retries
//	jwks.go       JWK Set parsing, key selection, cache lifetimes
//	metadata.go   authorization server metadata: discovery, parsing
//	cache.go      the verified-token cache
//	principal.go  Principal, and reading scopes and client ids of any IdP
//	resource.go   Protected Resource Metadata, DiscoverResource
//	challenge.go  WWW-Authenticate: building Bearer challenges, parsing any
//	bearer.go     the Authorization header's bearer token
//	client.go     Secret, ClientCredentials
//
// The tests run against a real authorization server (oidc-provider, started
// by internal/oauthtest), and the official MCP TypeScript SDK's OAuth
// client; docs/oauth.md has the recipes per identity provider.
package oauth
