package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// OAuthClient is the connector as an OAuth client of a protected resource:
// of the hub (Options.OAuth), or of an upstream HTTP server (Server.OAuth),
// each with credentials of its own. Tokens come by the client credentials
// grant (ClientID and Secret), or by the refresh token grant from a token
// kept in RefreshTokenFile.
type OAuthClient struct {
	// ClientID is the client's id at the authorization server.
	ClientID string
	// Secret is the client's secret. Without RefreshTokenFile it is the
	// client credentials grant's; with it, it authenticates a confidential
	// client's refreshes (a public client has none).
	Secret oauth.Secret
	// SecretFile, when Secret is empty, holds the secret: it is read again
	// for every token request, so that a secret rotated in its file (a
	// mounted Kubernetes secret) is used without a restart.
	SecretFile string
	// RefreshTokenFile holds a refresh token, its first line: tokens are
	// got by the refresh token grant, and a refresh token the server
	// rotates is written back to the file (atomically, mode 0600). The file
	// is read again before each refresh, so that a token put there by hand
	// replaces a dead one without a restart.
	RefreshTokenFile string
	// Issuer is the authorization server. Empty: it is discovered from the
	// resource's Protected Resource Metadata (RFC 9728), which a 401 of
	// the resource points at, and which names the resource identifier.
	Issuer string
	// Resource is the resource identifier (RFC 8707) tokens are asked for.
	// Empty: the one the metadata names, which must cover the URL the
	// connector reaches (or, with Issuer, that URL itself). Set it when the
	// connector reaches the resource at another address than its public one.
	Resource string
	// Scopes are asked for. Empty: the scopes of the resource's challenge,
	// else its metadata's scopes_supported.
	Scopes []string
	// Audience, when set, is sent as "audience", for authorization servers
	// that read it instead of the resource indicator (Auth0).
	Audience string
}

// check refuses an incomplete client, and a secret file that cannot be
// read.
func (o *OAuthClient) check() error {
	switch {
	case o.ClientID == "":
		return errors.New("an OAuth client id is needed")
	case o.RefreshTokenFile == "" && o.Secret.Reveal() == "" && o.SecretFile == "":
		return errors.New("an OAuth client secret (client credentials) or a refresh token file is needed")
	}
	if _, err := o.secret(); err != nil {
		return err
	}
	if o.Issuer != "" {
		if _, err := oauth.MetadataURLs(o.Issuer); err != nil {
			return err
		}
	}
	if o.Resource != "" {
		if _, err := oauth.ResourceMetadataURL(o.Resource); err != nil {
			return err
		}
	}
	return nil
}

// secret returns the client's secret: Secret, else SecretFile's; none for
// a public client.
func (o *OAuthClient) secret() (oauth.Secret, error) {
	if o.Secret.Reveal() != "" || o.SecretFile == "" {
		return o.Secret, nil
	}
	return oauth.SecretFromFile(o.SecretFile)
}

// grant names the grant for logs.
func (o *OAuthClient) grant() string {
	if o.RefreshTokenFile != "" {
		return "refresh_token"
	}
	return "client_credentials"
}

// Bounds of the wait after a failure to get a token, during which
// credentials.token answers the same error without asking again: however
// many connections and requests need a token, a server that refuses the
// client is asked at most once per wait.
const (
	tokenRetryMin = time.Second
	tokenRetryMax = 30 * time.Second
)

// renewShare is the share of a token's lifetime left when it is renewed, if
// that is less than oauth.DefaultRenewBefore: a token of 10 minutes is
// renewed 30 s before its end, one of 2 s after 1.6 s.
const renewShare = 5

// credentials get and keep the access tokens of one OAuthClient for one
// resource, the URL target. Discovery waits for the first token. A token
// is renewed before it expires; one that the resource refuses is replaced
// (refused). While a renewal runs, the token still valid is used. Safe for
// concurrent use: one request to the authorization server at a time.
type credentials struct {
	cfg    OAuthClient
	target string          // the URL requests go to (http or https)
	ctx    context.Context // bounds every request to the authorization server: Run's
	http   *http.Client    // discovery and token requests
	log    *slog.Logger
	what   string // names the resource in logs: "the hub", "the upstream server"

	mu       sync.Mutex
	fetch    func(context.Context) (*oauth2.Token, error) // nil until discovered
	tok      *oauth2.Token
	renewAt  time.Time
	fetching chan struct{} // closed when the fetch under way ends; nil when none
	retryAt  time.Time     // no new attempt before
	wait     time.Duration // the last wait after a failure to get a token
	lastErr  error
	// Refusals by the resource (refused).
	refusedAt time.Time
	strikes   int
}

// newCredentials makes the credentials of cfg for the resource at target.
func newCredentials(ctx context.Context, cfg *OAuthClient, target, what string, log *slog.Logger) *credentials {
	return &credentials{cfg: *cfg, target: target, ctx: ctx, what: what, log: log,
		http: &http.Client{Timeout: link.DialTimeout}}
}

// token returns an access token for the resource. challenges are the
// WWW-Authenticate values of the resource's 401 that asked for one, if
// any: discovery starts from them. It answers at once while a token is at
// hand (even one being renewed), and with the last error while the wait
// after a failure runs.
func (c *credentials) token(ctx context.Context, challenges []string) (string, error) {
	for {
		c.mu.Lock()
		now := time.Now()
		tok := c.tok
		usable := tok != nil && (tok.Expiry.IsZero() || now.Before(tok.Expiry))
		switch {
		case usable && now.Before(c.renewAt):
			c.mu.Unlock()
			return tok.AccessToken, nil
		case c.fetching != nil && usable:
			c.mu.Unlock()
			return tok.AccessToken, nil
		case c.fetching != nil:
			ch := c.fetching
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return "", ctx.Err()
			}
		case now.Before(c.retryAt):
			err := c.lastErr
			c.mu.Unlock()
			if usable {
				return tok.AccessToken, nil
			}
			return "", err
		}
		ch := make(chan struct{})
		c.fetching = ch
		c.mu.Unlock()

		next, err := c.get(challenges)
		c.mu.Lock()
		c.fetching = nil
		close(ch)
		if err != nil {
			c.failed(err)
			wait := c.wait
			c.mu.Unlock()
			if usable {
				c.log.Warn("cannot renew the access token for "+c.what+"; using the current one until it expires",
					"err", err, "expires_in", link.Round(time.Until(tok.Expiry)), "retry_in", wait)
				return tok.AccessToken, nil
			}
			c.log.Error("cannot get an access token for "+c.what, "err", err, "retry_in", wait)
			return "", err
		}
		c.tok, c.wait, c.lastErr = next, 0, nil
		c.renewAt = renewAt(now, next.Expiry)
		c.mu.Unlock()
		c.log.Debug("got an access token for "+c.what, "grant", c.cfg.grant(), "expires_in", expiresIn(next))
		return next.AccessToken, nil
	}
}

// failed starts the wait after a failure: it doubles from tokenRetryMin to
// tokenRetryMax. Called under mu.
func (c *credentials) failed(err error) {
	c.wait = min(max(2*c.wait, tokenRetryMin), tokenRetryMax)
	c.retryAt, c.lastErr = time.Now().Add(c.wait), err
}

// renewAt is when a token got at now that expires at expiry is renewed:
// oauth.DefaultRenewBefore before its expiry, or when a fifth of its life
// is left if that is later. Never, without an expiry.
func renewAt(now, expiry time.Time) time.Time {
	if expiry.IsZero() {
		return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return expiry.Add(-min(oauth.DefaultRenewBefore, expiry.Sub(now)/renewShare))
}

func expiresIn(t *oauth2.Token) any {
	if t.Expiry.IsZero() {
		return "never"
	}
	return link.Round(time.Until(t.Expiry))
}

// current returns the token to send now: none before the resource first
// asked for one (see token), else token's.
func (c *credentials) current(ctx context.Context) string {
	c.mu.Lock()
	known := c.fetch != nil
	c.mu.Unlock()
	if !known {
		return ""
	}
	tok, _ := c.token(ctx, nil)
	return tok
}

// refused says that the resource refused tok: the next token is a new one.
// Refusals in a row (of tokens got since the last refusal, within
// tokenRetryMax of it) start a wait before the next request for a token,
// doubling from tokenRetryMin: a resource that refuses every token costs
// the authorization server a request per wait, not one per request of the
// connector's. The first refusal is replaced at once.
func (c *credentials) refused(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == nil || c.tok.AccessToken != tok {
		return // refused already
	}
	now := time.Now()
	if now.Sub(c.refusedAt) > tokenRetryMax {
		c.strikes = 0
	}
	c.tok, c.refusedAt = nil, now
	c.strikes++
	if c.strikes > 1 {
		wait := min(tokenRetryMin<<min(c.strikes-2, 5), tokenRetryMax)
		c.retryAt = now.Add(wait)
		c.lastErr = fmt.Errorf("%s refused %d new access tokens in a row", c.what, c.strikes)
	}
}

// get discovers the authorization server if it is not known yet, then
// asks it for a token. Called by one goroutine at a time.
func (c *credentials) get(challenges []string) (*oauth2.Token, error) {
	c.mu.Lock()
	fetch := c.fetch
	c.mu.Unlock()
	if fetch == nil {
		var err error
		if fetch, err = c.discover(challenges); err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.fetch = fetch
		c.mu.Unlock()
	}
	tok, err := fetch(c.ctx)
	if err != nil {
		return nil, tokenError(err)
	}
	if tok.AccessToken == "" {
		return nil, errors.New("the authorization server answered without an access token")
	}
	return tok, nil
}

// discover finds the token endpoint, the resource indicator and the scopes,
// and returns how to get a token.
func (c *credentials) discover(challenges []string) (func(context.Context) (*oauth2.Token, error), error) {
	resource, scopes, issuer := c.cfg.Resource, c.cfg.Scopes, c.cfg.Issuer
	var server *oauth.ServerMetadata
	if issuer != "" {
		if resource == "" {
			resource = c.target
		}
		var err error
		if server, err = oauth.DiscoverServer(c.ctx, c.http, issuer); err != nil {
			return nil, fmt.Errorf("the authorization server %s: %w", issuer, err)
		}
	} else {
		if challenges == nil {
			challenges = c.probe()
		}
		requested := resource
		if requested == "" {
			requested = c.target
		}
		d, err := oauth.DiscoverResource(c.ctx, c.http, requested, challenges)
		if err != nil {
			return nil, fmt.Errorf("discovering the authorization server of %s: %w", link.Redact(requested), err)
		}
		resource, server, issuer = d.Resource.Resource, d.Server, d.Server.Issuer
		if len(scopes) == 0 {
			scopes = d.Scope
		}
	}
	if server.TokenEndpoint == "" {
		return nil, fmt.Errorf("the authorization server %s has no token endpoint", issuer)
	}
	c.log.Info("OAuth: getting access tokens for "+c.what, "issuer", issuer, "resource", resource,
		"scopes", strings.Join(scopes, " "), "grant", c.cfg.grant(), "client_id", c.cfg.ClientID)
	ctx := context.WithValue(c.ctx, oauth2.HTTPClient, c.http)
	if c.cfg.RefreshTokenFile != "" {
		r := newRefresher(&c.cfg, server.TokenEndpoint, scopes, c.log)
		return func(context.Context) (*oauth2.Token, error) { return r.token(ctx) }, nil
	}
	// A source of its own per token: the renewal is credentials', a
	// refused token must not come back from a source's cache, and the
	// secret is read anew.
	return func(context.Context) (*oauth2.Token, error) {
		secret, err := c.cfg.secret()
		if err != nil {
			return nil, err
		}
		cc := &oauth.ClientCredentials{TokenURL: server.TokenEndpoint, ClientID: c.cfg.ClientID, Secret: secret,
			Scopes: scopes, Resource: resource, Audience: c.cfg.Audience, HTTPClient: c.http}
		src, err := cc.TokenSource(ctx)
		if err != nil {
			return nil, err
		}
		return src.Token()
	}, nil
}

// probe asks the resource, without a token, for the challenge of its 401:
// a plain GET of the URL. nil when it answers otherwise.
func (c *credentials) probe() []string {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.target, nil)
	if err != nil {
		return nil
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusUnauthorized {
		return nil
	}
	return resp.Header.Values("WWW-Authenticate")
}

// tokenError says why the authorization server gave no token, in its own
// words (error and error_description) when it gave them, never with the
// request or the body otherwise.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return fmt.Errorf("token request: %w", err)
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	msg := fmt.Sprintf("the authorization server refused the token request (HTTP %d", status)
	if re.ErrorCode != "" {
		msg += " " + re.ErrorCode
	}
	msg += ")"
	if re.ErrorDescription != "" {
		msg += ": " + clip([]byte(re.ErrorDescription), 200)
	}
	switch re.ErrorCode {
	case "invalid_client", "unauthorized_client":
		msg += "; check the client id and its secret"
	case "invalid_grant":
		msg += "; the refresh token is no longer valid: put a new one in its file"
	case "invalid_scope", "invalid_target":
		msg += "; check the scopes and the resource the client may ask for"
	}
	return errors.New(msg)
}

// httpURL is the http(s) URL of a ws(s) one, without its query: the hub's
// endpoint as a resource.
func httpURL(ws string) string {
	u, err := url.Parse(ws)
	if err != nil {
		return ws
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// noTokenError is a dial that did not happen for want of an access token.
type noTokenError struct{ err error }

func (e *noTokenError) Error() string { return "no access token: " + e.err.Error() }
func (e *noTokenError) Unwrap() error { return e.err }

// status is the HTTP status of a refused WebSocket handshake, or 0.
func status(err error) int {
	var he *peer.HandshakeError
	if errors.As(err, &he) {
		return he.StatusCode
	}
	return 0
}

// refusal says why the resource refused tok (err is the refusal), in the
// words of the challenge it answers the same token with on a plain GET:
// "the hub refused the access token (HTTP 401 invalid_token: the access
// token is not meant for this resource)".
func (c *credentials) refusal(ctx context.Context, tok string, err error) error {
	msg := fmt.Sprintf("%s refused the access token (HTTP %d", c.what, status(err))
	req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, c.target, nil)
	if rerr == nil {
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, rerr := c.http.Do(req); rerr == nil {
			drain(resp)
			if why := challengeError(resp.Header); why != "" {
				msg += " " + why
			}
		}
	}
	return &refusedError{msg: msg + ")", err: err}
}

// challengeError is the error and error_description of a response's Bearer
// challenge: "invalid_token: the access token expired"; "" without one.
func challengeError(h http.Header) string {
	ch, ok := oauth.BearerChallenge(h.Values("WWW-Authenticate"))
	if !ok || ch.Param("error") == "" {
		return ""
	}
	why := ch.Param("error")
	if d := ch.Param("error_description"); d != "" {
		why += ": " + clip([]byte(d), 200)
	}
	return why
}

// refusedError is a resource's refusal of an access token.
type refusedError struct {
	msg string
	err error
}

func (e *refusedError) Error() string { return e.msg }
func (e *refusedError) Unwrap() error { return e.err }
