package catalog_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
)

// demoLists are the lists of a server like the hub's demo.
func demoLists() *catalog.Lists {
	return &catalog.Lists{
		Tools: raws(
			`{"name":"echo","description":"Echoes.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"icons":[{"src":"e.png"}]}`,
			`{"name":"add","description":"Adds.","inputSchema":{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}}`,
			`{"name":"slow","description":"Sleeps.","inputSchema":{"type":"object","properties":{"steps":{"type":"integer"},"label":{"type":"string"}},"required":["steps","label"]},"annotations":{"readOnlyHint":false,"title":"Slow"}}`,
			`{"name":"delete_all","inputSchema":{"type":"object"}}`,
		),
		Prompts: raws(`{"name":"greet","arguments":[{"name":"who"}]}`, `{"name":"summarize"}`),
		Resources: raws(`{"uri":"demo://readme","name":"readme"}`, `{"uri":"demo://notes/1","name":"note"}`,
			`{"uri":"file:///etc/hosts","name":"hosts"}`),
		Templates: raws(`{"uriTemplate":"demo://items/{id}","name":"item"}`, `{"uriTemplate":"file:///{+path}","name":"file"}`),
	}
}

func raws(items ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	return out
}

func build(t *testing.T, doc string, members map[string]*catalog.Lists) *catalog.View {
	t.Helper()
	c, err := catalog.Parse([]byte(doc))
	require.NoError(t, err)
	require.NotEmpty(t, c.VirtualServers)
	return catalog.Build(c.VirtualServers[0], members)
}

func names(items []*catalog.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Name)
	}
	return out
}

func TestBuild_support(t *testing.T) {
	t.Parallel()
	v := build(t, supportYAML, map[string]*catalog.Lists{"demo": demoLists()})
	assert.Empty(t, v.Warnings)
	// echo is named one by one (as say), which takes it out of the globs.
	assert.Equal(t, []string{"add", "say", "wait"}, names(v.Tools), "sorted by effective name")
	assert.Equal(t, []string{"greet", "summarize"}, names(v.Prompts))
	assert.Equal(t, []string{"demo://notes/1", "demo://readme"}, names(v.Resources))
	assert.Equal(t, []string{"demo://items/{id}"}, names(v.Templates))

	// A tool picked as it is passes through byte for byte.
	add, ok := v.Tool("add")
	require.True(t, ok)
	assert.Equal(t, demoLists().Tools[1], add.Raw)
	assert.Equal(t, "demo", add.Server)
	assert.Equal(t, "add", add.Orig)

	// An alias with a description and a fixed argument: renamed,
	// described, the argument gone from properties and required.
	wait, ok := v.Tool("wait")
	require.True(t, ok)
	assert.Equal(t, "slow", wait.Orig)
	assert.Equal(t, []string{"steps"}, wait.Fixed())
	assert.JSONEq(t, `{"name":"wait","description":"Waits.","inputSchema":{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]},
		"annotations":{"readOnlyHint":false,"title":"Slow"}}`, string(wait.Raw))

	// The alias of echo has its annotations merged in; members the catalog
	// does not know (icons) pass through.
	say, ok := v.Tool("say")
	require.True(t, ok)
	assert.Equal(t, "echo", say.Orig)
	assert.JSONEq(t, `{"name":"say","description":"Echoes.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},
		"icons":[{"src":"e.png"}],"annotations":{"readOnlyHint":true}}`, string(say.Raw))
	for _, own := range []string{"slow", "echo"} {
		_, ok = v.Tool(own)
		assert.False(t, ok, "the server's own name of an aliased tool is not callable")
	}
	_, ok = v.Tool("delete_all")
	assert.False(t, ok, "not picked")

	srv, ok := v.ServerOfURI("demo://readme")
	assert.True(t, ok)
	assert.Equal(t, "demo", srv)
	_, ok = v.ServerOfURI("demo://unlisted")
	assert.True(t, ok, "a URI under a picked prefix reaches its server")
	_, ok = v.ServerOfURI("file:///etc/hosts")
	assert.False(t, ok, "not picked")
}

// The view depends on what the servers offer, never on the order they
// listed it in.
func TestBuild_deterministic(t *testing.T) {
	t.Parallel()
	first := build(t, supportYAML, map[string]*catalog.Lists{"demo": demoLists()})
	for range 20 {
		l := demoLists()
		for _, s := range [][]json.RawMessage{l.Tools, l.Prompts, l.Resources, l.Templates} {
			rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		}
		v := build(t, supportYAML, map[string]*catalog.Lists{"demo": l})
		for i, pair := range [][2][]*catalog.Item{{first.Tools, v.Tools}, {first.Prompts, v.Prompts}, {first.Resources, v.Resources}, {first.Templates, v.Templates}} {
			require.Equal(t, len(pair[0]), len(pair[1]), "list %d", i)
			for j := range pair[0] {
				assert.Equal(t, pair[0][j].Name, pair[1][j].Name)
				assert.JSONEq(t, string(pair[0][j].Raw), string(pair[1][j].Raw))
			}
		}
	}
}

func TestBuild_globs(t *testing.T) {
	t.Parallel()
	doc := `virtualServers:
  - name: v
    tools:
      - {server: demo, exclude: ["delete_*"]}
      - {server: demo, tool: add, as: plus}
`
	v := build(t, doc, map[string]*catalog.Lists{"demo": demoLists()})
	assert.Empty(t, v.Warnings)
	// A tool named one by one leaves the globs of its server: add is
	// listed as plus only.
	assert.Equal(t, []string{"echo", "plus", "slow"}, names(v.Tools))
}

// A name two servers offer through globs: the first pick keeps it, and a
// warning says which was left out; an explicit pick beats any glob.
func TestBuild_clashes(t *testing.T) {
	t.Parallel()
	other := &catalog.Lists{Tools: raws(`{"name":"echo","description":"Other echo.","inputSchema":{"type":"object"}}`,
		`{"name":"ping","inputSchema":{"type":"object"}}`)}
	doc := `virtualServers:
  - name: v
    tools:
      - {server: demo, include: ["echo"]}
      - {server: other, include: ["*"]}
      - {server: other, tool: ping, as: add}
`
	members := map[string]*catalog.Lists{"demo": demoLists(), "other": other}
	v := build(t, doc, members)
	assert.Equal(t, []string{"add", "echo"}, names(v.Tools))
	add, _ := v.Tool("add")
	assert.Equal(t, "other", add.Server)
	echo, _ := v.Tool("echo")
	assert.Equal(t, "demo", echo.Server)
	require.Len(t, v.Warnings, 1)
	assert.Equal(t, `line 5: virtual server "v": tool "echo" of "other" is left out: the name is "demo"'s tool`, v.Warnings[0].String())
}

// What does not match yet is a warning, not an error: a member that is
// not connected, a glob that matches nothing, a tool the server lacks, a
// fixed argument the tool does not declare.
func TestBuild_warnings(t *testing.T) {
	t.Parallel()
	doc := `virtualServers:
  - name: v
    tools:
      - {server: gone, include: ["*"]}
      - {server: gone, tool: x}
      - {server: demo, include: ["nothing*"]}
      - {server: demo, tool: missing}
      - {server: demo, tool: add, fixed: {c: 1}}
    resources:
      - {server: demo, uriPrefix: "none://"}
`
	v := build(t, doc, map[string]*catalog.Lists{"demo": demoLists()})
	var got []string
	for _, w := range v.Warnings {
		got = append(got, w.String())
	}
	assert.ElementsMatch(t, []string{
		`line 4: virtual server "v": server "gone" is not connected`,
		`line 6: virtual server "v": no tool of "demo" matches include [nothing*]`,
		`line 7: virtual server "v": server "demo" has no tool "missing"`,
		`line 8: virtual server "v": tool "add" of "demo": the fixed argument "c" is not among its parameters`,
		`line 10: virtual server "v": no resource or template of "demo" matches`,
	}, got)
	assert.Equal(t, []string{"add"}, names(v.Tools))
}

func TestBuild_resources(t *testing.T) {
	t.Parallel()
	other := &catalog.Lists{
		Resources: raws(`{"uri":"demo://readme","name":"squatter"}`, `{"uri":"other://a","name":"a"}`),
		Templates: raws(`{"uriTemplate":"other://logs/{day}","name":"logs"}`, `{"uriTemplate":"other://x/{id}","name":"x"}`),
	}
	doc := `virtualServers:
  - name: v
    resources:
      - {server: demo, uriTemplate: "demo://{+rest}"}
      - {server: other}
      - {server: demo, uriTemplate: "demo://items/{id}"}
`
	v := build(t, doc, map[string]*catalog.Lists{"demo": demoLists(), "other": other})
	assert.Equal(t, []string{"demo://notes/1", "demo://readme", "other://a"}, names(v.Resources))
	assert.Equal(t, []string{"demo://items/{id}", "other://logs/{day}", "other://x/{id}"}, names(v.Templates))
	readme, _ := v.ServerOfURI("demo://readme")
	assert.Equal(t, "demo", readme, "the first pick keeps a URI two servers offer")
	require.Len(t, v.Warnings, 1)
	assert.Contains(t, v.Warnings[0].Message, `resource "demo://readme" of "other" is left out: "demo" offers it`)
	for uri, want := range map[string]string{
		"demo://anything/at/all": "demo",  // the first pick's template
		"other://logs/monday":    "other", // a template of a pick of all
		"other://unlisted":       "",      // a pick of all claims no unlisted URI
		"elsewhere://x":          "",
	} {
		got, ok := v.ServerOfURI(uri)
		assert.Equal(t, want != "", ok, uri)
		assert.Equal(t, want, got, uri)
	}
}

func TestBuild_searchMetaNames(t *testing.T) {
	t.Parallel()
	l := &catalog.Lists{Tools: raws(`{"name":"search_tools","inputSchema":{"type":"object"}}`)}
	v := build(t, "virtualServers:\n  - name: v\n    discovery: search\n    tools: [{server: s}]\n", map[string]*catalog.Lists{"s": l})
	assert.Equal(t, []string{"search_tools"}, names(v.Tools))
	require.Len(t, v.Warnings, 1)
	assert.Contains(t, v.Warnings[0].Message, "called through call_tool only")
}

func fixedTool(t *testing.T) *catalog.Item {
	t.Helper()
	doc := "virtualServers:\n  - name: v\n    tools: [{server: demo, tool: slow, fixed: {steps: 2, mode: \"fast\"}}]\n"
	v := build(t, doc, map[string]*catalog.Lists{"demo": demoLists()})
	it, ok := v.Tool("slow")
	require.True(t, ok)
	require.Equal(t, []string{"mode", "steps"}, it.Fixed())
	return it
}

func TestItem_arguments(t *testing.T) {
	t.Parallel()
	it := fixedTool(t)
	for _, tc := range []struct{ in, want string }{
		{``, `{"steps":2,"mode":"fast"}`},
		{`null`, `{"steps":2,"mode":"fast"}`},
		{`{}`, `{"steps":2,"mode":"fast"}`},
		{` { } `, `{"steps":2,"mode":"fast"}`},
		{`{"label":"x"}`, `{"label":"x","steps":2,"mode":"fast"}`},
		{"{\"label\":\"x\" \n}", `{"label":"x","steps":2,"mode":"fast"}`},
		{`{"nested":{"steps":9}}`, `{"nested":{"steps":9},"steps":2,"mode":"fast"}`},
	} {
		out, err := it.Arguments(json.RawMessage(tc.in))
		require.NoError(t, err, "%q", tc.in)
		assert.JSONEq(t, tc.want, string(out), "%q", tc.in)
		assert.True(t, json.Valid(out), "%q -> %s", tc.in, out)
	}
	for _, in := range []string{`{"steps":3}`, `{"label":"x","mode":"slow"}`, `{"st\u0065ps":3}`} {
		_, err := it.Arguments(json.RawMessage(in))
		assert.ErrorIs(t, err, catalog.ErrFixedArgument, in)
	}
	_, err := it.Arguments(json.RawMessage(`{"steps":3}`))
	assert.Equal(t, `the argument is fixed by the virtual server: "steps"`, err.Error())
	for _, in := range []string{`[]`, `"x"`, `3`, `{"a":1`} {
		_, err := it.Arguments(json.RawMessage(in))
		assert.ErrorIs(t, err, catalog.ErrArgumentsNotObject, in)
	}
}

// Without fixed arguments the client's pass through as they are: the same
// bytes, not a copy.
func TestItem_argumentsPassThrough(t *testing.T) {
	t.Parallel()
	v := build(t, supportYAML, map[string]*catalog.Lists{"demo": demoLists()})
	add, _ := v.Tool("add")
	in := json.RawMessage(`{"a":1,"b":2}`)
	out, err := add.Arguments(in)
	require.NoError(t, err)
	assert.Same(t, &in[0], &out[0])
	_, err = add.Arguments(json.RawMessage(`[1]`))
	assert.True(t, errors.Is(err, catalog.ErrArgumentsNotObject))
}

func BenchmarkItem_arguments(b *testing.B) {
	it := fixedTool(&testing.T{})
	args := json.RawMessage(`{"label":"` + strings.Repeat("x", 64<<10) + `","other":[1,2,3]}`)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := it.Arguments(args); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBuild_notConnected(t *testing.T) {
	t.Parallel()
	v := build(t, supportYAML, nil)
	assert.Empty(t, v.Tools)
	require.Len(t, v.Warnings, 1, "one warning per server, not per pick")
	assert.True(t, slices.ContainsFunc(v.Warnings, func(p catalog.Problem) bool { return strings.Contains(p.Message, `"demo" is not connected`) }))
}

// FuzzArguments: whatever a client sends, the server gets valid JSON
// holding the fixed arguments with their values, or the client gets an
// error; a fixed argument the client sent is never passed on.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `{"label":"x"}`, `{"steps":1}`, `[1]`, `{"a":{"steps":1}}`, ` {"a" : 1 } `, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	doc := "virtualServers:\n  - name: v\n    tools: [{server: demo, tool: slow, fixed: {steps: 2, mode: \"fast\"}}]\n"
	c, err := catalog.Parse([]byte(doc))
	require.NoError(f, err)
	it, ok := catalog.Build(c.VirtualServers[0], map[string]*catalog.Lists{"demo": demoLists()}).Tool("slow")
	require.True(f, ok)
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) && len(strings.TrimSpace(string(in))) > 0 {
			return // the hub's decoder lets only valid JSON through
		}
		out, err := it.Arguments(in)
		var client map[string]json.RawMessage
		isObject := json.Unmarshal(in, &client) == nil && client != nil
		if err != nil {
			_, sentSteps := client["steps"]
			_, sentMode := client["mode"]
			require.True(t, !isObject && strings.TrimSpace(string(in)) != "null" || sentSteps || sentMode, "%q: %v", in, err)
			return
		}
		var got map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(out, &got), "%q -> %q", in, out)
		assert.Equal(t, "2", string(got["steps"]))
		assert.Equal(t, `"fast"`, string(got["mode"]))
		for k := range client {
			assert.Contains(t, got, k)
		}
	})
}

func TestView_summary(t *testing.T) {
	t.Parallel()
	v := build(t, supportYAML, map[string]*catalog.Lists{"demo": demoLists()})
	raw, err := json.Marshal(v.Summary())
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"support","title":"Support desk","discovery":"list","members":["demo"],
		"tools":[{"name":"add","server":"demo"},{"name":"say","server":"demo","orig":"echo"},
			{"name":"wait","server":"demo","orig":"slow","fixed":["steps"]}],
		"prompts":[{"name":"greet","server":"demo"},{"name":"summarize","server":"demo"}],
		"resources":[{"name":"demo://notes/1","server":"demo"},{"name":"demo://readme","server":"demo"}],
		"resourceTemplates":[{"name":"demo://items/{id}","server":"demo"}]}`, string(raw))
}
