package oauthtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// PublicClient registers a public client (no secret, PKCE) for the
// authorization code flow, with a loopback redirect URI that nothing
// listens on: Authorize reads the code from the redirect itself.
func (s *Server) PublicClient() Client {
	s.tb.Helper()
	return s.Register(map[string]any{
		"client_name":                "public",
		"application_type":           "native",
		"redirect_uris":              []string{"http://127.0.0.1/callback"},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}

// Authorize runs the authorization code flow with PKCE (S256) for client c
// and resource, as a browser would, logging in as user and consenting on
// the server's pages, and returns the token the code is exchanged for.
// With offline_access among the scopes it holds a refresh token too.
func (s *Server) Authorize(c Client, user, resource string, scopes ...string) *oauth2.Token {
	s.tb.Helper()
	tok, err := s.authorize(c, user, resource, scopes)
	if err != nil {
		s.tb.Fatalf("oauthtest: authorize: %v\n%s", err, s.Log())
	}
	return tok
}

// formAction finds the form of the login and consent pages (server.mjs).
var formAction = regexp.MustCompile(`<form method="post" action="([^"]+)"`)

func (s *Server) authorize(c Client, user, resource string, scopes []string) (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conf := &oauth2.Config{
		ClientID:    c.ID,
		Endpoint:    oauth2.Endpoint{AuthURL: s.Issuer() + "/auth", TokenURL: s.Issuer() + "/token", AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: c.RedirectURI,
		Scopes:      scopes,
	}
	verifier := oauth2.GenerateVerifier()
	state := oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource)}
	if slices.Contains(scopes, "offline_access") {
		// OpenID Connect grants offline_access (a refresh token) only
		// with the user's consent asked for.
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "consent"))
	}
	next := conf.AuthCodeURL(state, opts...)

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), c.RedirectURI) {
				return http.ErrUseLastResponse // the code: stop there
			}
			return nil
		}}
	resp, page, err := s.browse(ctx, browser, next, user)
	if err != nil {
		return nil, err
	}
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && strings.HasPrefix(loc, c.RedirectURI) {
		return exchange(ctx, conf, loc, state, verifier, resource)
	}
	return nil, fmt.Errorf("no redirect to the client: %s: %s", resp.Status, page)
}

// Browse follows start with browser (which should keep cookies and follow
// redirects) as a person would: it logs in as user and consents on the
// server's pages, and returns the first response that is not one of them
// (the page of the client's redirect URI, or a refusal), with its body.
func (s *Server) Browse(browser *http.Client, start, user string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return s.browse(ctx, browser, start, user)
}

func (s *Server) browse(ctx context.Context, browser *http.Client, next, user string) (*http.Response, []byte, error) {
	method, form := http.MethodGet, url.Values(nil)
	for range 10 {
		req, err := http.NewRequestWithContext(ctx, method, next, strings.NewReader(form.Encode()))
		if err != nil {
			return nil, nil, err
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := browser.Do(req)
		if err != nil {
			return nil, nil, err
		}
		page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		m := formAction.FindSubmatch(page)
		if resp.StatusCode != http.StatusOK || m == nil || !strings.HasPrefix(resp.Request.URL.String(), s.Issuer()) {
			return resp, page, nil // not one of the server's pages: where the flow ends
		}
		action, _ := url.Parse(string(m[1]))
		next = resp.Request.URL.ResolveReference(action).String()
		method, form = http.MethodPost, url.Values{"login": {user}}
	}
	return nil, nil, errors.New("still on the server's pages after 10 of them")
}

// exchange reads the code from the redirect and exchanges it.
func exchange(ctx context.Context, conf *oauth2.Config, redirect, state, verifier, resource string) (*oauth2.Token, error) {
	u, err := url.Parse(redirect)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	if q.Get("error") != "" {
		return nil, fmt.Errorf("authorization refused: %s: %s", q.Get("error"), q.Get("error_description"))
	}
	if q.Get("state") != state {
		return nil, errors.New("state mismatch")
	}
	return conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
}
