package hub

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Version is the hub's version, reported in serverInfo and clientInfo.
const Version = "0.1.0"

// Config configures a Hub. The zero value is usable: one instance on the
// in-memory broker, with the defaults below.
type Config struct {
	// Broker connects instances; nil means a private in-memory broker.
	Broker pubsub.Broker
	// InstanceID names this instance among others; default a random UUID.
	InstanceID string
	// Addr is the address clients reach this instance at, for
	// switchboard://instances.
	Addr string
	// Separator joins server and item names; default "__".
	Separator string
	// CallTimeout bounds every routed request; default 60 s.
	CallTimeout time.Duration
	// PageSize is the number of items in one page of a list; default 100.
	PageSize int
	// HeartbeatInterval is how often this instance tells the others it is
	// alive; one that is silent for 3 intervals is dropped. Default 1 s.
	HeartbeatInterval time.Duration
	// OriginPatterns lists the origins (host patterns, as coder/websocket
	// reads them) whose pages may open WebSockets to the hub, besides the
	// hub's own host. Every other browser origin is refused with 403: this
	// is what stops cross-site WebSocket hijacking.
	OriginPatterns []string
	// AllowedHosts lists the Host names (path.Match patterns, "*" for any)
	// the hub answers to without tokens, besides loopback names: the guard
	// against DNS rebinding when anyone who connects is admin. Ignored
	// when Tokens is set.
	AllowedHosts []string

	// Tokens, when set, are required on every connection; nil lets anyone
	// in (the command allows that on loopback only, or with --insecure).
	Tokens *Tokens
	// OAuth, when set, makes the hub an OAuth 2.1 resource server: access
	// tokens of its issuers are accepted beside Tokens (auth_oauth.go).
	OAuth *OAuthConfig
	// Audit, when set, receives a line per authorization decision and per
	// routed call (audit.go). The hub does not close it.
	Audit *AuditLog

	// MaxMessageBytes bounds one frame; a larger one closes the connection
	// with 1009. Default 4 MiB.
	MaxMessageBytes int
	// MaxBatch and MaxDepth bound a batch's length and JSON nesting
	// (-32600 beyond). Defaults 100 and 64.
	MaxBatch, MaxDepth int
	// MaxInFlight bounds the requests one client connection has in flight;
	// more are refused with -32004. Default 256.
	MaxInFlight int
	// MaxConnectionsPerToken bounds the connections (and HTTP sessions)
	// open with one token (HTTP 429 beyond); a token's own maxConnections
	// overrides it. Default 1000. Without tokens it bounds the HTTP
	// sessions, all together (they outlive their sockets); WebSockets and
	// stateless requests, which last as long as their sockets, are not
	// counted.
	MaxConnectionsPerToken int
	// RateLimit is the sustained requests per second one token may send,
	// over all its connections (each connection on its own without
	// tokens), with bursts of RateBurst; beyond, requests get -32004 with
	// data.retryAfterMs. Defaults 1000 and 2000; negative disables.
	RateLimit float64
	RateBurst int
	// DiscoverTimeout is how long a server that dialed in has to answer
	// the hub's first request, server/discover, before the hub takes it for
	// a server of the session revisions and sends initialize instead (one
	// of those should refuse a method it does not know at once). Default
	// 5 s.
	DiscoverTimeout time.Duration
	// InitializeTimeout is how long a client has, once connected, to send
	// initialize; a slower one is closed with 1008. Default 10 s.
	InitializeTimeout time.Duration
	// HandshakeTimeout bounds reading an upgrade request's headers (against
	// slowloris clients), in the http.Server of NewHTTPServer. Default 10 s.
	HandshakeTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers: a body not complete by then is answered 408 and its
	// connection closed, so that a client that sends one byte a second
	// holds no connection for long. Default 10 s.
	BodyTimeout time.Duration
	// StreamWriteTimeout bounds each write of an HTTP response (an SSE
	// stream above all), on the instance that owns the session and on one
	// that relays it: a client that stops reading loses its stream (it
	// may resume it with Last-Event-ID). Default 30 s.
	StreamWriteTimeout time.Duration
	// SendQueue bounds the frames queued for one connection; a peer that
	// lets it overflow is closed with 1008 "slow consumer". Default 1024.
	SendQueue int

	// ServerNotificationRate is the sustained notifications per second one
	// server connection may send (progress, logs, updates), with bursts of
	// ServerNotificationBurst; beyond, they are dropped and counted, but
	// for the last progress report of a call and the last update of each
	// resource, held until the rate allows (list_changed and cancellations
	// are not limited). Defaults 1000 and 2000; negative disables.
	ServerNotificationRate  float64
	ServerNotificationBurst int

	// MaxListItems bounds the items of each list of one server (tools,
	// resources, prompts), MaxTemplates its resource templates (each is
	// matched against URIs), MaxItemBytes one item and MaxListBytes all of
	// a server's lists together; a server beyond is closed with 1008 and
	// the reason. Defaults 10000, 1000, 256 KiB and 16 MiB.
	MaxListItems, MaxTemplates, MaxItemBytes, MaxListBytes int
	// SnapshotChunkBytes bounds one message of the snapshot an instance
	// publishes of its servers; a larger snapshot goes in parts. Default
	// 256 KiB.
	SnapshotChunkBytes int
	// PageBytes bounds a page of a list a client asks for (at least one
	// item goes on each), as PageSize bounds its items. Default 1 MiB.
	PageBytes int

	// MaxSubscriptions bounds the resources one session subscribes to, and
	// MaxSubscriptionsPerToken those of all the sessions of one token;
	// beyond, subscribe gets -32004. Defaults 1000 and 10000.
	MaxSubscriptions, MaxSubscriptionsPerToken int
	// ListChangedInterval is the least time between two list_changed of one
	// kind to one client (the last change is always told). Default 100 ms.
	ListChangedInterval time.Duration
	// MaxLeaseQueue bounds the calls that wait on this instance for a
	// replica of one server whose replicas are leased (one client at a
	// time: servers whose requests to clients cannot name their call);
	// beyond, a call gets -32004 with data.retryAfterMs. Default 1024.
	MaxLeaseQueue int
	// ReservationPeriod is how long a server that left keeps its place: its
	// URIs and templates (and its name) stay reserved to its token, so that
	// it gets them back when it returns (a redeploy) and no other server is
	// served them meanwhile. Default 2 minutes; negative disables.
	ReservationPeriod time.Duration
	// ListTTL is how long a 2026-07-28 client may keep a list (its ttlMs)
	// while its principal listens on this instance for that list's
	// changes (subscriptions/listen): a change reaches it as list_changed,
	// which evicts the list from its cache. Other clients are promised no
	// freshness (ttlMs 0). Default 1 minute; negative disables.
	ListTTL time.Duration

	// TaskAfter makes a long call a task (the tasks extension): a
	// tools/call of a client that declared the extension, to a server that
	// does not speak it, still unanswered after this long becomes a task
	// the hub holds (routing_heldtasks.go). The client is answered with the
	// task at once, and the hub keeps the call going, the task's status
	// (progress as its statusMessage) and its result. Default
	// DefaultTaskAfter, or half the CallTimeout when that is shorter: a call
	// becomes a task well before it would time out; negative disables.
	TaskAfter time.Duration
	// TaskAfterFor overrides TaskAfter for the servers it names (by hub
	// name); a negative duration: never for that server.
	TaskAfterFor map[string]time.Duration
	// TaskTTL is the ttlMs of the tasks the hub holds: their record is kept
	// that long from their creation, and a call still running then is
	// cancelled. It is also how long the hub keeps the handle of a task a
	// server made without a ttlMs of its own. Default 1 hour.
	TaskTTL time.Duration
	// TaskPollInterval is the pollIntervalMs of the tasks the hub holds.
	// Default 1 s.
	TaskPollInterval time.Duration
	// MaxTasks bounds the tasks one principal has on one instance: those
	// the hub holds until they end, the handles of servers' tasks until they
	// expire. Beyond, a call does not become a task (it goes on as a call)
	// and a server's task is refused (-32004; it is cancelled at the
	// server). Default 1000.
	MaxTasks int
	// MaxTaskBytes bounds the bytes of results one principal's hub-held
	// tasks keep on one instance, until they expire; a result that does not
	// fit fails its task (-32603, saying so). Default 64 MiB.
	MaxTaskBytes int

	// StatsInterval is how often switchboard://stats is brought up to date
	// while someone watches it; its window spans 60 intervals. Default 1 s.
	StatsInterval time.Duration

	// SessionIdleTimeout ends a Streamable HTTP session with no request in
	// progress and no stream open for this long, releasing its
	// subscriptions. Default 10 minutes.
	SessionIdleTimeout time.Duration
	// ReplayEvents and ReplayBytes bound the SSE events one HTTP session
	// keeps for a client that reconnects with Last-Event-ID. Defaults 256
	// and 1 MiB.
	ReplayEvents, ReplayBytes int
	// HTTPResponses chooses how a POST with requests is answered:
	// mcp.ResponseAuto (the default) with JSON when the answer is all there
	// is to send, mcp.ResponseSSE always with an SSE stream (a priming event
	// with an id, so a client can resume it with Last-Event-ID).
	HTTPResponses mcp.ResponseMode

	// CatalogFile is the catalog file (YAML or JSON: virtual servers, the
	// aggregate's naming policy; pkg/catalog); "" for none. It must parse
	// when the hub starts; later it is read again when it changes (looked
	// at every CatalogPoll, default 250 ms) and on ReloadCatalog, and a
	// catalog that does not parse is refused, the one in force kept.
	// Instances with a catalog file share the newest catalog through the
	// broker (catalog_cluster.go).
	CatalogFile string
	CatalogPoll time.Duration
	// Discovery is how /mcp offers tools: catalog.DiscoveryList (the
	// default) lists them all, catalog.DiscoverySearch lists the
	// meta-tools search_tools and call_tool.
	Discovery catalog.Discovery
	// Tracing configures OpenTelemetry tracing (docs/observability.md):
	// off unless Tracing.Enabled, and then free. The hub sets its
	// InstanceID (service.instance.id) and Logger, registers its metrics,
	// and shuts it down on Close, exporting what is left.
	Tracing tracing.Config
	// TracingUI, when set, is the base URL of a tracing UI (Jaeger, Grafana
	// Tempo) that the call log links each call's trace to: "{traceId}" in
	// it is replaced by the trace id; without it, "/trace/<id>" is added,
	// as Jaeger's UI takes it.
	TracingUI string

	// WebSocket tunes every connection (keepalive, write timeout).
	WebSocket peer.WebSocketOptions
	// Logger receives the hub's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultSeparator                = "__"
	DefaultCallTimeout              = 60 * time.Second
	DefaultPageSize                 = 100
	DefaultHeartbeatInterval        = time.Second
	DefaultMaxMessageBytes          = 4 << 20
	DefaultMaxInFlight              = 256
	DefaultMaxConnectionsPerToken   = 1000
	DefaultRateLimit                = 1000
	DefaultRateBurst                = 2000
	DefaultInitializeTimeout        = 10 * time.Second
	DefaultDiscoverTimeout          = 5 * time.Second
	DefaultHandshakeTimeout         = 10 * time.Second
	DefaultBodyTimeout              = 10 * time.Second
	DefaultSendQueue                = 1024
	DefaultServerNotificationRate   = 1000
	DefaultServerNotificationBurst  = 2000
	DefaultMaxListItems             = 10000
	DefaultMaxTemplates             = 1000
	DefaultMaxItemBytes             = 256 << 10
	DefaultMaxListBytes             = 16 << 20
	DefaultPageBytes                = 1 << 20
	DefaultSnapshotChunkBytes       = 256 << 10
	DefaultMaxSubscriptions         = 1000
	DefaultMaxSubscriptionsPerToken = 10000
	DefaultListChangedInterval      = 100 * time.Millisecond
	DefaultStatsInterval            = time.Second
	DefaultReservationPeriod        = 2 * time.Minute
	DefaultListTTL                  = time.Minute
	DefaultMaxLeaseQueue            = 1024
	DefaultTaskAfter                = 30 * time.Second
	DefaultTaskTTL                  = time.Hour
	DefaultTaskPollInterval         = time.Second
	DefaultMaxTasks                 = 1000
	DefaultMaxTaskBytes             = 64 << 20
)

func (cfg *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if cfg.Separator == "" {
		cfg.Separator = DefaultSeparator
	}
	defDur(&cfg.CallTimeout, DefaultCallTimeout)
	def(&cfg.MaxLeaseQueue, DefaultMaxLeaseQueue)
	def(&cfg.PageSize, DefaultPageSize)
	defDur(&cfg.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&cfg.MaxMessageBytes, DefaultMaxMessageBytes)
	def(&cfg.MaxBatch, jsonrpc.DefaultMaxBatch)
	def(&cfg.MaxDepth, jsonrpc.DefaultMaxDepth)
	def(&cfg.MaxInFlight, DefaultMaxInFlight)
	def(&cfg.MaxConnectionsPerToken, DefaultMaxConnectionsPerToken)
	if cfg.RateLimit == 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	def(&cfg.RateBurst, DefaultRateBurst)
	defDur(&cfg.InitializeTimeout, DefaultInitializeTimeout)
	defDur(&cfg.DiscoverTimeout, DefaultDiscoverTimeout)
	defDur(&cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	defDur(&cfg.BodyTimeout, DefaultBodyTimeout)
	defDur(&cfg.StreamWriteTimeout, mcp.DefaultStreamWriteTimeout)
	defDur(&cfg.SessionIdleTimeout, mcp.DefaultStreamableIdle)
	if cfg.ServerNotificationRate == 0 {
		cfg.ServerNotificationRate = DefaultServerNotificationRate
	}
	def(&cfg.ServerNotificationBurst, DefaultServerNotificationBurst)
	def(&cfg.MaxListItems, DefaultMaxListItems)
	def(&cfg.MaxTemplates, DefaultMaxTemplates)
	def(&cfg.MaxItemBytes, DefaultMaxItemBytes)
	def(&cfg.MaxListBytes, DefaultMaxListBytes)
	def(&cfg.PageBytes, DefaultPageBytes)
	def(&cfg.SnapshotChunkBytes, DefaultSnapshotChunkBytes)
	def(&cfg.MaxSubscriptions, DefaultMaxSubscriptions)
	def(&cfg.MaxSubscriptionsPerToken, DefaultMaxSubscriptionsPerToken)
	defDur(&cfg.ListChangedInterval, DefaultListChangedInterval)
	defDur(&cfg.StatsInterval, DefaultStatsInterval)
	if cfg.ReservationPeriod == 0 {
		cfg.ReservationPeriod = DefaultReservationPeriod
	}
	if cfg.ListTTL == 0 {
		cfg.ListTTL = DefaultListTTL
	}
	def(&cfg.ReplayEvents, mcp.DefaultReplayEvents)
	def(&cfg.ReplayBytes, mcp.DefaultReplayBytes)
	def(&cfg.SendQueue, DefaultSendQueue)
	defDur(&cfg.CatalogPoll, DefaultCatalogPoll)
	if cfg.TaskAfter == 0 {
		cfg.TaskAfter = min(DefaultTaskAfter, cfg.CallTimeout/2)
	}
	defDur(&cfg.TaskTTL, DefaultTaskTTL)
	defDur(&cfg.TaskPollInterval, DefaultTaskPollInterval)
	def(&cfg.MaxTasks, DefaultMaxTasks)
	def(&cfg.MaxTaskBytes, DefaultMaxTaskBytes)
	if cfg.InstanceID == "" {
		cfg.InstanceID = uuid.NewString()
	}
	cfg.WebSocket.ReadLimit = int64(cfg.MaxMessageBytes)
}

// limits are the frame limits of every connection.
func (cfg *Config) limits() jsonrpc.Limits {
	return jsonrpc.Limits{MaxBytes: cfg.MaxMessageBytes, MaxBatch: cfg.MaxBatch, MaxDepth: cfg.MaxDepth}
}

// Hub routes MCP between clients and the servers that dial out to it.
type Hub struct {
	cfg        Config
	overloaded *jsonrpc.Error // what a session's call beyond MaxInFlight is answered: one for all
	log        *slog.Logger
	metrics    *metrics
	tracing    *tracing.Tracing // never nil; off unless Config.Tracing.Enabled (tracing.go)
	id         string
	broker     pubsub.Broker
	ownsBroker bool
	start      time.Time

	reg        *registry
	subs       *subscriptions
	inputs     *inputs   // modern clients' calls waiting for their input (routing_input.go)
	listening  listening // principals' listen streams, by list (session_modern.go cacheHints)
	leases     *leases   // replicas that serve one client at a time (routing_lease.go)
	tasks      *tasks    // the tasks extension: records, held calls, followers (cluster_tasks.go)
	cluster    *cluster
	streamable *mcp.StreamableHandler // the Streamable HTTP sessions
	gone       departures             // servers that left lately
	closers    closers                // servers that closed on server/discover (replica_modern.go)
	elicits    elicitations           // where URL-mode elicitations went (routing_elicitation.go)
	stats      *stats                 // traffic statistics: switchboard://stats, clients, calls
	oauth      *resourceServer        // nil without OAuthConfig
	catalog    *catalogKeeper         // the catalog in force (catalog.go)
	mux        http.Handler

	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced after every registry change

	ctx    context.Context // the hub's lifetime: sessions derive from it
	cancel context.CancelFunc
	// peerCtx is ctx without its cancellation, made once: the parent of
	// every session's peer (the hub closes its peers itself).
	peerCtx context.Context
	wg      sync.WaitGroup

	mu       sync.Mutex
	sessions map[*session]struct{}
	replicas map[*replica]struct{} // connected, registered or not yet
	perToken map[string]int        // open connections by token name
	buckets  map[string]*bucket    // rate limits by token name
	closed   bool

	draining atomic.Bool
	inflight atomic.Int64 // client requests being served

	seq atomic.Int64 // replica, client and progress-token numbers
}

// New returns a hub. Close it to release its goroutines and connections.
func New(cfg Config) (*Hub, error) {
	cfg.setDefaults()
	switch cfg.Discovery {
	case "", catalog.DiscoveryList, catalog.DiscoverySearch:
	default:
		return nil, fmt.Errorf("hub: discovery is %q or %q, not %q", catalog.DiscoveryList, catalog.DiscoverySearch, cfg.Discovery)
	}
	h := &Hub{
		overloaded: errOverloaded(cfg.MaxInFlight),
		cfg:        cfg,
		log:        cfg.Logger,
		id:         cfg.InstanceID,
		broker:     cfg.Broker,
		start:      time.Now(),
		sessions:   map[*session]struct{}{},
		replicas:   map[*replica]struct{}{},
		perToken:   map[string]int{},
		buckets:    map[string]*bucket{},
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.log = h.log.With("instance", shortID(h.id))
	if cfg.OAuth != nil {
		rs, err := newResourceServer(cfg.OAuth, h)
		if err != nil {
			return nil, err
		}
		h.oauth = rs
	}
	if h.broker == nil {
		h.broker = pubsub.NewMemory()
		h.ownsBroker = true
	}
	h.metrics = newMetrics(h)
	tcfg := cfg.Tracing
	tcfg.InstanceID, tcfg.Logger = h.id, h.log
	tr, err := tracing.New(context.Background(), tcfg)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	h.tracing, h.metrics.tracing = tr, tr
	h.metrics.reg.MustRegister(tr)
	h.broker = &meteredBroker{Broker: h.broker, m: h.metrics}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.peerCtx = context.WithoutCancel(h.ctx)
	h.reg = newRegistry(cfg.ReservationPeriod, h.viewChanged)
	h.reg.derive = h.deriveCatalog
	h.catalog = newCatalogKeeper(h, cfg.CatalogFile)
	h.subs = newSubscriptions(h)
	h.inputs = newInputs(h)
	h.leases = newLeases(h)
	h.tasks = newTasks(h)
	h.stats = newStats(h)
	h.cluster = newCluster(h)
	h.streamable = h.newStreamable()
	h.mux = h.newMux()
	if err := h.subs.start(h.ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hub: subscribing to the broker: %w", err)
	}
	if err := h.cluster.start(h.ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hub: joining the cluster: %w", err)
	}
	if err := h.stats.start(h.ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hub: subscribing to the statistics: %w", err)
	}
	if err := h.tasks.start(h.ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hub: subscribing to task changes: %w", err)
	}
	if h.oauth != nil {
		h.goOwned(func() { _ = h.oauth.v.Run(h.ctx) }) // the issuers' keys ahead of need; logs an issuer down
	}
	if err := h.catalog.start(h.ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hub: %w", err)
	}
	h.reg.reannounce() // what the catalog, or the search mode, makes of the (empty) view
	return h, nil
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// ID returns the instance's ID.
func (h *Hub) ID() string { return h.id }

// nextKey returns this instance's id, a slash and a number unique on this
// instance: a key that names a session or a replica across the cluster,
// made in one allocation. The number alone is keyID's slice of it.
func (h *Hub) nextKey() string {
	var num [20]byte
	var b strings.Builder
	b.Grow(len(h.id) + 1 + len(num))
	b.WriteString(h.id)
	b.WriteByte('/')
	b.Write(strconv.AppendInt(num[:0], h.seq.Add(1), 10))
	return b.String()
}

// keyID returns the number a key of nextKey ends with.
func (h *Hub) keyID(key string) string { return key[len(h.id)+1:] }

// Drain shuts the instance down gracefully: /readyz reports it, new
// connections are refused (503) and new routed requests too, the requests in
// flight may finish until ctx ends, then every connection is closed with
// 1001 "going away" (servers dialing out reconnect, elsewhere behind a load
// balancer) and the hub stops.
func (h *Hub) Drain(ctx context.Context) error {
	if h.draining.Swap(true) {
		return h.Close()
	}
	h.metrics.draining.Set(1)
	h.log.Info("draining", "inFlight", h.inflight.Load())
	for _, s := range h.sessionList() {
		s.endListeners() // a stream of notifications is no call to wait for
	}
	// Wait until no client has a request unanswered, and no call that
	// another instance routed here is in flight: answers are then on their
	// way, and closing sends them before the close frame. The drain happens
	// once: polling is cheaper than a signal on every request.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !h.idle() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			h.log.Warn("drain timeout: closing with requests still in flight", "inFlight", h.inflight.Load())
			return h.Close()
		}
	}
	return h.Close()
}

// idle reports whether the instance carries no call: none of its clients'
// and none that other instances routed to its servers.
func (h *Hub) idle() bool {
	if h.inflight.Load() > 0 || h.cluster.serving() > 0 {
		return false
	}
	for _, s := range h.sessionList() {
		if s.peer.Pending() > 0 {
			return false
		}
	}
	return true
}

// Close closes every connection with 1001 "going away" and stops the hub.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	// The tasks this instance holds end first, failed with a clear error,
	// while the broker still takes their records.
	h.tasks.close()
	h.mu.Lock()
	peers := make([]*peer.Peer, 0, len(h.sessions)+len(h.replicas))
	for s := range h.sessions {
		peers = append(peers, s.peer)
	}
	for r := range h.replicas {
		peers = append(peers, r.peer)
	}
	h.mu.Unlock()
	h.streamable.Close()
	for _, p := range peers {
		p.CloseWith(peer.CloseGoingAway, "hub shutting down")
	}
	for _, p := range peers {
		p.Wait()
	}
	h.cancel()
	h.wg.Wait()
	h.subs.close()
	h.catalog.stopSharing()
	h.cluster.close()
	h.stats.close()
	h.tasks.stop()
	var err error
	if h.ownsBroker {
		err = h.broker.Close()
	}
	// The spans of the last calls leave now, or are dropped (and counted)
	// once a collector that does not answer has had its time.
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdown)
	defer cancel()
	if terr := h.tracing.Shutdown(ctx); terr != nil {
		h.log.Warn("tracing: the last spans were not exported", "err", terr)
	}
	return err
}

// setLocal publishes a local replica, to this instance and the cluster.
func (h *Hub) setLocal(ri *replicaInfo) error {
	if err := h.reg.setLocal(ri); err != nil {
		return err
	}
	h.cluster.localChanged()
	return nil
}

// removeLocal withdraws a local replica; the last replica of its name in
// the cluster gives up the name's lease.
func (h *Hub) removeLocal(id string) {
	ri := h.reg.localInfo(id)
	if h.reg.removeLocal(id) {
		h.cluster.localChanged()
		if ri != nil {
			h.releaseName(ri.Name, ri.Owner)
		}
	}
}

// goOwned runs fn on a goroutine the hub waits for on Close.
func (h *Hub) goOwned(fn func()) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
	return true
}

// viewChanged runs, in order, after every registry change: clients hear of
// the lists that changed, subscribers of the hub's own resources of the new
// state, and subscriptions follow servers that moved.
func (h *Hub) viewChanged(old, cur *view) {
	h.changedMu.Lock()
	if h.changed != nil {
		close(h.changed)
	}
	h.changed = make(chan struct{})
	h.changedMu.Unlock()

	h.listsChanged(old, cur)
	for _, c := range cur.conflicts {
		if !slices.Contains(old.conflicts, c) {
			h.log.Warn("a server lists what an earlier server serves; its copy is not served",
				"kind", c.Kind, "key", c.Key, "kept", c.Kept, "refused", c.Refused)
		}
	}
	h.builtinsChanged()
	h.subs.viewChanged(cur)
}

// waitView waits until the registry's view satisfies ok, or ctx ends.
func (h *Hub) waitView(ctx context.Context, ok func(*view) bool) error {
	for {
		h.changedMu.Lock()
		if h.changed == nil {
			h.changed = make(chan struct{})
		}
		ch := h.changed
		h.changedMu.Unlock()
		if ok(h.reg.view()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// listsChanged tells every initialized session which of its lists
// changed: the whole hub's, or its server's; at most one of each kind per
// ListChangedInterval, the last change always told.
func (h *Hub) listsChanged(old, cur *view) {
	whole := cur.changed(old, "")
	for _, s := range h.sessionList() {
		methods := whole
		if s.scope != "" {
			methods = cur.changed(old, s.scope)
		}
		for _, m := range methods {
			if c := s.owe(m, cur.gen); c != nil {
				c.fire(m)
			}
		}
	}
}

// sessionList returns the client sessions (not those ending).
func (h *Hub) sessionList() []*session {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*session, 0, len(h.sessions))
	for s := range h.sessions {
		if !s.closed.Load() {
			out = append(out, s)
		}
	}
	return out
}

func encodeNotification(method string, params any) []byte {
	raw, err := jsonrpc.Marshal(params)
	if err != nil {
		raw = nil
	}
	return (&jsonrpc.Request{Method: method, Params: raw}).Encode()
}
