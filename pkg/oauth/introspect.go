package oauth

import (
	"context"
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
// issuer vouched for it) and the audience (Verify's).
func (v *Verifier) introspect(ctx context.Context, token string, now time.Time) (*Principal, error) {
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
		return v.activeToken(is, claims, now)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, is := range v.order {
		if is.introspection != nil {
			return nil, fmt.Errorf("%w: introspection says so", ErrInactive)
		}
	}
	return nil, fmt.Errorf("%w: not a JWT, and no issuer is configured for introspection", ErrMalformed)
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
// when the token is active, nil when it is not.
func (is *issuer) introspect(ctx context.Context, token string) (map[string]any, error) {
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
