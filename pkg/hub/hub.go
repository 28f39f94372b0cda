package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
	"github.com/switchboard-mcp/switchboard/web"
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
	// OriginPatterns lists the origins (besides the hub's own host) whose
	// pages may open WebSockets to the hub.
	OriginPatterns []string
	// WebSocket tunes every connection.
	WebSocket peer.WebSocketOptions
	// Limits bound each frame.
	Limits jsonrpc.Limits
	// Logger receives the hub's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultSeparator         = "__"
	DefaultCallTimeout       = 60 * time.Second
	DefaultPageSize          = 100
	DefaultHeartbeatInterval = time.Second
)

// Hub routes MCP between clients and the servers that dial out to it.
type Hub struct {
	cfg        Config
	log        *slog.Logger
	id         string
	broker     pubsub.Broker
	ownsBroker bool
	start      time.Time

	reg     *registry
	subs    *subscriptions
	cluster *cluster

	changedMu sync.Mutex
	changed   chan struct{} // closed and replaced after every registry change

	ctx    context.Context // the hub's lifetime: sessions derive from it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	clients  map[*clientSession]struct{}
	replicas map[*replica]struct{} // connected, registered or not yet
	closed   bool

	seq atomic.Int64 // replica, client and progress-token numbers
}

// New returns a hub. Close it to release its goroutines and connections.
func New(cfg Config) (*Hub, error) {
	if cfg.Separator == "" {
		cfg.Separator = DefaultSeparator
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = uuid.NewString()
	}
	h := &Hub{
		cfg:      cfg,
		log:      cfg.Logger,
		id:       cfg.InstanceID,
		broker:   cfg.Broker,
		start:    time.Now(),
		clients:  map[*clientSession]struct{}{},
		replicas: map[*replica]struct{}{},
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.log = h.log.With("instance", shortID(h.id))
	if h.broker == nil {
		h.broker = pubsub.NewMemory()
		h.ownsBroker = true
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.reg = newRegistry(h.viewChanged)
	h.subs = newSubscriptions(h)
	h.cluster = newCluster(h)
	if err := h.subs.start(h.ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hub: subscribing to the broker: %w", err)
	}
	if err := h.cluster.start(h.ctx); err != nil {
		h.Close()
		return nil, fmt.Errorf("hub: joining the cluster: %w", err)
	}
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

// Handler returns the hub's HTTP handler: /mcp, /mcp/server, /healthz,
// /readyz and the dashboard at /.
func (h *Hub) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp", h.serveClient)
	mux.HandleFunc("GET /mcp/server", h.serveServer)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", h.serveReady)
	mux.Handle("GET /", web.Handler())
	return mux
}

func (h *Hub) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := h.broker.Ready(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: broker unavailable")
		return
	}
	fmt.Fprintln(w, "ready")
}

func (h *Hub) acceptOptions() *peer.AcceptOptions {
	return &peer.AcceptOptions{WebSocketOptions: h.cfg.WebSocket, OriginPatterns: h.cfg.OriginPatterns}
}

// nextID returns a number unique on this instance.
func (h *Hub) nextID() string { return strconv.FormatInt(h.seq.Add(1), 10) }

// Close closes every connection with 1001 "going away" and stops the hub.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	peers := make([]*peer.Peer, 0, len(h.clients)+len(h.replicas))
	for c := range h.clients {
		peers = append(peers, c.peer)
	}
	for r := range h.replicas {
		peers = append(peers, r.peer)
	}
	h.mu.Unlock()
	for _, p := range peers {
		p.CloseWith(peer.CloseGoingAway, "hub shutting down")
	}
	for _, p := range peers {
		p.Wait()
	}
	h.cancel()
	h.wg.Wait()
	h.subs.close()
	h.cluster.close()
	var err error
	if h.ownsBroker {
		err = h.broker.Close()
	}
	return err
}

// setLocal publishes a local replica, to this instance and the cluster.
func (h *Hub) setLocal(ri *replicaInfo) {
	h.reg.setLocal(ri)
	h.cluster.localChanged()
}

// removeLocal withdraws a local replica.
func (h *Hub) removeLocal(id string) {
	if h.reg.removeLocal(id) {
		h.cluster.localChanged()
	}
}

// localReplica finds a connected local replica by ID.
func (h *Hub) localReplica(id string) *replica {
	h.reg.mu.Lock()
	defer h.reg.mu.Unlock()
	if ri := h.reg.local[id]; ri != nil {
		return ri.local
	}
	return nil
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

	tools, resources, prompts := cur.changed(old)
	var methods []string
	if tools {
		methods = append(methods, mcp.NotificationToolsListChanged)
	}
	if resources {
		methods = append(methods, mcp.NotificationResourcesListChanged)
	}
	if prompts {
		methods = append(methods, mcp.NotificationPromptsListChanged)
	}
	for _, m := range methods {
		h.broadcast(encodeNotification(m, nil))
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

// broadcast sends an encoded notification to every initialized client.
func (h *Hub) broadcast(frame []byte) {
	for _, c := range h.clientList() {
		if c.isInitialized() {
			_ = c.peer.SendEncoded(frame)
		}
	}
}

func (h *Hub) clientList() []*clientSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*clientSession, 0, len(h.clients))
	for c := range h.clients {
		out = append(out, c)
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

// errServerGone is what a call gets when its server disconnects.
func errServerGone(server string) error {
	return (&jsonrpc.Error{Code: mcp.CodeConnectionClosed, Message: fmt.Sprintf("server %q disconnected", server)}).
		WithData(map[string]string{"server": server})
}

// upstreamError turns the outcome of a routed request into what the caller
// sees: the server's own error as is, a timeout as -32001, a lost server as
// -32000.
func (h *Hub) upstreamError(ctx context.Context, server string, err error) error {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return mcp.ErrRequestTimeout.WithData(map[string]any{"server": server, "timeoutMs": h.cfg.CallTimeout.Milliseconds()})
	case errors.As(err, &rpcErr):
		if rpcErr == peer.ErrClosed { // the connection closed, as opposed to a -32000 the server sent
			return errServerGone(server)
		}
		return rpcErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	h.log.Warn("routing failed", "server", server, "err", err)
	return jsonrpc.ErrInternal
}

// downstreamError is upstreamError for a server's request routed to a
// client.
func (h *Hub) downstreamError(ctx context.Context, err error) error {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return mcp.ErrRequestTimeout.WithData(map[string]any{"timeoutMs": h.cfg.CallTimeout.Milliseconds()})
	case errors.As(err, &rpcErr):
		if rpcErr == peer.ErrClosed {
			return &jsonrpc.Error{Code: mcp.CodeConnectionClosed, Message: "the client disconnected"}
		}
		return rpcErr
	case ctx.Err() != nil:
		return ctx.Err()
	}
	h.log.Warn("routing to a client failed", "err", err)
	return jsonrpc.ErrInternal
}
