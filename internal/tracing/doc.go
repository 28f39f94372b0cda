// Package tracing is the hub's OpenTelemetry tracing: its setup, the spans
// it makes, and W3C trace context carried in and out of HTTP headers, MCP's
// params._meta and the envelope between instances.
//
// # Setup
//
// New builds a Tracing from a Config: with Enabled set (the hub's
// --tracing), an OTLP exporter over HTTP or gRPC configured by the standard
// OTEL_* variables, the sampler they name (parent-based, always on, by
// default), and a resource with service.name "switchboard" and
// service.instance.id the instance's id. Without it, the Tracing is off: no
// goroutine, and every method returns at once after one atomic load and
// allocates nothing (TestOff_allocatesNothing, BenchmarkCallPath/off). A
// nil *Tracing is off too. Shutdown exports what is left and turns it off.
//
// The hub records its spans itself (record.go) and encodes them to OTLP
// itself (otlp.go), where the OpenTelemetry SDK's tracer and exporters
// copied every span three times and allocated for each attribute: a traced
// call cost several times an untraced one. A span is one allocation; its
// attributes are made from what it keeps only when it is exported, off the
// call path; a trace that is not sampled records nothing at all. The SDK
// still decides (its samplers), describes (its resource detection) and,
// over gRPC, sends (its exporter, which takes the spans as it knows them).
//
// Spans leave through a bounded queue (queue.go): ending a span never
// waits, and a span that finds the queue full, or whose export fails, is
// dropped and counted in switchboard_tracing_spans_dropped_total. Tracing is
// a prometheus.Collector for the hub's registry. An exporter that is down
// therefore costs calls nothing; its first failure is logged, and its
// recovery.
//
// # Spans
//
// Start(ctx, kind, Op) starts one of the spans the hub makes (the Kind
// constants: Received, Sent, Route, CrossOut, CrossIn, InputRound, Publish,
// Hop), with the attribute names of OpenTelemetry's MCP semantic
// conventions (mcp.method.name, gen_ai.tool.name, jsonrpc.request.id,
// mcp.session.id, ...) read from the Op, whose raw params are only looked at
// while tracing is on. Span.EndWith records the outcome: error.type and
// rpc.response.status_code carry a JSON-RPC error's code, "tool_error" a
// tool result with isError. Arguments, results and tokens are never
// recorded.
//
// # Propagation
//
// Trace context is W3C traceparent and tracestate, with W3C baggage:
//
//   - from and to HTTP headers: ExtractHeaders, InjectHeaders;
//   - from and to a request's params._meta, on raw params: ExtractMeta (one
//     pass over _meta, nothing else decoded) and InjectMeta (the three keys
//     written, everything else kept byte for byte); a Received span reads
//     its own;
//   - across instances: Pack gives a compact string for the envelope, Unpack
//     reads it on the far side.
//
// A malformed traceparent, wherever it comes from, is ignored: the span
// starts a new trace. It is never an error.
//
// # Files
//
//	tracing.go    Config, New, Tracing: setup, flush, shutdown, metrics
//	record.go     the spans the hub records, ids, the sampler of OTEL_TRACES_*
//	otlp.go       their OTLP protobuf encoding
//	exporter.go   the OTLP exporter the OTEL_* variables choose
//	queue.go      the bounded span queue and its drop counters
//	span.go       Kind, Op, Start, Span: the hub's spans and their outcome
//	semconv.go    the semantic conventions' attribute names
//	propagate.go  headers, _meta and envelope: in and out
//	meta.go       params._meta on raw bytes
package tracing
