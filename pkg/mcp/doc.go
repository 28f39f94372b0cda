// Package mcp holds the Model Context Protocol types, method names and error
// codes the hub routes, and Go helpers to write an MCP server that dials out
// to the hub and a client that connects to it.
//
// # Types
//
// The types follow the MCP schema (protocol versions 2024-11-05 to
// 2025-11-25, see SupportedVersions, and 2026-07-28, see ModernVersion) as
// far as the hub and the helpers need them; members they do not know travel untouched, since the hub routes
// params and results as raw JSON. Object is a one-level decode that keeps
// every member, for code that must edit a message and pass the rest on.
// CallToolParams and CallToolResult encode themselves (jsonrpc.Appender):
// large raw arguments and structured results are copied, not re-scanned.
//
// # Two eras
//
// MCP has two shapes. The session-based revisions open a session with
// initialize, after which the server may send its client requests
// (sampling, elicitation, roots) and notifications of its own. The
// stateless revision 2026-07-28 has no session: every request describes
// itself in params._meta (its version, the client's capabilities and
// info, the log level it wants; see RequestMeta), server/discover says
// what a server is, every result says what it is (resultType), a server
// that needs input answers with an InputRequiredResult that the client
// fulfils and sends again, and notifications come on subscriptions/listen
// streams. The Server and the Client here speak both.
//
// # Servers
//
// NewServer, then AddTool, AddResource, AddResourceTemplate and AddPrompt
// with their handlers; Dial connects to a hub's /mcp/server endpoint and
// reconnects with backoff until its context ends, or Serve runs the server
// on a connection of your own. A handler can report progress and log
// through its request (ToolRequest.Log: for a request of 2026-07-28 only at
// the level its _meta asks for). A server answering large calls may lend
// its handlers their requests (ServerOptions.LendRequests): their bytes go
// back to a pool once the answer is written, and a handler copies what it
// keeps beyond that.
//
// A server answers both eras on every connection; its ProtocolVersions
// option restricts them (without a session-based version it answers
// initialize with -32601, which makes the hub use server/discover).
// A request of 2026-07-28 is checked in the revision's order (method, then
// _meta, then version), and its result gets resultType, the server's name
// and, for lists and reads, cache hints (ServerOptions.CacheTTL).
//
// # Input requests
//
// A handler that needs input from the client returns InputRequests (made
// with ElicitInput, SamplingInput, RootsInput) under keys of its choosing,
// and a RequestState if it wants one back; it is called again with the
// answers in its request's InputResponses (read them with InputResponse)
// and that state. A client of 2026-07-28 gets an InputRequiredResult and
// retries; for a client of a session the Server sends the requests itself,
// all at once, and calls the handler again: one handler serves both eras.
// Input the request's client cannot give (ToolRequest.ClientCapabilities)
// is -32021. The older blocking helpers (ToolRequest.CreateMessage, Elicit,
// ListRoots) need a session to send on; the hub routes their requests to the
// client that made the call.
//
// # Tasks
//
// With ServerOptions.Tasks a Server offers the tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663) to requests of 2026-07-28 that
// declare it. A tool handler decides per request: ToolRequest.RunAsTask
// runs its work as a task when the request can have one (CanRunTask) and
// in the call otherwise, so that one handler serves every client. The
// task's record is in a TaskStore (MemoryTaskStore by default) before the
// call answers with a CreateTaskResult; tasks/get reads it, tasks/update
// answers the input requests the work returns (the task waits in
// input_required until every one is answered), tasks/cancel cancels it;
// the work runs on a goroutine of the Server's until it ends, its TTL ends
// or Shutdown. TaskOptions.Owner ties each task to who made it. A Client
// with ClientOptions.Tasks declares the extension and CallTool follows a
// task to its result; StartTool, AwaitTask, GetTask, UpdateTask and
// CancelTask take the steps one at a time.
//
// # Listening
//
// In 2026-07-28 a client hears of list changes and resource updates on a
// subscriptions/listen request: the server acknowledges it first, with the
// part of its filter it supports, then sends what was asked for, each
// notification tagged with the listen request's id, until the client
// cancels it or leaves. AddTool and the like, and ResourceUpdated, reach
// sessions and listen streams alike.
//
// # Clients
//
// Connect dials a hub's /mcp endpoint, or any MCP server's Streamable HTTP
// endpoint (http:// and https:// URLs). Like the official SDKs it tries
// 2026-07-28 first (server/discover) and opens a session with initialize
// when the server does not speak it; ClientOptions.ProtocolVersion pins one
// era. CallTool, the List and All methods, ReadResource, Subscribe and
// GetPrompt call through it, and ClientOptions receive notifications and
// answer the server's requests: in a session as it sends them, in
// 2026-07-28 as input requests, which the client fulfils and retries by
// itself. In 2026-07-28, Subscribe opens a listen stream per URI, and a
// client with OnNotification one for the lists that may change.
//
// # Streamable HTTP
//
// StreamableHandler serves MCP's Streamable HTTP transport and turns each
// session into a peer.Conn, so that whoever owns a session runs a peer on
// it exactly as on a WebSocket. The conn is a peer.DirectConn: each POST's
// handler hands its messages to the peer itself, and what the peer sends
// is routed to the waiting response on the sender's goroutine, so a
// session has no goroutine of its own. Serving a Server over HTTP takes one
// hook:
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
// Last-Event-ID (its own stream only, and 204 once nothing more can come
// on it: a cancelled request's stream is never resumed); sessions end on
// DELETE, when idle, or when the owner
// closes the conn. The Open and Check hooks let an owner refuse sessions
// and requests with an HTTP status, and Screen a POST by what it carries
// (the hub's step-up 403); Stateless is the place for 2026-07-28
// requests without a session: it gets a session of one request, whose
// answer goes with the HTTP status of its error. docs/protocol.md says
// which stream each message takes and every status.
//
// DialStreamable is the client end, a peer.Conn that POSTs each frame,
// reads JSON and SSE answers, keeps the GET stream open, resumes streams
// and DELETEs the session on Close; a message of 2026-07-28 goes in a POST
// of its own, without a session. DialSSE is the client end of the older
// HTTP+SSE transport (2024-11-05), which Connect falls back to when a
// server refuses the initialize POST.
//
// # Files
//
//	doc.go                 this overview
//	protocol.go            protocol versions, method names, error codes,
//	                       _meta keys, logging levels
//	types.go               the messages' params and results, capabilities,
//	                       content
//	object.go              Object: a message decoded one level deep
//	encode.go              arguments and structured results spliced in raw
//	methods.go             the method table: each method's direction, era
//	                       and relay, read by the hub's dispatch and metrics
//	modern.go              2026-07-28: _meta, resultType, cache hints,
//	                       InputRequiredResult
//	input.go               input requests (SEP-2322), served in both eras
//	listen.go              subscriptions/listen
//	headers.go             Mcp-Param-* headers of a tool's arguments
//	                       (SEP-2243)
//	trace.go               trace context in _meta
//	schema.go              SchemaFor: a tool's input schema from a Go type
//	uritemplate.go         URITemplate: RFC 6570 templates matched
//	server.go              Server, ServerSession, the tool, resource and
//	                       prompt handlers; dialing out to the hub
//	client.go              Client: both eras, its lists, calls and handlers
//	client_modern.go       a 2026-07-28 Client: discover, input rounds,
//	                       listen streams
//	tasks.go               the tasks extension's types (SEP-2663)
//	tasks_server.go        a Server's side: RunAsTask, the runs, tasks/*
//	tasks_client.go        a Client's side: AwaitTask, StartTool, GetTask,
//	                       UpdateTask, CancelTask
//	tasks_store.go         TaskStore, TaskRecord, MemoryTaskStore
//	streamable.go          Streamable HTTP's server side: the handler,
//	                       StreamableOptions, its requests' checks
//	streamable_session.go  StreamSession: one session's conn, its POST and
//	                       GET streams, resumption
//	streamable_client.go   DialStreamable: the client conn
//	sse.go                 Server-Sent Events written and read
//	sse_client.go          the HTTP+SSE transport of 2024-11-05, client side
//	inbox.go               what an HTTP client conn received and why it ended
package mcp
