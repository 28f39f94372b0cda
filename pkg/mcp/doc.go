// Package mcp holds the Model Context Protocol types, method names and error
// codes the hub routes, and Go helpers to write an MCP server that dials out
// to the hub and a client that connects to it.
//
// # Types
//
// The types follow the MCP schema (protocol versions 2024-11-05 to
// 2025-11-25, see SupportedVersions) as far as the hub and the helpers need
// them; members they do not know travel untouched, since the hub routes
// params and results as raw JSON. Object is a one-level decode that keeps
// every member, for code that must edit a message and pass the rest on.
// CallToolParams and CallToolResult encode themselves (jsonrpc.Appender):
// large raw arguments and structured results are copied, not re-scanned.
//
// # Servers
//
// NewServer, then AddTool, AddResource, AddResourceTemplate and AddPrompt
// with their handlers; Dial connects to a hub's /mcp/server endpoint and
// reconnects with backoff until its context ends, or Serve runs the server
// on a connection of your own. A handler can report progress, log, and ask
// the client to sample, elicit or list its roots through its request; the
// hub routes those to the client that made the call.
//
// # Clients
//
// Connect dials a hub's /mcp endpoint and initializes; CallTool, the List
// and All methods, ReadResource, Subscribe and GetPrompt call through it,
// and ClientOptions receive notifications and answer the server's requests.
package mcp
