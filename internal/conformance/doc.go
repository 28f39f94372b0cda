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
// The command in ./fixture runs it on a port, or dials it out to a hub
// (Server.Dial; --modern for a server of 2026-07-28 only) so that the suite
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
// TestConformance runs the suite against the fixture served directly and
// through a hub, each in both response modes (JSON where it suffices, SSE
// always: hub.Config.HTTPResponses): 0.1.16's every server scenario (--suite
// all, 32) both ways, and, served directly, 0.2.0-alpha.12's scenarios
// required by 2026-07-28 (--requirements 2026-07-28, 37; the suite also
// runs 13 it does not score, which the test reports and does not judge). It
// fails on any failed or warned check of a required scenario. Through the
// hub, server-sse-polling checks the hub's priming event and retry field
// but cannot check resumption: the fixture, behind a WebSocket, cannot
// close a client's stream at the hub (pkg/hub's
// TestHTTP_resumesADroppedStream resumes one instead). It needs the suites
// and the Node 22 they run on, which scripts/deps.sh installs (npm ci in
// e2e/conformance). TestConformance2026ThroughHub runs both through a hub
// with the fixture speaking 2026-07-28 only: the hub discovers it, passes
// its input requests to the 2026-07-28 suite and answers them itself for
// 0.1.16's session.
package conformance
