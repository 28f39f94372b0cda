package catalog_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
)

const supportYAML = `virtualServers:
  - name: support
    title: Support desk
    instructions: Answer customers.
    tools:
      - {server: demo, include: ["add", "echo"], exclude: []}
      - {server: demo, tool: slow, as: wait, description: "Waits.", fixed: {steps: 2}}
      - server: demo
        tool: echo
        as: say
        annotations: {readOnlyHint: true}
    prompts:   [{server: demo, include: ["*"]}]
    resources: [{server: demo, uriPrefix: "demo://"}]
  - name: finder
    discovery: search
    tools: [{server: github}]
`

func TestParse_file(t *testing.T) {
	t.Parallel()
	c, err := catalog.Parse([]byte(supportYAML))
	require.NoError(t, err)
	require.Len(t, c.VirtualServers, 2)
	s := c.Server("support")
	require.NotNil(t, s)
	assert.Equal(t, 2, s.Line)
	assert.Equal(t, "Support desk", s.Title)
	assert.Equal(t, "Answer customers.", s.Instructions)
	assert.Equal(t, catalog.DiscoveryList, s.Discovery, "list is the default")
	require.Len(t, s.Tools, 3)
	assert.Equal(t, 7, s.Tools[1].Line)
	assert.Equal(t, "wait", s.Tools[1].As)
	assert.JSONEq(t, `{"steps":2}`, string(s.Tools[1].Fixed))
	assert.JSONEq(t, `{"readOnlyHint":true}`, string(s.Tools[2].Annotations))
	assert.Equal(t, "demo://", s.Resources[0].URIPrefix)
	assert.Equal(t, []string{"demo"}, s.Members())
	assert.Equal(t, catalog.DiscoverySearch, c.Server("finder").Discovery)
	assert.Nil(t, c.Server("nobody"))
	assert.Nil(t, c.Aggregate)
}

// The same catalog written as JSON reads the same.
func TestParse_json(t *testing.T) {
	t.Parallel()
	y, err := catalog.Parse([]byte(supportYAML))
	require.NoError(t, err)
	doc, err := json.Marshal(y)
	require.NoError(t, err)
	// Lines are where things are in a file: not a field to write.
	var generic map[string]any
	require.NoError(t, json.Unmarshal(doc, &generic))
	stripLines(generic)
	doc, _ = json.Marshal(generic)
	j, err := catalog.Parse(doc)
	require.NoError(t, err, "%s", doc)
	for i := range y.VirtualServers {
		assert.Equal(t, y.VirtualServers[i].Name, j.VirtualServers[i].Name)
		assert.Equal(t, len(y.VirtualServers[i].Tools), len(j.VirtualServers[i].Tools))
	}
	assert.JSONEq(t, `{"steps":2}`, string(j.Server("support").Tools[1].Fixed))
}

func stripLines(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "line")
		for _, e := range x {
			stripLines(e)
		}
	case []any:
		for _, e := range x {
			stripLines(e)
		}
	}
}

func TestParse_empty(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"", "# nothing yet\n", "virtualServers: []\n", "{}"} {
		c, err := catalog.Parse([]byte(doc))
		require.NoError(t, err, "%q", doc)
		assert.Empty(t, c.VirtualServers)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "catalog.yaml")
	require.NoError(t, os.WriteFile(p, []byte(supportYAML), 0o600))
	c, err := catalog.Load(p)
	require.NoError(t, err)
	assert.Len(t, c.VirtualServers, 2)
	_, err = catalog.Load(filepath.Join(dir, "missing.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// Every mistake the file alone shows is an error with its line, all of
// them at once.
func TestParse_errors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc string
		want      []string // "line: text" each problem must contain
	}{
		{"unknown field", "virtualServers:\n  - name: a\n    tols: []\n", []string{`3: unknown field "tols"`}},
		{"unknown pick field", "virtualServers:\n  - name: a\n    tools:\n      - {server: s, tol: x}\n", []string{`4: unknown field "tol"`}},
		{"unknown top field", "virtualserver: []\n", []string{`1: unknown field "virtualserver"`}},
		{"not a list", "virtualServers: {name: a}\n", []string{`1: cannot unmarshal !!map into a list`}},
		{"syntax", "virtualServers: [\n", []string{"1: did not find expected"}},
		{"duplicate key", "virtualServers: []\nvirtualServers: []\n", []string{`already defined`}},
		{"two documents", "virtualServers: []\n---\nvirtualServers: []\n", []string{`more than one document`}},
		{"bad name", "virtualServers:\n  - name: Support Desk\n", []string{`2: virtual server "Support Desk": a name is`}},
		{"no name", "virtualServers:\n  - title: x\n", []string{`2: virtual server "": a name is`}},
		{"reserved", "virtualServers:\n  - name: switchboard\n", []string{`the hub's own`}},
		{"same name twice", "virtualServers:\n  - name: a\n  - name: b\n  - name: a\n", []string{`4: virtual server "a": the name is taken by the virtual server at line 2`}},
		{"discovery", "virtualServers:\n  - name: a\n    discovery: find\n", []string{`2: virtual server "a": discovery is "list" or "search", not "find"`}},
		{"no server", "virtualServers:\n  - name: a\n    tools: [{include: ['*']}]\n", []string{`3: virtual server "a": tool: no server`}},
		{"nested", "virtualServers:\n  - name: a\n  - name: b\n    tools: [{server: a}]\n", []string{`4: virtual server "b": tool: "a" is a virtual server`}},
		{"bad glob", "virtualServers:\n  - name: a\n    tools: [{server: s, include: ['[x']}]\n", []string{`3: virtual server "a": tool: "[x" is not a glob`}},
		{"bad exclude glob", "virtualServers:\n  - name: a\n    prompts: [{server: s, exclude: ['\\']}]\n", []string{`is not a glob`}},
		{"tool and include", "virtualServers:\n  - name: a\n    tools: [{server: s, tool: t, include: ['*']}]\n", []string{`tool or include/exclude, not both`}},
		{"as without tool", "virtualServers:\n  - name: a\n    tools: [{server: s, as: x}]\n", []string{`as needs tool`}},
		{"description without prompt", "virtualServers:\n  - name: a\n    prompts: [{server: s, description: x}]\n", []string{`description needs prompt`}},
		{"bad alias", "virtualServers:\n  - name: a\n    tools: [{server: s, tool: t, as: 'two words'}]\n", []string{`as "two words": a name is`}},
		{"explicit clash", "virtualServers:\n  - name: a\n    tools:\n      - {server: s, tool: t}\n      - {server: r, tool: u, as: t}\n",
			[]string{`5: virtual server "a": tool: the name "t" is taken by the tool at line 4`}},
		{"prompt clash", "virtualServers:\n  - name: a\n    prompts:\n      - {server: s, prompt: p, as: q}\n      - {server: s, prompt: q}\n",
			[]string{`5: virtual server "a": prompt: the name "q" is taken by the prompt at line 4`}},
		{"meta-tool name", "virtualServers:\n  - name: a\n    discovery: search\n    tools: [{server: s, tool: find, as: search_tools}]\n", []string{`is a meta-tool's in search mode`}},
		{"fixed not an object", "virtualServers:\n  - name: a\n    tools:\n      - server: s\n        tool: t\n        fixed: [1, 2]\n", []string{`6: fixed: must be an object`}},
		{"fixed scalar", "virtualServers:\n  - name: a\n    tools: [{server: s, tool: t, fixed: 3}]\n", []string{`3: fixed: must be an object`}},
		{"annotations not an object", "virtualServers:\n  - name: a\n    tools: [{server: s, tool: t, annotations: yes}]\n", []string{`annotations: must be an object`}},
		{"fixed alias", "virtualServers:\n  - name: a\n    tools: [{server: s, tool: t, fixed: {a: &x 1, b: *x}}]\n", []string{`anchors and aliases`}},
		{"fixed inf", "virtualServers:\n  - name: a\n    tools: [{server: s, tool: t, fixed: {a: .inf}}]\n", []string{`is not a JSON number`}},
		{"prefix and template", "virtualServers:\n  - name: a\n    resources: [{server: s, uriPrefix: 'x://', uriTemplate: 'x://{id}'}]\n", []string{`uriPrefix or uriTemplate, not both`}},
		{"bad template", "virtualServers:\n  - name: a\n    resources: [{server: s, uriTemplate: 'x://{id'}]\n", []string{`"x://{id" is not a URI template`}},
		{"aggregate mode", "aggregate: {names: bare}\n", []string{`1: aggregate: names is "prefix" or "priority", not "bare"`}},
		{"aggregate alias", "aggregate:\n  aliases:\n    - {server: s, tool: t, prompt: p, as: x}\n    - {server: s, as: y}\n",
			[]string{`3: aggregate: an alias names a tool or a prompt`, `4: aggregate: an alias names`}},
		{"aggregate alias twice", "aggregate:\n  aliases:\n    - {server: s, tool: t, as: x}\n    - {server: r, tool: t, as: x}\n", []string{`4: aggregate: alias "x": taken by the alias at line 3`}},
		{"aggregate glob", "aggregate: {priority: ['[']}\n", []string{`priority: "[" is not a glob`}},
		{"several at once", "virtualServers:\n  - name: A\n  - name: b\n    discovery: x\n", []string{`2: virtual server "A"`, `3: virtual server "b": discovery`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := catalog.Parse([]byte(tc.doc))
			require.Error(t, err)
			assert.Nil(t, c)
			var ce *catalog.Error
			require.True(t, errors.As(err, &ce), "%T", err)
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					if strings.Contains(strings.TrimPrefix(g, "line "), w) {
						found = true
					}
				}
				assert.True(t, found, "want %q in %q", w, got)
			}
			assert.NotContains(t, err.Error(), "catalog.file", "Go's type names stay out of the message")
		})
	}
}

// Fixed arguments keep their JSON form: numbers as written, even those
// float64 cannot hold, and strings that YAML would read as something else
// when they are quoted.
func TestParse_fixedValues(t *testing.T) {
	t.Parallel()
	doc := `virtualServers:
  - name: a
    tools:
      - server: s
        tool: t
        fixed:
          big: 123456789012345678901234567890
          hex: 0x1F
          float: 1.5e3
          yes: "yes"
          date: 2026-07-28
          "null": null
          t: true
          list: [1, "two", {three: 3}]
          nested: {a: {b: [ ]}}
`
	c, err := catalog.Parse([]byte(doc))
	require.NoError(t, err)
	assert.JSONEq(t, `{"big":123456789012345678901234567890,"hex":31,"float":1.5e3,"yes":"yes","date":"2026-07-28",
		"null":null,"t":true,"list":[1,"two",{"three":3}],"nested":{"a":{"b":[]}}}`, string(c.Server("a").Tools[0].Fixed))
}

func TestCheckNames(t *testing.T) {
	t.Parallel()
	c, err := catalog.Parse([]byte(supportYAML))
	require.NoError(t, err)
	require.NoError(t, c.CheckNames([]string{"demo", "github"}))
	err = c.CheckNames([]string{"demo", "finder"})
	var ce *catalog.Error
	require.True(t, errors.As(err, &ce))
	require.Len(t, ce.Problems, 1)
	assert.Equal(t, `line 14: virtual server "finder": a real server has the name`, ce.Problems[0].String())
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"a": true, "a-b": true, "a1": true, "": false, "-a": false, "a-": false,
		"a--b": false, "A": false, "a_b": false, "a.b": false} {
		assert.Equal(t, want, catalog.ValidName(s), "%q", s)
	}
	for s, want := range map[string]bool{"get_issue": true, "a.b-C": true, "": false, "a b": false,
		strings.Repeat("x", 128): true, strings.Repeat("x", 129): false, "é": false} {
		assert.Equal(t, want, catalog.ValidItemName(s), "%q", s)
	}
}

// FuzzParse: any bytes give a catalog or an *Error, never a panic, and a
// catalog that parses is consistent: valid names, fixed arguments that are
// JSON objects, and its JSON form parses again to the same servers.
func FuzzParse(f *testing.F) {
	f.Add([]byte(supportYAML))
	f.Add([]byte(`{"virtualServers":[{"name":"a","tools":[{"server":"s","tool":"t","fixed":{"k":[1,{"x":null}]}}]}]}`))
	f.Add([]byte("aggregate: {names: priority, priority: [gh*], aliases: [{server: s, tool: t, as: x}]}\n"))
	f.Add([]byte("virtualServers:\n  - name: a\n    tools: [{server: s, tool: t, fixed: {a: &x 1, b: *x}}]\n"))
	f.Add([]byte("virtualServers:\n  - name: a\n    resources: [{server: s, uriTemplate: 'x://{id}'}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := catalog.Parse(b)
		if err != nil {
			var ce *catalog.Error
			require.True(t, errors.As(err, &ce), "%T %v", err, err)
			require.NotEmpty(t, ce.Problems)
			return
		}
		names := map[string]bool{}
		for _, vs := range c.VirtualServers {
			require.True(t, catalog.ValidName(vs.Name), "%q", vs.Name)
			require.False(t, names[vs.Name])
			names[vs.Name] = true
			for _, p := range vs.Tools {
				for _, raw := range []json.RawMessage{p.Fixed, p.Annotations} {
					if raw != nil {
						var o map[string]any
						require.NoError(t, json.Unmarshal(raw, &o), "%s", raw)
					}
				}
			}
			// The effective view of a parsed catalog builds with no
			// member connected, and says so.
			v := catalog.Build(vs, nil)
			require.Empty(t, v.Tools)
		}
		doc, err := json.Marshal(c)
		require.NoError(t, err)
		var generic map[string]any
		require.NoError(t, json.Unmarshal(doc, &generic))
		stripLines(generic)
		doc, _ = json.Marshal(generic)
		again, err := catalog.Parse(doc)
		require.NoError(t, err, "%s", doc)
		require.Len(t, again.VirtualServers, len(c.VirtualServers))
	})
}
