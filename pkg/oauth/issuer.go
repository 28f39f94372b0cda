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
// Fetches of the keys as they age are not counted.
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
	running    *fetch        // the fetch under way, if any
	queued     *fetch        // a fetch for an unknown key id, to start when running ends

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
	if err := is.refresh(ctx); err != nil {
		return nil, err
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.meta, nil
}

// fetch is one fetch of an issuer's keys (and metadata, when missing or
// old); whoever needs its outcome waits for done.
type fetch struct {
	done   chan struct{} // closed once it ended
	err    error         // why it failed; set before done is closed
	behind *fetch        // the fetch it was queued behind, if any
}

func newFetch() *fetch { return &fetch{done: make(chan struct{})} }

// key returns the keys that may have signed a token with this key id and
// algorithm. Keys past their cache lifetime are fetched again first (and
// kept if that fails). An unknown key id waits for a fetch that starts
// after it was seen (onDemandLocked): not one already under way, which
// may have begun before the issuer published the key.
func (is *issuer) key(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, error) {
	is.mu.Lock()
	stale := is.keys == nil || is.now().Sub(is.keysAt) >= is.keysMaxAge
	is.mu.Unlock()
	if stale {
		if err := is.refresh(ctx); err != nil && !is.hasKeys() {
			return nil, err
		}
	}
	is.mu.Lock()
	found := is.keys.find(kid, alg)
	var f *fetch
	limited, mine := false, false
	if len(found) == 0 && !is.keys.hasKeyID(kid) {
		if f, mine = is.onDemandLocked(); f == nil {
			// Not due: the fetch under way, if any, may have it still
			// (the key came before that fetch began).
			limited, f = true, is.running
		}
	}
	is.mu.Unlock()
	if len(found) > 0 {
		return found, nil
	}
	var fetchErr error
	if f != nil {
		if mine {
			is.runOnDemand(ctx, f)
		}
		fetchErr = is.await(ctx, f)
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
	if limited {
		what += fmt.Sprintf(" (keys fetched again at most every %s)", KeyRefreshInterval)
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownKey, what)
}

// onDemandLocked returns the fetch that may bring a key id the keys lack,
// and whether the caller is to run it (runOnDemand). It must start from now
// on: a fetch under way may have begun before the issuer rotated to the
// key, and taking its outcome for an answer refused the new key's tokens
// until the next fetch was due. So it is the fetch already queued behind
// the one under way, joined (a rotation brings many tokens of the new key
// at once, and a flood of made-up key ids costs nothing more), or a new
// one, started at once or queued behind the one under way, at most once
// per KeyRefreshInterval; nil when that is not due. After a failure it
// does not wait for the retry time: it is rate-limited already.
func (is *issuer) onDemandLocked() (f *fetch, mine bool) {
	if is.queued != nil {
		return is.queued, false
	}
	now := is.now()
	if now.Sub(is.onDemandAt) < KeyRefreshInterval {
		return nil, false
	}
	is.onDemandAt = now
	f = newFetch()
	if is.running == nil {
		is.running = f
	} else {
		f.behind, is.queued = is.running, f
	}
	return f, true
}

// runOnDemand runs f, which onDemandLocked gave this caller to run, once
// the fetch it was queued behind, if any, ended (which made f the one under
// way). It waits for that whatever ctx says: others wait for f.
func (is *issuer) runOnDemand(ctx context.Context, f *fetch) {
	if f.behind != nil {
		<-f.behind.done
	}
	is.run(ctx, f)
}

// await waits for f and returns its failure.
func (is *issuer) await(ctx context.Context, f *fetch) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for issuer %s: %w", ErrUnavailable, is.id, ctx.Err())
	}
}

func (is *issuer) hasKeys() bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.keys != nil
}

// refresh fetches the keys (and the metadata, when missing or old). One
// fetch runs at a time: a caller that finds one running waits for it and
// shares its outcome. After a failure, callers get that failure until the
// retry time.
func (is *issuer) refresh(ctx context.Context) error {
	is.mu.Lock()
	if f := is.running; f != nil {
		is.mu.Unlock()
		return is.await(ctx, f)
	}
	if is.err != nil && is.now().Before(is.retryAt) {
		defer is.mu.Unlock()
		return is.err
	}
	f := newFetch()
	is.running = f
	is.mu.Unlock()
	is.run(ctx, f)
	return f.err
}

// run carries out f, the fetch under way, and records its outcome; the
// fetch queued behind it, if any, is the one under way from then on.
func (is *issuer) run(ctx context.Context, f *fetch) {
	is.mu.Lock()
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
	is.running, is.queued = is.queued, nil
	f.err = err
	defer close(f.done) // once the outcome is recorded
	now := is.now()
	if err != nil {
		is.failures++
		is.retryAt = now.Add(min(retryMin<<min(is.failures-1, 10), retryMax))
		if is.err == nil {
			is.log.Warn("oauth: cannot fetch the issuer's metadata or keys", "issuer", is.id, "err", err,
				"retry", is.retryAt.Sub(now).String(), "keys_at_hand", len(is.keys))
		}
		is.err = err
		return
	}
	if is.err != nil || is.keys == nil {
		is.log.Info("oauth: issuer ready", "issuer", is.id, "keys", len(keys))
	}
	if fresh {
		is.meta, is.metaAt = meta, now
	}
	is.keys, is.keysAt, is.keysMaxAge = keys, now, maxAge
	is.err, is.failures = nil, 0
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
