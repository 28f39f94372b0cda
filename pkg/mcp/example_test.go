package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// A server with one typed tool, and a client calling it. In production the
// server dials the hub with Server.Dial and the client connects with
// Connect; here they talk over an in-memory pipe.
func ExampleAddTypedTool() {
	type greetArgs struct {
		Name  string `json:"name" description:"who to greet"`
		Shout bool   `json:"shout,omitempty"`
	}
	s := mcp.NewServer(mcp.Implementation{Name: "greeter", Version: "1.0.0"}, nil)
	mcp.AddTypedTool(s, &mcp.Tool{Name: "greet", Description: "Say hello"},
		func(ctx context.Context, req *mcp.ToolRequest, args greetArgs) (*mcp.CallToolResult, error) {
			if args.Name == "" {
				return nil, fmt.Errorf("nobody to greet") // the model sees this, with isError
			}
			greeting := "Hello, " + args.Name
			if args.Shout {
				greeting += "!"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(greeting)}}, nil
		})

	ctx := context.Background()
	serverEnd, clientEnd := peer.Pipe(64)
	session := s.Serve(ctx, serverEnd)
	c, err := mcp.ConnectConn(ctx, clientEnd, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		c.Close()
		session.Wait()
	}()

	fmt.Println("connected to", c.InitializeResult().ServerInfo.Name)
	tools, _ := c.AllTools(ctx)
	fmt.Println(tools[0].Name, string(tools[0].InputSchema))

	res, _ := c.CallTool(ctx, "greet", map[string]any{"name": "Ada", "shout": true}, nil)
	fmt.Println(res.Content[0].Text)

	res, _ = c.CallTool(ctx, "greet", nil, nil)
	fmt.Println(res.IsError, res.Content[0].Text)

	_, err = c.CallTool(ctx, "greet", map[string]any{"name": 42}, nil)
	fmt.Println(err != nil)
	// Output:
	// connected to greeter
	// greet {"properties":{"name":{"description":"who to greet","type":"string"},"shout":{"type":"boolean"}},"required":["name"],"type":"object"}
	// Hello, Ada!
	// true nobody to greet
	// true
}

func ExampleSchemaFor() {
	type searchArgs struct {
		Query string   `json:"query" description:"what to look for"`
		Sort  string   `json:"sort,omitempty" enum:"relevance,date"`
		Limit int      `json:"limit" default:"20"`
		Tags  []string `json:"tags,omitempty"`
	}
	var v any
	_ = json.Unmarshal(mcp.SchemaFor[searchArgs](), &v)
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "properties": {
	//     "limit": {
	//       "default": 20,
	//       "type": "integer"
	//     },
	//     "query": {
	//       "description": "what to look for",
	//       "type": "string"
	//     },
	//     "sort": {
	//       "enum": [
	//         "relevance",
	//         "date"
	//       ],
	//       "type": "string"
	//     },
	//     "tags": {
	//       "items": {
	//         "type": "string"
	//       },
	//       "type": "array"
	//     }
	//   },
	//   "required": [
	//     "query"
	//   ],
	//   "type": "object"
	// }
}

// Editing a message on its way through, without losing what the hub does
// not know about.
func ExampleObject() {
	params, err := mcp.ParseObject(json.RawMessage(
		`{"name":"search","arguments":{"q":"go"},"_meta":{"progressToken":7,"vendor/trace":"abc"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	name, _ := params.String("name")
	token, _ := params.MetaValue(mcp.MetaProgressToken)
	fmt.Println(name, string(token))

	params.Set("name", "github__search")
	params.SetMeta(mcp.MetaServer, "github")
	params.DeleteMeta(mcp.MetaProgressToken)
	fmt.Println(string(params.Raw()))

	_, err = mcp.ParseObject(json.RawMessage(`[1,2]`))
	fmt.Println(err)
	// Output:
	// search 7
	// {"_meta":{"switchboard/server":"github","vendor/trace":"abc"},"arguments":{"q":"go"},"name":"github__search"}
	// jsonrpc error -32602: Invalid params: params must be a JSON object
}

func ExampleParseURITemplate() {
	t := mcp.ParseURITemplate("github://{owner}/{repo}/blob/{+path}{?ref}")
	for _, uri := range []string{
		"github://golang/go/blob/src/net/http/server.go",
		"github://golang/go/blob/README.md?ref=master",
		"github://golang/go/tree/master",
	} {
		fmt.Println(t.Match(uri), uri)
	}
	// Output:
	// true github://golang/go/blob/src/net/http/server.go
	// true github://golang/go/blob/README.md?ref=master
	// false github://golang/go/tree/master
}

func ExampleNegotiateVersion() {
	fmt.Println(mcp.NegotiateVersion(mcp.Version20250618))
	fmt.Println(mcp.NegotiateVersion("2030-01-01"))
	// Output:
	// 2025-06-18
	// 2025-11-25
}
