// Package conformance is the fixture behind the official MCP conformance
// suite (@modelcontextprotocol/conformance, pinned in e2e/conformance): a
// pkg/mcp Server with every tool, resource and prompt the suite's server
// scenarios call, under the names and with the behaviours they check, in
// both eras of the protocol: sessions (2024-11-05 to 2025-11-25) and the
// stateless revision 2026-07-28.
//
// NewServer builds it; Handler serves it over pkg/mcp's Streamable HTTP
// handler, sessions and stateless requests on one endpoint, behind a
// loopback Host/Origin check (the suite checks DNS rebinding protection).
// The command in ./fixture runs it on a port, dials it out to a hub
// (Server.Dial; --modern for a server of 2026-07-28 only), or serves it on
// standard input and output (--stdio, for hub connect), so that the suite
// can be pointed at the hub's /servers/<name>/mcp.
//
// The tools that ask for input (sampling, elicitation, roots) are written
// once, with input requests (mcp.ElicitInput and the like): a client of
// 2026-07-28 gets an InputRequiredResult and retries, and for a client of a
// session the Server asks it itself. Those of the input-required-result
// scenarios keep what a later round needs in the request's requestState,
// sealed with an HMAC (a key made at NewServer): the server remembers
// nothing between rounds, and a forged or altered state is -32602.
//
// The tools of the tasks extension's scenarios (tasks.go) decide per
// request, as the extension has a server do: those that may run long run
// as tasks for a client that declared the extension
// (mcp.ToolRequest.RunAsTask) and in the call for any other; those that
// only run as tasks answer any other with -32021. NewServer turns the
// extension on (mcp.ServerOptions.Tasks); Shutdown stops the tasks still
// running. test_header_param has its region argument mirrored in the
// Mcp-Param-Region header (SEP-2243's x-mcp-header), which the Server
// checks on a request without a session.
//
// TestConformance runs the suite (@modelcontextprotocol/conformance
// 0.2.0-alpha.12, pinned in e2e/conformance, on the Node 22 that
// scripts/deps.sh installs there) in lanes: each revision, 2025-11-25 and
// 2026-07-28, at its own wire (--requirements <revision>: a session opened
// with initialize, or stateless requests), against the fixture served
// directly over pkg/mcp's Streamable HTTP handler (JSON answers where they
// suffice, or SSE always), through a hub's /servers/conformance/mcp with
// the fixture dialed out to it over a WebSocket (speaking every revision,
// or 2026-07-28 only), and behind hub connect's connector (the fixture as
// its child on stdio, ServeStdio, or served over Streamable HTTP and
// reached as an --upstream). The lanes run side by side. A lane fails on
// any failed or warned check of any scenario the suite runs, scored or not
// (the tasks extension's, the SEP-2243 headers', json-schema-2020-12); one
// whose every check the suite itself skips (tasks-status-notifications) is
// reported as skipped. It prints one table of every scenario in every
// lane; make conformance shows it. Through the hub, server-sse-polling
// checks the hub's priming event and retry field but cannot check
// resumption: the fixture, behind a WebSocket, cannot close a client's
// stream at the hub (pkg/hub's TestHTTP_resumesADroppedStream resumes one
// instead).
//
// # Files
//
//	doc.go     this overview
//	server.go  NewServer: the fixture's tools, resources and prompts
//	input.go   the 2026-07-28 scenarios' tools: stateless ones, and input
//	           requests whose state travels sealed in requestState
//	tasks.go   the tasks extension's tools
//	http.go    Handler: the fixture over Streamable HTTP, refusing hosts
//	           and origins that are not loopback
//	stdio.go   ServeStdio: the fixture as a child of hub connect
package conformance
