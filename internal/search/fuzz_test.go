package search_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/search"
)

// FuzzIndex: whatever a server lists (names, descriptions, input schemas
// are the server's to choose) and whatever a client asks, indexing and
// searching never panic, and a search returns only tools indexed, each
// once, best first, and only those the filter allows.
func FuzzIndex(f *testing.F) {
	f.Add("get_issue", "Get an issue of a GitHub repository", `{"type":"object","properties":{"owner":{"description":"who"}}}`, "find the issue")
	f.Add("HTTPServer", "", `{"properties":{"a":{"properties":{"b":{"items":{"properties":{"c":{}}}}}}}}`, "http server")
	f.Add("x", "ünïcode — wörds", `[1,2]`, "wörds")
	f.Add("", "", ``, "")
	f.Fuzz(func(t *testing.T, name, description, schema, query string) {
		x := search.New()
		tools := []search.Tool{
			{Name: "s__" + name, Server: "s", Description: description, InputSchema: json.RawMessage(schema)},
			{Name: "s__other", Server: "s", Title: name, Description: query},
			{Name: "t__" + name, Server: "t", Description: description + " " + query},
		}
		x.SetServer("s", tools[:2])
		x.SetServer("t", tools[2:])
		indexed := map[string]bool{}
		for _, tl := range tools {
			indexed[tl.Name] = true
		}
		rs := x.Search(query, 10, search.Filter{Tool: func(tl *search.Tool) bool { return tl.Server == "s" }})
		seen := map[*search.Tool]bool{}
		for i, r := range rs {
			require.True(t, indexed[r.Tool.Name], "%q", r.Tool.Name)
			require.Equal(t, "s", r.Tool.Server)
			require.False(t, seen[r.Tool], "%q twice", r.Tool.Name)
			seen[r.Tool] = true
			require.Greater(t, r.Score, 0.0)
			if i > 0 {
				require.GreaterOrEqual(t, rs[i-1].Score, r.Score)
			}
		}
		x.RemoveServer("s")
		for _, r := range x.Search(query, 10, search.Filter{}) {
			require.Equal(t, "t", r.Tool.Server)
		}
	})
}
