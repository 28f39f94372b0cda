package hub

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

// admit decides, before a WebSocket upgrade, whether a connection may
// open: not while draining (503), then as check says, and only while the
// token is under its connection limit (429). It answers the HTTP error
// itself and returns nil then; otherwise release frees the connection's
// slot.
func (h *Hub) admit(w http.ResponseWriter, r *http.Request, endpoint string, roles ...Role) (p *principal, release func()) {
	if h.draining.Load() {
		h.refuseDraining(w)
		return nil, nil
	}
	if p = h.check(w, r, endpoint, roles...); p == nil {
		return nil, nil
	}
	release, err := h.takeSlot(p)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return nil, nil
	}
	return p, release
}

// refuseDraining answers a new connection or session while the instance
// drains.
func (h *Hub) refuseDraining(w http.ResponseWriter) {
	h.metrics.authFailures.WithLabelValues("draining").Inc()
	w.Header().Set("Retry-After", "1")
	http.Error(w, "503 draining: this hub instance is shutting down; connect to another", http.StatusServiceUnavailable)
}

// check decides whether a request may reach the hub at all: only for a
// Host it answers to (403, against DNS rebinding), only from an allowed
// origin (403), only with a token that has one of roles (401, 403). It
// answers the HTTP error itself and returns nil then.
func (h *Hub) check(w http.ResponseWriter, r *http.Request, endpoint string, roles ...Role) *principal {
	if !h.checkHost(w, r) {
		return nil
	}
	if !originAllowed(r, h.cfg.OriginPatterns) {
		h.metrics.authFailures.WithLabelValues("origin").Inc()
		http.Error(w, "403 forbidden: this origin may not connect to the hub (see --allowed-origins)", http.StatusForbidden)
		return nil
	}
	return h.authenticate(w, r, endpoint, roles...)
}

// checkHost refuses a request for a Host the hub does not answer to (403,
// against DNS rebinding); it reports whether the request may go on.
func (h *Hub) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if h.hostAllowed(r.Host) {
		return true
	}
	h.metrics.authFailures.WithLabelValues("host").Inc()
	http.Error(w, "403 forbidden: this hub does not answer to this Host name (DNS rebinding protection; "+
		"use localhost or 127.0.0.1, or see --allowed-hosts)", http.StatusForbidden)
	return false
}

// hostChecked serves next only for a Host the hub answers to: the
// dashboard and its login, which a rebinding page must not reach either.
func (h *Hub) hostChecked(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.checkHost(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// takeSlot counts a connection (or HTTP session) against its token's limit.
func (h *Hub) takeSlot(p *principal) (release func(), err error) {
	if p == anonymous {
		return func() {}, nil
	}
	limit := h.cfg.MaxConnectionsPerToken
	if p.maxConn > 0 {
		limit = p.maxConn
	}
	return h.countSlot(p.name, limit, func() error {
		return fmt.Errorf("429 too many connections: token %q has %d open", p.name, limit)
	})
}

// takeSessionSlot counts an HTTP session that outlives its request. One
// without a token counts too, against one limit for all of them
// (MaxConnectionsPerToken, as if they shared a token): a WebSocket, or a
// stateless request, lasts as long as its socket, which the system bounds,
// but a session lives on without any socket until it idles out, and
// nothing else would bound how many are open.
func (h *Hub) takeSessionSlot(p *principal) (release func(), err error) {
	if p != anonymous {
		return h.takeSlot(p)
	}
	limit := h.cfg.MaxConnectionsPerToken
	return h.countSlot(anonymous.name, limit, func() error {
		return fmt.Errorf("429 too many HTTP sessions: %d are open without a token; end those no longer used "+
			"(DELETE), or give clients tokens", limit)
	})
}

// countSlot takes one of limit slots under key, or refuses with refusal's
// error.
func (h *Hub) countSlot(key string, limit int, refusal func() error) (release func(), err error) {
	h.mu.Lock()
	if h.perToken[key] >= limit {
		h.mu.Unlock()
		h.metrics.authFailures.WithLabelValues("too_many_connections").Inc()
		return nil, refusal()
	}
	h.perToken[key]++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			if h.perToken[key]--; h.perToken[key] <= 0 {
				delete(h.perToken, key)
			}
			h.mu.Unlock()
		})
	}, nil
}

// hostAllowed guards against DNS rebinding. Without tokens everyone who
// reaches the hub is admin, so a web page whose name an attacker points at
// 127.0.0.1 must not get in: its requests carry the attacker's name in
// Host. Only loopback names (localhost, *.localhost, 127.0.0.0/8, ::1) and
// the AllowedHosts patterns pass ("*" lets every Host in). With tokens, the
// token is the guard and every Host passes.
func (h *Hub) hostAllowed(hostport string) bool {
	if h.authOn() {
		return true
	}
	host := strings.ToLower(hostport)
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, pat := range h.cfg.AllowedHosts {
		if ok, _ := path.Match(strings.ToLower(pat), host); ok || pat == "*" {
			return true
		}
	}
	return false
}

// originAllowed checks a browser's Origin the way coder/websocket does (the
// request's own host, or a pattern), so that the refusal is counted and
// explained. Clients that send no Origin are not browsers and pass.
func originAllowed(r *http.Request, patterns []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, pat := range patterns {
		target := u.Host
		if strings.Contains(pat, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, _ := path.Match(strings.ToLower(pat), strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}

// bucket is a token bucket: rate tokens a second, up to burst.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
	rate   float64
	burst  float64
}

func newBucket(rate float64, burst int) *bucket {
	return &bucket{tokens: float64(burst), last: time.Now(), rate: rate, burst: float64(burst)}
}

// take spends one token, or says how long until one is there.
func (b *bucket) take(now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// bucketFor returns the rate limit a connection draws on: its token's,
// shared by all the token's connections, or its own without tokens. Nil
// means no limit.
func (h *Hub) bucketFor(p *principal) *bucket {
	if h.cfg.RateLimit < 0 {
		return nil
	}
	if p == anonymous {
		return newBucket(h.cfg.RateLimit, h.cfg.RateBurst)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.buckets[p.name]
	if b == nil {
		if len(h.buckets) >= maxBuckets {
			h.sweepBuckets(time.Now())
		}
		b = newBucket(h.cfg.RateLimit, h.cfg.RateBurst)
		h.buckets[p.name] = b
	}
	return b
}

// maxBuckets is how many rate limits are kept before the idle ones go: a
// tokens file names a few principals, OAuth issuers any number.
const maxBuckets = 10000

// sweepBuckets forgets the rate limits that are full again (idle long
// enough to have refilled): a principal that comes back gets a full one, as
// it would have. The caller holds h.mu.
func (h *Hub) sweepBuckets(now time.Time) {
	for name, b := range h.buckets {
		b.mu.Lock()
		full := b.tokens+now.Sub(b.last).Seconds()*b.rate >= b.burst
		b.mu.Unlock()
		if full {
			delete(h.buckets, name)
		}
	}
}
