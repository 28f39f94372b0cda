package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Server is one MCP server to put on the hub: a command to run (a stdio
// server), or the URL of a Streamable HTTP server.
type Server struct {
	// Name is the server's name on the hub, sent as ?name= (the hub
	// normalises it to [a-z0-9-]). Empty: the hub names the server after its
	// serverInfo.name, and the connector keeps that name for its later
	// connections, so that failures before the first start have no name.
	Name string

	// Command and Args start a stdio server; Env adds to (or replaces in)
	// the connector's environment, less the connector's secrets (TokenEnv,
	// ClientSecretEnv, UpstreamClientSecretEnv), which the child never
	// sees; Dir is its working directory (empty: the connector's).
	Command string
	Args    []string
	Env     map[string]string
	Dir     string

	// Roots are the URIs the hub answers roots/list with when the server
	// asks outside any client's call, sent as repeated ?root=.
	Roots []string

	// Upstream is the URL of an HTTP server to put on the hub instead of a
	// command, and Header what to send with each request to it. Transport
	// is TransportStreamable or TransportSSE; empty means SSE for a URL
	// whose path ends in /sse, Streamable HTTP otherwise.
	Upstream  string
	Header    http.Header
	Transport string
	// OAuth, for an upstream server that wants access tokens, are the
	// connector's own credentials as a client of that server (never the
	// hub's): on the server's first 401 the connector discovers its
	// authorization server and sends a token with every request from then
	// on.
	OAuth *OAuthClient

	// Pool keeps between Pool.Min and Pool.Max runs of the server at once
	// (children of the command, or sessions with the HTTP server), each a
	// replica of the server on the hub: Min for good, more while every run
	// has calls in flight, each stopped after Options.PoolIdle without one.
	// The zero value is one run.
	Pool Pool
	// Shared says that the server's requests to clients (sampling,
	// elicitation, roots) name the call they serve, or that it sends none
	// during calls: each run then serves every client's calls at once.
	// Otherwise the connector asks the hub to lease each run of a command
	// (or of an HTTP+SSE server) to one client at a time, since such a
	// server cannot say which call a request of its belongs to. A
	// Streamable HTTP server is never leased: the connector names the call
	// of each request from the POST stream that carries it.
	Shared bool
	// Session says the server needs a session (a revision before
	// 2026-07-28): its tools send the client requests of their own in the
	// middle of a call (sampling, elicitation, roots), which 2026-07-28 has
	// not, so a server of both eras written that way fails them there. The
	// connector asks the hub (?era=session) to open a session with
	// initialize instead of speaking 2026-07-28 to it.
	Session bool
}

// leased reports whether the hub should lease s's runs to one client at a
// time: a stdio or HTTP+SSE server whose requests do not name their call.
func (s *Server) leased() bool {
	return !s.Shared && (s.Upstream == "" || s.transport() == TransportSSE)
}

// label names the server in logs before the hub has named it: its name,
// else the package a runner such as npx or uvx runs, else the command.
func (s *Server) label() string {
	switch {
	case s.Name != "":
		return s.Name
	case s.Command == "":
		return link.Redact(s.Upstream)
	}
	base := filepath.Base(s.Command)
	switch base {
	case "npx", "pnpx", "bunx", "uvx", "pipx":
		for _, a := range s.Args {
			if a == "" || strings.HasPrefix(a, "-") {
				continue
			}
			if i := strings.LastIndexByte(a[1:], '@'); i >= 0 { // a version: pkg@1.2.3, @scope/pkg@1.2.3
				a = a[:i+1]
			}
			return a[strings.LastIndexByte(a, '/')+1:]
		}
	}
	return base
}

// Defaults of Options.
const (
	DefaultInitTimeout = 30 * time.Second
	DefaultMinBackoff  = time.Second
	DefaultMaxBackoff  = 30 * time.Second
	DefaultResetAfter  = 30 * time.Second
	DefaultStopGrace   = 5 * time.Second
	DefaultPoolIdle    = time.Minute
)

// Options configure Run. Zero fields take their defaults.
type Options struct {
	// URL is the hub's endpoint for servers, ws://host:port/mcp/server (or
	// wss://). Each server's ?name= and ?root= are added to it.
	URL string
	// Header is sent with every handshake to the hub (Authorization).
	Header http.Header
	// OAuth, when set, gets the connector an access token for the hub
	// (usually by client credentials), sent on every handshake in place of
	// a static token: renewed before it expires, and replaced at once when
	// the hub refuses it.
	OAuth *OAuthClient
	// Logger receives the connector's log and each server's standard error,
	// line by line, with the attribute server=<name>.
	Logger *slog.Logger
	// InitTimeout is how long a server may take to answer the hub's
	// initialize before it is restarted. Default 30 s.
	InitTimeout time.Duration
	// Retry spaces out restarts and reconnections: the wait doubles after
	// each failure from MinBackoff to MaxBackoff (defaults 1 s and 30 s),
	// and a server that ran ResetAfter (default 30 s) since it was
	// initialized is restarted after MinBackoff again.
	link.Retry
	// StopGrace is how long a child has to exit after SIGTERM before its
	// process group is killed. Default 5 s.
	StopGrace time.Duration
	// PoolIdle is how long a run beyond a pool's Min may have no call in
	// flight before it is stopped. Default 1 minute.
	PoolIdle time.Duration
	// ReadLimit is the longest message accepted from a server, in bytes.
	// Default 4 MiB.
	ReadLimit int
	// WebSocket tunes the connections to the hub.
	WebSocket peer.WebSocketOptions
	// Tracing, when on, traces each request of the hub's on its way to a
	// server (trace.go); the caller shuts it down.
	Tracing *tracing.Tracing

	hubCreds *credentials // of OAuth, made by Run
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	if v.InitTimeout <= 0 {
		v.InitTimeout = DefaultInitTimeout
	}
	v.Retry = v.Retry.Or(link.Retry{MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff, ResetAfter: DefaultResetAfter})
	if v.StopGrace <= 0 {
		v.StopGrace = DefaultStopGrace
	}
	if v.PoolIdle <= 0 {
		v.PoolIdle = DefaultPoolIdle
	}
	if v.ReadLimit <= 0 {
		v.ReadLimit = peer.DefaultReadLimit
	}
	return v
}

// ErrRefused matches the error Run returns when the hub refuses the
// connector's static token (HTTP 401 or 403): retrying would not help.
// Access tokens (Options.OAuth) are never given up on: the authorization
// server may grant tomorrow what it refuses today.
var ErrRefused = errors.New("the hub refused the credentials")

// Run puts every server on the hub and keeps them there until ctx ends:
// it restarts a server that fails and reconnects when the hub goes away,
// both with backoff. When ctx ends it closes every connection with 1001 and
// stops every child (SIGTERM, then SIGKILL after StopGrace), and returns
// nil once all are gone. It returns early, with an error matching
// ErrRefused, only when the hub refuses the credentials for every server.
func Run(ctx context.Context, servers []Server, opts *Options) error {
	o := opts.withDefaults()
	if err := check(&o, servers); err != nil {
		return err
	}
	if o.OAuth != nil {
		o.hubCreds = newCredentials(ctx, o.OAuth, httpURL(o.URL), "the hub", o.Logger)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range servers {
		p := newPool(servers[i], &o)
		if s := &servers[i]; s.OAuth != nil {
			creds := newCredentials(ctx, s.OAuth, s.Upstream, "the upstream server", o.Logger.With("server", s.label()))
			p.upstreamClient = &http.Client{Transport: newOAuthTransport(creds, s.Upstream)}
		}
		wg.Go(func() {
			if err := p.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// check refuses what could never work, before anything starts.
func check(o *Options, servers []Server) error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return fmt.Errorf("the hub's URL must be ws://HOST:PORT/mcp/server or wss://..., not %q", link.Redact(o.URL))
	}
	if err := checkOAuth(o.OAuth, o.Header); err != nil {
		return fmt.Errorf("the hub's credentials: %w", err)
	}
	if len(servers) == 0 {
		return errors.New("no server to connect")
	}
	seen := map[string]bool{}
	for i, s := range servers {
		switch {
		case s.Command == "" && s.Upstream == "":
			return fmt.Errorf("server %d (%q): a command or an upstream URL is needed", i+1, s.Name)
		case s.Command != "" && s.Upstream != "":
			return fmt.Errorf("server %q: a command or an upstream URL, not both", s.Name)
		case s.Upstream != "":
			u, err := url.Parse(s.Upstream)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("server %q: the upstream URL must be http:// or https://", s.Name)
			}
			if t := s.Transport; t != "" && t != TransportStreamable && t != TransportSSE {
				return fmt.Errorf("server %q: transport %q is neither %q nor %q", s.Name, t, TransportStreamable, TransportSSE)
			}
			if err := checkOAuth(s.OAuth, s.Header); err != nil {
				return fmt.Errorf("server %q: the upstream's credentials: %w", s.Name, err)
			}
		case s.OAuth != nil:
			return fmt.Errorf("server %q: OAuth credentials are for an upstream URL", s.label())
		}
		if err := s.Pool.check(); err != nil {
			return fmt.Errorf("server %q: pool %w", s.label(), err)
		}
		if s.Name != "" {
			if seen[s.Name] {
				return fmt.Errorf("server name %q is given twice", s.Name)
			}
			seen[s.Name] = true
		}
	}
	return nil
}

// checkOAuth refuses incomplete OAuth credentials, or credentials beside a
// static Authorization header.
func checkOAuth(o *OAuthClient, header http.Header) error {
	if o == nil {
		return nil
	}
	if header.Get("Authorization") != "" {
		return errors.New("an Authorization header or OAuth credentials, not both")
	}
	return o.check()
}

// connector keeps one run of a server on the hub: session after session
// for a run of the pool's first Min, else one session.
type connector struct {
	srv       Server
	opts      *Options
	pool      *pool
	permanent bool          // restarted whatever happens
	n         int           // its number in the pool, for logs
	retire    chan struct{} // closed when the pool no longer needs it
	back      link.Backoff

	// Under pool.mu:
	ready     bool      // the server answered the hub's handshake
	busy      bool      // it has calls of the hub's in flight
	idleSince time.Time // when it last had none
	retired   bool      // retire is closed
}

// dialURL is the hub URL with the server's name, its roots, whether to
// lease its replicas to one client at a time, and whether it needs a
// session.
func (c *connector) dialURL() string {
	u, _ := url.Parse(c.opts.URL) // checked by Run
	q := u.Query()
	if name := c.pool.serverName(); name != "" {
		q.Set("name", name)
	}
	for _, r := range c.srv.Roots {
		q.Add("root", r)
	}
	if c.srv.leased() {
		q.Set("lease", "client")
	}
	if c.srv.Session {
		q.Set("era", "session")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (c *connector) logger() *slog.Logger {
	label := c.pool.serverName()
	if label == "" {
		label = c.srv.label()
	}
	log := c.opts.Logger.With("server", label)
	if c.pool.max > 1 {
		log = log.With("run", c.n)
	}
	return log
}

// run runs sessions until ctx ends, waiting between them as told; a run
// beyond the pool's Min ends with its first session.
func (c *connector) run(ctx context.Context) error {
	for {
		wait, err := c.session(ctx)
		if err != nil || ctx.Err() != nil || !c.permanent {
			return err
		}
		if !link.Sleep(ctx, wait) {
			return nil
		}
	}
}

// session dials the hub, starts the server and relays between them until
// one side ends. It returns how long to wait before the next session, or an
// error when there should be none.
func (c *connector) session(ctx context.Context) (time.Duration, error) {
	log := c.logger()
	hub, err := c.dialHub(ctx)
	if err != nil {
		var noToken *noTokenError
		switch {
		case ctx.Err() != nil:
			return 0, nil
		case errors.As(err, &noToken): // the credentials logged why
			wait := c.back.Next()
			log.Debug("no access token for the hub yet; waiting", "retry_in", link.Round(wait))
			return wait, nil
		case link.Refused(err) && c.opts.hubCreds == nil:
			log.Error("giving up on this server: "+err.Error(), "url", link.Redact(c.opts.URL))
			return 0, fmt.Errorf("server %s: %w: %w", c.srv.label(), ErrRefused, err)
		}
		wait := c.back.Next()
		log.Error(err.Error()+"; retrying", "retry_in", link.Round(wait))
		return wait, nil
	}

	up, conn, attrs, err := c.start(ctx, log)
	if err != nil {
		wait := c.back.Next()
		what := "cannot start the server's command"
		if c.srv.Upstream != "" {
			what = "cannot reach the upstream server"
		}
		log.Error(what+"; retrying", "err", err, "retry_in", link.Round(wait))
		hub.Close(peer.CloseInternalError, fmt.Sprintf("%s; retrying in %v", what, link.Round(wait)))
		return wait, nil
	}
	r := &relay{hub: hub, server: conn, log: log, initTimeout: c.opts.InitTimeout, http: c.srv.Upstream != "",
		retire: c.retire, started: func() { c.pool.started(c) }}
	if c.pool.elastic() {
		r.load = func(busy bool) { c.pool.loaded(c, busy) }
	}
	r.hops = newHops(c.opts.Tracing, c.srv.label(), c.network())
	end := r.run(ctx, up, c.opts.StopGrace)
	c.pool.ended(c)
	if !r.initAt.IsZero() && time.Since(r.initAt) >= c.opts.ResetAfter {
		c.back.Reset() // it ran well for a while: start over
	}
	if r.serverName != "" {
		c.pool.learnName(r.serverName)
	}
	switch end.kind {
	case endStopped:
		r.wait()
		log.Info("server stopped", attrs...)
		return 0, nil
	case endRetired:
		r.wait()
		log.Info("stopped a run that had no call for "+link.Round(c.opts.PoolIdle).String()+"; the pool shrinks", attrs...)
		return 0, nil
	}
	wait := c.back.Next()
	what, reason := end.describe(link.Round(wait))
	attrs = append(attrs, "retry_in", link.Round(wait))
	if end.err != nil && end.kind != endExited {
		attrs = append(attrs, "err", end.err)
	}
	if end.kind == endHubLost {
		log.Warn(what, attrs...)
	} else {
		log.Error(what, attrs...)
	}
	hub.Close(peer.CloseInternalError, reason) // nothing is sent to a hub that is gone
	r.wait()
	return wait, nil
}

// dialHub dials the hub, with an access token when the connector has
// OAuth credentials: a token the hub refuses with 401 is replaced, and the
// hub dialed again, once.
func (c *connector) dialHub(ctx context.Context) (*peer.WebSocket, error) {
	creds := c.opts.hubCreds
	if creds == nil {
		return link.Dial(ctx, c.dialURL(), c.opts.Header, c.opts.WebSocket)
	}
	var refusedTok string // refused with 401 once already
	var refusedErr error
	for {
		tok, err := creds.token(ctx, nil)
		if err != nil {
			if refusedErr != nil {
				return nil, creds.refusal(ctx, refusedTok, refusedErr)
			}
			return nil, &noTokenError{err}
		}
		header := c.opts.Header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set("Authorization", "Bearer "+tok)
		hub, err := link.Dial(ctx, c.dialURL(), header, c.opts.WebSocket)
		if !link.Refused(err) {
			return hub, err
		}
		if status(err) == http.StatusUnauthorized {
			creds.refused(tok)
		}
		if refusedErr != nil || status(err) != http.StatusUnauthorized {
			return nil, creds.refusal(ctx, tok, err)
		}
		refusedTok, refusedErr = tok, err
	}
}

// start starts the server's side of a session: its command, or a session
// with its HTTP server. attrs name it in logs.
func (c *connector) start(ctx context.Context, log *slog.Logger) (up upstream, conn peer.Conn, attrs []any, err error) {
	if c.srv.Upstream != "" {
		h, err := dialUpstream(ctx, &c.srv, c.pool.upstreamClient, c.opts.ReadLimit, log)
		if err != nil {
			return nil, nil, nil, err
		}
		attrs = []any{"upstream", link.Redact(c.srv.Upstream), "transport", c.srv.transport()}
		log.Info("upstream session opened", attrs...)
		return h, h.conn, attrs, nil
	}
	ch, err := startChild(&c.srv, c.opts.ReadLimit, log)
	if err != nil {
		return nil, nil, nil, err
	}
	attrs = []any{"pid", ch.pid()}
	log.Info("server started", attrs...)
	return ch, ch.conn, attrs, nil
}
