package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Secret is a client secret. It prints as "[redacted]" whatever the verb
// (%v, %+v, %#v, %s), in JSON and in slog: only Reveal gives it, for the
// one place that sends it.
type Secret struct {
	s string
}

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{s} }

// Reveal returns the secret itself.
func (s Secret) Reveal() string { return s.s }

const redacted = "[redacted]"

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]".
func (Secret) GoString() string { return redacted }

// LogValue returns "[redacted]".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON returns "[redacted]", quoted.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// SecretFromFile reads a secret from a file (a mounted Kubernetes or
// Docker secret, say), without its trailing newline. An empty one is an
// error. The error never holds the file's content.
func SecretFromFile(path string) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Secret{}, fmt.Errorf("secret: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return Secret{}, fmt.Errorf("secret: %s is empty", path)
	}
	return Secret{s}, nil
}

// SecretFromEnv reads a secret from the environment variable name. Unset
// or empty is an error. Prefer a file: a process's environment is readable
// by whoever may inspect the process.
func SecretFromEnv(name string) (Secret, error) {
	s := os.Getenv(name)
	if s == "" {
		return Secret{}, fmt.Errorf("secret: environment variable %s is not set", name)
	}
	return Secret{s}, nil
}

// DefaultRenewBefore is how long before its expiry a token of
// ClientCredentials is renewed.
const DefaultRenewBefore = 30 * time.Second

// ClientCredentials gets access tokens for a machine client (the client
// credentials grant, RFC 6749 section 4.4) and renews them before they
// expire: what a connector presents to the hub, or to an upstream server.
type ClientCredentials struct {
	// TokenURL is the authorization server's token endpoint (its metadata's
	// token_endpoint: see DiscoverServer, DiscoverResource).
	TokenURL string
	// ClientID and Secret are the client's credentials, sent with
	// client_secret_basic.
	ClientID string
	Secret   Secret
	// Scopes are the scopes asked for; empty leaves it to the server.
	Scopes []string
	// Resource is the resource indicator (RFC 8707) asked for: the URL of
	// the resource the tokens are for, which becomes their audience. Empty
	// asks for none (some servers need Audience instead).
	Resource string
	// Audience, when set, is sent as "audience", the parameter Auth0 and
	// some others read instead of (or beside) "resource".
	Audience string
	// RenewBefore is how long before expiry a token is renewed; 0 means
	// DefaultRenewBefore. A token that lives less than that is fetched
	// anew for every use.
	RenewBefore time.Duration
	// HTTPClient makes the token requests; nil means a client with a
	// 30-second timeout.
	HTTPClient *http.Client
}

// TokenSource returns a source of access tokens for c: the first Token
// asks the server, later ones reuse it until RenewBefore its expiry. ctx
// bounds every request the source makes: it should live as long as the
// source is used. A source is safe for concurrent use; one request runs at
// a time.
func (c *ClientCredentials) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	if c.ClientID == "" || c.Secret.Reveal() == "" {
		return nil, errors.New("oauth: client credentials need a client id and a secret")
	}
	if err := checkEndpoint(c.TokenURL); err != nil {
		return nil, fmt.Errorf("oauth: token URL: %w", err)
	}
	params := url.Values{}
	if c.Resource != "" {
		params.Set("resource", c.Resource)
	}
	if c.Audience != "" {
		params.Set("audience", c.Audience)
	}
	cc := clientcredentials.Config{
		ClientID:       c.ClientID,
		ClientSecret:   c.Secret.Reveal(),
		TokenURL:       c.TokenURL,
		Scopes:         c.Scopes,
		EndpointParams: params,
		AuthStyle:      oauth2.AuthStyleInHeader,
	}
	client := c.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	// cc.Token asks the server on every call (clientcredentials' own
	// TokenSource would reuse a token until 10 s before its expiry, beneath
	// ours): the reuse source renews RenewBefore the expiry.
	fetch := tokenSourceFunc(func() (*oauth2.Token, error) { return cc.Token(ctx) })
	return oauth2.ReuseTokenSourceWithExpiry(nil, fetch, orDefault(c.RenewBefore, DefaultRenewBefore)), nil
}

// tokenSourceFunc adapts a function to oauth2.TokenSource.
type tokenSourceFunc func() (*oauth2.Token, error)

// Token calls f.
func (f tokenSourceFunc) Token() (*oauth2.Token, error) { return f() }
