package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// serveOptions are the flags of `hub serve`.
type serveOptions struct {
	addr           string
	redis          string
	tokens         string
	allowedOrigins string
	demo           bool
	insecure       bool
	log            logFlags
	callTimeout    time.Duration
	drainTimeout   time.Duration
	maxMessage     int
	maxBatch       int
	maxDepth       int
	maxInFlight    int
	maxConnections int
	rateLimit      float64
	rateBurst      int
	allowedHosts   string
	sessionIdle    time.Duration
	replayEvents   int
	maxSubs        int
	maxSubsToken   int
	serverNoteRate float64
	maxListBytes   int
	maxTemplates   int
	reservation    time.Duration
	listTTL        time.Duration

	publicURL       string
	oauthIssuers    string
	oauthAudiences  string
	auditLog        string
	dashClientID    string
	dashSecretFile  string
	dashboardScopes string
	catalog         string
	discovery       string

	introspectionIDs   string
	introspectionFiles string
	introspectionCache time.Duration

	taskAfter    time.Duration
	taskAfterFor string
	taskTTL      time.Duration

	tracing   bool
	tracingUI string
}

func serveCommand(o *serveOptions) *command {
	c := newCommand("serve")
	c.summary = "hub serve: run the hub. MCP servers dial out to it on /mcp/server, clients and dashboards dial in\n" +
		"on /mcp (WebSocket or Streamable HTTP), and it routes everything between them. \"hub\" alone does this."
	c.usage = []string{"hub [serve] [flags]"}
	c.examples = []string{
		"hub --demo                                   the hub and a demo server on http://127.0.0.1:8080",
		"hub --addr 0.0.0.0:8080 --tokens tokens.yaml   on every interface, with tokens",
		"hub --redis redis://10.0.0.2:6379/0            one of several instances sharing a Redis",
	}
	c.notes = "SIGTERM or SIGINT drains: new connections are refused and calls in flight get --drain-timeout to finish.\n" +
		"SIGHUP reloads the tokens file and the catalog file, and reopens the audit log.\n" +
		"With --oauth-issuer the hub is an OAuth 2.1 resource server (docs/security.md, \"Authorization\"): access tokens of\n" +
		"those issuers are accepted beside the static tokens. The dashboard's client secret is read from\n" +
		"--dashboard-client-secret-file, or " + dashboardSecretEnv + ": never from the command line. Opaque access tokens are\n" +
		"checked at an issuer's introspection endpoint with --oauth-introspection-client-id (one per --oauth-issuer, in its order,\n" +
		"empty for an issuer without), its secret from --oauth-introspection-secret-file (the same way) or, when one issuer\n" +
		"introspects, " + introspectionSecretEnv + "."
	fs := c.fs
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "`address` to listen on")
	fs.StringVar(&o.redis, "redis", "", "Redis `URL` shared by several instances: redis://host:port/db, or a Redis Cluster as redis+cluster://host:port,host:port; empty runs one instance on its in-memory broker")
	fs.StringVar(&o.tokens, "tokens", "", "`file` of tokens and roles (YAML or JSON); reloaded on SIGHUP")
	fs.StringVar(&o.catalog, "catalog", "", "catalog `file` (YAML or JSON): virtual servers at /servers/<name>/mcp and the naming of /mcp; reloaded when it changes and on SIGHUP, shared with the other instances")
	fs.StringVar(&o.discovery, "discovery", "list", "how /mcp offers tools: list (every tool) or search (the meta-tools search_tools and call_tool)")
	fs.StringVar(&o.allowedOrigins, "allowed-origins", "", "comma-separated `origins` (host patterns) whose pages may open WebSockets, besides the hub's own")
	fs.BoolVar(&o.demo, "demo", false, "run a demo MCP server beside the hub")
	fs.BoolVar(&o.insecure, "insecure", false, "allow listening beyond loopback without --tokens")
	o.log.add(fs)
	fs.DurationVar(&o.callTimeout, "call-timeout", hub.DefaultCallTimeout, "how long a routed request may take (-32001 beyond)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 10*time.Second, "how long calls in flight may finish on SIGTERM")
	fs.IntVar(&o.maxMessage, "max-message-bytes", hub.DefaultMaxMessageBytes, "largest frame accepted (close 1009 beyond)")
	fs.IntVar(&o.maxBatch, "max-batch", 100, "longest JSON-RPC batch accepted")
	fs.IntVar(&o.maxDepth, "max-depth", 64, "deepest JSON nesting accepted")
	fs.IntVar(&o.maxInFlight, "max-in-flight", hub.DefaultMaxInFlight, "requests one client connection may have in flight (-32004 beyond)")
	fs.IntVar(&o.maxConnections, "max-connections-per-token", hub.DefaultMaxConnectionsPerToken, "connections one token may hold open, and HTTP sessions without tokens all together (HTTP 429 beyond)")
	fs.Float64Var(&o.rateLimit, "rate-limit", hub.DefaultRateLimit, "requests per second per token (per connection without tokens); negative disables")
	fs.IntVar(&o.rateBurst, "rate-burst", hub.DefaultRateBurst, "burst of requests above --rate-limit")
	fs.StringVar(&o.allowedHosts, "allowed-hosts", "", "comma-separated Host `names` (patterns; * for any) the hub answers to without --tokens, besides loopback names and --addr's host (DNS rebinding protection)")
	fs.DurationVar(&o.sessionIdle, "session-idle-timeout", mcp.DefaultStreamableIdle, "how long a Streamable HTTP session may sit idle before it ends")
	fs.IntVar(&o.replayEvents, "replay-events", mcp.DefaultReplayEvents, "SSE events one HTTP session keeps for a client that resumes with Last-Event-ID")
	fs.IntVar(&o.maxSubs, "max-subscriptions", hub.DefaultMaxSubscriptions, "resources one client connection may subscribe to (-32004 beyond)")
	fs.IntVar(&o.maxSubsToken, "max-subscriptions-per-token", hub.DefaultMaxSubscriptionsPerToken, "resources all the connections of one token may subscribe to")
	fs.Float64Var(&o.serverNoteRate, "server-notification-rate", hub.DefaultServerNotificationRate, "notifications per second one server connection may send (dropped beyond); negative disables")
	fs.IntVar(&o.maxListBytes, "max-list-bytes", hub.DefaultMaxListBytes, "bytes of all one server's lists together (the server is refused beyond)")
	fs.IntVar(&o.maxTemplates, "max-templates", hub.DefaultMaxTemplates, "resource templates one server may list (the server is refused beyond)")
	fs.DurationVar(&o.reservation, "reservation-period", hub.DefaultReservationPeriod, "how long a server that left keeps its URIs, templates and name for its token (a redeploy gets them back); negative disables")
	fs.DurationVar(&o.listTTL, "list-ttl", hub.DefaultListTTL, "how long a 2026-07-28 client that listens for a list's changes may cache that list (its ttlMs); negative disables")
	fs.StringVar(&o.publicURL, "public-url", "", "the hub's canonical external `URL` (scheme, host, port): OAuth resource identifiers derive from it (<URL>/mcp, <URL>/servers/<name>/mcp, <URL>/mcp/server)")
	fs.StringVar(&o.oauthIssuers, "oauth-issuer", "", "comma-separated `URLs` of the trusted OAuth authorization servers, exactly as their tokens' iss; needs --public-url")
	fs.StringVar(&o.oauthAudiences, "oauth-audience", "", "comma-separated extra accepted token audiences, for authorization servers that cannot put the resource in aud")
	fs.StringVar(&o.auditLog, "audit-log", "", "`file` (or - for the standard output) of the audit trail: a JSON line per authorization decision and per routed call; reopened on SIGHUP")
	fs.StringVar(&o.dashClientID, "dashboard-client-id", "", "OAuth client `id` the dashboard logs in as, through the first --oauth-issuer (authorization code with PKCE; redirect URI <public-url>/login/oauth/callback)")
	fs.StringVar(&o.dashSecretFile, "dashboard-client-secret-file", "", "`file` holding the dashboard client's secret, for a confidential client")
	fs.StringVar(&o.dashboardScopes, "dashboard-scopes", "", "comma-separated `scopes` the dashboard's login asks for (default mcp:dashboard,mcp:client)")
	fs.StringVar(&o.introspectionIDs, "oauth-introspection-client-id", "", "the hub's client `ids` at the issuers' introspection endpoints (RFC 7662), for opaque access tokens: comma-separated, one per --oauth-issuer in its order, empty for an issuer without")
	fs.StringVar(&o.introspectionFiles, "oauth-introspection-secret-file", "", "`files` holding those clients' secrets, comma-separated as --oauth-introspection-client-id")
	fs.DurationVar(&o.introspectionCache, "oauth-introspection-cache", oauth.DefaultIntrospectionCache, "how long an introspected token's answer is trusted: a revoked token is refused within it; negative trusts it until the token's expiry")
	fs.DurationVar(&o.taskAfter, "task-after", hub.DefaultTaskAfter, "how long a tools/call of a client that declared the tasks extension may run at a server without it before the hub makes it a task it holds: the default, or half of --call-timeout when that is shorter; 0 disables")
	fs.StringVar(&o.taskAfterFor, "task-after-for", "", "comma-separated `NAME=DURATION` pairs: --task-after for the server NAME (0 disables it there)")
	fs.DurationVar(&o.taskTTL, "task-ttl", hub.DefaultTaskTTL, "how long the hub keeps a task it holds (its ttlMs; a call still running then is cancelled), and the handle of a server's task without a ttlMs of its own")
	fs.BoolVar(&o.tracing, "tracing", false, "export OpenTelemetry traces over OTLP, configured by the standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, ...; docs/observability.md)")
	fs.StringVar(&o.tracingUI, "tracing-ui-url", "", "`URL` of a tracing UI (Jaeger: http://jaeger:16686) that the call log links each call's trace to; {traceId} in it is replaced by the trace id, else /trace/<id> is added")
	return c
}

// taskAfterConfig turns --task-after and --task-after-for into the hub's
// Config: 0 disables, which Config says with a negative duration (its 0
// is the default: DefaultTaskAfter, or half the call timeout when that is
// shorter, which the flag's default stands for).
func (o *serveOptions) taskAfterConfig() (time.Duration, map[string]time.Duration, error) {
	off := func(d time.Duration) time.Duration {
		if d <= 0 {
			return -1
		}
		return d
	}
	var per map[string]time.Duration
	for _, pair := range splitList(o.taskAfterFor) {
		name, value, ok := strings.Cut(pair, "=")
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if !ok || strings.TrimSpace(name) == "" || err != nil {
			return 0, nil, usagef("serve", "--task-after-for: %q is not NAME=DURATION", pair)
		}
		if per == nil {
			per = map[string]time.Duration{}
		}
		per[strings.TrimSpace(name)] = off(d)
	}
	if o.taskAfter == hub.DefaultTaskAfter {
		return 0, per, nil
	}
	return off(o.taskAfter), per, nil
}

// isLoopback reports whether addr only listens on loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runServe is `hub serve`: the hub on its address until ctx ends, then a
// drain.
func runServe(ctx context.Context, args []string, env *Env) error {
	var o serveOptions
	c := serveCommand(&o)
	if err := c.parse(args, env); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if c.fs.NArg() > 0 {
		return usagef("serve", "unexpected arguments: %v", c.fs.Args())
	}
	log, err := o.log.logger("serve", env.Stderr)
	if err != nil {
		return err
	}
	if o.tokens == "" && o.oauthIssuers == "" && !o.insecure && !isLoopback(o.addr) {
		return fmt.Errorf("refusing to listen on %s without --tokens or --oauth-issuer: anyone could connect; pass --tokens FILE, or --insecure if you mean it", o.addr)
	}
	var tokens *hub.Tokens
	if o.tokens != "" {
		if tokens, err = hub.LoadTokens(o.tokens); err != nil {
			return err
		}
	}
	oauthCfg, err := o.oauthConfig(env)
	if err != nil {
		return err
	}
	taskAfter, taskAfterFor, err := o.taskAfterConfig()
	if err != nil {
		return err
	}
	if oauthCfg != nil && tokens == nil && o.demo {
		tokens = hub.NewTokens() // for the demo server's credentials alone
	}
	var audit *hub.AuditLog
	if o.auditLog != "" {
		if audit, err = hub.OpenAuditLog(o.auditLog); err != nil {
			return err
		}
		defer audit.Close() // after the hub: deferred before it
	}

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	cfg := hub.Config{
		Addr: ln.Addr().String(), CallTimeout: o.callTimeout, Logger: log, Tokens: tokens,
		MaxMessageBytes: o.maxMessage, MaxBatch: o.maxBatch, MaxDepth: o.maxDepth, MaxInFlight: o.maxInFlight,
		MaxConnectionsPerToken: o.maxConnections, RateLimit: o.rateLimit, RateBurst: o.rateBurst,
		SessionIdleTimeout: o.sessionIdle, ReplayEvents: o.replayEvents,
		MaxSubscriptions: o.maxSubs, MaxSubscriptionsPerToken: o.maxSubsToken,
		ServerNotificationRate: o.serverNoteRate, MaxListBytes: o.maxListBytes, MaxTemplates: o.maxTemplates,
		ReservationPeriod: o.reservation, OAuth: oauthCfg, Audit: audit,
		CatalogFile: o.catalog, Discovery: catalog.Discovery(o.discovery),
		TaskAfter: taskAfter, TaskAfterFor: taskAfterFor, TaskTTL: o.taskTTL,
		Tracing: tracing.Config{Enabled: o.tracing}, TracingUI: o.tracingUI,
		ListTTL: o.listTTL,
	}
	cfg.AllowedHosts = splitList(o.allowedHosts)
	if host, _, err := net.SplitHostPort(o.addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			cfg.AllowedHosts = append(cfg.AllowedHosts, host) // the name it was told to listen on
		}
	}
	cfg.OriginPatterns = splitList(o.allowedOrigins)
	if o.redis != "" {
		broker, err := newRedisBroker(ctx, o.redis, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer broker.Close()
		cfg.Broker = broker
	}
	h, err := hub.New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	srv := h.NewHTTPServer()
	if env.Handler != nil {
		srv.Handler = env.Handler(srv.Handler)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("switchboard listening", "addr", ln.Addr().String(), "dashboard", "http://"+ln.Addr().String()+"/",
		"tokens", o.tokens != "", "redis", o.redis != "", "oauth_issuers", splitList(o.oauthIssuers), "audit_log", o.auditLog,
		"tracing", o.tracing)

	if tokens != nil || audit != nil || o.catalog != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		reloaded := make(chan struct{})
		defer func() { <-reloaded }()
		go func() {
			defer close(reloaded)
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					reload(log, tokens, audit)
					_ = h.ReloadCatalog() // it logs what it did, or why it refused
				}
			}
		}()
	}

	// The demo server lives until the hub has drained, like a server
	// elsewhere would, so that its calls in flight can finish.
	demoCtx, stopDemo := context.WithCancel(context.Background())
	defer stopDemo()
	demoDone := make(chan error, 1)
	if o.demo {
		var dial mcp.DialOptions
		if tokens != nil {
			// The demo server needs credentials like any other: one that
			// lives only in this process, for the name "demo" alone.
			dial.Token = tokens.AddEphemeral("demo (--demo)", []hub.Role{hub.RoleServer}, []string{"demo"})
		}
		d := demo.New(nil)
		go func() {
			err := d.Run(demoCtx, "ws://"+ln.Addr().String()+"/mcp/server", &dial)
			if err != nil && demoCtx.Err() == nil {
				log.Error("the demo server stopped", "err", err)
			}
			demoDone <- err
		}()
	} else {
		demoDone <- nil
	}

	select {
	case <-ctx.Done():
	case err := <-served:
		h.Close()
		stopDemo()
		<-demoDone
		return err
	}
	log.Info("shutting down: draining", "timeout", o.drainTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), o.drainTimeout)
	defer cancel()
	shut := make(chan struct{})
	go func() { srv.Shutdown(drainCtx); close(shut) }() // stops accepting at once
	h.Drain(drainCtx)
	<-shut
	stopDemo()
	<-demoDone
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// reload is SIGHUP: the tokens file read again, the audit log reopened.
func reload(log *slog.Logger, tokens *hub.Tokens, audit *hub.AuditLog) {
	if tokens != nil {
		if err := tokens.Reload(); err != nil {
			log.Error("reloading tokens failed; keeping the old ones", "err", err)
		} else {
			log.Info("tokens reloaded")
		}
	}
	if audit != nil {
		if err := audit.Reopen(); err != nil {
			log.Error("reopening the audit log failed; its lines are dropped until the next SIGHUP", "err", err)
		} else {
			log.Info("audit log reopened")
		}
	}
}

// dashboardSecretEnv holds the dashboard client's secret, when no file does.
const dashboardSecretEnv = "SWITCHBOARD_DASHBOARD_CLIENT_SECRET"

// oauthConfig returns the hub's OAuth configuration of the flags, or nil
// without --oauth-issuer.
func (o *serveOptions) oauthConfig(env *Env) (*hub.OAuthConfig, error) {
	issuers := splitList(o.oauthIssuers)
	if len(issuers) == 0 {
		if o.dashClientID != "" {
			return nil, usagef("serve", "--dashboard-client-id needs --oauth-issuer")
		}
		return nil, nil
	}
	if o.publicURL == "" {
		return nil, usagef("serve", "--oauth-issuer needs --public-url: the hub's external URL, which names its resources")
	}
	cfg := &hub.OAuthConfig{PublicURL: o.publicURL, Issuers: issuers, Audiences: splitList(o.oauthAudiences)}
	in, err := o.introspection(issuers, env)
	if err != nil {
		return nil, err
	}
	cfg.Introspection = in
	if o.dashClientID != "" {
		d := &hub.DashboardLogin{ClientID: o.dashClientID, Scopes: splitList(o.dashboardScopes)}
		if o.dashSecretFile != "" {
			s, err := oauth.SecretFromFile(o.dashSecretFile)
			if err != nil {
				return nil, err
			}
			d.Secret = s
		} else if v, ok := env.LookupEnv(dashboardSecretEnv); ok && v != "" {
			d.Secret = oauth.NewSecret(v)
		}
		cfg.Dashboard = d
	}
	return cfg, nil
}

// introspectionSecretEnv holds the secret of the hub's introspection
// client, when one issuer introspects and no file holds it.
const introspectionSecretEnv = "SWITCHBOARD_OAUTH_INTROSPECTION_SECRET"

// introspection returns the introspection credentials of each issuer, from
// --oauth-introspection-client-id and --oauth-introspection-secret-file
// (each comma-separated, one item per issuer, in the order of
// --oauth-issuer) or the environment; nil when no issuer has any.
func (o *serveOptions) introspection(issuers []string, env *Env) (map[string]*oauth.Introspection, error) {
	if o.introspectionIDs == "" {
		if o.introspectionFiles != "" {
			return nil, usagef("serve", "--oauth-introspection-secret-file needs --oauth-introspection-client-id")
		}
		return nil, nil
	}
	ids := splitItems(o.introspectionIDs)
	if len(ids) != len(issuers) {
		return nil, usagef("serve", "--oauth-introspection-client-id has %d items for %d issuers: give one per --oauth-issuer, in its order (empty for an issuer without introspection)", len(ids), len(issuers))
	}
	var files []string
	if o.introspectionFiles != "" {
		if files = splitItems(o.introspectionFiles); len(files) != len(issuers) {
			return nil, usagef("serve", "--oauth-introspection-secret-file has %d items for %d issuers: give one per --oauth-issuer, as --oauth-introspection-client-id", len(files), len(issuers))
		}
	}
	out := make(map[string]*oauth.Introspection)
	for i, id := range ids {
		if id == "" {
			if files != nil && files[i] != "" {
				return nil, usagef("serve", "--oauth-introspection-secret-file names a file for %s, which has no introspection client id", issuers[i])
			}
			continue
		}
		out[issuers[i]] = &oauth.Introspection{ClientID: id, CacheFor: o.introspectionCache}
	}
	for i, iss := range issuers {
		in := out[iss]
		switch {
		case in == nil:
		case files != nil && files[i] != "":
			s, err := oauth.SecretFromFile(files[i])
			if err != nil {
				return nil, fmt.Errorf("the introspection secret of %s: %w", iss, err)
			}
			in.Secret = s
		case len(out) == 1:
			if in.Secret = envSecret(env, introspectionSecretEnv); in.Secret.Reveal() == "" {
				return nil, usagef("serve", "the introspection client of %s needs its secret: --oauth-introspection-secret-file or %s", iss, introspectionSecretEnv)
			}
		default:
			return nil, usagef("serve", "the introspection client of %s needs its secret in --oauth-introspection-secret-file (%s serves one issuer only)", iss, introspectionSecretEnv)
		}
	}
	return out, nil
}

func newRedisBroker(ctx context.Context, url string, log *slog.Logger) (*pubsub.Redis, error) {
	// go-redis logs dial failures through a global logger of its own; route
	// them to ours, at debug: the broker already reports outages once.
	redis.SetLogger(redisLogger{log})
	return pubsub.NewRedis(ctx, pubsub.RedisOptions{URL: url, KeyPrefix: "switchboard:", Logger: log})
}

// redisLogger adapts slog to go-redis's internal logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.Debug("redis: " + fmt.Sprintf(format, v...))
}

// splitItems splits a comma-separated flag into its items, empty ones
// kept: the items of a list that follows another's order.
func splitItems(s string) []string {
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// splitList splits a comma-separated flag into its non-empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
