package jsonrpc_test

import (
	"fmt"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

func ExampleLimits_Decode() {
	f := jsonrpc.Decode([]byte(`[{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":"a"},{"foo":"boo"}]`))
	for _, m := range f.Messages {
		req := m.(*jsonrpc.Request)
		fmt.Println("call", req.Method, req.ID, string(req.Params))
	}
	for _, r := range f.Replies {
		fmt.Println("owed", string(jsonrpc.Encode(r)))
	}
	// Output:
	// call sum "a" [1,2]
	// owed {"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: missing \"jsonrpc\":\"2.0\""}}
}
