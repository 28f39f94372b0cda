// Package conformance is the fixture behind the official MCP conformance
// suite (@modelcontextprotocol/conformance, pinned in e2e/conformance): a
// pkg/mcp Server with every tool, resource and prompt the suite's server
// scenarios call, under the names and with the behaviours they check.
//
// NewServer builds it; Handler serves it over pkg/mcp's Streamable HTTP
// handler behind a loopback Host/Origin check (the suite checks DNS
// rebinding protection). The command in ./fixture runs it on a port, or
// dials it out to a hub (Server.Dial) so that the suite can be pointed at
// the hub's /servers/<name>/mcp.
//
// TestConformance runs the whole suite (--suite all) against the fixture
// served directly and through a hub, each in both response modes (JSON
// where it suffices, SSE always: hub.Config.HTTPResponses), and fails on any
// failed or warned check. Through the hub, server-sse-polling checks the
// hub's priming event and retry field but cannot check resumption: the
// fixture, behind a WebSocket, cannot close a client's stream at the hub
// (pkg/hub's TestHTTP_resumesADroppedStream resumes one instead). It needs
// the suite and the Node 22 it runs on, which scripts/deps.sh installs (npm
// ci in e2e/conformance).
package conformance
