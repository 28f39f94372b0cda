package conformance_test

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// TestConformance2026ThroughHub runs the suite through a hub with the
// fixture dialed out as a server of protocol version 2026-07-28 only (it
// answers initialize with -32601, so the hub must fall back to
// server/discover and call it with per-request _meta): the 2026-07-28
// scenarios against the hub's /servers/conformance/mcp, and 0.1.16's, which
// the hub must translate for a server of the other era (its input requests
// become requests to the suite's session, and so on).
func TestConformance2026ThroughHub(t *testing.T) {
	node, legacyCLI := suite(t, legacySuite)
	_, modernCLI := suite(t, modernSuite)
	modernOnly := &mcp.ServerOptions{ProtocolVersions: []string{mcp.ModernVersion}}
	t.Run(mcp.ModernVersion, func(t *testing.T) {
		url, stop := throughHub(t, mcp.ResponseAuto, modernOnly)
		defer stop()
		runSuite(t, node, modernCLI, modernSuite, url)
	})
	t.Run(mcp.LatestVersion, func(t *testing.T) {
		url, stop := throughHub(t, mcp.ResponseAuto, modernOnly)
		defer stop()
		runSuite(t, node, legacyCLI, legacySuite, url)
	})
}
