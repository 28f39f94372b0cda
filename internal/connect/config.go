package connect

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// configFile is the shape desktop clients use for their servers (Claude
// Desktop's claude_desktop_config.json, Cursor's mcp.json: "mcpServers";
// VS Code's: "servers"), in YAML or JSON.
type configFile struct {
	MCPServers map[string]configServer `yaml:"mcpServers"`
	Servers    map[string]configServer `yaml:"servers"`
}

type configServer struct {
	Command  string            `yaml:"command"`
	Args     []string          `yaml:"args"`
	Env      map[string]string `yaml:"env"`
	Cwd      string            `yaml:"cwd"`
	URL      string            `yaml:"url"`
	Headers  map[string]string `yaml:"headers"`
	Roots    []string          `yaml:"roots"`
	Type     string            `yaml:"type"`
	Disabled bool              `yaml:"disabled"`
	Pool     string            `yaml:"pool"`
	Shared   bool              `yaml:"shared"`
	Session  bool              `yaml:"session"`
	OAuth    *configOAuth      `yaml:"oauth"`
}

// configOAuth is an upstream's Server.OAuth. Secrets only in files.
type configOAuth struct {
	ClientID         string `yaml:"clientId"`
	ClientSecretFile string `yaml:"clientSecretFile"`
	RefreshTokenFile string `yaml:"refreshTokenFile"`
	Scope            string `yaml:"scope"`
	Issuer           string `yaml:"issuer"`
	Audience         string `yaml:"audience"`
}

// LoadConfig reads a file of servers in the shape desktop clients use, YAML
// or JSON:
//
//	mcpServers:
//	  memory:
//	    command: npx
//	    args: ["-y", "@modelcontextprotocol/server-memory"]
//	    env: {MEMORY_FILE_PATH: /var/lib/memory.json}
//	  files:
//	    command: npx
//	    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/files"]
//	    roots: ["file:///srv/files"]
//	  remote:
//	    url: http://10.0.0.5:3001/mcp
//	    headers: {Authorization: "Bearer ..."}
//	  crm:
//	    url: https://crm.example/mcp
//	    oauth: {clientId: crm-connector, clientSecretFile: /run/secrets/crm}
//	  everything:
//	    command: npx
//	    args: ["-y", "@modelcontextprotocol/server-everything"]
//	    pool: 1..8
//
// Each key is the server's name on the hub. "servers" (VS Code's key) is
// read like "mcpServers"; "cwd" sets the working directory; an entry with
// "disabled: true" is skipped; "type" (VS Code's) may say "sse" for an
// upstream on the older HTTP+SSE transport; "pool" (MIN..MAX, or N),
// "shared" and "session" are Server.Pool, Server.Shared and
// Server.Session; "oauth" is an upstream's
// Server.OAuth (clientId, clientSecretFile, refreshTokenFile, scope,
// issuer, audience: a secret only in a file); other members are ignored.
// Servers come back sorted by name.
func LoadConfig(path string) ([]Server, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(b)
}

// ParseConfig parses the contents of a file of servers (see LoadConfig).
func ParseConfig(b []byte) ([]Server, error) {
	var f configFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("servers file: %w", err)
	}
	entries := f.MCPServers
	if entries == nil {
		entries = f.Servers
	} else if f.Servers != nil {
		return nil, errors.New(`servers file: "mcpServers" or "servers", not both`)
	}
	if len(entries) == 0 {
		return nil, errors.New(`servers file: no server under "mcpServers"`)
	}
	var out []Server
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		if e.Disabled {
			continue
		}
		if strings.TrimSpace(name) == "" {
			return nil, errors.New("servers file: a server has an empty name")
		}
		s := Server{Name: name, Command: e.Command, Args: e.Args, Env: e.Env, Dir: e.Cwd, Roots: e.Roots, Upstream: e.URL, Shared: e.Shared, Session: e.Session}
		if e.Pool != "" {
			p, err := ParsePool(e.Pool)
			if err != nil {
				return nil, fmt.Errorf("servers file: server %q: pool %w", name, err)
			}
			s.Pool = p
		}
		switch strings.ToLower(e.Type) {
		case "", "stdio":
		case "sse":
			s.Transport = TransportSSE
		case "http", "streamable-http", "streamablehttp":
			s.Transport = TransportStreamable
		default:
			return nil, fmt.Errorf("servers file: server %q: unknown type %q (stdio, http or sse)", name, e.Type)
		}
		if a := e.OAuth; a != nil {
			s.OAuth = &OAuthClient{ClientID: a.ClientID, SecretFile: a.ClientSecretFile, RefreshTokenFile: a.RefreshTokenFile,
				Scopes: strings.Fields(a.Scope), Issuer: a.Issuer, Audience: a.Audience}
		}
		if len(e.Headers) > 0 {
			s.Header = http.Header{}
			for k, v := range e.Headers {
				s.Header.Set(k, v)
			}
		}
		switch {
		case s.Command == "" && s.Upstream == "":
			return nil, fmt.Errorf("servers file: server %q has neither a command nor a url", name)
		case s.Command != "" && s.Upstream != "":
			return nil, fmt.Errorf("servers file: server %q has both a command and a url", name)
		case s.OAuth != nil && s.Upstream == "":
			return nil, fmt.Errorf("servers file: server %q: oauth is for a server with a url", name)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("servers file: every server is disabled")
	}
	return out, nil
}
