package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ServerMetadata is an authorization server's metadata (RFC 8414, and the
// OpenID Connect Discovery document, which shares its members): the
// members this package and its callers use. Unknown members are ignored.
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint,omitempty"`
	TokenEndpoint                     string   `json:"token_endpoint,omitempty"`
	JWKSURI                           string   `json:"jwks_uri,omitempty"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	IntrospectionEndpoint             string   `json:"introspection_endpoint,omitempty"`
	RevocationEndpoint                string   `json:"revocation_endpoint,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	ResponseTypesSupported            []string `json:"response_types_supported,omitempty"`
	GrantTypesSupported               []string `json:"grant_types_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
}

// maxDocument bounds the metadata and key set documents this package reads:
// real ones are a few KiB.
const maxDocument = 1 << 20

// MetadataURLs returns the addresses where the metadata of issuer may be
// found, in the order DiscoverServer tries them, as the MCP authorization
// specification lists them: RFC 8414's (the well-known name inserted
// between the host and the issuer's path) and OpenID Connect Discovery's
// (appended to the issuer; also inserted, for an issuer with a path). For
// an issuer with a path, RFC 8414's name appended to it comes last: Okta
// and Keycloak serve it there.
func MetadataURLs(issuer string) ([]string, error) {
	u, err := parseIssuer(issuer)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(u.Path, "/")
	at := func(p string) string {
		v := *u
		v.Path, v.RawPath = p, ""
		return v.String()
	}
	const oauthName, oidcName = "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"
	if path == "" {
		return []string{at(oauthName), at(oidcName)}, nil
	}
	return []string{
		at(oauthName + path),
		at(oidcName + path),
		at(path + oidcName),
		at(path + oauthName),
	}, nil
}

// parseIssuer checks an issuer identifier (RFC 8414 section 2): an absolute
// URL without query or fragment, https unless its host is a loopback one.
func parseIssuer(issuer string) (*url.URL, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("issuer %q: %w", issuer, err)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("issuer %q: an issuer is an absolute URL without query, fragment or user", issuer)
	}
	if err := checkScheme(u); err != nil {
		return nil, fmt.Errorf("issuer %q: %w", issuer, err)
	}
	return u, nil
}

// checkScheme accepts https, and http to a loopback host only (tests, and
// an authorization server beside the hub).
func checkScheme(u *url.URL) error {
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return errors.New("must be https (http only to a loopback address)")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DiscoverServer fetches the metadata of the authorization server issuer,
// trying each of MetadataURLs in turn until one answers, and checks that
// the document names the same issuer (RFC 8414 section 3.3: the defence
// against a server speaking for another). A document that is not found
// (any 4xx) moves on to the next address; any other failure stops, wrapped
// in ErrUnavailable.
func DiscoverServer(ctx context.Context, client *http.Client, issuer string) (*ServerMetadata, error) {
	urls, err := MetadataURLs(issuer)
	if err != nil {
		return nil, err
	}
	var tried []string
	for _, u := range urls {
		body, _, err := getDocument(ctx, client, u)
		var status statusError
		if errors.As(err, &status) && status >= 400 && status < 500 {
			tried = append(tried, fmt.Sprintf("%s: %d", u, int(status)))
			continue
		}
		if err != nil {
			return nil, err
		}
		m, err := ParseServerMetadata(body, issuer)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, u, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: no metadata for issuer %s (%s)", ErrUnavailable, issuer, strings.Join(tried, ", "))
}

// ParseServerMetadata decodes an authorization server's metadata document
// and checks that it names issuer (exactly: RFC 8414 section 3.3) and that
// each endpoint it gives is a URL this package would fetch (https, or http
// to loopback).
func ParseServerMetadata(body []byte, issuer string) (*ServerMetadata, error) {
	var m ServerMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if m.Issuer != issuer {
		return nil, fmt.Errorf("metadata: issuer %q, expected %q", m.Issuer, issuer)
	}
	for name, v := range map[string]string{
		"authorization_endpoint": m.AuthorizationEndpoint,
		"token_endpoint":         m.TokenEndpoint,
		"jwks_uri":               m.JWKSURI,
		"registration_endpoint":  m.RegistrationEndpoint,
		"introspection_endpoint": m.IntrospectionEndpoint,
		"revocation_endpoint":    m.RevocationEndpoint,
	} {
		if v == "" {
			continue
		}
		if err := checkEndpoint(v); err != nil {
			return nil, fmt.Errorf("metadata: %s: %w", name, err)
		}
	}
	return &m, nil
}

// checkEndpoint checks a URL found in a document before it is fetched.
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	return checkScheme(u)
}

// statusError is an HTTP status other than 200 from a document's address.
type statusError int

func (e statusError) Error() string {
	return fmt.Sprintf("HTTP status %d", int(e))
}

// getDocument fetches a JSON document: status 200, a JSON content type (or
// none), at most maxDocument bytes. Errors wrap ErrUnavailable, and a
// status other than 200 is also a statusError.
func getDocument(ctx context.Context, client *http.Client, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
		return nil, nil, fmt.Errorf("%w: GET %s: %w", ErrUnavailable, u, statusError(resp.StatusCode))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			return nil, nil, fmt.Errorf("%w: GET %s: content type %q, not JSON", ErrUnavailable, u, mt)
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: GET %s: %w", ErrUnavailable, u, err)
	}
	if len(body) > maxDocument {
		return nil, nil, fmt.Errorf("%w: GET %s: document larger than %d bytes", ErrUnavailable, u, maxDocument)
	}
	return body, resp.Header, nil
}
