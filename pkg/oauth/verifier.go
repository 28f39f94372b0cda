package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Defaults and bounds of Config.
const (
	// MaxLeeway is the most clock skew allowed on "exp", "nbf" and "iat",
	// and the default.
	MaxLeeway = 60 * time.Second
	// DefaultMaxTokenSize bounds a token's length: larger ones are refused
	// before any parsing. Real access tokens are 1 to 4 KiB.
	DefaultMaxTokenSize = 16 << 10
	// DefaultCacheEntries bounds how many verified tokens are remembered.
	DefaultCacheEntries = 10000
	// DefaultFetchTimeout bounds one fetch from an issuer (metadata, keys,
	// introspection).
	DefaultFetchTimeout = 10 * time.Second
)

// DefaultAlgorithms is the allow-list of signature algorithms when
// Config.Algorithms is empty: every asymmetric algorithm of JWA that
// go-jose verifies. "none" and the HMAC algorithms (HS256...) are never
// accepted, whatever the configuration: an issuer's keys are public, and a
// token "signed" with one as an HMAC secret proves nothing.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Config configures a Verifier.
type Config struct {
	// Issuers are the trusted authorization servers. At least one.
	Issuers []IssuerConfig
	// Audiences are extra accepted "aud" values, beside the resource that
	// each Verify asks for: for authorization servers that cannot put a
	// resource indicator (RFC 8707) into "aud" (a client id, an
	// "api://..." application id URI).
	Audiences []string
	// Algorithms narrows the allow-list of signature algorithms; empty
	// means DefaultAlgorithms. Only members of DefaultAlgorithms may appear.
	Algorithms []string
	// Leeway is the clock skew allowed on "exp", "nbf" and "iat": 0 means
	// MaxLeeway, a negative value none; at most MaxLeeway.
	Leeway time.Duration
	// MaxTokenSize bounds a token's length in bytes; 0 means
	// DefaultMaxTokenSize.
	MaxTokenSize int
	// CacheEntries bounds the cache of verified tokens; 0 means
	// DefaultCacheEntries, a negative value turns the cache off.
	CacheEntries int
	// HTTPClient fetches from the issuers; nil means a client of its own.
	// Each fetch is bounded by FetchTimeout whatever its Timeout.
	HTTPClient *http.Client
	// FetchTimeout bounds each fetch; 0 means DefaultFetchTimeout.
	FetchTimeout time.Duration
	// Logger gets the issuers' changes of state (unreachable, ready again);
	// nil means slog.Default(). Tokens are never logged.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. For tests.
	Now func() time.Time
}

// IssuerConfig is one trusted authorization server.
type IssuerConfig struct {
	// Issuer is its identifier, exactly as its tokens' "iss" and its
	// metadata's "issuer" spell it (mind a trailing slash: Auth0 has one):
	// https, or http to a loopback host.
	Issuer string
	// Introspection, when set, lets Verify check opaque (non-JWT) tokens at
	// this issuer's introspection endpoint (RFC 7662).
	Introspection *Introspection
}

// Verifier verifies access tokens for a resource server: JWTs locally, by
// the keys of their issuer, and opaque tokens by introspection. It is safe
// for concurrent use. Its issuers are contacted when first needed, or by
// Run ahead of need.
type Verifier struct {
	issuers   map[string]*issuer
	order     []*issuer // as configured
	audiences map[string]bool
	algs      []jose.SignatureAlgorithm
	leeway    time.Duration
	maxSize   int
	now       func() time.Time
	cache     *tokenCache
	log       *slog.Logger
}

// New returns a Verifier for cfg. It fetches nothing: an issuer that is
// unreachable now is tried again when a token needs it (see Status).
func New(cfg Config) (*Verifier, error) {
	if len(cfg.Issuers) == 0 {
		return nil, errors.New("oauth: no issuer")
	}
	v := &Verifier{
		issuers:   make(map[string]*issuer),
		audiences: make(map[string]bool),
		leeway:    cfg.Leeway,
		maxSize:   orDefault(cfg.MaxTokenSize, DefaultMaxTokenSize),
		now:       cfg.Now,
		log:       cfg.Logger,
	}
	switch {
	case v.leeway == 0:
		v.leeway = MaxLeeway
	case v.leeway < 0:
		v.leeway = 0
	case v.leeway > MaxLeeway:
		return nil, fmt.Errorf("oauth: leeway %s is more than %s", cfg.Leeway, MaxLeeway)
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.log == nil {
		v.log = slog.Default()
	}
	algs, err := allowedAlgorithms(cfg.Algorithms)
	if err != nil {
		return nil, err
	}
	v.algs = algs
	for _, a := range cfg.Audiences {
		v.audiences[a] = true
	}
	if cfg.CacheEntries >= 0 {
		v.cache = newTokenCache(orDefault(cfg.CacheEntries, DefaultCacheEntries))
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultFetchTimeout}
	}
	for _, ic := range cfg.Issuers {
		if _, err := parseIssuer(ic.Issuer); err != nil {
			return nil, fmt.Errorf("oauth: %w", err)
		}
		if v.issuers[ic.Issuer] != nil {
			return nil, fmt.Errorf("oauth: issuer %s given twice", ic.Issuer)
		}
		if err := ic.Introspection.check(); err != nil {
			return nil, fmt.Errorf("oauth: issuer %s: %w", ic.Issuer, err)
		}
		is := &issuer{
			id: ic.Issuer, introspection: ic.Introspection, client: client, log: v.log, now: v.now,
			timeout: orDefault(cfg.FetchTimeout, DefaultFetchTimeout),
		}
		v.issuers[ic.Issuer] = is
		v.order = append(v.order, is)
	}
	return v, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// allowedAlgorithms checks Config.Algorithms against DefaultAlgorithms.
func allowedAlgorithms(names []string) ([]jose.SignatureAlgorithm, error) {
	if len(names) == 0 {
		names = DefaultAlgorithms
	}
	algs := make([]jose.SignatureAlgorithm, 0, len(names))
	for _, n := range names {
		if !slices.Contains(DefaultAlgorithms, n) {
			return nil, fmt.Errorf("oauth: algorithm %q is not allowed (only %v)", n, DefaultAlgorithms)
		}
		algs = append(algs, jose.SignatureAlgorithm(n))
	}
	return algs, nil
}

// Verify checks an access token presented to resource (the resource
// identifier of RFC 8707 / RFC 9728 the request went to, such as
// "https://hub.example.com/mcp") and returns its principal. A refusal wraps
// one of the Err* values of this package (see Describe).
//
// A JWT is verified locally: its algorithm against the allow-list, "iss"
// among the trusted issuers, the signature by that issuer's key (fetching
// its keys if needed), "exp", "nbf" and "iat" with the leeway, and "aud"
// naming resource or one of Config.Audiences. Anything else is an opaque
// token, checked by introspection when an issuer has it configured.
//
// A verified token is remembered until it expires, within the cache's
// bounds, so that its next Verify costs a map lookup; the audience is
// checked on every call.
func (v *Verifier) Verify(ctx context.Context, token, resource string) (*Principal, error) {
	if token == "" {
		return nil, ErrNoToken
	}
	if len(token) > v.maxSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(token), v.maxSize)
	}
	now := v.now()
	if e, ok := v.cache.get(token, now); ok {
		if e.err != nil {
			return nil, e.err
		}
		return v.admit(e.p, resource)
	}
	var p *Principal
	var until time.Time // for an introspected token, the end of its answer's trust
	var err error
	if isJWT(token) {
		p, err = v.verifyJWT(ctx, token, now)
	} else {
		p, until, err = v.introspect(ctx, token, now)
		if errors.Is(err, ErrInactive) {
			v.cache.put(token, cacheEntry{err: err, until: now.Add(inactiveFor)}, now)
		}
	}
	if err != nil {
		return nil, err
	}
	if exp := p.Expiry.Add(v.leeway); until.IsZero() || exp.Before(until) {
		until = exp
	}
	v.cache.put(token, cacheEntry{p: p, until: until}, now)
	return v.admit(p, resource)
}

// admit checks that the token's audience names resource or one of
// Config.Audiences.
func (v *Verifier) admit(p *Principal, resource string) (*Principal, error) {
	for _, a := range p.Audience {
		if (a == resource && resource != "") || v.audiences[a] {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: its audience is %q, not %q", ErrAudience, p.Audience, resource)
}

// Status returns what is known of each trusted issuer, in configuration
// order. It fetches nothing.
func (v *Verifier) Status() []IssuerStatus {
	out := make([]IssuerStatus, len(v.order))
	for i, is := range v.order {
		out[i] = is.status()
	}
	return out
}

// Ready returns nil when every issuer's keys are at hand (even if a later
// fetch failed) and no introspection endpoint refuses the resource
// server's credentials, else an error naming each issuer that is not ready
// and why. It fetches nothing: a readiness probe may call it freely.
func (v *Verifier) Ready() error {
	var errs []error
	for _, st := range v.Status() {
		if !st.Ready {
			errs = append(errs, fmt.Errorf("issuer %s: %w", st.Issuer, st.Err))
		}
		if st.Introspection != nil {
			errs = append(errs, fmt.Errorf("issuer %s: %w", st.Issuer, st.Introspection))
		}
	}
	return errors.Join(errs...)
}

// Run keeps the issuers' metadata and keys at hand until ctx ends: it
// fetches them at once, again after a failure (after a growing wait), and
// shortly before they age out, so that no request waits for a fetch. It
// also checks each introspecting issuer's credentials once (and again
// while they are refused), so that Ready reports a wrong secret before a
// client's token meets it. It
// returns ctx's error. Running it is optional (Verify fetches what it
// needs) but recommended: an issuer that is down at start is then logged
// and retried without waiting for a token to need it.
func (v *Verifier) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		now := v.now()
		next := now.Add(KeysMaxAge)
		for _, is := range v.order {
			if !is.due().After(now) {
				_ = is.refresh(ctx) // logged by refresh; Status reports it
			}
			next = minTime(next, is.due())
			if at, ok := is.credentialsDue(); ok && !at.After(now) {
				is.checkCredentials(ctx) // logged by credentialsAnswer; Status reports it
			}
			if at, ok := is.credentialsDue(); ok {
				next = minTime(next, at)
			}
		}
		timer.Reset(max(next.Sub(v.now()), retryMin))
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
