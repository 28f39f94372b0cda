// Package stdio is the hub as a local stdio MCP server: the logic of `hub
// stdio`, for clients that launch their servers as commands (desktop apps,
// IDEs).
//
// # Use
//
//	conn := peer.NewStdio(os.Stdin, os.Stdout, nil)
//	err := stdio.Serve(ctx, conn, &stdio.Options{URL: "ws://127.0.0.1:8080/mcp", Logger: log})
//
// The client writes to the process's standard input and reads its standard
// output; Serve passes each message to the hub's /mcp (every server of the
// hub, named <server>__<name>) or /servers/NAME/mcp (one server, its own
// names) over a WebSocket, and the hub's messages back. The standard output
// carries the protocol only; what a person should know (connected, lost,
// reconnecting, refused) goes to the Logger, on standard error.
//
// # What passes, and what the gateway does itself
//
// The client's messages go to the hub unchanged: initialize, calls,
// notifications, cancellation, progress tokens. So do the hub's answers and
// notifications (progress, resource updates, list_changed, log messages).
// The hub's own requests to the client (sampling, elicitation, roots, ping)
// reach the client under an id of the gateway's, and the client's answer goes
// back under the hub's: an answer that arrives after the connection it
// belongs to has ended is dropped, never taken for the answer to a newer
// request that reused the id. The hub's notifications/cancelled for one of
// those requests reaches the client under the same id of the gateway's (and
// is dropped when the request is no longer in flight). A frame that is not
// JSON-RPC is answered by the gateway (-32700, -32600), since the hub would
// close a connection that sent it invalid UTF-8. Progress tokens need no
// mapping: each side's are the ones its own requests carried, unchanged.
//
// # Reconnection
//
// The gateway dials the hub at once and keeps trying with backoff (doubling
// from MinBackoff to MaxBackoff, with jitter); the client's first messages
// wait meanwhile. When the connection ends, the client's calls in flight
// fail with -32000, the hub's requests in flight are cancelled toward the
// client (notifications/cancelled), and the gateway dials again. On the new
// connection it replays the client's session before anything else: its
// initialize (with ids of its own, "switchboard-stdio/N", whose answers the
// client never sees), notifications/initialized, its logging level and its
// resource subscriptions. Then the messages the client sent meanwhile go out
// in order, and the client gets list_changed for tools, resources and
// prompts, since the hub may offer something else now. A hub that refuses
// the credentials (HTTP 401 or 403) ends Serve with an error: retrying would
// not help.
//
// # Files
//
//	doc.go      this overview
//	gateway.go  Serve, Options: the client's side, the hub's, and what is
//	            replayed to a hub dialed again
package stdio
