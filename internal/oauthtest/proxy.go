package oauthtest

import (
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// proxy is the issuer's address: a reverse proxy to the authorization
// server that counts requests per path, fails the paths it is told to, and
// can stop listening (connection refused) and listen again on the same
// port.
type proxy struct {
	addr string
	wg   sync.WaitGroup // the Serve goroutines

	mu     sync.Mutex
	target *httputil.ReverseProxy // nil until the server is ready
	srv    *http.Server           // nil while down
	faults map[string]bool
	holds  map[string]*Hold // the next request for the path is held
	counts map[string]int
}

func startProxy(tb testing.TB) *proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("oauthtest: proxy: %v", err)
	}
	p := &proxy{addr: ln.Addr().String(), faults: make(map[string]bool), holds: make(map[string]*Hold),
		counts: make(map[string]int)}
	p.serve(ln)
	return p
}

func (p *proxy) url() string { return "http://" + p.addr }

func (p *proxy) setTarget(u string) {
	target, _ := url.Parse(u)
	rp := httputil.NewSingleHostReverseProxy(target)
	p.mu.Lock()
	p.target = rp
	p.mu.Unlock()
}

// serve serves ln until down or stop. The caller holds no lock.
func (p *proxy) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(p.handle)}
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	p.wg.Go(func() { _ = srv.Serve(ln) })
}

func (p *proxy) handle(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.counts[r.URL.Path]++
	fail, target := p.faults[r.URL.Path], p.target
	hold := p.holds[r.URL.Path]
	delete(p.holds, r.URL.Path)
	p.mu.Unlock()
	if fail || target == nil {
		// Close the connection without an answer.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		http.Error(w, "unavailable", http.StatusBadGateway)
		return
	}
	if hold != nil {
		hold.serve(target, w, r)
		return
	}
	target.ServeHTTP(w, r)
}

// Hold is a request the proxy holds: the server's answer, taken when the
// request came, goes back only once released.
type Hold struct {
	held    chan struct{} // closed once the answer is taken
	release chan struct{} // closed by Release
	once    sync.Once
}

func (p *proxy) hold(path string) *Hold {
	h := &Hold{held: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	p.holds[path] = h
	p.mu.Unlock()
	return h
}

// serve asks the server at once, and answers once released.
func (h *Hold) serve(target http.Handler, w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	target.ServeHTTP(rec, r)
	close(h.held)
	<-h.release
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// Held returns a channel closed once a request is held: the server has
// answered it, and the answer waits for Release.
func (h *Hold) Held() <-chan struct{} { return h.held }

// Release sends the held answer (or lets the next request through
// unheld, if none came yet). It may be called more than once.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

func (p *proxy) setFault(path string, fail bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[path] = fail
}

func (p *proxy) count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[path]
}

// down closes the listener and every open connection.
func (p *proxy) down(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv == nil {
		tb.Fatal("oauthtest: Down: the issuer is already down")
	}
	_ = srv.Close()
	p.wg.Wait()
}

// up listens again on the same address.
func (p *proxy) up(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	running := p.srv != nil
	p.mu.Unlock()
	if running {
		tb.Fatal("oauthtest: Up: the issuer is already up")
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		tb.Fatalf("oauthtest: Up: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *proxy) stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	p.wg.Wait()
}
