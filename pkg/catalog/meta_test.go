package catalog_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

func TestMetaTools(t *testing.T) {
	t.Parallel()
	tools := catalog.MetaTools()
	require.Len(t, tools, 2)
	assert.Equal(t, catalog.SearchToolsName, tools[0].Name)
	assert.Equal(t, catalog.CallToolName, tools[1].Name)
	for _, tool := range tools {
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tool.InputSchema, &schema), tool.Name)
		assert.Equal(t, "object", schema["type"])
		assert.True(t, catalog.ValidItemName(tool.Name))
	}
	tools[0].Name = "changed"
	assert.Equal(t, catalog.SearchToolsName, catalog.MetaTools()[0].Name, "each call gives new values")
}

func TestParseSearchArgs(t *testing.T) {
	t.Parallel()
	a, err := catalog.ParseSearchArgs(json.RawMessage(`{"query":"open an issue"}`))
	require.NoError(t, err)
	assert.Equal(t, catalog.SearchArgs{Query: "open an issue", Limit: catalog.DefaultSearchLimit}, a)
	a, err = catalog.ParseSearchArgs(json.RawMessage(`{"query":"x","limit":3}`))
	require.NoError(t, err)
	assert.Equal(t, 3, a.Limit)
	for _, bad := range []string{``, `null`, `{}`, `{"query":""}`, `{"query":1}`, `{"query":"x","limit":51}`,
		`{"query":"x","limit":-1}`, `{"query":"x","limit":1.5}`, `[]`} {
		_, err := catalog.ParseSearchArgs(json.RawMessage(bad))
		assert.Error(t, err, bad)
	}
}

func TestParseCallArgs(t *testing.T) {
	t.Parallel()
	name, args, err := catalog.ParseCallArgs(json.RawMessage(`{"name":"github__create_issue","arguments":{"title":"x"}}`))
	require.NoError(t, err)
	assert.Equal(t, "github__create_issue", name)
	assert.Equal(t, `{"title":"x"}`, string(args))
	name, args, err = catalog.ParseCallArgs(json.RawMessage(`{"name":"ping","arguments":null,"extra":1}`))
	require.NoError(t, err)
	assert.Equal(t, "ping", name)
	assert.Nil(t, args)
	for _, bad := range []string{``, `[]`, `{}`, `{"name":""}`, `{"name":3}`, `{"name":"x","arguments":[1]}`, `{"name":"x","arguments":"a"}`} {
		_, _, err := catalog.ParseCallArgs(json.RawMessage(bad))
		assert.Error(t, err, bad)
	}
}

func TestSearchResult(t *testing.T) {
	t.Parallel()
	found := []catalog.Found{{Name: "a", Description: "A.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}, {Name: "b"}}
	res := catalog.SearchResult(found)
	assert.Nil(t, found[1].InputSchema, "the caller's slice is left alone")
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	var got struct {
		Content           []mcp.Content `json:"content"`
		StructuredContent struct {
			Tools []catalog.Found `json:"tools"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Len(t, got.StructuredContent.Tools, 2)
	assert.Equal(t, "a", got.StructuredContent.Tools[0].Name)
	assert.JSONEq(t, `{"type":"object"}`, string(got.StructuredContent.Tools[1].InputSchema), "a schema is always there")
	require.Len(t, got.Content, 1)
	assert.JSONEq(t, string(mustJSON(t, got.StructuredContent)), got.Content[0].Text, "the text is the same JSON")

	raw, _ = json.Marshal(catalog.SearchResult(nil))
	assert.Contains(t, string(raw), `"structuredContent":{"tools":[]}`)
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
