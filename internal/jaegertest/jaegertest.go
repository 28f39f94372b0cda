// Package jaegertest runs a real Jaeger for tests: Jaeger v2's all-in-one
// (an OpenTelemetry Collector with Jaeger's query service and in-memory
// storage), one process per Start, receiving OTLP over gRPC and HTTP on free
// loopback ports, stopped when the test ends; and reads traces back through
// Jaeger's query API (api_v3, OTLP JSON), as an operator's UI would.
//
//	j := jaegertest.Start(t)
//	... export spans to j.OTLPHTTP() or j.OTLPGRPC() ...
//	tr := j.WaitTrace(t, traceID, 3) // the trace, once it holds 3 spans
//
// Jaeger is pinned by the test-only module e2e/tracing (a go tool, so that
// the root go.mod never names it). Binary builds it once into the user's
// cache directory; `make deps` does so ahead of the tests. When it cannot
// be built, Start fails the test with the reason: tests that need Jaeger
// are never skipped.
//
// Launch starts one the same way for a program, or for a TestMain that
// shares one Jaeger between the tests of a package: it returns errors
// instead of failing a test, and the caller stops it.
package jaegertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/proctest"
)

// readyTimeout bounds the wait for a started Jaeger to take OTLP and answer
// queries; its start reads a large binary, on a machine that may be busy.
const readyTimeout = 60 * time.Second

// waitTimeout bounds WaitTrace and WaitTraces.
const waitTimeout = 15 * time.Second

// Jaeger is a Jaeger process owned by a test or a program.
type Jaeger struct {
	dir                       string
	otlpGRPC, otlpHTTP, query int

	mu   sync.Mutex
	proc *proctest.Proc // nil once stopped
}

// Start builds Jaeger if needed (Binary), starts it on free ports of
// 127.0.0.1, waits until it takes OTLP and answers queries, and registers
// its Stop with tb.Cleanup. It fails tb if Jaeger cannot be built or does
// not start.
func Start(tb testing.TB) *Jaeger {
	tb.Helper()
	j, err := Launch(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(j.Stop)
	return j
}

// Launch starts Jaeger as Start does, with dir for its configuration, and
// returns it; the caller must Stop it. The process is killed if the program
// dies without stopping it.
func Launch(dir string) (*Jaeger, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	// The ports are free when freePort returns, but another process may
	// take one before Jaeger binds it: try a few times.
	var lastErr error
	for range 3 {
		j := &Jaeger{dir: dir}
		for _, p := range []*int{&j.otlpGRPC, &j.otlpHTTP, &j.query} {
			if *p, err = proctest.FreePort(); err != nil {
				return nil, fmt.Errorf("jaegertest: %w", err)
			}
		}
		if lastErr = j.start(bin); lastErr == nil {
			return j, nil
		}
	}
	return nil, lastErr
}

// OTLPGRPC returns the URL of the OTLP gRPC receiver, http://127.0.0.1:PORT
// (plain text), as OTEL_EXPORTER_OTLP_ENDPOINT takes it.
func (j *Jaeger) OTLPGRPC() string { return "http://" + addr(j.otlpGRPC) }

// OTLPHTTP returns the base URL of the OTLP HTTP receiver,
// http://127.0.0.1:PORT (spans go to /v1/traces below it).
func (j *Jaeger) OTLPHTTP() string { return "http://" + addr(j.otlpHTTP) }

// QueryURL returns the base URL of the query service: its API, and the UI
// when the binary was built with one.
func (j *Jaeger) QueryURL() string { return "http://" + addr(j.query) }

// Stop kills Jaeger and waits for it to exit; its traces are lost.
// Stopping a stopped Jaeger does nothing.
func (j *Jaeger) Stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.proc == nil {
		return
	}
	j.proc.Kill()
	j.proc = nil
}

// Log returns what Jaeger printed, for a failing test's message.
func (j *Jaeger) Log() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.proc == nil {
		return ""
	}
	return j.proc.Output()
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// config is Jaeger's configuration: OTLP in, memory storage, the query
// service; no other receiver, and no telemetry of its own (which would take
// fixed ports).
const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: "%[3]s"
    grpc:
      endpoint: "%[4]s"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "%[1]s"
      http:
        endpoint: "%[2]s"
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

func (j *Jaeger) start(bin string) error {
	grpcQuery, err := proctest.FreePort()
	if err != nil {
		return fmt.Errorf("jaegertest: %w", err)
	}
	cfg := filepath.Join(j.dir, "jaeger.yaml")
	text := fmt.Sprintf(config, addr(j.otlpGRPC), addr(j.otlpHTTP), addr(j.query), addr(grpcQuery))
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return fmt.Errorf("jaegertest: %w", err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Dir = j.dir
	p, err := proctest.Start(cmd, "jaeger", j.ready, readyTimeout)
	if err != nil {
		return fmt.Errorf("jaegertest: %w", err)
	}
	j.mu.Lock()
	j.proc = p
	j.mu.Unlock()
	return nil
}

// ready reports whether both OTLP receivers take connections and the query
// API answers. The collector starts its receivers last, so a Jaeger that is
// ready stores what it receives.
func (j *Jaeger) ready() error {
	for _, p := range []int{j.otlpGRPC, j.otlpHTTP} {
		c, err := net.DialTimeout("tcp", addr(p), 200*time.Millisecond)
		if err != nil {
			return err
		}
		c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := j.get(ctx, "/api/v3/services", nil)
	return err
}

// ErrNotFound is the error of Trace and Traces when Jaeger has no trace
// that matches.
var ErrNotFound = errors.New("jaegertest: no trace found")

// Trace returns the spans Jaeger holds of the trace traceID (32 hex digits),
// or ErrNotFound.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (*Trace, error) {
	body, err := j.get(ctx, "/api/v3/traces/"+url.PathEscape(traceID), nil)
	if err != nil {
		return nil, err
	}
	traces, err := decodeTraces(body)
	if err != nil {
		return nil, err
	}
	if len(traces) == 0 {
		return nil, ErrNotFound
	}
	return traces[0], nil
}

// Traces returns the traces with a span of service that started since
// since, or ErrNotFound.
func (j *Jaeger) Traces(ctx context.Context, service string, since time.Time) ([]*Trace, error) {
	q := url.Values{
		"query.service_name":   {service},
		"query.start_time_min": {since.UTC().Format(time.RFC3339Nano)},
		"query.start_time_max": {time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)},
		"query.num_traces":     {"1000"},
	}
	body, err := j.get(ctx, "/api/v3/traces", q)
	if err != nil {
		return nil, err
	}
	traces, err := decodeTraces(body)
	if err == nil && len(traces) == 0 {
		err = ErrNotFound
	}
	return traces, err
}

// WaitTrace waits until Jaeger holds at least spans spans of the trace
// traceID and returns it; exported spans take a moment to be stored. It
// fails tb after 15s, saying what it last saw.
func (j *Jaeger) WaitTrace(tb testing.TB, traceID string, spans int) *Trace {
	tb.Helper()
	var tr *Trace
	j.wait(tb, fmt.Sprintf("%d spans of trace %s", spans, traceID), func(ctx context.Context) error {
		var err error
		if tr, err = j.Trace(ctx, traceID); err != nil {
			return err
		}
		if len(tr.Spans) < spans {
			return fmt.Errorf("%d spans: %v", len(tr.Spans), tr.Names())
		}
		return nil
	})
	return tr
}

// WaitTraces waits until Jaeger holds a trace of service started since
// since for which match returns true, and returns those that match.
func (j *Jaeger) WaitTraces(tb testing.TB, service string, since time.Time, match func(*Trace) bool) []*Trace {
	tb.Helper()
	var got []*Trace
	j.wait(tb, "traces of "+service, func(ctx context.Context) error {
		traces, err := j.Traces(ctx, service, since)
		if err != nil {
			return err
		}
		got = got[:0]
		for _, tr := range traces {
			if match(tr) {
				got = append(got, tr)
			}
		}
		if len(got) == 0 {
			return fmt.Errorf("%d traces, none that match", len(traces))
		}
		return nil
	})
	return got
}

func (j *Jaeger) wait(tb testing.TB, what string, try func(context.Context) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := try(ctx)
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("jaegertest: waited %v for %s: %v", waitTimeout, what, err)
		case <-tick.C:
		}
	}
}

// get fetches a path of the query API: its body on 200, ErrNotFound on 404.
func (j *Jaeger) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := j.QueryURL() + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusNotFound:
		return nil, ErrNotFound
	default:
		return nil, fmt.Errorf("jaegertest: GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
}
