package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// callPath is everything the hub will do for tracing on one routed call:
// the client's request received (context from headers and _meta), the
// routing decision, the crossing, the request sent to the server with its
// _meta written, and the outcome recorded.
func callPath(tr *Tracing, ctx context.Context, h http.Header, params []byte) []byte {
	ctx = tr.ExtractHeaders(ctx, h)
	ctx, recv := tr.Start(ctx, Received, Op{Method: "tools/call", ID: jsonrpc.Int64ID(7), Params: params, Session: "s1", Network: NetworkWebSocket})
	_, route := tr.Start(ctx, Route, Op{Method: "tools/call", Server: "everything"})
	route.End()
	cctx, cross := tr.Start(ctx, CrossOut, Op{Method: "tools/call", Instance: "b"})
	packed := tr.Pack(cctx)
	ictx := tr.Unpack(ctx, packed)
	sctx, sent := tr.Start(ictx, Sent, Op{Method: "tools/call", ID: jsonrpc.Int64ID(3), Params: params, Server: "everything"})
	out := tr.InjectMeta(sctx, params)
	sent.EndWith(out, nil)
	cross.End()
	recv.EndWith(nil, nil)
	return out
}

var benchParams = []byte(`{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":1}}`)

// With tracing off the whole call path allocates nothing and hands params
// on untouched: what it costs is a few atomic loads (BenchmarkCallPath/off).
func TestOff_allocatesNothing(t *testing.T) {
	tr, err := New(context.Background(), Config{})
	require.NoError(t, err)
	h := http.Header{"Traceparent": {testTraceparent}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if out := callPath(tr, ctx, h, benchParams); &out[0] != &benchParams[0] {
			t.Fatal("params copied")
		}
	})
	assert.Zero(t, allocs)
}

// BenchmarkCallPath measures callPath with tracing off, and on with every
// call sampled, its spans exported over OTLP/HTTP to a sink that takes them
// and answers at once (the cost of a backend is not the hub's).
func BenchmarkCallPath(b *testing.B) {
	h := http.Header{"Traceparent": {testTraceparent}}
	b.Run("off", func(b *testing.B) {
		tr, err := New(context.Background(), Config{})
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			callPath(tr, context.Background(), h, benchParams)
		}
	})
	b.Run("on", func(b *testing.B) {
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		defer sink.Close()
		tr, err := New(context.Background(), Config{Enabled: true, Endpoint: sink.URL})
		require.NoError(b, err)
		defer tr.Shutdown(context.Background())
		b.ReportAllocs()
		for b.Loop() {
			callPath(tr, context.Background(), h, benchParams)
		}
		b.StopTimer()
		require.NoError(b, tr.ForceFlush(context.Background()))
		c := counts(b, tr)
		b.ReportMetric(c["queue_full"]+c["export_failed"], "dropped")
	})
}
