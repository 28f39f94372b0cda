package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// BenchmarkServerCall measures a Server's side of one tools/call, one at a
// time over an in-memory pipe, as the hub sends it: in a session, and in
// 2026-07-28 with the client's _meta (its version, capabilities,
// clientInfo and log level) on every call. The frames are written and read
// raw, so that only the server's work (and the pipe's) is measured.
func BenchmarkServerCall(b *testing.B) {
	args := `{"text":"hello"}`
	modernMeta := fmt.Sprintf(`{%q:%q,%q:{"sampling":{},"elicitation":{"form":{}},"roots":{"listChanged":true}},%q:{"name":"switchboard","version":"1.0.0"},%q:"info"}`,
		mcp.MetaProtocolVersion, mcp.ModernVersion, mcp.MetaClientCapabilities, mcp.MetaClientInfo, mcp.MetaLogLevel)
	for _, era := range []struct {
		name, meta string
		session    bool
	}{{"session", "", true}, {"modern", modernMeta, false}} {
		b.Run(era.name, func(b *testing.B) {
			s := mcp.NewServer(testInfo, nil)
			s.AddTool(&mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{StructuredContent: req.Params.Arguments}, nil
			})
			serverEnd, clientEnd := peer.Pipe(64)
			ss := s.Serve(context.Background(), serverEnd)
			defer ss.Close()
			ctx := context.Background()
			roundTrip := func(frame string) []byte {
				if err := clientEnd.Write(ctx, []byte(frame)); err != nil {
					b.Fatal(err)
				}
				for {
					out, err := clientEnd.Read(ctx)
					if err != nil {
						b.Fatal(err)
					}
					var m struct{ ID json.RawMessage }
					if json.Unmarshal(out, &m) == nil && m.ID != nil {
						return out
					}
				}
			}
			if era.session {
				roundTrip(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, mcp.LatestVersion))
				if err := clientEnd.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
					b.Fatal(err)
				}
			}
			params := `{"name":"echo","arguments":` + args
			if era.meta != "" {
				params += `,"_meta":` + era.meta
			}
			params += "}"
			frames := make([]string, 64)
			for i := range frames {
				frames[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i+1, params)
			}
			if out := roundTrip(frames[0]); !bytes.Contains(out, []byte(`"structuredContent":{"text":"hello"}`)) {
				b.Fatalf("the server answered %s", out)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				roundTrip(frames[i%len(frames)])
			}
		})
	}
}
