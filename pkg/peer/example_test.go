package peer_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Two peers on an in-memory pipe, each calling the other. Either end
// answers calls and makes its own; a handler may call back the peer that
// called it (peer.FromContext) before it answers. In the hub every
// WebSocket is such a peer, a server's as well as a client's.
func Example() {
	left, right := peer.Pipe(16)
	a := peer.New(left, &peer.Options{Handler: peer.HandlerFunc(
		func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			if req.Method == "name" {
				return "Ada", nil
			}
			return nil, jsonrpc.ErrMethodNotFound
		})})
	b := peer.New(right, &peer.Options{Handler: peer.HandlerFunc(
		func(ctx context.Context, req *jsonrpc.Request) (any, error) {
			switch req.Method {
			case "greet":
				var name string
				if err := peer.FromContext(ctx).Call(ctx, "name", nil, &name); err != nil {
					return nil, err
				}
				return "Hello, " + name, nil
			case "sum":
				var xs []int
				if err := json.Unmarshal(req.Params, &xs); err != nil {
					return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "want an array of integers")
				}
				total := 0
				for _, x := range xs {
					total += x
				}
				return total, nil
			}
			return nil, jsonrpc.ErrMethodNotFound
		})})
	ctx := context.Background()
	a.Start(ctx)
	b.Start(ctx)
	defer func() {
		a.Close() // closes the pipe, and so b
		a.Wait()
		b.Wait()
	}()

	var greeting string
	err := a.Call(ctx, "greet", nil, &greeting)
	fmt.Println(greeting, err)

	var total int
	err = a.Call(ctx, "sum", []int{1, 2, 3}, &total)
	fmt.Println(total, err)

	err = a.Call(ctx, "sum", map[string]int{"one": 1}, &total)
	fmt.Println(jsonrpc.CodeOf(err), err)

	err = b.Call(ctx, "greet", nil, &greeting) // a has no "greet"
	fmt.Println(jsonrpc.CodeOf(err), err)
	// Output:
	// Hello, Ada <nil>
	// 6 <nil>
	// -32602 jsonrpc error -32602: Invalid params: want an array of integers
	// -32601 jsonrpc error -32601: Method not found
}
