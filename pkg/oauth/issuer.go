package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// KeyRefreshInterval is how often, at most, an issuer's keys are fetched
// again because a token named a key id they lack: a flood of tokens with
// made-up key ids costs the issuer one request per interval, not one each.
const KeyRefreshInterval = 30 * time.Second

// The wait after a failed fetch grows from retryMin to retryMax; meanwhile
// a token that needs the issuer gets the last error at once instead of a
// new attempt, so an unreachable issuer does not hold every request for a
// connection timeout.
const (
	retryMin = time.Second
	retryMax = time.Minute
)

// metadataMaxAge is how long an issuer's metadata is used before it is
// fetched again, with its keys.
const metadataMaxAge = time.Hour

// IssuerStatus is what a Verifier knows of one trusted issuer, for a
// readiness probe and logs.
type IssuerStatus struct {
	// Issuer is the issuer's identifier, as configured.
	Issuer string
	// Ready is true once its metadata and keys were fetched; it stays true
	// while later fetches fail (the keys at hand keep verifying tokens).
	Ready bool
	// Keys is how many signing keys are at hand.
	Keys int
	// Fetched is when the keys were last fetched; zero if never.
	Fetched time.Time
	// Err is why the last fetch failed, or nil if it succeeded. It holds
	// addresses, not secrets: fine for logs and a probe's body.
	Err error
	// Retry is when a new attempt is allowed after that failure.
	Retry time.Time
	// Introspection is why the issuer's introspection endpoint refused the
	// resource server's own credentials (ErrIntrospectionRefused), or nil:
	// none configured, not tried yet, or accepted. It names the client id,
	// never the secret.
	Introspection error
}

// issuer is one trusted authorization server: its metadata and keys,
// fetched when first needed and again as they age, one fetch at a time.
type issuer struct {
	id            string
	introspection *Introspection
	client        *http.Client
	log           *slog.Logger
	now           func() time.Time
	timeout       time.Duration

	mu         sync.Mutex
	meta       *ServerMetadata // nil until fetched
	metaAt     time.Time
	keys       keySet
	keysAt     time.Time     // last successful fetch of the keys
	keysMaxAge time.Duration // from the JWKS's cache headers
	onDemandAt time.Time     // last fetch for an unknown key id
	err        error         // last fetch's failure, nil after a success
	failures   int           // failed fetches in a row
	retryAt    time.Time     // no new attempt before this, after a failure
	inflight   chan struct{} // non-nil while a fetch runs; closed when it ends

	// What the introspection endpoint made of the resource server's own
	// credentials (introspect.go).
	credsErr     error     // it refused them; nil once it took them
	credsChecked bool      // it answered once, either way
	credsFails   int       // failed attempts in a row
	credsRetry   time.Time // no new attempt before this, after a failure
}

// status returns what is known of the issuer.
func (is *issuer) status() IssuerStatus {
	is.mu.Lock()
	defer is.mu.Unlock()
	st := IssuerStatus{
		Issuer: is.id, Ready: is.meta != nil && is.keys != nil, Keys: len(is.keys),
		Fetched: is.keysAt, Err: is.err, Retry: is.retryAt, Introspection: is.credsErr,
	}
	if !st.Ready && st.Err == nil {
		st.Err = errNotReady
	}
	return st
}

// metadata returns the issuer's metadata, fetching it (with its keys) when
// it has none yet.
func (is *issuer) metadata(ctx context.Context) (*ServerMetadata, error) {
	is.mu.Lock()
	m := is.meta
	is.mu.Unlock()
	if m != nil {
		return m, nil
	}
	if err := is.refresh(ctx, false); err != nil {
		return nil, err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.meta, nil
}

// key returns the keys that may have signed a token with this key id and
// algorithm. Keys past their cache lifetime are fetched again first (and
// kept if that fails); an unknown key id fetches them again at most once
// per KeyRefreshInterval.
func (is *issuer) key(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, error) {
	is.mu.Lock()
	stale := is.keys == nil || is.now().Sub(is.keysAt) >= is.keysMaxAge
	is.mu.Unlock()
	if stale {
		if err := is.refresh(ctx, false); err != nil && !is.hasKeys() {
			return nil, err
		}
	}
	is.mu.Lock()
	found := is.keys.find(kid, alg)
	onDemand := len(found) == 0 && !is.keys.hasKeyID(kid) && is.now().Sub(is.onDemandAt) >= KeyRefreshInterval
	if onDemand {
		is.onDemandAt = is.now()
	}
	inflight := is.inflight
	is.mu.Unlock()
	if len(found) == 0 && !onDemand && inflight != nil {
		// A fetch is under way, for this key id maybe (a rotation brings
		// many tokens of the new key at once): its outcome, not a refusal
		// because the next fetch is not due.
		select {
		case <-inflight:
		case <-ctx.Done():
		}
		is.mu.Lock()
		found = is.keys.find(kid, alg)
		is.mu.Unlock()
	}
	if len(found) > 0 {
		return found, nil
	}
	var fetchErr error
	if onDemand {
		fetchErr = is.refresh(ctx, true)
		is.mu.Lock()
		found = is.keys.find(kid, alg)
		is.mu.Unlock()
		if len(found) > 0 {
			return found, nil
		}
	}
	what := fmt.Sprintf("no key of issuer %s has id %q for %s", is.id, kid, alg)
	if fetchErr != nil {
		return nil, fmt.Errorf("%w: %s, and its keys could not be fetched again: %w", ErrUnknownKey, what, fetchErr)
	}
	if !onDemand {
		what += fmt.Sprintf(" (keys fetched again at most every %s)", KeyRefreshInterval)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownKey, what)
}

func (is *issuer) hasKeys() bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys != nil
}

// refresh fetches the keys (and the metadata, when missing or old). One
// fetch runs at a time: a caller that finds one running waits for it and
// shares its outcome. After a failure, callers get that failure until the
// retry time, unless force (an unknown key id, already rate-limited).
func (is *issuer) refresh(ctx context.Context, force bool) error {
	is.mu.Lock()
	if ch := is.inflight; ch != nil {
		is.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for issuer %s: %w", ErrUnavailable, is.id, ctx.Err())
		}
		is.mu.Lock()
		defer is.mu.Unlock()
		return is.err
	}
	if is.err != nil && !force && is.now().Before(is.retryAt) {
		defer is.mu.Unlock()
		return is.err
	}
	ch := make(chan struct{})
	is.inflight = ch
	meta := is.meta
	if meta != nil && is.now().Sub(is.metaAt) >= metadataMaxAge {
		meta = nil
	}
	is.mu.Unlock()

	// The fetch is the issuer's, not the request's that started it: others
	// may be waiting for it, so the request's end does not cut it short.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), is.timeout)
	defer cancel()
	fresh := meta == nil
	var keys keySet
	var maxAge time.Duration
	var err error
	if fresh {
		meta, err = is.fetchMetadata(fctx)
	}
	if err == nil {
		keys, maxAge, err = is.fetchKeys(fctx, meta.JWKSURI)
	}

	is.mu.Lock()
	defer is.mu.Unlock()
	is.inflight = nil
	close(ch)
	now := is.now()
	if err != nil {
		is.failures++
		is.retryAt = now.Add(min(retryMin<<min(is.failures-1, 10), retryMax))
		if is.err == nil {
			is.log.Warn("oauth: cannot fetch the issuer's metadata or keys", "issuer", is.id, "err", err,
				"retry", is.retryAt.Sub(now).String(), "keys_at_hand", len(is.keys))
		}
		is.err = err
		return err
	}
	if is.err != nil || is.keys == nil {
		is.log.Info("oauth: issuer ready", "issuer", is.id, "keys", len(keys))
	}
	if fresh {
		is.meta, is.metaAt = meta, now
	}
	is.keys, is.keysAt, is.keysMaxAge = keys, now, maxAge
	is.err, is.failures = nil, 0
	return nil
}

func (is *issuer) fetchMetadata(ctx context.Context) (*ServerMetadata, error) {
	m, err := DiscoverServer(ctx, is.client, is.id)
	if err != nil {
		return nil, err
	}
	if m.JWKSURI == "" && is.introspection == nil {
		return nil, fmt.Errorf("%w: issuer %s: its metadata has no jwks_uri", ErrUnavailable, is.id)
	}
	return m, nil
}

// fetchKeys fetches the JWKS. An issuer that only introspects (no
// jwks_uri) has an empty key set.
func (is *issuer) fetchKeys(ctx context.Context, uri string) (keySet, time.Duration, error) {
	if uri == "" {
		return keySet{}, KeysMaxAge, nil
	}
	body, h, err := getDocument(ctx, is.client, uri)
	if err != nil {
		return nil, 0, fmt.Errorf("issuer %s: keys: %w", is.id, err)
	}
	keys, skipped, err := ParseKeySet(body)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: issuer %s: %s: %w", ErrUnavailable, is.id, uri, err)
	}
	if skipped > 0 {
		is.log.Debug("oauth: key set members left out", "issuer", is.id, "skipped", skipped)
	}
	if keys == nil {
		keys = keySet{}
	}
	return keys, keysMaxAge(h, is.now()), nil
}

// due returns when the issuer next needs a fetch: now if it is not ready,
// at the retry time after a failure, else shortly before its keys age out
// (so that requests do not wait for it).
func (is *issuer) due() time.Time {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.err != nil {
		return is.retryAt
	}
	if is.keys == nil {
		return time.Time{}
	}
	return is.keysAt.Add(is.keysMaxAge * 9 / 10)
}

// errNotReady is what status reports for an issuer never tried.
var errNotReady = errors.New("not fetched yet")
