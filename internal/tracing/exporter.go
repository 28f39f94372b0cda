package tracing

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	protocolGRPC = "grpc"
	protocolHTTP = "http/protobuf"
)

// newExporter returns the OTLP exporter the configuration names. The two
// exporters read the rest of their configuration themselves, from the
// standard variables: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS,
// _TIMEOUT, _COMPRESSION, _CERTIFICATE and _INSECURE (gRPC). Neither
// connects here: an endpoint that is down only fails the exports.
//
// The protocol is chosen here, since the Go exporters leave that to the
// program: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf as the specification says.
// (contrib's autoexport does the same and more, at the price of a metrics
// and logs pipeline the hub has no use for.)
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
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
		return exp, nil
	case protocolHTTP, "":
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/")+"/v1/traces"))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP HTTP exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q: want grpc or http/protobuf", protocol)
	}
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
