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
//	                    own names, serverInfo and instructions; or to a
//	                    virtual server of the catalog (Config.CatalogFile)
//	GET /mcp/server     MCP servers dialing out (named by their token, else
//	                    by ?name=, else by serverInfo.name)
//	GET /healthz        the process is up
//	GET /readyz         it takes new connections (503 while draining or
//	                    while the broker is unreachable)
//	GET /metrics        Prometheus metrics (an admin token when tokens are on)
//	POST /login, /logout, GET /   the dashboard and its session cookie
//	GET /.well-known/oauth-protected-resource/...  with OAuthConfig: each
//	                    endpoint's Protected Resource Metadata
//	GET /login/oauth    the dashboard's login through the issuer
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
// Files are named by wing; ls reads as this map.
//
//	doc.go                 this map
//	hub.go                 Config, Hub, drain and close
//	http.go                the HTTP mux, bodies under a deadline, readiness,
//	                       the dashboard's login and logout
//	errors.go              every JSON-RPC error the hub gives, built in one place
//	tracing.go             every span of a call's hops, built in one place
//	                       (internal/tracing), free while tracing is off
//	builtin.go             the hub's own resources (switchboard://servers,
//	                       instances) and who may read each of them
//	coalesce.go            at most one event per key and interval, always the
//	                       last (list_changed to clients, roots/list_changed
//	                       to servers)
//
// Who may connect:
//
//	auth.go                the tokens file, roles and principals, their
//	                       identity, where a request's token is found
//	auth_policy.go         the policy: OAuth scopes and claims as roles and
//	                       allow-lists; step-up scopes
//	auth_oauth.go          the hub as an OAuth resource server: OAuthConfig,
//	                       access tokens verified for each endpoint's
//	                       resource, challenges, expiry of WebSocket sessions
//	                       and of HTTP streams (GET, subscriptions/listen)
//	http_oauth.go          Protected Resource Metadata, the step-up 403 of a
//	                       POST, the dashboard's login through the issuer
//	admission.go           who may connect: draining, origin, token, limits
//	audit.go               the audit trail: a line per authorization and per
//	                       routed call
//
// Sessions, a client's side, and their faces:
//
//	session.go             a client session: the method table, lists
//	session_ws.go          a session on a WebSocket
//	session_http.go        a session on Streamable HTTP, /mcp and
//	                       /servers/<name>/mcp
//	session_modern.go      clients of the 2026-07-28 revision: requests without
//	                       a session, their checks, answers and cache hints
//	session_listen.go      subscriptions/listen streams, and the session's
//	                       holds on resource subscriptions
//	session_caps.go        what a client declared it can do for servers
//	session_tasks.go       tasks/get, tasks/update, tasks/cancel; listen
//	                       streams that follow tasks
//
// Routing, a call's way and its translation between eras:
//
//	routing.go             the entry of a client's call (routeCall) and the
//	                       call path: resolve, pick, forward; id and progress-
//	                       token rewriting; server requests routed to their
//	                       client
//	routing_input.go       translation between eras: a server's requests as a
//	                       modern client's input requests, and back
//	routing_lease.go       replicas of servers whose requests to clients
//	                       cannot name their call, leased to one client at a
//	                       time, and the calls that wait for one
//	routing_elicitation.go URL-mode elicitations: where each went, so that its
//	                       completion notice reaches that client
//	routing_tasks.go       servers' tasks on a call's way back: passed through
//	                       under the hub's ids, or awaited for a client that
//	                       cannot follow them
//	routing_heldtasks.go   long calls of servers without the tasks extension,
//	                       made tasks the hub holds (TaskAfter)
//
// Replicas, the server's side:
//
//	replica.go             a server connection: handshake, lists, what it sends
//	replica_modern.go      servers of the 2026-07-28 revision: which revision a
//	                       server is spoken to in (discover first), _meta,
//	                       their listen stream
//
// The registry of servers:
//
//	registry.go            every replica of every instance, and the immutable
//	                       view: who serves each name, URI and template
//	registry_departures.go servers that left: why, and the place they keep for
//	                       a while (their URIs, templates and name)
//	registry_names.go      server names: normalised, and leased in the broker
//
// The catalog, virtual servers and search:
//
//	catalog.go             the catalog file: read at start, on change and on
//	                       SIGHUP, refused when bad (the old one stays);
//	                       switchboard://catalog
//	catalog_cluster.go     the newest catalog shared through the broker
//	registry_catalog.go    what the catalog makes of each view: virtual
//	                       servers' lists, the aggregate's names under its
//	                       policy, the search indexes
//	routing_virtual.go     a virtual server's names back to its members',
//	                       fixed arguments spliced in; call_tool
//	session_search.go      search mode: search_tools, filtered per principal
//
// Subscriptions:
//
//	subscriptions.go       resource subscriptions counted cluster-wide; fan-out
//
// The cluster, instances sharing a broker:
//
//	cluster.go             membership: heartbeats, snapshots, epochs, expiry
//	cluster_calls.go       the exchanges: calls, requests, answers, resumptions
//	                       (sendCall is the remote twin of replica.send)
//	cluster_wire.go        the envelope, the wire format between instances
//	cluster_http.go        an HTTP request for a session another instance
//	                       owns, served by its owner through the broker
//	cluster_tasks.go       task records in the broker's Store, for every
//	                       instance: ids, owners, limits, a holder gone
//
// Statistics:
//
//	stats.go               counters per call, and the window kept while
//	                       someone watches
//	stats_doc.go           switchboard://stats rendered
//	stats_cluster.go       the instances' summaries added up
//	stats_calls.go         switchboard://calls, the call log
//	stats_clients.go       switchboard://clients
//	stats_metrics.go       Prometheus metrics
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
// or the broker. Queuing a message for a peer's writer is not writing: the
// peer's own lock (pkg/peer's Peer.mu), which calls out to nothing, may be
// taken under any lock here. When two are held, they are taken in this
// order, and in no other:
//
//	registry.mu     (a change is derived and announced under it, in order:
//	                the view's observers run holding it)
//	  -> search.Index.mu                a search index follows the view
//	                                    (deriveCatalog; internal/search)
//	  -> Hub.changedMu                  a view was swapped in (viewChanged)
//	  -> Hub.mu -> replica.mu           sessions listed; a client's roots
//	                                    changed (rootsChanged)
//	  -> session.mu -> listening.mu     the list_changed a client is owed;
//	                                    a listen stream counted as it is
//	                                    registered or dropped (session_listen.go)
//	  -> coalescer.mu                   its list_changed fired
//	  -> subscriptions.mu               subscriptions moved with the view
//	inputCall.mu
//	  -> inputs.mu                      the call ends and is forgotten
//	  -> Hub.mu                         its cancellation runs on a goroutine
//	                                    the hub owns (goOwned)
//	replica.mu -> bucket.mu             held updates drawn on the rate
//	Hub.mu -> bucket.mu                 idle rate limits forgotten
//	                                    (sweepBuckets)
//	heldCall.mu -> tasks.mu             a hub-held task's result counted
//	                                    against its owner's bytes
//
// Every mutex of the package, what it guards (the fields written beside it)
// and what may be taken under it; a leaf takes nothing:
//
//	registry.mu          every replica, local and remote, and the places
//	                     kept for servers that left; one view change at a
//	                     time. Under it: the view's observers' locks above
//	Hub.changedMu        the channel closed after each view change; a leaf
//	Hub.mu               the sessions, the replicas, connections and rate
//	                     limits by token, closed. Under it: replica.mu,
//	                     bucket.mu
//	replica.mu           a server connection's calls in flight, progress
//	                     tokens, held progress and updates, re-listing.
//	                     Under it: bucket.mu
//	session.mu           a client's listen streams, resource holds and
//	                     subscriptions, clientInfo, capabilities, owed
//	                     list_changed, calls in flight by server, and its
//	                     coalescers once made. Under it: listening.mu
//	listening.mu         listen streams by principal and list
//	                     (session_modern.go); a leaf
//	inputCall.mu         a call that waits for a modern client's input: its
//	                     rounds, the server's requests, its answer. Under
//	                     it: inputs.mu, Hub.mu
//	inputs.mu            those calls by id (routing_input.go); a leaf
//	heldCall.mu          a hub-held call's state, requests and task record
//	                     (routing_heldtasks.go). Under it: tasks.mu
//	tasks.mu             the task records written here, each principal's
//	                     tasks and bytes, listen streams following tasks,
//	                     servers' tasks polled for them (cluster_tasks.go);
//	                     a leaf
//	coalescer.mu         a coalescer's windows (coalesce.go); a leaf
//	subscriptions.mu     resource subscriptions: this instance's, by
//	                     session and token, and those asked of and kept
//	                     for the cluster; a leaf
//	bucket.mu            a token bucket (admission.go); a leaf
//	cluster.mu           the other instances, the exchanges with them,
//	                     relayed requests, snapshots in parts, the
//	                     broker's state (cluster.go); a leaf
//	cluster.inboxMu      each instance's inbox topic; a leaf
//	flight.mu            a forwarded call's one end, its attempt and timer
//	                     (routing.go); a leaf
//	leases.mu            the calls waiting for a leased replica, and each
//	                     replica's holder (routing_lease.go); a leaf
//	elicitations.mu      where each URL-mode elicitation went; a leaf
//	departures.mu        the servers that left lately
//	                     (registry_departures.go); a leaf
//	closers.mu           servers that closed on server/discover
//	                     (replica_modern.go); a leaf
//	catalogKeeper.mu     one catalog load at a time, and the file's state
//	                     (catalog.go); a leaf
//	Tokens.mu            credentials made in process (auth.go); a leaf
//	principalCache.mu    principals of verified access tokens
//	knownTokens.mu       access tokens that verified (both auth_oauth.go);
//	                     leaves
//	internTable.mu       strings interned for envelopes (cluster_wire.go);
//	                     a leaf
//	recorder.mu          a new item's counters added (stats.go); a leaf
//	stats.mu             the statistics loop and its windows; a leaf
//	stats.rmu            the other instances' summaries; a leaf
//	callLog.mu           the call log's marks and the other instances'
//	                     entries (stats_calls.go); a leaf
//
// One change of a modern server's listen stream holds a turn across its
// round trip to the server (upstreamListen, replica_modern.go), and so
// does one write of a hub-held task's record (heldCall.turn,
// routing_heldtasks.go: the writes of one task one at a time); a turn is a
// channel, not a mutex, and waiting for it honours the caller's context.
// Neither is taken with any lock held.
//
// docs/architecture.md follows one call and one notification through all
// of this; docs/protocol.md says how each ambiguity of MCP and JSON-RPC was
// resolved.
package hub
