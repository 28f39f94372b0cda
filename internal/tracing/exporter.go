package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The OTLP protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	protocolGRPC = "grpc"
	protocolHTTP = "http/protobuf"
)

// newExporter returns the OTLP exporter the configuration names, for spans
// of res. Neither connects here: an endpoint that is down only fails the
// exports.
//
// The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf as the specification
// says. Over HTTP the hub encodes and sends its spans itself (otlp.go,
// httpExporter below), configured by the standard variables; over gRPC
// they go through the OpenTelemetry SDK's exporter, which reads its own,
// at the price of the SDK's copies of every span (docs/observability.md).
func newExporter(ctx context.Context, cfg Config, res *resource.Resource) (exporter, error) {
	protocol := cfg.Protocol
	if protocol == "" {
		protocol = firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if cfg.Endpoint != "" {
		if u, err := url.Parse(cfg.Endpoint); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("tracing: endpoint %q: want a URL such as http://127.0.0.1:4318", cfg.Endpoint)
		}
	}
	switch protocol {
	case protocolGRPC:
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP gRPC exporter: %w", err)
		}
		return &sdkExporter{exp: exp, res: res}, nil
	case protocolHTTP, "":
		return newHTTPExporter(cfg, res)
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q: want grpc or http/protobuf", protocol)
	}
}

// httpExporter sends spans as OTLP/HTTP in protobuf (the default of the
// specification), encoded by the hub (otlp.go), one request a batch. A
// batch that fails is not sent again: the queue counts it dropped.
type httpExporter struct {
	url    string
	header http.Header // the configured headers, and the content's
	client *http.Client
	enc    *encoder
	gz     *gzip.Writer // nil without compression
	zbuf   bytes.Buffer
}

// The variables of the OTLP/HTTP exporter, each also read without TRACES_
// (OTEL_EXPORTER_OTLP_HEADERS for all signals), as the specification says.
const (
	envEndpoint   = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // the full URL; OTEL_EXPORTER_OTLP_ENDPOINT is the base, /v1/traces added
	envHeaders    = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envTimeout    = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
	envCompress   = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"
	envCA         = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"
	envClientCert = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"
	envClientKey  = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"
)

// signalEnv returns the TRACES_ variable name, else the one for all
// signals, with its value.
func signalEnv(name string) (string, string) {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return name, v
	}
	all := strings.Replace(name, "_TRACES_", "_", 1)
	return all, strings.TrimSpace(os.Getenv(all))
}

func newHTTPExporter(cfg Config, res *resource.Resource) (*httpExporter, error) {
	e := &httpExporter{url: "http://localhost:4318/v1/traces", header: http.Header{}, enc: newEncoder(res, scope)}
	switch name, v := signalEnv(envEndpoint); {
	case cfg.Endpoint != "":
		e.url = strings.TrimSuffix(cfg.Endpoint, "/") + "/v1/traces"
	case v != "" && name == envEndpoint:
		e.url = v
	case v != "":
		e.url = strings.TrimSuffix(v, "/") + "/v1/traces"
	}
	if u, err := url.Parse(e.url); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("tracing: OTLP endpoint %q: want a URL such as http://127.0.0.1:4318", e.url)
	}
	if name, v := signalEnv(envHeaders); v != "" {
		if err := parseHeaders(e.header, v); err != nil {
			return nil, fmt.Errorf("tracing: %s: %w", name, err)
		}
	}
	e.header.Set("Content-Type", "application/x-protobuf")
	e.header.Set("User-Agent", "switchboard OTLP/HTTP exporter")
	timeout := 10 * time.Second
	if name, v := signalEnv(envTimeout); v != "" {
		ms, err := envMillis(0, name, timeout)
		if err != nil {
			return nil, err
		}
		timeout = ms
	}
	switch name, v := signalEnv(envCompress); v {
	case "", "none":
	case "gzip":
		e.gz = gzip.NewWriter(io.Discard)
		e.header.Set("Content-Encoding", "gzip")
	default:
		return nil, fmt.Errorf("tracing: %s=%q: want gzip or none", name, v)
	}
	tlsConf, err := tlsFromEnv()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	e.client = &http.Client{Transport: tr, Timeout: timeout}
	return e, nil
}

// parseHeaders reads OTEL_EXPORTER_OTLP_HEADERS: key=value pairs separated
// by commas, values percent-encoded.
func parseHeaders(h http.Header, s string) error {
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("want key=value pairs separated by commas")
		}
		v, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("the value of %s: %w", k, err)
		}
		h.Add(k, v)
	}
	return nil
}

// tlsFromEnv is the TLS configuration of an https endpoint: the
// certificate authority to trust, and the client's certificate, from the
// standard variables; nil without them (the system's roots).
func tlsFromEnv() (*tls.Config, error) {
	caName, ca := signalEnv(envCA)
	certName, cert := signalEnv(envClientCert)
	_, key := signalEnv(envClientKey)
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("tracing: %s: %w", caName, err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tracing: %s: no PEM certificate in it", caName)
		}
	}
	if cert != "" || key != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tracing: %s and its key: %w", certName, err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, nil
}

func (e *httpExporter) export(ctx context.Context, spans []*span) error {
	body := e.enc.encode(spans)
	if e.gz != nil {
		e.zbuf.Reset()
		e.gz.Reset(&e.zbuf)
		if _, err := e.gz.Write(body); err != nil {
			return err
		}
		if err := e.gz.Close(); err != nil {
			return err
		}
		body = e.zbuf.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, vs := range e.header {
		req.Header[k] = vs
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("tracing: OTLP export: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("tracing: OTLP export: %s", resp.Status)
	}
	return nil
}

func (e *httpExporter) shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// sdkExporter sends spans through one of the SDK's exporters, as the
// read-only spans it takes.
type sdkExporter struct {
	exp sdktrace.SpanExporter
	res *resource.Resource
	ro  []sdktrace.ReadOnlySpan
}

func (e *sdkExporter) export(ctx context.Context, spans []*span) error {
	e.ro = e.ro[:0]
	for _, s := range spans {
		e.ro = append(e.ro, s.readOnly(e.res))
	}
	err := e.exp.ExportSpans(ctx, e.ro)
	clear(e.ro)
	return err
}

func (e *sdkExporter) shutdown(ctx context.Context) error { return e.exp.Shutdown(ctx) }

// readOnly is the span as the SDK's exporters take it.
func (s *span) readOnly(res *resource.Resource) sdktrace.ReadOnlySpan {
	var attrs []attribute.KeyValue
	s.eachAttribute(func(kv attribute.KeyValue) { attrs = append(attrs, kv) })
	stub := tracetest.SpanStub{Name: s.name(), SpanContext: s.sc, SpanKind: s.kind, StartTime: s.start, EndTime: s.end,
		Attributes: attrs, Status: sdktrace.Status{Code: s.status, Description: s.message}, Resource: res,
		InstrumentationScope: instrumentation.Scope{Name: scope}}
	if s.parent.IsValid() {
		stub.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: s.sc.TraceID(), SpanID: s.parent,
			TraceFlags: s.sc.TraceFlags(), Remote: s.parentRemote})
	}
	for _, l := range s.links {
		stub.Links = append(stub.Links, sdktrace.Link{SpanContext: l.SpanContext})
	}
	return stub.Snapshot()
}

// firstEnv returns the value of the first of the variables that is set.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}
