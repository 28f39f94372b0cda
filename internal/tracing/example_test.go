package tracing_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// The hub's part in one call: the client's request received, continuing the
// trace of its _meta; the request to the server sent with the hub's span in
// its _meta; the outcome recorded. Tracing is on here without an endpoint
// anyone listens on: the spans are dropped, and counted, which changes
// nothing for the call.
func Example() {
	ctx := context.Background()
	tr, err := tracing.New(ctx, tracing.Config{Enabled: true, InstanceID: "hub-1", Endpoint: "http://127.0.0.1:1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer tr.Shutdown(ctx)

	fromClient := []byte(`{"name":"echo","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}`)
	ctx, received := tr.Start(ctx, tracing.Received, tracing.Op{Method: "tools/call", ID: jsonrpc.Int64ID(1), Params: fromClient})
	fmt.Println("trace", received.TraceID())

	sctx, sent := tr.Start(ctx, tracing.Sent, tracing.Op{Method: "tools/call", Params: fromClient, Server: "everything"})
	toServer := tr.InjectMeta(sctx, fromClient)
	meta, _ := jsonrpc.Member(toServer, "_meta")
	tp, _ := jsonrpc.StringMember(meta, "traceparent")
	fmt.Println("to the server:", tp[:35], "and the hub's span id")

	sent.EndWith([]byte(`{"content":[],"isError":true}`), nil)
	received.EndWith(nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "bad arguments"))
	// Output:
	// trace 4bf92f3577b34da6a3ce929d0e0e4736
	// to the server: 00-4bf92f3577b34da6a3ce929d0e0e4736 and the hub's span id
}

// With tracing off everything is free and changes nothing.
func Example_off() {
	tr, _ := tracing.New(context.Background(), tracing.Config{})
	params := []byte(`{"name":"echo"}`)
	ctx, s := tr.Start(context.Background(), tracing.Received, tracing.Op{Method: "tools/call", Params: params})
	fmt.Println(tr.Enabled(), s.Recording(), string(tr.InjectMeta(ctx, params)), tr.Pack(ctx) == "")
	s.End()
	// Output:
	// false false {"name":"echo"} true
}
