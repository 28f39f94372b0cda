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

	"github.com/switchboard-mcp/switchboard/internal/connect"
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
	initTimeout time.Duration
	log         logFlags
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
	}
	c.notes = "--config reads the shape desktop clients use, in YAML or JSON:\n" +
		"  mcpServers:\n" +
		"    memory: {command: npx, args: [-y, \"@modelcontextprotocol/server-memory\"], env: {MEMORY_FILE_PATH: /tmp/m.json}}\n" +
		"and runs every server from one process, each under its key's name.\n" +
		"A stdio server cannot say which client's call its sampling, elicitation or roots requests belong to,\n" +
		"so the hub lets each child serve one client's calls at a time; --pool keeps more children for more\n" +
		"clients at once, and --shared says the server needs none of that.\n" +
		"The child's stderr goes to the log line by line, marked server=NAME. SIGTERM or SIGINT stops every\n" +
		"child (its whole process group: SIGTERM, then SIGKILL after 5s) and closes the connections."
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
	fs.DurationVar(&o.initTimeout, "init-timeout", connect.DefaultInitTimeout, "how long a server may take to answer the hub's initialize (or server/discover) before it is restarted")
	o.log.add(fs)
	return c
}

// runConnect is `hub connect`.
func runConnect(ctx context.Context, args []string, env *Env) error {
	var o connectOptions
	c := connectCommand(&o)
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
	log, err := o.log.logger("connect", env.Stderr)
	if err != nil {
		return err
	}
	if visible := tokenOnCommandLine(c.fs); visible != "" {
		log.Warn("the token is on the command line (" + visible + "), where every user of this machine sees it in the process list; " +
			"use --token-file FILE or SWITCHBOARD_TOKEN instead")
	}
	return connect.Run(ctx, servers, &connect.Options{URL: hubURL, Header: header, Logger: log, InitTimeout: o.initTimeout, PoolIdle: o.poolIdle})
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
		if o.name != "" || len(o.roots) > 0 || len(o.headers) > 0 || o.transport != "" || o.pool != "" || o.shared {
			return nil, usagef("connect", "--name, --root, --header, --transport, --pool and --shared apply to one server: with --config, put them in the file")
		}
		servers, err := connect.LoadConfig(o.config)
		if err != nil {
			return nil, err
		}
		return servers, nil
	}
	s := connect.Server{Name: o.name, Roots: o.roots, Shared: o.shared}
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
