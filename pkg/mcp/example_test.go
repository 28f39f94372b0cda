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

// A tool that asks its caller for input serves clients of both eras: a
// client of 2026-07-28 gets the input requests, fulfils them and calls
// again; for a client of a session, the Server asks the client itself.
func ExampleElicitInput() {
	s := mcp.NewServer(mcp.Implementation{Name: "greeter", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "greet", Description: "Greets you by name"},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			form, ok := mcp.InputResponse[mcp.ElicitResult](req.InputResponses, "name")
			if !ok || form.Action != "accept" {
				return &mcp.CallToolResult{InputRequests: map[string]mcp.InputRequest{
					"name": mcp.ElicitInput(&mcp.ElicitParams{Message: "What is your name?",
						RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)}),
				}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(fmt.Sprintf("Hello, %v!", form.Content["name"]))}}, nil
		})

	ctx := context.Background()
	for _, version := range []string{"", mcp.LatestVersion} { // 2026-07-28 first (the default), then a session
		serverEnd, clientEnd := peer.Pipe(16)
		ss := s.Serve(ctx, serverEnd)
		c, err := mcp.ConnectConn(ctx, clientEnd, &mcp.ClientOptions{
			ProtocolVersion: version,
			Elicitation: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
			},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		res, err := c.CallTool(ctx, "greet", nil, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(c.InitializeResult().ProtocolVersion, res.Content[0].Text)
		c.Close()
		ss.Wait()
	}
	// Output:
	// 2026-07-28 Hello, Ada!
	// 2025-11-25 Hello, Ada!
}

// In protocol version 2026-07-28 a client hears of changes on
// subscriptions/listen streams: Subscribe opens one for a resource.
func ExampleClient_Subscribe() {
	s := mcp.NewServer(mcp.Implementation{Name: "files", Version: "1.0.0"}, nil)
	s.AddResource(&mcp.Resource{URI: "file:///notes.txt", Name: "notes"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "buy milk"}}}, nil
		})

	ctx := context.Background()
	serverEnd, clientEnd := peer.Pipe(16)
	ss := s.Serve(ctx, serverEnd)
	updated := make(chan string, 1)
	c, err := mcp.ConnectConn(ctx, clientEnd, &mcp.ClientOptions{
		OnNotification: func(method string, params json.RawMessage) {
			if method == mcp.NotificationResourceUpdated {
				var p mcp.ResourceUpdatedParams
				_ = json.Unmarshal(params, &p)
				updated <- p.URI
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Subscribe(ctx, "file:///notes.txt"); err != nil { // returns once the server acknowledged it
		fmt.Println(err)
		return
	}
	s.ResourceUpdated(ctx, "file:///notes.txt")
	fmt.Println("updated:", <-updated)
	c.Close()
	ss.Wait()
	// Output:
	// updated: file:///notes.txt
}
