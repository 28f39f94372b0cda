package gosdk_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/hub"
)

// The official Go SDK's client, unchanged, on a virtual server of the
// catalog (an alias, a fixed argument) and on one in search mode, in both
// revisions.
func TestGoSDK_virtualServer(t *testing.T) { bothEras(t, testGoSDK_virtualServer) }

func testGoSDK_virtualServer(t *testing.T, version string) {
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
virtualServers:
  - name: support
    title: Support desk
    tools:
      - {server: one, tool: add, as: plus, fixed: {b: 2}}
  - name: finder
    discovery: search
    tools: [{server: one}]
`), 0o644))
	srv := startHubConfig(t, hub.Config{CatalogFile: file}, nil)
	dialOut(t, newFixture().Server, srv, "one")
	ctx := testCtx(t)

	cs := connectVersion(t, srv.URL+"/servers/support/mcp", srv.Client(), version, nil)
	negotiated(t, cs, version)
	assert.Equal(t, "support", cs.InitializeResult().ServerInfo.Name)
	var tools []*sdk.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err)
		tools = append(tools, tool)
	}
	require.Len(t, tools, 1)
	assert.Equal(t, "plus", tools[0].Name)
	schema, _ := json.Marshal(tools[0].InputSchema)
	assert.NotContains(t, string(schema), `"b"`, "the fixed argument is out of the schema")
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "plus", Arguments: map[string]int{"a": 40}})
	require.NoError(t, err)
	assert.Equal(t, "42", res.Content[0].(*sdk.TextContent).Text)

	fs := connectVersion(t, srv.URL+"/servers/finder/mcp", srv.Client(), version, nil)
	var names []string
	for tool, err := range fs.Tools(ctx, nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
	}
	assert.Equal(t, []string{"search_tools", "call_tool"}, names)
	res, err = fs.CallTool(ctx, &sdk.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "adds", "limit": 2}})
	require.NoError(t, err)
	raw, _ := json.Marshal(res.StructuredContent)
	var found struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(raw, &found))
	require.NotEmpty(t, found.Tools)
	assert.Equal(t, "add", found.Tools[0].Name)
	res, err = fs.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "add", "arguments": map[string]int{"a": 1, "b": 2}}})
	require.NoError(t, err)
	assert.Equal(t, "3", res.Content[0].(*sdk.TextContent).Text)
	res, err = fs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: map[string]int{"a": 2, "b": 2}})
	require.NoError(t, err)
	assert.Equal(t, "4", res.Content[0].(*sdk.TextContent).Text)
}
