package oauth

import (
	"sync"
	"time"
)

// inactiveFor is how long an introspection's "not active" is remembered:
// long enough that a client retrying a dead token, or anyone sending
// made-up ones, costs the issuer one request per token and period, short
// enough that a token activated meanwhile (clock skew between servers) is
// not refused for long.
const inactiveFor = 30 * time.Second

// tokenCache remembers verified tokens until they expire: the outcome of
// verifying one (its principal, or for introspection, that it is not
// active) keyed by the token itself. The token is the key rather than a
// digest of it: the map's hash is cheaper than a cryptographic one, and the
// bytes are held either way.
//
// It holds at most max entries. When full, a new entry first sweeps out
// the expired ones, then, if that freed less than a tenth, displaces
// arbitrary ones (the map's iteration order) down to nine tenths, so that
// the sweep's cost is paid once per tenth of the cache, not per entry. A
// token displaced early costs one more verification, nothing else.
type tokenCache struct {
	max int

	mu sync.RWMutex
	m  map[string]cacheEntry // guarded by mu
}

// cacheEntry is a remembered outcome, valid until until.
type cacheEntry struct {
	p     *Principal
	err   error
	until time.Time
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: make(map[string]cacheEntry)}
}

// get returns the outcome remembered for token, if any and still valid at
// now. A nil cache remembers nothing.
func (c *tokenCache) get(token string, now time.Time) (cacheEntry, bool) {
	if c == nil {
		return cacheEntry{}, false
	}
	c.mu.RLock()
	e, ok := c.m[token]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return cacheEntry{}, false
	}
	return e, true
}

// put remembers an outcome.
func (c *tokenCache) put(token string, e cacheEntry, now time.Time) {
	if c == nil || !now.Before(e.until) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, there := c.m[token]; !there && len(c.m) >= c.max {
		for k, old := range c.m {
			if !now.Before(old.until) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) <= c.max-max(c.max/10, 1) {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[token] = e
}

// len returns the number of entries, expired ones included.
func (c *tokenCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
