package oauth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Introspection is how a resource server authenticates to an issuer's
// introspection endpoint (RFC 7662): as a confidential client of it, with
// client_secret_basic (RFC 6749 section 2.3.1).
type Introspection struct {
	// ClientID and Secret are the resource server's own client credentials
	// at the issuer (never a client's token).
	ClientID string
	Secret   Secret
	// Endpoint overrides the issuer metadata's introspection_endpoint.
	Endpoint string
	// CacheFor bounds how long an active token's answer is trusted before
	// the issuer is asked again, so that a revocation is seen within it: 0
	// means DefaultIntrospectionCache, a negative value until the token's
	// expiry (a revocation is then never seen before it).
	CacheFor time.Duration
}

// DefaultIntrospectionCache is how long, by default, an introspected
// token's "active" answer is trusted: a revoked token is refused within
// it, and a busy client costs the issuer one request per token and period.
const DefaultIntrospectionCache = time.Minute

// cacheFor returns how long an active answer is trusted; 0 means until
// the token's expiry.
func (in *Introspection) cacheFor() time.Duration {
	switch {
	case in.CacheFor < 0:
		return 0
	case in.CacheFor == 0:
		return DefaultIntrospectionCache
	}
	return in.CacheFor
}

// check validates an introspection configuration; nil is valid (none).
func (in *Introspection) check() error {
	if in == nil {
		return nil
	}
	if in.ClientID == "" || in.Secret.Reveal() == "" {
		return errors.New("introspection needs a client id and a secret")
	}
	if in.Endpoint != "" {
		if err := checkEndpoint(in.Endpoint); err != nil {
			return fmt.Errorf("introspection endpoint: %w", err)
		}
	}
	return nil
}

// introspectionNoExpiry is how long an active token whose introspection
// gives no "exp" is taken for valid before it is introspected again.
const introspectionNoExpiry = time.Minute

// introspect checks an opaque token at the introspection endpoint of each
// issuer that has one configured, in order, until one says it is active.
// It checks what a JWT's claims are checked for, but the signature (the
// issuer vouched for it) and the audience (Verify's). It also returns
// until when the answer may be trusted, by the issuer's CacheFor (zero: no
// bound but the token's expiry).
func (v *Verifier) introspect(ctx context.Context, token string, now time.Time) (*Principal, time.Time, error) {
	var errs []error
	for _, is := range v.order {
		if is.introspection == nil {
			continue
		}
		claims, err := is.introspect(ctx, token)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if claims == nil {
			continue // not active at this issuer
		}
		var until time.Time
		if d := is.introspection.cacheFor(); d > 0 {
			until = now.Add(d)
		}
		p, err := v.activeToken(is, claims, now)
		return p, until, err
	}
	if len(errs) > 0 {
		return nil, time.Time{}, errors.Join(errs...)
	}
	for _, is := range v.order {
		if is.introspection != nil {
			return nil, time.Time{}, fmt.Errorf("%w: introspection says so", ErrInactive)
		}
	}
	return nil, time.Time{}, fmt.Errorf("%w: not a JWT, and no issuer is configured for introspection", ErrMalformed)
}

// activeToken checks the answer of is's introspection for a token it
// says is active, and returns its principal.
func (v *Verifier) activeToken(is *issuer, claims map[string]any, now time.Time) (*Principal, error) {
	if iss, ok := claims["iss"]; ok && iss != is.id {
		return nil, fmt.Errorf("%w: introspection at %s answered for issuer %v", ErrUntrustedIssuer, is.id, iss)
	}
	if tt := claimString(claims, "token_type"); tt != "" && !strings.EqualFold(tt, "bearer") {
		return nil, fmt.Errorf("%w: a %q token, not a bearer access token", ErrInactive, tt)
	}
	if _, ok := claims["exp"]; !ok {
		claims["exp"] = float64(now.Add(introspectionNoExpiry).Unix())
	}
	exp, err := v.checkTimes(claims, now)
	if err != nil {
		return nil, err
	}
	p := principalOf(is.id, claims, exp)
	if p.Subject == "" {
		return nil, fmt.Errorf(`%w: introspection gave no "sub" nor client id`, ErrMalformed)
	}
	return p, nil
}

// introspect asks the issuer about token. It returns the answer's members
// when the token is active, nil when it is not. While the endpoint refuses
// the resource server's credentials, it asks again only when a retry is
// due, and returns that refusal at once meanwhile.
func (is *issuer) introspect(ctx context.Context, token string) (map[string]any, error) {
	if err := is.credentialsRefused(); err != nil {
		return nil, err
	}
	claims, err := is.askIntrospection(ctx, token)
	is.credentialsAnswer(err)
	return claims, err
}

// askIntrospection is one request to the introspection endpoint.
func (is *issuer) askIntrospection(ctx context.Context, token string) (map[string]any, error) {
	endpoint := is.introspection.Endpoint
	if endpoint == "" {
		m, err := is.metadata(ctx)
		if err != nil {
			return nil, err
		}
		if m.IntrospectionEndpoint == "" {
			return nil, fmt.Errorf("%w: issuer %s has no introspection_endpoint", ErrUnavailable, is.id)
		}
		endpoint = m.IntrospectionEndpoint
	}
	ctx, cancel := context.WithTimeout(ctx, is.timeout)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 section 2.3.1: both form-encoded before the Basic encoding.
	req.SetBasicAuth(url.QueryEscape(is.introspection.ClientID), url.QueryEscape(is.introspection.Secret.Reveal()))
	resp, err := is.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: introspection at %s: %w", ErrUnavailable, is.id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return nil, fmt.Errorf("%w: introspection at %s: %w", ErrUnavailable, is.id, err)
	}
	// RFC 7662 section 2.1: the endpoint authenticates its caller, and
	// refuses it as a token endpoint would (RFC 6749 section 5.2: 401, or
	// 400 invalid_client).
	code := oauthErrorCode(body)
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden ||
		resp.StatusCode == http.StatusBadRequest && code == "invalid_client" {
		why := ""
		if code != "" {
			why = fmt.Sprintf(" (error %q)", code)
		}
		return nil, fmt.Errorf("%w: %w: introspection at %s: client %q: %w%s", ErrUnavailable, ErrIntrospectionRefused,
			is.id, is.introspection.ClientID, statusError(resp.StatusCode), why)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: introspection at %s: %w", ErrUnavailable, is.id, statusError(resp.StatusCode))
	}
	claims, active, err := ParseIntrospection(body)
	if err != nil {
		return nil, fmt.Errorf("%w: introspection at %s: %w", ErrUnavailable, is.id, err)
	}
	if !active {
		return nil, nil
	}
	return claims, nil
}

// oauthErrorCode returns the "error" of an OAuth error response (RFC 6749
// section 5.2) when it is a plain code (at most 64 visible ASCII
// characters, no quote nor backslash), else "". The code is the issuer's
// word for why, fit for a log line; the description is left out, as any
// text the issuer chose.
func oauthErrorCode(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || len(e.Error) > 64 || strings.ContainsFunc(e.Error, func(r rune) bool {
		return r < 0x21 || r > 0x7e || r == '"' || r == '\\'
	}) {
		return ""
	}
	return e.Error
}

// ParseIntrospection decodes an introspection response (RFC 7662 section
// 2.2): its members, and whether "active" is true (a boolean; anything
// else is not active).
func ParseIntrospection(body []byte) (claims map[string]any, active bool, err error) {
	claims, err = decodeClaims(body)
	if err != nil {
		return nil, false, fmt.Errorf("introspection response: %w", err)
	}
	active, _ = claims["active"].(bool)
	return claims, active, nil
}

// credentialsRefused returns the endpoint's last refusal of the resource
// server's credentials while a new attempt is not due: a wrong secret
// costs the issuer one request per retry period, not one per token.
func (is *issuer) credentialsRefused() error {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.credsErr != nil && is.now().Before(is.credsRetry) {
		return is.credsErr
	}
	return nil
}

// credentialsAnswer records what an introspection request said of the
// resource server's credentials (err is its outcome), and logs a change.
func (is *issuer) credentialsAnswer(err error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	now := is.now()
	switch {
	case errors.Is(err, ErrIntrospectionRefused):
		if is.credsErr == nil {
			is.log.Error("oauth: the issuer refused the introspection credentials: opaque tokens cannot be verified",
				"issuer", is.id, "client_id", is.introspection.ClientID, "err", err)
		}
		is.credsErr, is.credsChecked = err, true
	case err != nil && !is.credsChecked:
		// Unreachable before it ever answered: the credentials are still
		// to be checked, after the same wait.
	case err != nil:
		return // the endpoint failed otherwise: nothing learnt of the credentials
	default:
		if is.credsErr != nil {
			is.log.Info("oauth: the issuer took the introspection credentials", "issuer", is.id)
		}
		is.credsErr, is.credsChecked, is.credsFails = nil, true, 0
		return
	}
	is.credsFails++
	is.credsRetry = now.Add(min(retryMin<<min(is.credsFails-1, 10), retryMax))
}

// credentialsDue returns when the resource server's introspection
// credentials should next be checked (Run does, ahead of any token): at
// once if never checked, at the retry time while refused or unreachable;
// false when they need no check.
func (is *issuer) credentialsDue() (time.Time, bool) {
	if is.introspection == nil {
		return time.Time{}, false
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.credsChecked && is.credsErr == nil {
		return time.Time{}, false
	}
	return is.credsRetry, true
}

// checkCredentials asks the introspection endpoint about a token that
// does not exist: with good credentials it answers "not active"; with bad
// ones it refuses, which Status then reports before any client's token
// meets it.
func (is *issuer) checkCredentials(ctx context.Context) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	_, _ = is.introspect(ctx, "credentials-check-"+hex.EncodeToString(b[:])) // recorded by introspect
}
