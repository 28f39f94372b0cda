package mcp

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMethods_theHelpersAnswerWhatTheTableSays ties the Go helpers to the
// method table: a Server answers every session-era method a client sends,
// and a Client every request a server sends, and neither answers a method
// the table does not know.
func TestMethods_theHelpersAnswerWhatTheTableSays(t *testing.T) {
	t.Parallel()
	for _, m := range Methods() {
		if m.Eras&SessionEra == 0 {
			continue
		}
		if m.Direction&ClientToServer != 0 && m.Name != NotificationProgress {
			assert.Contains(t, serverMethods, m.Name, "the Server answers %s", m.Name)
		}
		if m.Direction&ServerToClient != 0 && !m.Notification {
			assert.Contains(t, clientMethods, m.Name, "the Client answers %s", m.Name)
		}
	}
	for name := range serverMethods {
		_, ok := LookupMethod(name)
		assert.True(t, ok, "the Server answers %s, which the table does not know", name)
	}
	for name := range clientMethods {
		_, ok := LookupMethod(name)
		assert.True(t, ok, "the Client answers %s, which the table does not know", name)
	}
}
