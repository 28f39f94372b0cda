// Command hubbench is Switchboard's load generator. It measures the hub
// against the physical limit of the machine it runs on, in the same run,
// states each figure against its floor, prints one table with its targets
// marked PASS or MISS, and writes docs/benchmarks.md. Its scenarios and
// report are here; the lab they run in (process supervision, /proc
// readings, the machine's description, statistics, tables) is
// internal/benchlab.
//
// Usage, from the repository:
//
//	go run ./cmd/hubbench          # the full suite, a few minutes
//	go run ./cmd/hubbench -quick   # smaller counts and shorter rounds, under a minute
//
// Flags: -hub names a hub binary to measure instead of building one; -out
// moves the report (- for none); -profile off|DIR controls the CPU profiles;
// -servers N puts N replicas of the MCP server behind each hub path;
// -calls SHAPE/PAYLOAD,... measures those cells of the calls alone, and
// -paths NAME,... only those paths beside the raw echo (for an A/B of one
// change: "-calls 1x1/100B -paths 'hub,hub x2 (redis),redis publish -> sub'");
// -profile-shape takes the profiles under another load than 64x16, and
// -paths then limits them too; -idle-only measures idle connections alone
// (with -profile DIR, on the hub's twins, writing their heap profiles
// there); -pools-only measures the connector pools alone (a minute), -pool
// N sizes the pool measured (8), -tracing-only measures the cost of tracing
// alone (a minute), and -base REV names the revision whose hub the cost of
// leases and of tracing are measured against (main: the commit where this
// tree left it; empty for none); -http-only measures the Streamable HTTP
// rows beside their WebSocket and net/http floors, -connect-only `hub
// connect` against its floors, -cache-only the caching client, and
// -auth-only the cost of access tokens, each alone (a minute or two),
// printing the table, the targets and the load average.
//
// # Processes
//
// Everything measured runs as a separate process on loopback, started and
// stopped by hubbench (each child dies with it, even on a crash):
//
//   - bin/hub, built from this tree (go build ./cmd/hub) unless -hub names one;
//   - redis-server without persistence, shared by two hubs for the
//     cross-instance measurements;
//   - hubbench itself in hidden roles: -role echo-server (a raw
//     coder/websocket echo, the baseline), -role peer-server (pkg/peer
//     answering every call with its params), -role mcp-server (an MCP server
//     that dials out to a hub, with a tool "echo" returning its arguments),
//     -role stdio-server (the same server on stdio, for `hub connect`),
//     -role fanout-server (the raw fan-out baseline: a coder/websocket
//     server that answers MCP clients just enough for them to subscribe,
//     and writes one prepared frame to all of them), -role otlp-sink (an
//     OTLP/HTTP receiver that discards what it takes), -role http-server
//     (the stdio server's MCP server served over Streamable HTTP by
//     pkg/mcp), -role pipe-relay (a raw copy of WebSocket frames to a
//     child's lines and back: the floor of `hub connect`) and -role hub (`hub
//     serve` run in-process through the command's own entry, internal/cli,
//     with the flags bin/hub gets, plus net/http/pprof: the twin that is
//     profiled, since the hub binary has no profiling endpoint).
//
// Readiness is always polled with a deadline, never slept for: a hub is
// ready when it logs its address and answers /readyz, a role when it prints
// its address, Redis when it answers PING, a server when its tool is listed
// by the hub the clients use.
//
// # Method
//
// Calls: for each payload (100 B and 16 KiB of arguments) and shape (1x1,
// 16x1, 64x16: connections x calls in flight on each), four paths are
// measured: the raw echo, pkg/peer direct, client -> hub -> server, and
// client -> hub A -> Redis -> hub B -> server. At 100 B, 1x1 and 64x16,
// four more: the hub over Streamable HTTP answering with JSON, and with
// SSE (a lean client, httpload.go: one session per connection, a keep-alive
// TCP connection per call in flight), net/http alone echoing the same POSTs
// (the floor of the HTTP face), and the floor of a hop between instances: a
// PUBLISH delivered to a subscriber by the redis-server the two hubs share
// (go-redis). Each connection keeps its
// calls in flight in a closed loop. The paths warm up, then run in
// alternating rounds so that the machine's drift hits all alike; in each
// round each path's load warms up, then only the calls that end inside a
// measured window count. Every figure is the median over the rounds, and
// every ratio to the raw echo the median of the per-round ratios. CPU per
// call is the middle process's user + system time from /proc/PID/stat over
// the window's calls; allocations per call come from the hub's Go runtime
// counters, where it exposes them (/metrics or /debug/pprof). Floors
// (floors.go) come from the same cell: the hub's CPU per call against
// twice the raw echo server's per round trip, two hubs' against twice one
// instance's, and the 1x1 latency two instances add in Redis round trips.
//
// Fan-out: an MCP server running inside hubbench (so that the send time and
// every receipt are read from one clock) dials a hub; 1,000 and 10,000 clients
// connect, initialize and subscribe to its resource, on one instance and
// spread over two; each round the server sends one
// notifications/resources/updated and the next round starts once everyone
// has it. As many clients of their own, connected at once, measure the raw
// fan-out server (told to send over a control connection) in alternating
// rounds with each setting, where the open files limit allows both sets
// (hubbench raises its hard limit when it may); else just before it.
// Churn: workers connecting, initializing and closing sessions in a loop.
//
// Idle (idle.go): RSS per connection that does nothing, each kind on a
// fresh process: MCP clients connected and initialized over WebSocket to a
// bare coder/websocket server (the raw fan-out server: the floor) and to
// the hub, and Streamable HTTP sessions of the hub, initialized and left
// without a connection.
//
// Connector pools (pools.go): `hub connect` runs hubbench's MCP server on
// stdio (-role stdio-server) behind a hub of its own, with one child (which
// the hub leases to one client at a time), a pool of N, and one child with
// --shared (no leases), at 16x4 in alternating rounds. Then the cost of
// leases to a server that names its calls: this tree's hub against the
// hub of the base revision, built from `git archive`, each with the bench
// server dialing out, at 64x16 in alternating rounds (target: at least
// 0.97x the base's calls/s).
//
// The cost of tracing (tracing.go): this tree's hub with tracing compiled
// in but off, on with every call sampled and on with 1% sampled (exporting
// over OTLP/HTTP to -role otlp-sink, a local receiver that discards what it
// takes), against the base revision's hub, each with the bench server
// dialing out, at 64x16 in alternating rounds (targets: at least 0.98x,
// 0.8x and 0.95x the base's calls/s).
//
// hub connect against its floors (connect.go): the same lean HTTP client
// calls a server with one tool (the official Go SDK's, e2e/gosdk's
// benchserver, built from its own module; hubbench's own when that does
// not build) served directly over Streamable HTTP by its SDK, on stdio
// through a hub and `hub connect --shared`, and on stdio through the hub
// and the raw pipe relay, at 1x1 and 16x4 in alternating rounds (targets:
// 1x1 p50 at most 1.3x direct; the connector's CPU per call at most 1.2x
// the relay's).
//
// Cacheable lists (cachecost.go): the TypeScript SDK's 2026-07-28 client
// (e2e/bench/cachecalls.mjs, after make deps) lists the tools before each
// call while listening for their changes, against a hub whose lists carry
// ttlMs 0 (--list-ttl=-1s) and one with the default TTL, in alternating
// rounds; the table gives the ratio of their calls/s.
//
// Access tokens (authcost.go): pkg/hub's BenchmarkStreamableCallAuth and
// BenchmarkAuthenticateWarm, run by `go test` against the real
// authorization server of internal/oauthtest (oidc-provider under node,
// after make deps; without it both targets are MISS, not measured, and
// say so): 64x16 calls over Streamable HTTP with a static token and with
// an access token (a JWT) on every POST, in alternating rounds on one hub
// (target: at least 0.95x the static token's calls/s, judged by the CPU a
// call costs), and the authentication of a request whose token was
// verified before (target: at most 2 µs).
//
// The HTTP rows include the 2026-07-28 revision's POSTs without a session
// (hub http 2026), JSON and SSE; at 64x16 each is held to the hub's CPU per
// call at most 1.5x net/http's alone (the raw http echo's per request) and
// at least 0.45x the WebSocket rate through the hub.
//
// Traffic statistics (statscost.go): the hub's 64x16 load with nobody
// watching its traffic, and with a client doing what the dashboard's
// Traffic view does (subscribed to switchboard://stats, clients and calls),
// in alternating rounds; the table gives the ratio of their calls/s.
//
// The catalog (catalog.go; -catalog-only alone): internal/search's own
// benchmarks (a search over 10,000 tools of real servers, p50 <= 1 ms and
// p99 <= 5 ms; a server of 500 tools joining the index, <= 50 ms), then a
// hub with a catalog file, the bench server dialing out, and the same call
// through the server's own endpoint and through a virtual server that
// renames it, at 16x4 in alternating rounds (target: the virtual server
// costs at most 1.05x).
//
// Profiles: when the 64x16 throughput target is missed (or -profile DIR is
// given), the twin runs the same 64x16 load while it records a CPU profile;
// the top functions go into docs/benchmarks.md.
package main
