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
//	/mcp                clients: a GET with a WebSocket upgrade (subprotocol
//	                    "mcp"), or MCP Streamable HTTP (POST, GET, DELETE)
//	/servers/<name>/mcp the same two transports, scoped to one server: its
//	                    own names, serverInfo and instructions
//	GET /mcp/server     MCP servers dialing out (named by their token, else
//	                    by ?name=, else by serverInfo.name)
//	GET /healthz        the process is up
//	GET /readyz         it takes new connections (503 while draining or
//	                    while the broker is unreachable)
//	GET /metrics        Prometheus metrics (an admin token when tokens are on)
//	POST /login, /logout, GET /   the dashboard and its session cookie
//
// Drain stops taking connections and lets calls in flight finish; Close
// ends everything and waits for every goroutine the hub started.
//
// # Words
//
// One word for each thing, here and in the docs:
//
//   - a session is one client's connection to the hub, which is to it one
//     MCP server (session.go; session_ws.go is its WebSocket face);
//   - a replica is one connection of an MCP server dialing out; several
//     replicas with one name are one server, and the hub is their MCP
//     client (replica.go);
//   - an instance is one hub process; instances share a broker (cluster.go,
//     cluster_wire.go);
//   - upstream is toward servers, downstream toward clients; a caller is the
//     downstream end of one routed call (routing.go).
//
// # Where things are
//
//	hub.go            Config, Hub, drain and close
//	http.go           the HTTP mux, bodies under a deadline, readiness, the
//	                  dashboard's login and logout
//	admission.go      who may connect: draining, origin, token, limits
//	auth.go           the tokens file and roles
//	session.go        a client session: the method table, lists, routing entry
//	session_ws.go     a session on a WebSocket
//	session_http.go   a session on Streamable HTTP, /mcp and /servers/<name>/mcp
//	cluster_http.go     an HTTP request for a session another instance owns,
//	                  served by its owner through the broker
//	routing.go        the call path: resolve, pick, forward; id and progress-
//	                  token rewriting; server requests routed to their client
//	routing_lease.go          replicas of servers whose requests to clients cannot
//	                  name their call, leased to one client at a time, and
//	                  the calls that wait for one
//	session_modern.go         clients of the 2026-07-28 revision: requests without a
//	                  session, their checks, answers and cache hints
//	session_listen.go         subscriptions/listen streams, and the session's holds
//	                  on resource subscriptions
//	routing_input.go          translation between eras: a server's requests as a
//	                  modern client's input requests, and back
//	routing_elicitation.go    URL-mode elicitations: where each went, so that its
//	                  completion notice reaches that client
//	replica.go        a server connection: handshake, lists, what it sends
//	replica_modern.go servers of the 2026-07-28 revision: discover, _meta,
//	                  their listen stream
//	registry.go       every replica of every instance, and the immutable view:
//	                  who serves each name, URI and template
//	registry_departures.go     servers that left: why, and the place they keep for a
//	                  while (their URIs, templates and name)
//	subscriptions.go  resource subscriptions counted cluster-wide; fan-out
//	cluster.go        instances: heartbeats, snapshots, calls between them
//	cluster_wire.go       the wire format between instances
//	errors.go         every JSON-RPC error the hub gives, built in one place
//	coalesce.go       at most one event per key and interval, always the last
//	                  (list_changed to clients, roots/list_changed to servers)
//	stats.go          traffic statistics: counters per call, the window
//	                  kept while someone watches; stats_doc.go renders
//	                  switchboard://stats, stats_cluster.go adds up the
//	                  instances' summaries, stats_calls.go and stats_clients.go are
//	                  switchboard://calls and switchboard://clients
//	session_caps.go, builtin.go, registry_names.go, stats_metrics.go
//
// # Inside
//
// Each connection is a peer.Peer. The registry holds every replica of
// every instance and publishes an immutable view that readers use without
// locking. Items are named server + Separator + item ("weather__forecast"),
// resource URIs are kept as they are.
//
// A tools/call is forwarded from the client's read loop and answered from
// wherever the answer arrives, without a goroutine waiting, whether the
// replica is here or on another instance: params are edited as bytes (the
// name spliced in, the progress token swapped), never decoded and
// re-encoded. A server's request for a client (sampling, elicitation,
// roots) goes the other way the same way: from the server connection's
// read loop, answered when the client answers, so that no worker waits on
// a client. Subscriptions are counted across the cluster, with one
// upstream subscription per resource.
//
// # Locks
//
// Locks are short and never held while writing to a socket, calling a peer
// or the broker. When two are held, they are taken in this order:
// registry.mu (held while a registry change is announced), then Hub.mu,
// then replica.mu; registry.mu, then subscriptions.mu or Hub.changedMu.
// cluster.mu, subscriptions.mu, session.mu, flight.mu, leases.mu,
// stats.mu, stats.rmu, callLog.mu and elicitations.mu are leaves: nothing
// else is taken while one is held.
//
// docs/architecture.md follows one call and one notification through all
// of this; docs/protocol.md says how each ambiguity of MCP and JSON-RPC was
// resolved.
package hub
