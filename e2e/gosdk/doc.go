// Package gosdk tests pkg/mcp's Streamable HTTP transport with the official
// MCP Go SDK (github.com/modelcontextprotocol/go-sdk, pinned in go.mod) as the
// client. It is a module of its own so that the hub's go.mod stays free of
// the SDK; a replace directive points at the repository, so the tests start
// pkg/mcp servers in-process. connect_test.go puts servers written with the
// SDK (askserver, and a TypeScript SDK one) behind `hub connect`, and asks
// them from many SDK clients at once.
package gosdk
