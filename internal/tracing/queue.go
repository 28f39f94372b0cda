package tracing

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queue is between the hub's calls and the exporter: a bounded queue that
// ended spans enter without ever waiting (a span that finds it full is
// dropped and counted), and one goroutine that sends them to the exporter
// in batches. An exporter that is down or slow costs the calls nothing: its
// spans are dropped, by the queue or by the failed export, and counted in
// switchboard_tracing_spans_dropped_total.
//
// The SDK's BatchSpanProcessor behaves alike but counts its drops only in
// an experimental metric of the global MeterProvider; a hub has its own
// Prometheus registry, and tests run several hubs in one process.
type queue struct {
	exp     exporter
	log     *slog.Logger
	batch   int
	delay   time.Duration
	timeout time.Duration

	spans   chan *span
	flushes chan chan struct{} // ForceFlush: the worker closes the channel once it exported what was queued
	stop    chan struct{}      // closed by Shutdown
	done    chan struct{}      // closed when the worker has returned
	base    context.Context    // of every export; cancelled when Shutdown runs out of time
	cancel  context.CancelFunc
	once    sync.Once

	droppedFull   prometheus.Counter // the queue was full
	droppedFailed prometheus.Counter // the exporter failed
	exported      prometheus.Counter
}

// exporter sends batches of spans to a collector (exporter.go).
type exporter interface {
	// export sends spans, in one request when it can; an error means they
	// were not all taken.
	export(ctx context.Context, spans []*span) error
	// shutdown releases the exporter's connections.
	shutdown(ctx context.Context) error
}

// queueConfig sizes a queue; see Config.
type queueConfig struct {
	size, batch    int
	delay, timeout time.Duration
}

func newQueue(exp exporter, cfg queueConfig, m *metrics, log *slog.Logger) *queue {
	q := &queue{
		exp:           exp,
		log:           log,
		batch:         cfg.batch,
		delay:         cfg.delay,
		timeout:       cfg.timeout,
		spans:         make(chan *span, cfg.size),
		flushes:       make(chan chan struct{}),
		stop:          make(chan struct{}),
		done:          make(chan struct{}),
		droppedFull:   m.dropped.WithLabelValues("queue_full"),
		droppedFailed: m.dropped.WithLabelValues("export_failed"),
		exported:      m.exported,
	}
	q.base, q.cancel = context.WithCancel(context.Background())
	go q.run()
	return q
}

// add queues an ended span, or drops it when the queue is full. It never
// blocks.
func (q *queue) add(s *span) {
	select {
	case q.spans <- s:
	default:
		q.droppedFull.Inc()
	}
}

// ForceFlush returns once every span queued before it was called has been
// exported (or counted dropped), or when ctx is done.
func (q *queue) ForceFlush(ctx context.Context) error {
	flushed := make(chan struct{})
	select {
	case q.flushes <- flushed:
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, stops the worker and shuts the exporter
// down. When ctx ends first, the export in flight is abandoned (its spans
// counted dropped).
func (q *queue) Shutdown(ctx context.Context) error {
	q.once.Do(func() { close(q.stop) })
	select {
	case <-q.done:
	case <-ctx.Done():
		q.cancel()
		<-q.done
	}
	q.cancel()
	return q.exp.shutdown(ctx)
}

// run is the worker: it gathers spans into batches and exports a batch when
// it is full, when it has waited delay, on ForceFlush and on Shutdown.
func (q *queue) run() {
	defer close(q.done)
	tick := time.NewTicker(q.delay)
	defer tick.Stop()
	buf := make([]*span, 0, q.batch)
	failing := false
	export := func() {
		if len(buf) > 0 {
			failing = q.export(buf, failing)
			clear(buf)
			buf = buf[:0]
		}
	}
	// drain exports everything queued now.
	drain := func() {
		for {
			select {
			case s := <-q.spans:
				if buf = append(buf, s); len(buf) == q.batch {
					export()
				}
			default:
				export()
				return
			}
		}
	}
	for {
		select {
		case s := <-q.spans:
			if buf = append(buf, s); len(buf) == q.batch {
				export()
			}
		case <-tick.C:
			export()
		case flushed := <-q.flushes:
			drain()
			close(flushed)
		case <-q.stop:
			drain()
			return
		}
	}
}

// export sends one batch, counting it exported or dropped, and logs when
// exports start or stop failing (not every failure: an exporter that is
// down would fill the log). It returns whether this export failed.
func (q *queue) export(spans []*span, failing bool) bool {
	ctx, cancel := context.WithTimeout(q.base, q.timeout)
	defer cancel()
	err := q.exp.export(ctx, spans)
	if err != nil {
		q.droppedFailed.Add(float64(len(spans)))
		if !failing {
			q.log.Warn("tracing: spans not exported; dropping them until the exporter answers", "spans", len(spans), "error", err)
		}
		return true
	}
	q.exported.Add(float64(len(spans)))
	if failing {
		q.log.Info("tracing: spans exported again")
	}
	return false
}

// metrics are the tracing's Prometheus metrics; Tracing is their Collector.
type metrics struct {
	dropped  *prometheus.CounterVec
	exported prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_tracing_spans_dropped_total",
			Help: "Spans not exported, by reason: queue_full (the exporter could not keep up) or export_failed (the exporter failed or timed out).",
		}, []string{"reason"}),
		exported: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_tracing_spans_exported_total",
			Help: "Spans the exporter accepted.",
		}),
	}
	for _, reason := range []string{"queue_full", "export_failed"} {
		m.dropped.WithLabelValues(reason) // both shown from the start, at 0
	}
	return m
}
