// Package oauthtest starts a real OAuth 2.1 / OpenID Connect authorization
// server for tests: oidc-provider (e2e/oauth, pinned by its package-lock.json
// and installed by `make deps`), run by the system's node on a free
// loopback port, behind a proxy the test controls. It is never a mock: the
// tokens, keys, discovery documents, registration, introspection and
// authorization code flow are oidc-provider's.
//
//	as := oauthtest.Start(t)
//	c := as.MachineClient("mcp:client")
//	token := as.Token(c, "http://127.0.0.1:8080/mcp", "mcp:client")
//	as.Revoke(c, token)    // an opaque token no longer active
//	as.Rotate(false)       // a new signing key, the old one still published
//	as.FailPath("/jwks")   // the JWKS endpoint drops every connection
//	h := as.HoldNext("/jwks") // its next answer waits for h.Release()
//	as.Down()              // the issuer is unreachable (connection refused)
//
// The proxy is the issuer's address: every request to the authorization
// server goes through it, so a test can count them (Requests), make one
// endpoint fail (FailPath) or the whole server unreachable (Down, Up)
// while the server keeps its clients, grants and keys.
package oauthtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readyTimeout bounds the start of the server (node loading oidc-provider
// on a busy machine takes a second or two).
const readyTimeout = 30 * time.Second

// Server is a running authorization server, owned by one test: it stops
// when the test ends.
type Server struct {
	tb      testing.TB
	proxy   *proxy
	control string // base URL of the control API
	cmd     *exec.Cmd
	stdin   io.Closer
	exited  chan struct{}
	logPath string // the server's standard error, and its output after the ready line
	client  *http.Client
}

// Dir returns the folder of the authorization server's script and its
// node_modules, e2e/oauth in the repository.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "e2e", "oauth")
}

// Start starts an authorization server and waits until it serves. It fails
// the test, saying what to do, when node or the npm packages are missing.
func Start(tb testing.TB) *Server {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Fatal("oauthtest: node not found: run `make deps` (it installs nodejs)")
	}
	dir := Dir()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); err != nil {
		tb.Fatalf("oauthtest: oidc-provider is not installed in %s: run `make deps` (npm ci there)", dir)
	}
	p := startProxy(tb)
	s := &Server{tb: tb, proxy: p, exited: make(chan struct{}), client: &http.Client{Timeout: 10 * time.Second},
		logPath: filepath.Join(tb.TempDir(), "oidc-provider.log")}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		tb.Fatalf("oauthtest: %v", err)
	}

	s.cmd = exec.Command(node, "server.mjs", "--issuer", p.url())
	s.cmd.Dir = dir
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		tb.Fatalf("oauthtest: %v", err)
	}
	// The server exits when its stdin closes: at Stop, or when the test
	// binary dies without running its cleanups.
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		tb.Fatalf("oauthtest: %v", err)
	}
	s.stdin = stdin
	s.cmd.Stderr = logFile
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		tb.Fatalf("oauthtest: start node: %v", err)
	}
	ready := make(chan readyLine, 1)
	go func() {
		defer close(s.exited)
		defer logFile.Close()
		sc := bufio.NewScanner(stdout)
		var r readyLine
		if sc.Scan() {
			_ = json.Unmarshal(sc.Bytes(), &r)
		}
		ready <- r
		_, _ = io.Copy(logFile, stdout)
		_ = s.cmd.Wait()
	}()
	tb.Cleanup(s.Stop)

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case r := <-ready:
		if !r.Ready {
			<-s.exited
			tb.Fatalf("oauthtest: the authorization server did not start: %s", strings.TrimSpace(s.Log()))
		}
		p.setTarget(fmt.Sprintf("http://127.0.0.1:%d", r.Port))
		s.control = fmt.Sprintf("http://127.0.0.1:%d", r.Control)
	case <-timer.C:
		tb.Fatalf("oauthtest: the authorization server did not start within %v: %s", readyTimeout, strings.TrimSpace(s.Log()))
	}
	return s
}

// readyLine is what server.mjs prints once it serves.
type readyLine struct {
	Ready   bool `json:"ready"`
	Port    int  `json:"port"`
	Control int  `json:"control"`
}

// Stop stops the server and its proxy and waits for them. Tests need not
// call it: it runs when the test ends.
func (s *Server) Stop() {
	if s.stdin != nil {
		_ = s.stdin.Close()
		s.stdin = nil
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	s.proxy.stop()
}

// Log returns what the server wrote on its standard error (and anything
// after its ready line on its standard output).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// Issuer returns the issuer identifier: the proxy's URL, no trailing slash.
func (s *Server) Issuer() string { return s.proxy.url() }

// Down makes the issuer unreachable: its port refuses connections (the
// open ones are closed) until Up.
func (s *Server) Down() { s.proxy.down(s.tb) }

// Up makes the issuer reachable again, on the same address.
func (s *Server) Up() { s.proxy.up(s.tb) }

// FailPath makes requests to path (such as "/jwks") fail: the connection
// is closed without an answer, as a dead backend behind a load balancer
// would. HealPath undoes it.
func (s *Server) FailPath(path string) { s.proxy.setFault(path, true) }

// HoldNext holds the next request for path (such as "/jwks"): the server
// answers it at once, and the answer goes back to the client only when the
// test releases it, as a slow network would deliver a document that was
// current when asked for. Released when the test ends, if not before.
func (s *Server) HoldNext(path string) *Hold {
	h := s.proxy.hold(path)
	s.tb.Cleanup(h.Release)
	return h
}

// HealPath undoes FailPath.
func (s *Server) HealPath(path string) { s.proxy.setFault(path, false) }

// Requests returns how many requests for path reached the proxy (failed
// ones included).
func (s *Server) Requests(path string) int { return s.proxy.count(path) }

// Client is a client registered at the server.
type Client struct {
	ID, Secret string
	// RedirectURI is its redirect URI, for the authorization code flow.
	RedirectURI string
}

// Register registers a client by dynamic client registration (RFC 7591)
// with the metadata given, and returns its id and secret.
func (s *Server) Register(metadata map[string]any) Client {
	s.tb.Helper()
	var out struct {
		ID          string   `json:"client_id"`
		Secret      string   `json:"client_secret"`
		RedirectURI []string `json:"redirect_uris"`
	}
	s.post(s.Issuer()+"/reg", "application/json", metadata, nil, &out)
	c := Client{ID: out.ID, Secret: out.Secret}
	if len(out.RedirectURI) > 0 {
		c.RedirectURI = out.RedirectURI[0]
	}
	return c
}

// MachineClient registers a confidential client for the client credentials
// grant (client_secret_basic), allowed the scopes given (none: a client
// that only introspects, a resource server).
func (s *Server) MachineClient(scopes ...string) Client {
	s.tb.Helper()
	metadata := map[string]any{
		"client_name":                "machine",
		"grant_types":                []string{"client_credentials"},
		"response_types":             []string{},
		"token_endpoint_auth_method": "client_secret_basic",
	}
	if len(scopes) > 0 {
		metadata["scope"] = strings.Join(scopes, " ")
	}
	return s.Register(metadata)
}

// Token gets an access token for resource by client credentials, with the
// scopes given, and returns it.
func (s *Server) Token(c Client, resource string, scopes ...string) string {
	s.tb.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	var out struct {
		AccessToken string `json:"access_token"`
	}
	s.post(s.Issuer()+"/token", "application/x-www-form-urlencoded", form, &c, &out)
	if out.AccessToken == "" {
		s.tb.Fatal("oauthtest: token endpoint gave no access_token")
	}
	return out.AccessToken
}

// Revoke revokes token (RFC 7009) as client c, the client it was issued
// to: introspection says it is not active from then on.
func (s *Server) Revoke(c Client, token string) {
	s.tb.Helper()
	s.post(s.Issuer()+"/token/revocation", "application/x-www-form-urlencoded", url.Values{"token": {token}}, &c, nil)
}

// Resource says how the tokens for one resource are issued. Resources not
// configured get RS256 JWTs valid for an hour.
type Resource struct {
	// Resource is the resource indicator (the tokens' aud).
	Resource string `json:"resource"`
	// Format is "jwt" (the default) or "opaque" (checked by introspection).
	Format string `json:"format,omitempty"`
	// Alg signs the JWTs: RS256 (default), PS256, ES256 or EdDSA.
	Alg string `json:"alg,omitempty"`
	// TTL is the tokens' lifetime in seconds; 0 means an hour.
	TTL int `json:"ttl,omitempty"`
	// NotBefore, in seconds, gives the JWTs an "nbf" that far after their
	// "iat".
	NotBefore int `json:"notBefore,omitempty"`
}

// SetResource configures how tokens for r.Resource are issued from now on.
func (s *Server) SetResource(r Resource) {
	s.tb.Helper()
	s.post(s.control+"/resources", "application/json", r, nil, nil)
}

// SetUserClaims gives the access tokens of user (logged in through
// Authorize) extra claims, such as {"groups": ["support"]}.
func (s *Server) SetUserClaims(user string, claims map[string]any) {
	s.tb.Helper()
	s.post(s.control+"/users", "application/json", map[string]any{"user": user, "claims": claims}, nil, nil)
}

// Rotate gives the server a new signing key per algorithm, used from the
// next token on; the old keys stay in its JWKS unless retire. It returns
// the key ids now published, newest first.
func (s *Server) Rotate(retire bool) []string {
	s.tb.Helper()
	var out struct {
		Kids []string `json:"kids"`
	}
	s.post(s.control+"/rotate", "application/json", map[string]bool{"retire": retire}, nil, &out)
	return out.Kids
}

// post sends a request and decodes its JSON answer into out (if not nil),
// failing the test on any error or a status other than 2xx. body is JSON
// for "application/json", url.Values otherwise.
func (s *Server) post(u, contentType string, body any, basic *Client, out any) {
	s.tb.Helper()
	var rd io.Reader
	if v, ok := body.(url.Values); ok {
		rd = strings.NewReader(v.Encode())
	} else {
		b, err := json.Marshal(body)
		if err != nil {
			s.tb.Fatalf("oauthtest: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, rd)
	if err != nil {
		s.tb.Fatalf("oauthtest: %v", err)
	}
	req.Header.Set("Content-Type", contentType)
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic.ID), url.QueryEscape(basic.Secret))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.tb.Fatalf("oauthtest: POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		s.tb.Fatalf("oauthtest: POST %s: %s: %s", u, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.tb.Fatalf("oauthtest: POST %s: %v: %s", u, err, b)
		}
	}
}
