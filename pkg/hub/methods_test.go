package hub

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// TestMethods_theHubAnswersWhatTheTableSays ties the hub's method tables to
// pkg/mcp's: toward clients it answers every session-era method a client
// sends, toward servers it handles every method a server sends, and nothing
// the table does not know; a notification the table says the hub never
// passes on has no handler (a server's is counted as unrouted).
func TestMethods_theHubAnswersWhatTheTableSays(t *testing.T) {
	t.Parallel()
	for _, m := range mcp.Methods() {
		if m.Relay == mcp.RelayNotRouted {
			assert.NotContains(t, replicaMethods, m.Name, "replicas never pass on %s", m.Name)
			continue
		}
		if m.Eras&mcp.SessionEra == 0 {
			continue
		}
		if m.Direction&mcp.ClientToServer != 0 && m.Name != mcp.NotificationProgress {
			assert.Contains(t, sessionMethods, m.Name, "sessions answer %s", m.Name)
		}
		if m.Direction&mcp.ServerToClient != 0 {
			assert.Contains(t, replicaMethods, m.Name, "replicas handle %s", m.Name)
		}
	}
	for name := range sessionMethods {
		_, ok := mcp.LookupMethod(name)
		assert.True(t, ok, "sessions answer %s, which the table does not know", name)
	}
	for name := range replicaMethods {
		_, ok := mcp.LookupMethod(name)
		assert.True(t, ok, "replicas handle %s, which the table does not know", name)
	}
}
