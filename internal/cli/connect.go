package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
)

// connectOptions are the flags of `hub connect`.
type connectOptions struct {
	hub         string
	token       string
	tokenFile   string
	name        string
	roots       listFlag
	config      string
	upstream    string
	headers     listFlag
	transport   string
	pool        string
	poolIdle    time.Duration
	shared      bool
	session     bool
	initTimeout time.Duration
	tracing     bool
	log         logFlags

	// The connector's OAuth client of the hub, and of an --upstream server.
	oauthClientID, oauthSecretFile, oauthIssuer, oauthScope, oauthAudience, oauthResource string
	upClientID, upSecretFile, upRefreshFile, upScope                                      string
}

func connectCommand(o *connectOptions) *command {
	c := newCommand("connect")
	c.summary = "hub connect: put MCP servers on a hub without changing them. A stdio server runs as a child\n" +
		"process; a Streamable HTTP server is reached at its URL. Either way the connector dials out to the\n" +
		"hub's /mcp/server and passes every message both ways unchanged. A child that exits is restarted with\n" +
		"backoff (the hub shows why it left); a hub that goes away is dialed again."
	c.usage = []string{
		"hub connect --hub URL [--name NAME] [--root URI]... [--pool MIN..MAX] -- COMMAND [ARGS...]",
		"hub connect --hub URL --config FILE",
		"hub connect --hub URL --name NAME --upstream URL [--header 'NAME: VALUE']... [--transport sse]",
	}
	c.examples = []string{
		"hub connect --hub ws://127.0.0.1:8080 -- npx -y @modelcontextprotocol/server-memory",
		"hub connect --hub ws://127.0.0.1:8080 --name files --root file:///srv/files -- \\",
		"    npx -y @modelcontextprotocol/server-filesystem /srv/files",
		"hub connect --hub wss://hub.example --token-file /run/secrets/hub-token --config claude_desktop_config.json",
		"hub connect --hub ws://127.0.0.1:8080 --name remote --upstream http://10.0.0.5:3001/mcp --header 'Authorization: Bearer x'",
		"hub connect --hub ws://127.0.0.1:8080 --pool 1..8 -- npx -y @modelcontextprotocol/server-everything",
		"hub connect --hub wss://hub.example --oauth-client-id weather-connector --oauth-client-secret-file /run/secrets/weather -- ./weather-server",
		"hub connect --hub wss://hub.example --name crm --upstream https://crm.example/mcp \\",
		"    --upstream-oauth-client-id crm-connector --upstream-oauth-client-secret-file /run/secrets/crm",
	}
	c.notes = "--config reads the shape desktop clients use, in YAML or JSON:\n" +
		"  mcpServers:\n" +
		"    memory: {command: npx, args: [-y, \"@modelcontextprotocol/server-memory\"], env: {MEMORY_FILE_PATH: /tmp/m.json}}\n" +
		"and runs every server from one process, each under its key's name.\n" +
		"A stdio server cannot say which client's call its sampling, elicitation or roots requests belong to,\n" +
		"so the hub lets each child serve one client's calls at a time; --pool keeps more children for more\n" +
		"clients at once, and --shared says the server needs none of that.\n" +
		"The child's stderr goes to the log line by line, marked server=NAME. SIGTERM or SIGINT stops every\n" +
		"child (its whole process group: SIGTERM, then SIGKILL after 5s) and closes the connections.\n" +
		"With --oauth-client-id the connector gets access tokens for the hub by client credentials (docs/connect.md,\n" +
		"\"Credentials\"): the issuer is found from the hub's metadata unless --oauth-issuer names it. Client secrets are\n" +
		"read from a file, or from " + connect.ClientSecretEnv + " and " + connect.UpstreamClientSecretEnv + ":\n" +
		"never from the command line, and no child sees them."
	c.noEnv["root"], c.noEnv["header"] = true, true
	fs := c.fs
	fs.StringVar(&o.hub, "hub", "", "the hub: `URL` ws://HOST:PORT (or wss://, http://, https://; the path defaults to /mcp/server)")
	fs.StringVar(&o.token, "token", "", "`token` for the hub (sent as Authorization: Bearer); on the command line every user sees it in the process list: prefer --token-file or the variable")
	fs.StringVar(&o.tokenFile, "token-file", "", "`file` holding the token for the hub (its first line), unseen in the process list")
	fs.StringVar(&o.name, "name", "", "the server's `name` on the hub (default: its serverInfo.name)")
	fs.Var(&o.roots, "root", "a root `URI` (file:///...) the hub answers roots/list with when the server asks outside any client's call; repeatable")
	fs.StringVar(&o.config, "config", "", "`file` of servers to run, in the shape desktop clients use (mcpServers: {name: {command, args, env}})")
	fs.StringVar(&o.upstream, "upstream", "", "`URL` of a Streamable HTTP MCP server to put on the hub instead of a command")
	fs.Var(&o.headers, "header", "`header` ('Name: value') sent to the --upstream server; repeatable")
	fs.StringVar(&o.transport, "transport", "", "the --upstream server's `transport`: streamable-http, or sse for the older HTTP+SSE (default: sse when the URL's path ends in /sse)")
	fs.StringVar(&o.pool, "pool", "", "keep between MIN and MAX children of the command (`MIN..MAX`, or N), each a replica on the hub: MIN always, more while every one has calls in flight (default 1..1)")
	fs.DurationVar(&o.poolIdle, "pool-idle", connect.DefaultPoolIdle, "how long a child beyond the pool's MIN may have no call before it is stopped")
	fs.BoolVar(&o.shared, "shared", false, "every child serves every client's calls at once: for a server that asks clients nothing during a call (no sampling, elicitation or roots), or names the call when it does")
	fs.BoolVar(&o.session, "session", false, "the server needs a session: its tools ask clients with requests of their own during a call (sampling, elicitation, roots), which protocol version 2026-07-28 has not; the hub opens a session with initialize instead of speaking 2026-07-28 to a server that speaks both")
	fs.DurationVar(&o.initTimeout, "init-timeout", connect.DefaultInitTimeout, "how long a server may take to answer the hub's server/discover (or initialize) before it is restarted")
	fs.StringVar(&o.oauthClientID, "oauth-client-id", "", "OAuth client `id` the connector gets access tokens for the hub as (client credentials), instead of a static --token")
	fs.StringVar(&o.oauthSecretFile, "oauth-client-secret-file", "", "`file` holding that client's secret (or "+connect.ClientSecretEnv+"; never on the command line)")
	fs.StringVar(&o.oauthIssuer, "oauth-issuer", "", "the authorization server's issuer `URL` (default: the first one the hub's resource metadata names)")
	fs.StringVar(&o.oauthScope, "oauth-scope", "mcp:server", "`scopes` to ask for, space- or comma-separated")
	fs.StringVar(&o.oauthAudience, "oauth-audience", "", "`value` of the token request's audience parameter, for authorization servers that read it instead of the resource (Auth0)")
	fs.StringVar(&o.oauthResource, "oauth-resource", "", "the hub's resource identifier `URL`, <public-url>/mcp/server (default: what its metadata says, which must match --hub's address)")
	fs.StringVar(&o.upClientID, "upstream-oauth-client-id", "", "OAuth client `id` of the connector at the --upstream server's authorization server (found from the server's 401)")
	fs.StringVar(&o.upSecretFile, "upstream-oauth-client-secret-file", "", "`file` holding that client's secret (or "+connect.UpstreamClientSecretEnv+"): client credentials, or a confidential client's refreshes")
	fs.StringVar(&o.upRefreshFile, "upstream-oauth-refresh-token-file", "", "`file` holding a refresh token for the --upstream server: tokens by the refresh grant; a rotated refresh token is written back")
	fs.StringVar(&o.upScope, "upstream-oauth-scope", "", "`scopes` to ask the --upstream server's authorization server for (default: those of its 401, else its metadata's)")
	fs.BoolVar(&o.tracing, "tracing", false, "export an OpenTelemetry span of each request's hop to the server over OTLP, configured by the standard OTEL_* variables (docs/observability.md)")
	o.log.add(fs)
	return c
}

// runConnect is `hub connect`.
func runConnect(ctx context.Context, args []string, env *Env) error {
	var o connectOptions
	c := connectCommand(&o)
	if flag := secretOnCommandLine(args); flag != "" {
		return usagef("connect", "%s: a client secret is never taken on the command line, where every user sees it: "+
			"give %s-file FILE, or the environment variable", flag, flag)
	}
	if err := c.parse(args, env); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	servers, err := o.servers(c.fs.Args())
	if err != nil {
		return err
	}
	upOAuth, err := o.upstreamOAuth(env)
	if err != nil {
		return err
	}
	if upOAuth != nil {
		if o.upstream == "" {
			return usagef("connect", "--upstream-oauth-client-id applies to --upstream (in a --config file, give the server oauth: {clientId: ...})")
		}
		servers[0].OAuth = upOAuth
	}
	if o.hub == "" {
		return usagef("connect", "--hub is required (or SWITCHBOARD_HUB): the hub's URL, e.g. ws://127.0.0.1:8080")
	}
	token, err := o.readToken()
	if err != nil {
		return err
	}
	hubURL, header, err := endpoint(o.hub, "/mcp/server", token)
	if err != nil {
		return usagef("connect", "--hub: %w", err)
	}
	hubOAuth, err := o.hubOAuth(env)
	if err != nil {
		return err
	}
	if hubOAuth != nil && header != nil {
		return usagef("connect", "give the hub a static token (--token, --token-file, SWITCHBOARD_TOKEN, ?token=) or --oauth-client-id, not both")
	}
	log, err := o.log.logger("connect", env.Stderr)
	if err != nil {
		return err
	}
	if visible := tokenOnCommandLine(c.fs); visible != "" {
		log.Warn("the token is on the command line (" + visible + "), where every user of this machine sees it in the process list; " +
			"use --token-file FILE or SWITCHBOARD_TOKEN instead")
	}
	tr, err := tracing.New(ctx, tracing.Config{Enabled: o.tracing, Service: tracing.ServiceName + "-connect", InstanceID: uuid.NewString(), Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tr.Shutdown(sctx) // what is left is dropped, and the process ends
	}()
	return connect.Run(ctx, servers, &connect.Options{URL: hubURL, Header: header, OAuth: hubOAuth, Logger: log,
		InitTimeout: o.initTimeout, PoolIdle: o.poolIdle, Tracing: tr})
}

// secretOnCommandLine names a flag that would put a client secret on the
// command line (which has none: secrets come from files or variables), so
// that the refusal says where to put it; "" when there is none.
func secretOnCommandLine(args []string) string {
	for _, a := range args {
		if a == "--" {
			return ""
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "oauth-client-secret" || name == "upstream-oauth-client-secret") {
			return "--" + name
		}
	}
	return ""
}

// hubOAuth returns the connector's OAuth client of the hub, or nil without
// --oauth-client-id.
func (o *connectOptions) hubOAuth(env *Env) (*connect.OAuthClient, error) {
	if o.oauthClientID == "" {
		if o.oauthSecretFile != "" || o.oauthIssuer != "" || o.oauthAudience != "" || o.oauthResource != "" {
			return nil, usagef("connect", "--oauth-client-secret-file, --oauth-issuer, --oauth-audience and --oauth-resource need --oauth-client-id")
		}
		return nil, nil
	}
	c := &connect.OAuthClient{ClientID: o.oauthClientID, SecretFile: o.oauthSecretFile, Issuer: o.oauthIssuer,
		Scopes: scopes(o.oauthScope), Audience: o.oauthAudience, Resource: o.oauthResource}
	if c.SecretFile == "" {
		c.Secret = envSecret(env, connect.ClientSecretEnv)
	}
	if c.SecretFile == "" && c.Secret.Reveal() == "" {
		return nil, usagef("connect", "--oauth-client-id needs the client's secret: --oauth-client-secret-file FILE or %s", connect.ClientSecretEnv)
	}
	return c, nil
}

// upstreamOAuth returns the connector's OAuth client of the --upstream
// server, or nil without --upstream-oauth-client-id.
func (o *connectOptions) upstreamOAuth(env *Env) (*connect.OAuthClient, error) {
	if o.upClientID == "" {
		if o.upSecretFile != "" || o.upRefreshFile != "" || o.upScope != "" {
			return nil, usagef("connect", "--upstream-oauth-client-secret-file, --upstream-oauth-refresh-token-file and --upstream-oauth-scope need --upstream-oauth-client-id")
		}
		return nil, nil
	}
	c := &connect.OAuthClient{ClientID: o.upClientID, SecretFile: o.upSecretFile, RefreshTokenFile: o.upRefreshFile, Scopes: scopes(o.upScope)}
	if c.SecretFile == "" {
		c.Secret = envSecret(env, connect.UpstreamClientSecretEnv)
	}
	if c.SecretFile == "" && c.Secret.Reveal() == "" && c.RefreshTokenFile == "" {
		return nil, usagef("connect", "--upstream-oauth-client-id needs the client's secret (--upstream-oauth-client-secret-file FILE or %s) "+
			"or --upstream-oauth-refresh-token-file FILE", connect.UpstreamClientSecretEnv)
	}
	return c, nil
}

// envSecret is the client secret in the environment variable name, if any.
func envSecret(env *Env, name string) oauth.Secret {
	v, _ := env.LookupEnv(name)
	return oauth.NewSecret(v)
}

// scopes splits a list of scopes given with spaces or commas.
func scopes(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// readToken returns the token for the hub: --token's (or SWITCHBOARD_TOKEN),
// else the first line of --token-file's file.
func (o *connectOptions) readToken() (string, error) {
	if o.tokenFile == "" {
		return o.token, nil
	}
	if o.token != "" {
		return "", usagef("connect", "give the token by --token (or SWITCHBOARD_TOKEN) or by --token-file, not both")
	}
	b, err := os.ReadFile(o.tokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token, _, _ := strings.Cut(string(b), "\n")
	if token = strings.TrimSpace(token); token == "" {
		return "", fmt.Errorf("--token-file: %s holds no token", o.tokenFile)
	}
	return token, nil
}

// tokenOnCommandLine names where the command line shows a token: --token,
// or ?token= in --hub (not SWITCHBOARD_TOKEN or SWITCHBOARD_HUB, which
// only the user and root can read). "" when it shows none.
func tokenOnCommandLine(fs *flag.FlagSet) string {
	where := ""
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "token" && f.Value.String() != "":
			where = "--token"
		case f.Name == "hub" && where == "":
			if u, err := url.Parse(f.Value.String()); err == nil && u.Query().Get("token") != "" {
				where = "?token= in --hub"
			}
		}
	})
	return where
}

// servers turns the flags and arguments into the servers to run.
func (o *connectOptions) servers(command []string) ([]connect.Server, error) {
	ways := 0
	for _, set := range []bool{len(command) > 0, o.config != "", o.upstream != ""} {
		if set {
			ways++
		}
	}
	switch {
	case ways == 0:
		return nil, usagef("connect", "what to connect is missing: -- COMMAND [ARGS...], --config FILE or --upstream URL")
	case ways > 1:
		return nil, usagef("connect", "give one of -- COMMAND [ARGS...], --config FILE and --upstream URL")
	}
	if o.config != "" {
		if o.name != "" || len(o.roots) > 0 || len(o.headers) > 0 || o.transport != "" || o.pool != "" || o.shared || o.session {
			return nil, usagef("connect", "--name, --root, --header, --transport, --pool, --shared and --session apply to one server: with --config, put them in the file")
		}
		servers, err := connect.LoadConfig(o.config)
		if err != nil {
			return nil, err
		}
		return servers, nil
	}
	s := connect.Server{Name: o.name, Roots: o.roots, Shared: o.shared, Session: o.session}
	if o.pool != "" {
		p, err := connect.ParsePool(o.pool)
		if err != nil {
			return nil, usagef("connect", "--pool: %w", err)
		}
		s.Pool = p
	}
	if len(command) > 0 {
		if len(o.headers) > 0 || o.transport != "" {
			return nil, usagef("connect", "--header and --transport apply to --upstream only")
		}
		s.Command, s.Args = command[0], command[1:]
		return []connect.Server{s}, nil
	}
	if o.name == "" {
		return nil, usagef("connect", "--upstream needs --name")
	}
	u, err := url.Parse(o.upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("connect", "--upstream must be an http:// or https:// URL")
	}
	s.Upstream = o.upstream
	switch o.transport {
	case "", connect.TransportStreamable, connect.TransportSSE:
		s.Transport = o.transport
	default:
		return nil, usagef("connect", "--transport must be %s or %s, not %q", connect.TransportStreamable, connect.TransportSSE, o.transport)
	}
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("connect", "--header must be 'Name: value'") // the value may be a secret: not repeated
		}
		if s.Header == nil {
			s.Header = http.Header{}
		}
		s.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return []connect.Server{s}, nil
}

// endpoint turns the --hub URL into the URL to dial: ws:// or wss:// (from
// http:// or https://, or none), path defaulting to path. A ?token= in it
// moves to the Authorization header, unless --token gave one, so that it
// never shows in a log.
func endpoint(raw, path, token string) (string, http.Header, error) {
	if !strings.Contains(raw, "://") {
		raw = "ws://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, errors.New("not a URL")
	}
	switch u.Scheme {
	case "ws", "wss":
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", nil, fmt.Errorf("the scheme must be ws, wss, http or https, not %q", u.Scheme)
	}
	if u.Host == "" {
		return "", nil, errors.New("the URL has no host")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = path
	}
	q := u.Query()
	if t := q.Get("token"); t != "" && token == "" {
		token = t
	}
	q.Del("token")
	u.RawQuery = q.Encode()
	var header http.Header
	if token != "" {
		header = http.Header{"Authorization": {"Bearer " + token}}
	}
	return u.String(), header, nil
}
