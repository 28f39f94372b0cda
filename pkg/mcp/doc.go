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
// Connect also takes http:// and https:// URLs: any MCP server's Streamable
// HTTP endpoint.
//
// # Streamable HTTP
//
// StreamableHandler serves MCP's Streamable HTTP transport and turns each
// session into a peer.Conn, so that whoever owns a session runs a peer on
// it exactly as on a WebSocket. Serving a Server over HTTP takes one hook:
//
//	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
//		Open: func(r *http.Request, sess *mcp.StreamSession) error {
//			s.Serve(sess.Context(), sess.Conn())
//			return nil
//		},
//	})
//	http.Handle("/mcp", originCheck(h)) // admission is the owner's job
//
// The handler routes what the peer writes: an answer to the POST that
// carried its request, progress to the POST of the request it reports on,
// a message naming a request in _meta["switchboard/relatedRequest"] to that
// request's POST, anything else to the session's GET stream (kept until one
// opens). It answers with JSON when an answer is all a POST gets, with SSE
// otherwise; SSE events have ids from which a client resumes with
// Last-Event-ID; sessions end on DELETE, when idle, or when the owner
// closes the conn. The Open and Check hooks let an owner refuse sessions
// and requests with an HTTP status; Stateless is the place for 2026-07-28
// requests without a session. docs/protocol.md says which stream each
// message takes and every status.
//
// DialStreamable is the client end, a peer.Conn that POSTs each frame,
// reads JSON and SSE answers, keeps the GET stream open, resumes streams
// and DELETEs the session on Close. DialSSE is the client end of the older
// HTTP+SSE transport (2024-11-05), which Connect falls back to when a
// server refuses the initialize POST.
package mcp
