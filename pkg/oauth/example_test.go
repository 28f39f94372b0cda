package oauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// A resource server in a few lines: its metadata for clients to find the
// authorization server, a 401 that points there, tokens verified on every
// request, a 403 asking for a missing scope.
func Example() {
	const base = "https://mcp.example.com"
	v, err := oauth.New(oauth.Config{
		Issuers: []oauth.IssuerConfig{{Issuer: "https://login.example.com/realms/mcp"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go v.Run(ctx) // fetch the issuer's keys ahead of need, retry while it is down

	mux := http.NewServeMux()
	protectResource(mux, v, base, "/mcp", []string{"mcp:client"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello", principalOf(r.Context()).Subject)
	}))
	_ = http.ListenAndServe("127.0.0.1:8080", mux)
}

type principalKey struct{}

func principalOf(ctx context.Context) *oauth.Principal {
	p, _ := ctx.Value(principalKey{}).(*oauth.Principal)
	return p
}

// protectResource serves next at path of base, for the holders of a token
// for that resource with the scopes given, and the resource's metadata at
// its well-known address.
func protectResource(mux *http.ServeMux, v *oauth.Verifier, base, path string, scopes []string, next http.Handler) {
	resource := base + path
	metadataURL, err := oauth.ResourceMetadataURL(resource)
	if err != nil {
		panic(err)
	}
	metadata, _ := json.Marshal(oauth.ResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{v.Status()[0].Issuer},
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "example",
	})
	mux.HandleFunc("GET "+strings.TrimPrefix(metadataURL, base), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		_, _ = w.Write(metadata)
	})
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		challenge := oauth.Bearer{ResourceMetadata: metadataURL, Scope: scopes}
		token, ok, err := oauth.BearerToken(r.Header)
		if err != nil {
			challenge.Error, challenge.Description = oauth.ErrorInvalidRequest, err.Error()
			refuse(w, http.StatusBadRequest, challenge)
			return
		}
		if !ok {
			refuse(w, http.StatusUnauthorized, challenge)
			return
		}
		p, err := v.Verify(r.Context(), token, resource)
		if err != nil {
			challenge.Error, challenge.Description = oauth.ErrorInvalidToken, oauth.Describe(err)
			refuse(w, http.StatusUnauthorized, challenge)
			return
		}
		for _, s := range scopes {
			if !p.HasScope(s) {
				challenge.Error, challenge.Description = oauth.ErrorInsufficientScope, "the token lacks scope "+s
				refuse(w, http.StatusForbidden, challenge)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func refuse(w http.ResponseWriter, status int, c oauth.Bearer) {
	w.Header().Set("WWW-Authenticate", c.String())
	http.Error(w, http.StatusText(status), status)
}
