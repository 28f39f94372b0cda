package hub

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// benchAuthHub starts a hub for the authentication benchmarks: static
// tokens (a client's, the bench server's) and the OAuth issuer as, with the
// bench server on it.
func benchAuthHub(b *testing.B, as *oauthtest.Server) *testHub {
	b.Helper()
	file := filepath.Join(b.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(`
tokens:
  - {name: bench-client, token: bench-client-secret, roles: [client]}
  - {name: bench-server, token: bench-server-secret, roles: [server], servers: [bench]}
`), 0o600); err != nil {
		b.Fatal(err)
	}
	tokens, err := LoadTokens(file)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	h, err := New(Config{RateLimit: -1, Tokens: tokens, Logger: slog.New(slog.DiscardHandler),
		OAuth: &OAuthConfig{PublicURL: "http://" + srv.Listener.Addr().String(), Issuers: []string{as.Issuer()}}})
	if err != nil {
		b.Fatal(err)
	}
	th := &testHub{Hub: h, srv: srv}
	srv.Config = h.NewHTTPServer()
	srv.Start()
	b.Cleanup(func() {
		srv.Close()
		h.Close()
	})
	ctx, cancel := context.WithCancel(context.Background())
	dialed := make(chan struct{})
	go func() {
		defer close(dialed)
		newBenchServer(echoArguments).Dial(ctx, th.wsURL("/mcp/server"), &mcp.DialOptions{Token: "bench-server-secret"})
	}()
	b.Cleanup(func() { cancel(); <-dialed })
	waitBenchServer(b, th)
	return th
}

// BenchmarkStreamableCallAuth is BenchmarkStreamableCall with a credential
// on every POST, 64 sessions with 16 calls in flight each: a static token,
// or an access token (a JWT of a real authorization server, RS256), which
// the verified-token cache answers after its first request. Both run on
// one hub, in alternating rounds (so that a machine busy with something
// else slows both alike); it reports each one's wall time and process CPU
// per call, and the ratios static/jwt of both (0.95 or more is the goal:
// docs/performance.md).
func BenchmarkStreamableCallAuth(b *testing.B) {
	as := oauthtest.Start(b)
	th := benchAuthHub(b, as)
	endpoint := th.srv.URL + "/mcp"
	jwt := as.Token(as.MachineClient("mcp:client"), endpoint, "mcp:client")
	const sessions, inflight, rounds = 64, 16, 10
	static, err := newBenchAuthLoad(endpoint, "bench-client-secret", sessions, inflight)
	if err != nil {
		b.Fatal(err)
	}
	defer static.close()
	oauth, err := newBenchAuthLoad(endpoint, jwt, sessions, inflight)
	if err != nil {
		b.Fatal(err)
	}
	defer oauth.close()
	b.ReportAllocs()
	b.ResetTimer()
	var took, cpu [2]time.Duration
	done := 0
	for r := range rounds {
		n := (b.N - done) / (2 * (rounds - r))
		for i, load := range []*benchAuthLoad{static, oauth} {
			cpu0 := processCPU()
			d, err := load.run(n)
			if err != nil {
				b.Fatal(err)
			}
			took[i] += d
			cpu[i] += processCPU() - cpu0
			done += n
		}
	}
	b.StopTimer()
	calls := float64(done / 2)
	if calls > 0 && took[1] > 0 && cpu[1] > 0 {
		b.ReportMetric(float64(took[0])/calls, "static-ns/call")
		b.ReportMetric(float64(took[1])/calls, "jwt-ns/call")
		b.ReportMetric(float64(took[0])/float64(took[1]), "static/jwt")
		b.ReportMetric(float64(cpu[0])/calls, "static-cpu-ns/call")
		b.ReportMetric(float64(cpu[1])/calls, "jwt-cpu-ns/call")
		b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "cpu-static/jwt")
	}
}

// benchAuthLoad is sessions x inflight keep-alive connections, each POST
// with one token.
type benchAuthLoad struct {
	slots  []*benchHTTPSlot
	params string
	ids    atomic.Int64
}

func newBenchAuthLoad(endpoint, token string, sessions, inflight int) (*benchAuthLoad, error) {
	l := &benchAuthLoad{params: `{"name":"bench__echo","arguments":{"text":"` + strings.Repeat("x", 100-len(`{"text":""}`)) + `"}}`}
	auth := http.Header{"Authorization": {"Bearer " + token}}
	for range sessions {
		head, err := benchHTTPSession(endpoint, auth)
		if err != nil {
			l.close()
			return nil, err
		}
		for range inflight {
			sl, err := newBenchHTTPSlot(endpoint, head)
			if err != nil {
				l.close()
				return nil, err
			}
			l.slots = append(l.slots, sl)
		}
	}
	return l, nil
}

func (l *benchAuthLoad) close() {
	for _, sl := range l.slots {
		sl.conn.Close()
	}
}

// run makes n calls over every slot at once and returns how long they took.
func (l *benchAuthLoad) run(n int) (time.Duration, error) {
	var left atomic.Int64
	left.Store(int64(n))
	errs := make(chan error, len(l.slots))
	start := time.Now()
	for _, sl := range l.slots {
		go func() {
			for left.Add(-1) >= 0 {
				if err := sl.call(l.ids.Add(1), l.params); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range l.slots {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return time.Since(start), first
}

// BenchmarkAuthenticateWarm is what an access token costs a request once
// verified (docs/benchmarks.md: 2 µs at most): finding the token, trying
// it as a static one, the verified-token cache, the audience, the
// principal of the policy and its role. A static token's beside it.
func BenchmarkAuthenticateWarm(b *testing.B) {
	as := oauthtest.Start(b)
	th := benchAuthHub(b, as)
	resource := th.srv.URL + "/mcp"
	jwt := as.Token(as.MachineClient("mcp:client"), resource, "mcp:client")
	for _, tt := range []struct{ name, token string }{{"static", "bench-client-secret"}, {"jwt", jwt}} {
		b.Run(tt.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, resource, nil)
			r.Header.Set("Authorization", "Bearer "+tt.token)
			w := httptest.NewRecorder()
			if th.authenticate(w, r, "/mcp", RoleClient, RoleDashboard) == nil {
				b.Fatalf("refused: %d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if th.authenticate(w, r, "/mcp", RoleClient, RoleDashboard) == nil {
					b.Fatal("refused")
				}
			}
		})
	}
}
