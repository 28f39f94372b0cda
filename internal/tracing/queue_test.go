package tracing

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/proctest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// With the exporter's endpoint down, refusing connections or accepting them
// and never answering, calls go on as if tracing were off: ending a span
// never waits for the exporter. Every span that could not be exported is
// counted in switchboard_tracing_spans_dropped_total, and the failure is
// logged once, not once per export.
func TestExporterDown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		endpoint func(t *testing.T) string
		timeout  time.Duration // of one export
		hung     bool
	}{
		{"refused", refusingEndpoint, 100 * time.Millisecond, false},
		// An export timeout far beyond the test's deadline: a span's End
		// that waited for the export would fail the test.
		{"hung", hungEndpoint, time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs proctest.Buffer
			tr, err := New(context.Background(), Config{
				Enabled: true, InstanceID: "down", Endpoint: tc.endpoint(t),
				QueueSize: 8, BatchSize: 4, BatchDelay: time.Millisecond, ExportTimeout: tc.timeout,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			require.NoError(t, err)

			const calls = 1000
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range calls {
					ctx, s := tr.Start(context.Background(), Received, Op{Method: "tools/call", ID: jsonrpc.Int64ID(int64(i)), Params: []byte(`{"name":"echo"}`)})
					params := tr.InjectMeta(ctx, []byte(`{"name":"echo"}`))
					s.EndWith(params, nil)
				}
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("ending spans waited for the exporter")
			}

			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_ = tr.Shutdown(ctx) // the hung exporter's export is abandoned: its spans count as dropped
			assert.False(t, tr.Enabled())

			c := counts(t, tr)
			assert.Zero(t, c["exported"])
			assert.Equal(t, float64(calls), c["queue_full"]+c["export_failed"], "%v", c)
			if tc.hung {
				assert.GreaterOrEqual(t, c["queue_full"], float64(calls-8-2*4), "the queue holds at most 8, a batch of 4 is stuck in flight and one being gathered: %v", c)
			}
			assert.Positive(t, c["export_failed"], "%v", c)
			assert.Equal(t, 1, strings.Count(logs.String(), "spans not exported"), "%s", logs.String())
		})
	}
}

// counts reads the tracing's metrics through a Prometheus registry, as the
// hub will: "exported", and each reason of the dropped spans.
func counts(t testing.TB, tr *Tracing) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tr))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	c := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "switchboard_tracing_spans_exported_total":
				c["exported"] = m.GetCounter().GetValue()
			case "switchboard_tracing_spans_dropped_total":
				require.Len(t, m.GetLabel(), 1)
				c[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			default:
				t.Errorf("unexpected metric %s", mf.GetName())
			}
		}
	}
	return c
}

// refusingEndpoint returns the URL of a loopback port nothing listens on.
func refusingEndpoint(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// hungEndpoint returns the URL of a loopback listener that accepts
// connections and never answers, as a collector that hangs would. It is
// closed, with its connections, when the test ends.
func hungEndpoint(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// ForceFlush returns once what was queued is exported; Shutdown too, and
// after it Start makes no span.
func TestFlushAndShutdown(t *testing.T) {
	t.Parallel()
	j := jaeger(t)
	tr, err := New(context.Background(), Config{Enabled: true, Endpoint: j.OTLPHTTP(), BatchDelay: time.Hour})
	require.NoError(t, err)
	_, s := tr.Start(context.Background(), Hop, Op{Method: "initialize", Network: NetworkStdio})
	s.End()
	require.NoError(t, tr.ForceFlush(context.Background()))
	assert.Equal(t, float64(1), counts(t, tr)["exported"], "exported by ForceFlush, not after the hour's delay")
	got := j.WaitTrace(t, s.TraceID(), 1).Span("initialize")
	require.NotNil(t, got)
	assert.Equal(t, "pipe", got.Attributes["network.transport"])

	_, s = tr.Start(context.Background(), Hop, Op{Method: "initialize"})
	s.End()
	require.NoError(t, tr.Shutdown(context.Background()))
	assert.Equal(t, float64(2), counts(t, tr)["exported"], "exported by Shutdown")
	_, s = tr.Start(context.Background(), Hop, Op{Method: "initialize"})
	assert.False(t, s.Recording(), "no spans after Shutdown")
	require.NoError(t, tr.Shutdown(context.Background()), "a second Shutdown is harmless")
	require.NoError(t, tr.ForceFlush(context.Background()))
}

func TestNew_errors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		env  map[string]string
		want string
	}{
		{"protocol", Config{Protocol: "http/json"}, nil, `OTLP protocol "http/json"`},
		{"protocol from env", Config{}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}, `OTLP protocol "thrift"`},
		{"endpoint", Config{Endpoint: "127.0.0.1:4318"}, nil, "want a URL"},
		{"queue size", Config{}, map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "-1"}, "OTEL_BSP_MAX_QUEUE_SIZE"},
		{"delay", Config{}, map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "5s"}, "OTEL_BSP_SCHEDULE_DELAY"},
		{"resource", Config{}, map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=mcp,novalue"}, "resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tc.cfg.Enabled = true
			tr, err := New(context.Background(), tc.cfg)
			require.Error(t, err)
			assert.Nil(t, tr)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// OTEL_SDK_DISABLED=true turns tracing off whatever the hub's flag says.
func TestNew_sdkDisabled(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	tr, err := New(context.Background(), Config{Enabled: true})
	require.NoError(t, err)
	assert.False(t, tr.Enabled())
	assert.Equal(t, map[string]float64{"exported": 0, "queue_full": 0, "export_failed": 0}, counts(t, tr))
}
