package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// ServiceName is the service.name of the hub's spans, unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name another.
const ServiceName = "switchboard"

// scope is the instrumentation scope of the hub's spans.
const scope = "github.com/switchboard-mcp/switchboard"

// Config configures the hub's tracing. The exporter, the sampler and the
// resource are configured as OpenTelemetry specifies, by the OTEL_*
// environment variables (docs/observability.md lists them); the fields
// below override the few a program or a test sets itself.
type Config struct {
	// Enabled turns tracing on (the hub's --tracing). Off, New starts
	// nothing and every method costs at most an atomic load.
	// OTEL_SDK_DISABLED=true turns it off too.
	Enabled bool
	// InstanceID is service.instance.id: the hub instance's id.
	InstanceID string
	// Service is service.name; default ServiceName. (`hub connect` is
	// switchboard-connect.) OTEL_SERVICE_NAME wins over both.
	Service string
	// Endpoint, when set, is the OTLP endpoint instead of
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT:
	// a base URL such as http://127.0.0.1:4318 (for http/protobuf,
	// /v1/traces is added) or http://127.0.0.1:4317 (grpc).
	Endpoint string
	// Protocol, when set, is the OTLP protocol instead of
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
	// "grpc" or "http/protobuf" (the default).
	Protocol string
	// QueueSize bounds the spans waiting for the exporter; beyond it they
	// are dropped (and counted). Zero: OTEL_BSP_MAX_QUEUE_SIZE, else 2048.
	QueueSize int
	// BatchSize is the most spans sent in one export. Zero:
	// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, else 512.
	BatchSize int
	// BatchDelay is the longest a span waits for its batch to fill. Zero:
	// OTEL_BSP_SCHEDULE_DELAY (milliseconds), else 5s.
	BatchDelay time.Duration
	// ExportTimeout bounds one export; its spans are dropped after it.
	// Zero: OTEL_BSP_EXPORT_TIMEOUT (milliseconds), else 30s.
	ExportTimeout time.Duration
	// Logger receives the tracing's warnings (exports failing); nil is
	// slog.Default().
	Logger *slog.Logger
}

// Tracing is one hub's tracing: its tracer provider, exporter queue and
// metrics. A Tracing that is off (Config.Enabled false, or after Shutdown)
// and a nil *Tracing do nothing, at the cost of an atomic load per call;
// all methods are safe for concurrent use.
type Tracing struct {
	on      atomic.Bool
	sampler sdktrace.Sampler // what traces are recorded (record.go)
	queue   *queue           // nil when off from the start
	metrics *metrics
}

var _ prometheus.Collector = (*Tracing)(nil)

// routeErrors sets OpenTelemetry's error handler, which is global, once.
var routeErrors sync.Once

// New sets up tracing as cfg says. When cfg.Enabled is false it returns a
// Tracing that is off. It fails on a configuration the exporter cannot use
// (an unknown protocol, a malformed endpoint or OTEL_RESOURCE_ATTRIBUTES);
// it does not wait for the endpoint, which may be down: spans are then
// dropped and counted, and calls are not slowed.
func New(ctx context.Context, cfg Config) (*Tracing, error) {
	t := &Tracing{metrics: newMetrics()}
	if !cfg.Enabled || sdkDisabled() {
		return t, nil
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	routeErrors.Do(func() {
		// What the SDK reports through its global handler (a malformed
		// OTEL_RESOURCE_ATTRIBUTES value, the first malformed baggage a
		// peer sends) goes to the hub's log, not to the standard logger.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: OpenTelemetry", "error", err)
		}))
	})
	res, err := newResource(ctx, cfg.Service, cfg.InstanceID)
	if err != nil {
		return nil, err
	}
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else
	// parentbased_always_on, as the SDK's default.
	if t.sampler, err = samplerFromEnv(); err != nil {
		return nil, err
	}
	qc, err := cfg.queueConfig()
	if err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, cfg, res)
	if err != nil {
		return nil, err
	}
	t.queue = newQueue(exp, qc, t.metrics, log)
	t.on.Store(true)
	return t, nil
}

// Enabled reports whether tracing is on: whether Start makes spans.
func (t *Tracing) Enabled() bool { return t != nil && t.on.Load() }

// ForceFlush exports every span ended so far, for tests and before a
// planned stop; it returns when they are exported or dropped, or ctx ends.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil || t.queue == nil {
		return nil
	}
	return t.queue.ForceFlush(ctx)
}

// Shutdown turns tracing off, exports the spans already ended (until ctx
// ends: those left are dropped and counted) and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.queue == nil {
		return nil
	}
	t.on.Store(false)
	return t.queue.Shutdown(ctx)
}

// Describe implements prometheus.Collector: the hub registers its Tracing
// with its registry.
func (t *Tracing) Describe(ch chan<- *prometheus.Desc) {
	t.metrics.dropped.Describe(ch)
	t.metrics.exported.Describe(ch)
}

// Collect implements prometheus.Collector.
func (t *Tracing) Collect(ch chan<- prometheus.Metric) {
	t.metrics.dropped.Collect(ch)
	t.metrics.exported.Collect(ch)
}

// newResource is the hub's resource: service.name (switchboard, unless
// service names another) and service.instance.id, then the SDK's and the
// host's attributes, then what OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES say (they win).
func newResource(ctx context.Context, service, instanceID string) (*resource.Resource, error) {
	if service == "" {
		service = ServiceName
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(service)}
	if instanceID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(instanceID))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return res, nil
}

// sdkDisabled reports OTEL_SDK_DISABLED=true, which OpenTelemetry defines
// as turning the SDK off whatever else is configured.
func sdkDisabled() bool {
	v, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")))
	return v
}

// queueConfig resolves the queue's sizes: the Config's, else the OTEL_BSP_*
// variables', else OpenTelemetry's defaults.
func (cfg Config) queueConfig() (queueConfig, error) {
	var qc queueConfig
	var err error
	if qc.size, err = envInt(cfg.QueueSize, "OTEL_BSP_MAX_QUEUE_SIZE", 2048); err != nil {
		return qc, err
	}
	if qc.batch, err = envInt(cfg.BatchSize, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512); err != nil {
		return qc, err
	}
	qc.batch = min(qc.batch, qc.size)
	if qc.delay, err = envMillis(cfg.BatchDelay, "OTEL_BSP_SCHEDULE_DELAY", 5*time.Second); err != nil {
		return qc, err
	}
	if qc.timeout, err = envMillis(cfg.ExportTimeout, "OTEL_BSP_EXPORT_TIMEOUT", 30*time.Second); err != nil {
		return qc, err
	}
	return qc, nil
}

// envInt returns set when positive, else the positive integer in the
// variable name, else def.
func envInt(set int, name string, def int) (int, error) {
	if set > 0 {
		return set, nil
	}
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("tracing: %s=%q: want a positive integer", name, v)
	}
	return n, nil
}

// envMillis is envInt for a duration given in milliseconds.
func envMillis(set time.Duration, name string, def time.Duration) (time.Duration, error) {
	if set > 0 {
		return set, nil
	}
	n, err := envInt(0, name, int(def/time.Millisecond))
	return time.Duration(n) * time.Millisecond, err
}
