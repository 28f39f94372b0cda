// Package hub is the Switchboard hub: it accepts MCP servers that dial out
// to it and clients that dial in, aggregates the servers' tools, resources
// and prompts, and routes every request, answer, notification and
// server-to-client request between them, on one instance or across many
// sharing a broker.
//
// # Use
//
// New builds a Hub from a Config (the zero value runs one instance on an
// in-memory broker); Handler, or NewHTTPServer, serves it:
//
//	GET /mcp          clients (WebSocket, subprotocol "mcp")
//	GET /mcp/server   MCP servers dialing out (named by their token, else
//	                  by ?name=, else by serverInfo.name)
//	GET /healthz      the process is up
//	GET /readyz       it takes new connections (503 while draining or
//	                  while the broker is unreachable)
//	GET /metrics      Prometheus metrics (an admin token when tokens are on)
//	POST /login, /logout, GET /   the dashboard and its session cookie
//
// Drain stops taking connections and lets calls in flight finish; Close
// ends everything and waits for every goroutine the hub started.
//
// # Inside
//
// Each connection is a peer.Peer. A clientSession is the hub as an MCP
// server to one client; a replica (server_session.go) is the hub as an MCP
// client to one server connection; several replicas may serve one server
// name, and calls go to the one with the fewest in flight. The registry
// holds every replica of every instance and publishes an immutable view
// that readers use without locking. Items are named server + Separator +
// item ("weather__forecast"), resource URIs are kept as they are.
//
// A tools/call to a server on this instance is forwarded from the client's
// read loop and answered from the server's, without a goroutine waiting;
// params are edited as bytes (the name spliced in, the progress token
// swapped), never decoded and re-encoded. Calls to a server on another
// instance travel through the broker (cluster.go). Subscriptions are
// counted across the cluster, with one upstream subscription per resource.
//
// docs/architecture.md follows one call and one notification through all
// of this; docs/protocol.md says how each ambiguity of MCP and JSON-RPC was
// resolved.
package hub
