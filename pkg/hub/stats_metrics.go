package hub

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// metrics are the hub's Prometheus metrics, on a registry of its own so that
// several hubs in one process (tests) do not collide.
type metrics struct {
	reg *prometheus.Registry

	connections   *prometheus.GaugeVec
	requests      *prometheus.CounterVec
	routed        *prometheus.HistogramVec
	fannedOut     *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	unrouted      *prometheus.CounterVec
	slowConsumers prometheus.Counter
	refused       *prometheus.CounterVec
	relayed       *prometheus.CounterVec
	rateLimited   prometheus.Counter
	authFailures  *prometheus.CounterVec
	brokerOps     *prometheus.CounterVec
	// brokerOps of publishes, resolved once: there is one per message.
	brokerPublishOK, brokerPublishErr prometheus.Counter
	// published counts a publish by its outcome, and logs a failure: the
	// done of an envelope posted without one of its own.
	published func(error)
	brokerUp  prometheus.Gauge
	draining  prometheus.Gauge

	tracing      *tracing.Tracing // for the exemplars of routed; set by New
	nextExemplar atomic.Int64     // Unix nanoseconds from which routed may take an exemplar
}

func newMetrics(h *Hub) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_connections", Help: "Open WebSocket connections, by role.",
		}, []string{"role"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_requests_total", Help: "Requests from clients, by method and outcome (ok or the JSON-RPC error code).",
		}, []string{"method", "outcome"}),
		routed: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_routed_request_duration_seconds", Help: "Time for a routed request to get its answer from a server.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method", "where"}),
		fannedOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_notifications_fanned_out_total", Help: "Notifications delivered to clients, by method.",
		}, []string{"method"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_notifications_dropped_total", Help: "Notifications not delivered to a client that read too slowly to get everything, by method.",
		}, []string{"method"}),
		unrouted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_server_notifications_unrouted_total", Help: "Server notifications passed on to no client, by method and reason (unknown, not_routed, no_destination).",
		}, []string{"method", "reason"}),
		slowConsumers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_slow_consumers_dropped_total", Help: "Connections closed because they did not read what they were sent.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_refused_total", Help: "What peers sent that the hub refused or dropped, by reason.",
		}, []string{"reason"}),
		relayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_http_relayed_total", Help: "Streamable HTTP requests for a session of another instance: sent to its owner, or served for another instance.",
		}, []string{"side"}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_rate_limited_total", Help: "Requests refused with -32004 by the per-token rate limit.",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_auth_failures_total", Help: "Upgrades refused, by reason (unauthorized, forbidden, origin, too_many_connections, draining).",
		}, []string{"reason"}),
		brokerOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_broker_messages_total", Help: "Messages through the broker, by direction (publish, receive) and outcome.",
		}, []string{"direction", "outcome"}),
		brokerUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_broker_up", Help: "1 when the broker (Redis, when configured) is reachable.",
		}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_draining", Help: "1 while the instance drains before shutting down.",
		}),
	}
	m.reg.MustRegister(m.connections, m.requests, m.routed, m.fannedOut, m.dropped, m.unrouted, m.slowConsumers, m.refused, m.relayed, m.rateLimited,
		m.authFailures, m.brokerOps, m.brokerUp, m.draining,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_servers", Help: "Servers (names) reachable through this instance, cluster-wide.",
	}, func() float64 { return float64(len(h.reg.view().names)) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_instances", Help: "Hub instances this one knows, itself included.",
	}, func() float64 { return float64(1 + len(h.remoteInstances())) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_tasks_held", Help: "Tasks (the tasks extension) whose calls this instance holds.",
	}, func() float64 { held, _ := h.tasks.counts(); return float64(held) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_task_records", Help: "Task records this instance wrote and keeps until they expire.",
	}, func() float64 { _, kept := h.tasks.counts(); return float64(kept) }))
	if a := h.cfg.Audit; a != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "switchboard_audit_dropped_total", Help: "Audit log lines dropped because the log could not keep up.",
		}, func() float64 { return float64(a.Dropped()) }))
	}
	for _, role := range []string{"client", "server"} {
		m.connections.WithLabelValues(role)
	}
	m.brokerPublishOK = m.brokerOps.WithLabelValues("publish", "ok")
	m.brokerPublishErr = m.brokerOps.WithLabelValues("publish", "error")
	m.published = func(err error) {
		if err != nil {
			m.brokerPublishErr.Inc()
			h.log.Debug("publishing to the cluster failed", "err", err)
		} else {
			m.brokerPublishOK.Inc()
		}
	}
	return m
}

func (m *metrics) handler() http.Handler {
	// OpenMetrics, to a scraper that asks for it, carries the exemplars.
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// methodLabel bounds the method label to the methods MCP defines:
// anything else counts as "other".
func methodLabel(m string) string {
	if _, ok := mcp.LookupMethod(m); ok {
		return m
	}
	return "other"
}

// unrouted counts a server's notification passed on to no client, and logs
// it at debug with its method: one a server should not have sent, or one
// about something gone, is worth knowing of, never silently lost.
func (h *Hub) unrouted(method, reason string, attrs ...any) {
	h.metrics.unrouted.WithLabelValues(methodLabel(method), reason).Inc()
	if len(method) > 100 {
		method = method[:100] // a server's own name for it: logged, not at any length
	}
	h.log.Debug("server notification not routed", append([]any{"method", method, "reason", reason}, attrs...)...)
}

// observeRequest counts a client's request by its outcome.
func (m *metrics) observeRequest(method string, err error) {
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, context.Canceled):
		outcome = "cancelled"
	default:
		outcome = strconv.FormatInt(int64(jsonrpc.CodeOf(err)), 10)
	}
	m.requests.WithLabelValues(methodLabel(method), outcome).Inc()
}

// observeRouted records how long a routed request took. The request's
// trace id (ctx's, when tracing sampled it) becomes the observation's
// exemplar, at most once every exemplarInterval: Prometheus keeps one
// exemplar per bucket, and making one costs a dozen allocations, which
// every call would pay for nothing.
func (m *metrics) observeRouted(ctx context.Context, method string, local bool, since time.Time) {
	where := "local"
	if !local {
		where = "remote"
	}
	o := m.routed.WithLabelValues(methodLabel(method), where)
	now := time.Now()
	d := now.Sub(since).Seconds()
	if m.tracing.Enabled() && m.exemplarDue(now) {
		if id := m.tracing.TraceID(ctx); id != "" {
			if eo, ok := o.(prometheus.ExemplarObserver); ok {
				eo.ObserveWithExemplar(d, prometheus.Labels{"trace_id": id})
				return
			}
		}
	}
	o.Observe(d)
}

// exemplarInterval is the least time between two exemplars of the
// routed-request histogram.
const exemplarInterval = 100 * time.Millisecond

// exemplarDue reports whether an observation at now may carry an exemplar,
// and if so takes the turn.
func (m *metrics) exemplarDue(now time.Time) bool {
	next := m.nextExemplar.Load()
	return now.UnixNano() >= next && m.nextExemplar.CompareAndSwap(next, now.Add(exemplarInterval).UnixNano())
}

// meteredBroker counts what goes through the broker.
type meteredBroker struct {
	pubsub.Broker
	m *metrics
}

func (b *meteredBroker) Publish(ctx context.Context, topic string, payload []byte) error {
	err := b.Broker.Publish(ctx, topic, payload)
	if err != nil {
		b.m.brokerPublishErr.Inc()
	} else {
		b.m.brokerPublishOK.Inc()
	}
	return err
}

func (b *meteredBroker) Subscribe(ctx context.Context, topic string, fn pubsub.Handler) (pubsub.Subscription, error) {
	received := b.m.brokerOps.WithLabelValues("receive", "ok")
	return b.Broker.Subscribe(ctx, topic, func(ctx context.Context, topic string, payload []byte) {
		received.Inc()
		fn(ctx, topic, payload)
	})
}
