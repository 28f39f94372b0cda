// Package connect puts MCP servers that cannot dial a hub on one: a stdio
// server run as a child process, or a Streamable HTTP (or HTTP+SSE) server
// reached at its URL. It is the logic of `hub connect`.
//
// # Use
//
//	err := connect.Run(ctx, []connect.Server{{
//		Name:    "memory",
//		Command: "npx",
//		Args:    []string{"-y", "@modelcontextprotocol/server-memory"},
//	}}, &connect.Options{URL: "ws://127.0.0.1:8080/mcp/server", Logger: log})
//
// Run keeps every server on the hub until ctx ends. LoadConfig reads many
// servers from a file in the shape desktop clients use (`mcpServers: {name:
// {command, args, env}}`), so that one process runs them all.
//
// # One session
//
// For each server, the connector dials the hub's /mcp/server (with ?name=,
// one ?root= per root, and ?lease=client, below), then starts the command
// in a process group of its own, with pipes for its standard streams. From then on it relays:
// every line the server writes on its standard output goes to the hub as one
// WebSocket frame, and every frame from the hub goes to the server's standard
// input as one line, unchanged (a line break inside a frame, which can only
// be JSON whitespace, becomes a space). Ids are not rewritten: the hub's
// connection and the server's pipes are one conversation, so requests,
// answers, notifications, progress, cancellation and the server's own
// requests to clients (sampling, elicitation, roots) all pass as they are.
// The hub asks server/discover first, as it does every server, and sends
// initialize to a server that refuses it (one of the session revisions);
// the connector only watches for them and for the server's answers: a
// server that answered either has started.
//
// The server's standard error goes to the log line by line, with
// server=<name>. A line on its standard output that is not JSON-RPC (a
// banner printed by mistake) is dropped and logged, and the hub gets an
// error log message (notifications/message from logger
// "switchboard-connect", which the hub passes to clients that asked for
// errors); the server keeps running.
//
// A server with an Upstream URL is the same, with a session of pkg/mcp's
// Streamable HTTP client (or its HTTP+SSE client) in place of the child:
// the hub's initialize opens the session, and a session the server forgot
// (404) or that cannot be resumed ends the relay like a child's exit.
//
// # Failures
//
// A session is one child and one hub connection, and ends with either, so
// that both sides always start afresh: a new child gets the hub's new
// initialize. When the child exits, closes its output, writes a line over
// the read limit or answers neither initialize nor server/discover within
// InitTimeout, the connector stops it and closes the hub connection with
// 1011 and a short reason the hub shows ("server exited with status 1; restarting in 4s").
// When the hub goes away, the connector stops the child and dials again.
// Every next session waits a backoff that doubles from MinBackoff to
// MaxBackoff, with jitter, and starts over once a server has run for
// ResetAfter. A hub that refuses a static token (HTTP 401 or 403) ends that
// server's loop with ErrRefused; nothing else does.
//
// # Credentials
//
// With Options.OAuth the connector gets access tokens for the hub (oauth.go):
// the first handshake's token is asked for after discovery (the hub's 401
// without a token names its Protected Resource Metadata, which names the
// resource and the authorization server, unless OAuthClient.Issuer does),
// by client credentials; every handshake of every server of the process
// carries the same token, renewed before it expires, and one the hub
// refuses is replaced at once, once per dial. A connection outlives its
// token: the hub checks a server's token when it connects. Failures to get
// a token, and new tokens refused one after another, wait from 1 s to 30 s
// before the authorization server is asked again, so that nothing loops.
//
// With Server.OAuth an upstream HTTP server is reached as an OAuth client of
// its own (upstream_oauth.go), never with the hub's token: the first 401
// starts the discovery, then every request to the server's origin carries a
// token for it, got by client credentials or from a refresh token kept in
// a file, which is rewritten when the server rotates it (oauth_refresh.go).
//
// # Requests to clients, leases and pools
//
// A stdio server cannot say which call its sampling, elicitation and roots
// requests serve (the official SDKs put no related request on the stdio
// wire), so the hub sends each to the only client with calls in flight to
// that server's connection. The connector asks the hub (?lease=client) to
// lease each connection of such a server to one client at a time; with
// Server.Pool it keeps between Min and Max children, each a connection of
// its own: Min always, one more while every child has calls of the hub's
// in flight (the relay counts them), and any beyond Min stopped after
// PoolIdle without a call. Server.Shared turns the leases off, for a server
// that never asks clients anything during a call. An HTTP+SSE server is
// leased like a stdio one; a Streamable HTTP server is not: its client conn
// names the call of each request from the POST stream that carries it.
//
// # Tracing
//
// With Options.Tracing on (`hub connect --tracing`), each request of the
// hub's is a span of its hop to the server, the child of the hub's span of
// the request, whose context the server receives in _meta in its place
// (trace.go); an HTTP upstream gets it as headers too.
//
// # Stopping
//
// When ctx ends, each connection is closed with 1001 and each child's
// process group gets SIGTERM, then SIGKILL after StopGrace: whatever the
// server started (npx starts a shell that starts node) goes with it. On
// unix the connector starts each command through a keeper, a copy of its
// own executable that leads the group (keeper.go): should the connector
// die without stopping the child (a crash, SIGKILL), the keeper sees the
// pipe from it end and kills everything under it, the command, what the
// command started, and what detached itself from the group (on Linux the
// keeper is their subreaper).
//
// # Files
//
//	doc.go              this overview
//	connect.go          Server, Options, Run: each server's session with the
//	                    hub, dialed again after a loss
//	config.go           LoadConfig: a desktop client's file of servers
//	pool.go             Pool: the runs of one server kept at once, one more
//	                    when all are busy, those beyond Min retired idle
//	relay.go            one run's messages between the hub and the server
//	child.go            a stdio server's run: its process and streams; no
//	                    secret of the connector's in its environment
//	keeper.go           the keeper, which kills what a child started should
//	                    the connector die
//	process_linux.go    process groups and signals on Linux, and the
//	process_unix.go     other unix systems;
//	process_other.go    elsewhere, the child alone
//	upstream_http.go    an upstream over Streamable HTTP or HTTP+SSE
//	upstream_oauth.go   an upstream's own access tokens, never the hub's
//	oauth.go            OAuthClient: the connector's access tokens
//	oauth_refresh.go    the refresh token grant, its rotated token written
//	                    back to its file
//	trace.go            the connector's hop, traced (Options.Tracing)
package connect
