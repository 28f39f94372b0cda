package mcp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		if m.Relay == RelayNotRouted {
			continue // nothing produces it: neither helper declares tasks
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

// TestMethods_everyNotificationOfEveryRevision walks the notifications of
// both revisions' schemas (testdata/spec, copies of the published ones):
// the table knows each, sent the way the schema says, in that revision, and
// says what the hub does with it; and it knows no notification a revision
// it names does not define.
func TestMethods_everyNotificationOfEveryRevision(t *testing.T) {
	t.Parallel()
	revisions := []struct {
		file string
		era  Era
	}{
		{"mcp-2025-11-25.schema.json", SessionEra},
		{"mcp-2026-07-28.schema.json", StatelessEra},
	}
	for _, rev := range revisions {
		t.Run(strings.TrimSuffix(rev.file, ".schema.json"), func(t *testing.T) {
			sent := schemaNotifications(t, filepath.Join("testdata", "spec", rev.file))
			require.NotEmpty(t, sent)
			for name, dir := range sent {
				m, ok := LookupMethod(name)
				if !assert.True(t, ok, "the table knows %s", name) {
					continue
				}
				assert.True(t, m.Notification, "%s is a notification", name)
				assert.Equal(t, dir, m.Direction&dir, "%s goes the way the schema says", name)
				assert.NotZero(t, m.Eras&rev.era, "%s is of this revision", name)
				assert.NotEqual(t, RelayNone, m.Relay, "the table says what the hub does with %s", name)
			}
			for _, m := range Methods() {
				if m.Notification && m.Eras&rev.era != 0 && m.Extension == "" { // an extension's are in its own schema
					// (Its direction may be wider than this revision's: a
					// client sends progress in 2025-11-25 only.)
					assert.Contains(t, sent, m.Name, "the table puts %s in a revision that does not define it", m.Name)
				}
			}
		})
	}
}

// schemaNotifications reads the notifications a schema's ClientNotification
// and ServerNotification define (each a union of definitions, or one), and
// who sends each.
func schemaNotifications(t *testing.T, file string) map[string]Direction {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	type def struct {
		AnyOf []struct {
			Ref string `json:"$ref"`
		} `json:"anyOf"`
		Properties struct {
			Method struct {
				Const string `json:"const"`
			} `json:"method"`
		} `json:"properties"`
	}
	var doc struct {
		Defs map[string]def `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	out := map[string]Direction{}
	for union, dir := range map[string]Direction{"ClientNotification": ClientToServer, "ServerNotification": ServerToClient} {
		d, ok := doc.Defs[union]
		require.True(t, ok, "%s defines %s", file, union)
		members := []def{d}
		if len(d.AnyOf) > 0 {
			members = nil
			for _, r := range d.AnyOf {
				m, ok := doc.Defs[strings.TrimPrefix(r.Ref, "#/$defs/")]
				require.True(t, ok, "%s defines %s", file, r.Ref)
				members = append(members, m)
			}
		}
		for _, m := range members {
			name := m.Properties.Method.Const
			require.NotEmpty(t, name, "a notification of %s names its method", union)
			out[name] |= dir
		}
	}
	return out
}
