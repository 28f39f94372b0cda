package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/oauthtest"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/oauth"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// writeCatalog writes a catalog file in the test's directory.
func writeCatalog(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// waitCatalog waits until th serves the catalog text.
func (th *testHub) waitCatalog(text string) {
	th.t.Helper()
	sum := catalogSum([]byte(text))
	th.waitFor("the catalog in force", func(v *view) bool {
		return v.cat != nil && v.cat.source != nil && v.cat.source.sum == sum
	})
}

// clientAt connects an MCP client to one of the hub's endpoints, with a
// session unless opts name a version.
func (th *testHub) clientAt(path string, opts *mcp.ClientOptions) *mcp.Client {
	th.t.Helper()
	c, err := mcp.Connect(ctxFor(th.t), th.wsURL(path), sessionOpts(opts))
	require.NoError(th.t, err)
	th.t.Cleanup(func() { c.Close() })
	return c
}

func toolNames(t *testing.T, c *mcp.Client) []string {
	t.Helper()
	tools, err := c.AllTools(ctxFor(t))
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return names
}

// readJSON reads one of the hub's resources as JSON.
func readJSON(t *testing.T, c *mcp.Client, uri string, v any) {
	t.Helper()
	res, err := c.ReadResource(ctxFor(t), uri)
	require.NoError(t, err)
	require.NotEmpty(t, res.Contents)
	require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), v))
}

const supportCatalog = `
virtualServers:
  - name: support
    title: Support desk
    tools:
      - {server: demo, include: ["add", "echo"]}
      - {server: demo, tool: slow, as: wait, fixed: {steps: 1}}
    prompts: [{server: demo, include: ["*"]}]
    resources: [{server: demo, uriPrefix: "demo://"}]
  - name: finder
    discovery: search
    tools:
      - {server: demo}
      - {server: other}
`

// The modern revision on a virtual server: discover names the virtual
// server, calls by effective names, fixed arguments; and a client of
// another token restricted to the virtual server reaches it, and nothing
// beyond it.
func TestCatalog_virtualServerBothEras(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CatalogFile: writeCatalog(t, supportCatalog)})
	th.runServer(demo.New(nil).Server, "")
	for _, version := range []string{mcp.LatestVersion, mcp.ModernVersion} {
		t.Run(version, func(t *testing.T) {
			c := th.clientAt("/servers/support/mcp", &mcp.ClientOptions{ProtocolVersion: version})
			assert.Equal(t, "support", c.InitializeResult().ServerInfo.Name)
			assert.Equal(t, "Support desk", c.InitializeResult().ServerInfo.Title)
			assert.Equal(t, []string{"add", "echo", "wait"}, toolNames(t, c))
			res, err := c.CallTool(ctxFor(t), "add", map[string]any{"a": 2, "b": 40}, nil)
			require.NoError(t, err)
			assert.JSONEq(t, `{"sum":42}`, structured(t, res))
			_, err = c.CallTool(ctxFor(t), "wait", map[string]any{"steps": 3}, nil)
			assert.Equal(t, -32602, int(rpcCode(err)), "a fixed argument: %v", err)
			res, err = c.CallTool(ctxFor(t), "wait", nil, nil) // steps: 1 from the catalog
			require.NoError(t, err)
			assert.False(t, res.IsError, "%+v", res)
		})
	}
}

// Search mode on a virtual server: tools/list lists the meta-tools;
// search_tools finds by meaning; call_tool and the name itself call.
func TestCatalog_searchModeVirtual(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CatalogFile: writeCatalog(t, supportCatalog)})
	th.runServer(demo.New(nil).Server, "")
	c := th.clientAt("/servers/finder/mcp", nil)
	assert.Equal(t, []string{catalog.SearchToolsName, catalog.CallToolName}, toolNames(t, c))
	res, err := c.CallTool(ctxFor(t), catalog.SearchToolsName, map[string]any{"query": "sum two numbers", "limit": 3}, nil)
	require.NoError(t, err)
	var found struct{ Tools []catalog.Found }
	require.NoError(t, json.Unmarshal([]byte(structured(t, res)), &found))
	require.NotEmpty(t, found.Tools)
	assert.Equal(t, "add", found.Tools[0].Name)
	res, err = c.CallTool(ctxFor(t), catalog.CallToolName, map[string]any{"name": "add", "arguments": map[string]any{"a": 1, "b": 2}}, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":3}`, structured(t, res))
	res, err = c.CallTool(ctxFor(t), "add", map[string]any{"a": 1, "b": 1}, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":2}`, structured(t, res))
	_, err = c.CallTool(ctxFor(t), catalog.SearchToolsName, map[string]any{"limit": 3}, nil)
	assert.Equal(t, -32602, int(rpcCode(err)), "a search without a query: %v", err)
}

// Search mode on /mcp, and a token restricted to some tools: search_tools
// never returns a tool the token may not call, whatever the query, and
// returns the others in the order everyone gets them.
func TestCatalog_searchRestricted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, os.WriteFile(tokens, []byte(`tokens:
  - {name: all, token: all-secret, roles: [client]}
  - {name: some, token: some-secret, roles: [client], tools: ["demo__add", "demo__echo", "finder__echo"]}
  - {name: srv, token: srv-secret, roles: [server], servers: [demo]}
`), 0o600))
	tk, err := LoadTokens(tokens)
	require.NoError(t, err)
	th := startHub(t, Config{Tokens: tk, Discovery: catalog.DiscoverySearch, CatalogFile: writeCatalog(t, supportCatalog)})
	stop := th.dial(demo.New(nil).Server, "?token=srv-secret")
	defer stop()
	th.waitServer("demo", 1)
	search := func(c *mcp.Client, query string) []string {
		res, err := c.CallTool(ctxFor(t), catalog.SearchToolsName, map[string]any{"query": query, "limit": 50}, nil)
		require.NoError(t, err)
		var found struct{ Tools []catalog.Found }
		require.NoError(t, json.Unmarshal([]byte(structured(t, res)), &found))
		var names []string
		for _, f := range found.Tools {
			names = append(names, f.Name)
		}
		return names
	}
	all := th.clientAt("/mcp?token=all-secret", nil)
	some := th.clientAt("/mcp?token=some-secret", nil)
	assert.Equal(t, []string{catalog.SearchToolsName, catalog.CallToolName}, toolNames(t, some))
	queries := []string{"add numbers", "echo text back", "take a while", "ask the model", "increment the counter", "demo"}
	for _, q := range queries {
		everyone, limited := search(all, q), search(some, q)
		var want []string
		for _, name := range everyone {
			if name == "demo__add" || name == "demo__echo" {
				want = append(want, name)
			}
		}
		assert.Equal(t, want, limited, "query %q: all found %v", q, everyone)
	}
	assert.Contains(t, search(all, "take a while"), "demo__slow")
	_, err = some.CallTool(ctxFor(t), catalog.CallToolName, map[string]any{"name": "demo__slow"}, nil)
	assert.Equal(t, -32003, int(rpcCode(err)), "call_tool of a forbidden tool: %v", err)

	// The same on a virtual server in search mode, by its client-facing names.
	fs := th.clientAt("/servers/finder/mcp?token=some-secret", nil)
	for _, q := range queries {
		for _, name := range search(fs, q) {
			assert.Equal(t, "echo", name, "query %q", q)
		}
	}
	assert.Equal(t, []string{"echo"}, search(fs, "echo text back"))
}

// The aggregate's naming policy from the catalog: bare names where one
// server offers them, an alias, the prefixed name always callable; the
// list in name order on every instance and after every change.
func TestCatalog_aggregatePolicy(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CatalogFile: writeCatalog(t, `
aggregate:
  names: priority
  priority: [alpha]
  aliases: [{server: beta, tool: add, as: plus}]
`)})
	th.runServer(demo.New(nil).Server, "alpha")
	th.runServer(demo.New(nil).Server, "beta")
	c := th.client(nil)
	names := toolNames(t, c)
	assert.Equal(t, []string{"add", "ask", "beta__ask", "beta__echo", "beta__increment", "beta__slow", "echo", "increment", "plus", "slow"}, names)
	for _, name := range []string{"add", "alpha__add", "plus", "beta__add"} {
		res, err := c.CallTool(ctxFor(t), name, map[string]any{"a": 1, "b": 2}, nil)
		require.NoError(t, err, name)
		assert.JSONEq(t, `{"sum":3}`, structured(t, res), name)
	}
}

// A real server that comes under a virtual server's name is refused; a
// catalog that names a virtual server like a real one is refused, and the
// dashboard's switchboard://catalog says why, beside the one in force.
func TestCatalog_namesClash(t *testing.T) {
	t.Parallel()
	path := writeCatalog(t, supportCatalog)
	th := startHub(t, Config{CatalogFile: path})
	th.runServer(demo.New(nil).Server, "")
	err := th.rawServerRegister("support")
	assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(err), "got %v", err)
	assert.ErrorContains(t, err, `server name "support" is a virtual server's`)

	require.NoError(t, os.WriteFile(path, []byte("virtualServers:\n  - name: demo\n"), 0o644))
	require.Error(t, th.ReloadCatalog())
	admin := th.client(nil)
	var doc catalogDoc
	readJSON(t, admin, uriCatalog, &doc)
	require.NotNil(t, doc.Refused)
	assert.Contains(t, doc.Refused.Problems[0].Message, `a real server has the name`)
	require.NotNil(t, doc.InForce)
	assert.Equal(t, catalogSum([]byte(supportCatalog)), doc.InForce.SHA256)
	assert.Equal(t, supportCatalog, doc.Source)
	require.Len(t, doc.VirtualServers, 2)
	assert.Equal(t, "finder", doc.VirtualServers[0].Name)
	assert.Equal(t, "support", doc.VirtualServers[1].Name)
	assert.Equal(t, []string{"add", "echo", "wait"}, func() (n []string) {
		for _, it := range doc.VirtualServers[1].Tools {
			n = append(n, it.Name)
		}
		return
	}())
	var servers struct{ VirtualServers []virtualServerDoc }
	readJSON(t, admin, uriServers, &servers)
	require.Len(t, servers.VirtualServers, 2)
	assert.Equal(t, 3, servers.VirtualServers[1].Tools)
	assert.True(t, strings.HasPrefix(doc.Refused.From, "file"))
}

// rawServerRegister connects a server under name and returns why the hub
// closed it.
func (th *testHub) rawServerRegister(name string) error {
	s := mcp.NewServer(mcp.Implementation{Name: name, Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "t"}, nil)
	conn, err := peer.Dial(ctxFor(th.t), th.wsURL("/mcp/server?name="+name), nil)
	require.NoError(th.t, err)
	return s.Serve(ctxFor(th.t), conn).Wait()
}

// structured returns a result's structuredContent as JSON.
func structured(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	return string(raw)
}

// Two instances on a real redis-server, each with a catalog file of its
// own: a change of A's file is served by B within a second, though B's
// file never changes; a client on A uses a virtual server whose member
// lives on B; B restarted with its old file takes the cluster's newer
// catalog.
func TestCatalog_twoInstances(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	first := `
virtualServers:
  - name: support
    tools: [{server: demo, include: ["add"]}]
`
	second := `
virtualServers:
  - name: support
    tools: [{server: demo, tool: add, as: plus}, {server: demo, include: ["echo"]}]
`
	pathA, pathB := writeCatalog(t, first), writeCatalog(t, first)
	a := startHubOn(t, rs, prefix, Config{CatalogFile: pathA})
	b := startHubOn(t, rs, prefix, Config{CatalogFile: pathB})
	b.runServer(demo.New(nil).Server, "")
	a.waitServer("demo", 1)

	c := a.clientAt("/servers/support/mcp", nil)
	assert.Equal(t, []string{"add"}, toolNames(t, c))
	res, err := c.CallTool(ctxFor(t), "add", map[string]any{"a": 20, "b": 22}, nil)
	require.NoError(t, err, "a call on A to a member on B")
	assert.JSONEq(t, `{"sum":42}`, structured(t, res))

	// A's file changes: both serve the new catalog within a second.
	require.NoError(t, os.WriteFile(pathA, []byte(second), 0o644))
	start := time.Now()
	for _, th := range []*testHub{a, b} {
		th.waitCatalog(second)
	}
	assert.Less(t, time.Since(start), time.Second, "both instances serve the change")
	res, err = b.clientAt("/servers/support/mcp", nil).CallTool(ctxFor(t), "plus", map[string]any{"a": 1, "b": 2}, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":3}`, structured(t, res))
	assert.Equal(t, []string{"echo", "plus"}, toolNames(t, c))

	// A third instance whose file is older than the cluster's catalog
	// takes the cluster's.
	pathC := writeCatalog(t, first)
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(pathC, old, old))
	d := startHubOn(t, rs, prefix, Config{CatalogFile: pathC})
	d.waitCatalog(second)
	a.waitCatalog(second) // and gives nothing back
}

// An OAuth access token for a virtual server's endpoint works there like
// one for a real server's (its audience names /servers/<virtual>/mcp), and
// a token for the member's own endpoint does not.
func TestCatalog_oauthVirtualServer(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	th := oauthHub(t, as, Config{CatalogFile: writeCatalog(t, supportCatalog)}, "")
	forSupport := machineToken(as, th.resource("/servers/support/mcp"), "mcp:client")
	forDemo := machineToken(as, th.resource("/servers/demo/mcp"), "mcp:client")
	c, err := mcp.Connect(ctxFor(t), th.srv.URL+"/servers/support/mcp", sessionOpts(&mcp.ClientOptions{Token: forSupport}))
	require.NoError(t, err)
	defer c.Close()
	res, err := c.CallTool(ctxFor(t), "add", map[string]any{"a": 1, "b": 2}, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":3}`, structured(t, res))
	want := refusal{401, th.challenge("/servers/support/mcp", "mcp:client", oauth.ErrorInvalidToken, "the access token is not meant for this resource")}
	assert.Equal(t, want, initializeWith(t, th.srv.URL+"/servers/support/mcp", bearer(forDemo)))
}

// A tool with an argument mirrored in a header (SEP-2243), on a virtual
// server that renames it and fixes another argument the schema mirrors,
// and in search mode: called directly without a session, its header is
// checked against the schema as that endpoint lists it (the fixed argument
// out of it); in search mode, whose lists hold only the meta-tools, its
// client knows no schema to mirror from, and it is not (by its name, or
// through call_tool). pkg/mcp's client calls it every way.
func TestCatalog_paramHeaders(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CatalogFile: writeCatalog(t, `
virtualServers:
  - name: ops
    tools: [{server: geo, tool: deploy, as: launch, fixed: {zone: b}}]
  - name: find
    discovery: search
    tools: [{server: geo}]
`)})
	s := mcp.NewServer(mcp.Implementation{Name: "geo", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "deploy", InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"region":{"type":"string","x-mcp-header":"Region"},"zone":{"type":"string","x-mcp-header":"Zone"}}}`)},
		func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("deployed " + string(req.Params.Arguments))}}, nil
		})
	th.runServer(s, "geo")

	ops := th.srv.URL + "/servers/ops/mcp"
	st := modernPost(t, ops, modernBody(1, "tools/call", `"name":"launch","arguments":{"region":"us"}`, "{}"), nil)
	assert.Equal(t, http.StatusBadRequest, st.status, "no Mcp-Param-Region")
	resp, _ := modernPost(t, ops, modernBody(2, "tools/call", `"name":"launch","arguments":{"region":"us"}`, "{}"),
		http.Header{"Mcp-Param-Region": {"us"}}).answer(t)
	assert.Contains(t, firstText(t, resultOf(t, resp)), `"zone":"b"`, "the fixed argument needs no header of the client's")

	for _, tc := range []struct{ path, tool string }{{"/servers/ops/mcp", "launch"}, {"/servers/find/mcp", "deploy"}} {
		c, err := mcp.Connect(ctxFor(t), th.srv.URL+tc.path, nil) // 2026-07-28
		require.NoError(t, err)
		defer c.Close()
		res, err := c.CallTool(ctxFor(t), tc.tool, map[string]any{"region": "eu"}, nil)
		require.NoError(t, err, tc.path)
		assert.Contains(t, res.Content[0].Text, `"region":"eu"`)
	}
	c, err := mcp.Connect(ctxFor(t), th.srv.URL+"/servers/find/mcp", nil)
	require.NoError(t, err)
	defer c.Close()
	res, err := c.CallTool(ctxFor(t), catalog.CallToolName, map[string]any{"name": "deploy", "arguments": map[string]any{"region": "ap"}}, nil)
	require.NoError(t, err, "call_tool's inner tool is not held to headers its client could not know")
	assert.Contains(t, res.Content[0].Text, `"region":"ap"`)
}
