package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ResourceMetadata is a Protected Resource Metadata document (RFC 9728
// section 2): what a client needs to get a token for a resource. A
// resource server serves it at ResourceMetadataURL(Resource), with CORS
// open to every origin (browser clients read it).
type ResourceMetadata struct {
	// Resource is the resource identifier: the URL clients send requests
	// to, and the audience ("aud") of the tokens meant for it.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers whose tokens the resource takes.
	AuthorizationServers []string `json:"authorization_servers,omitempty"`
	// ScopesSupported are the scopes that requests to the resource may need.
	ScopesSupported []string `json:"scopes_supported,omitempty"`
	// BearerMethodsSupported says how the token may be sent: "header" (the
	// Authorization header) for an MCP server.
	BearerMethodsSupported []string `json:"bearer_methods_supported,omitempty"`
	// ResourceName is a human-readable name of the resource.
	ResourceName string `json:"resource_name,omitempty"`
	// ResourceDocumentation is the URL of documentation for developers.
	ResourceDocumentation string `json:"resource_documentation,omitempty"`
}

// wellKnownResource is the well-known name of RFC 9728 section 3.
const wellKnownResource = "/.well-known/oauth-protected-resource"

// ResourceMetadataURL returns where the metadata of resource is served
// (RFC 9728 section 3.1): the well-known name inserted between the host
// and the path, "https://hub.example.com/.well-known/oauth-protected-resource/mcp"
// for "https://hub.example.com/mcp". The resource must be an absolute
// http(s) URL without fragment; a query, discouraged, is kept.
func ResourceMetadataURL(resource string) (string, error) {
	u, err := parseResource(resource)
	if err != nil {
		return "", err
	}
	u.Path = wellKnownResource + strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// parseResource checks a resource identifier (RFC 8707 section 2).
func parseResource(resource string) (*url.URL, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return nil, fmt.Errorf("resource %q: %w", resource, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("resource %q: a resource is an absolute http(s) URL without fragment or user", resource)
	}
	return u, nil
}

// ParseResourceMetadata decodes a Protected Resource Metadata document and
// checks it: its resource must be one the client may use for requested
// (the URL it asked for: see ResourceCovers), and its authorization
// servers must be issuer identifiers.
func ParseResourceMetadata(body []byte, requested string) (*ResourceMetadata, error) {
	var m ResourceMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("resource metadata: %w", err)
	}
	if !ResourceCovers(m.Resource, requested) {
		return nil, fmt.Errorf("resource metadata: resource %q does not cover %q", m.Resource, requested)
	}
	for _, as := range m.AuthorizationServers {
		if _, err := parseIssuer(as); err != nil {
			return nil, fmt.Errorf("resource metadata: authorization_servers: %w", err)
		}
	}
	return &m, nil
}

// ResourceCovers reports whether the resource identifier resource covers
// the URL requested: the same scheme and host (compared without case), and
// a path that is requested's path or a parent of it, segment by segment.
// RFC 9728 section 3.3 asks for the same URL; MCP servers commonly name
// their origin, and the MCP SDKs accept that: so does this.
func ResourceCovers(resource, requested string) bool {
	r, err1 := parseResource(resource)
	q, err2 := parseResource(requested)
	if err1 != nil || err2 != nil {
		return false
	}
	if !strings.EqualFold(r.Scheme, q.Scheme) || !strings.EqualFold(r.Host, q.Host) {
		return false
	}
	rp, qp := strings.TrimSuffix(r.Path, "/"), strings.TrimSuffix(q.Path, "/")
	return rp == qp || strings.HasPrefix(qp, rp+"/")
}

// Discovery is what a client learned of a protected resource: where to
// get a token for it, and which.
type Discovery struct {
	// MetadataURL is where Resource came from.
	MetadataURL string
	// Resource is the resource's metadata. Its Resource member is the
	// resource indicator (RFC 8707) to ask tokens for.
	Resource *ResourceMetadata
	// Scope is the scope the resource's challenge asked for, if it gave
	// one; else its metadata's ScopesSupported.
	Scope []string
	// Server is the metadata of the resource's first authorization server.
	Server *ServerMetadata
}

// DiscoverResource finds how to get a token for the protected resource at
// resource (an MCP server's URL), as an MCP client does after a 401:
// challenges are the WWW-Authenticate values of that 401 (nil if there
// were none). Its Protected Resource Metadata comes from the Bearer
// challenge's resource_metadata, else from the well-known addresses (for
// the URL's path, then for its root); then the first authorization
// server's metadata, by DiscoverServer.
func DiscoverResource(ctx context.Context, client *http.Client, resource string, challenges []string) (*Discovery, error) {
	var candidates []string
	var scope []string
	if c, ok := BearerChallenge(challenges); ok {
		if u := c.Param("resource_metadata"); u != "" {
			if err := checkEndpoint(u); err != nil {
				return nil, fmt.Errorf("resource_metadata of the challenge: %w", err)
			}
			candidates = append(candidates, u)
		}
		scope = strings.Fields(c.Param("scope"))
	}
	if len(candidates) == 0 {
		u, err := ResourceMetadataURL(resource)
		if err != nil {
			return nil, err
		}
		root, _ := url.Parse(u)
		root.Path, root.RawQuery = wellKnownResource, ""
		candidates = append(candidates, u)
		if root.String() != u {
			candidates = append(candidates, root.String())
		}
	}
	d := &Discovery{Scope: scope}
	var err error
	for _, u := range candidates {
		var body []byte
		body, _, err = getDocument(ctx, client, u)
		var status statusError
		if errors.As(err, &status) && status >= 400 && status < 500 {
			continue
		}
		if err != nil {
			return nil, err
		}
		d.MetadataURL = u
		if d.Resource, err = ParseResourceMetadata(body, resource); err != nil {
			return nil, err
		}
		break
	}
	if d.Resource == nil {
		return nil, fmt.Errorf("no protected resource metadata for %s: %w", resource, err)
	}
	if len(d.Resource.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("the protected resource metadata at %s names no authorization server", d.MetadataURL)
	}
	if d.Scope == nil {
		d.Scope = d.Resource.ScopesSupported
	}
	if d.Server, err = DiscoverServer(ctx, client, d.Resource.AuthorizationServers[0]); err != nil {
		return nil, err
	}
	return d, nil
}
