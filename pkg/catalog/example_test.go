package catalog_test

import (
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
)

// A virtual server offering two tools of a server, one renamed with an
// argument fixed: what its clients see, and what a call sends the server.
func ExampleBuild() {
	c, err := catalog.Parse([]byte(`
virtualServers:
  - name: support
    tools:
      - {server: demo, include: ["ad*"]}
      - {server: demo, tool: slow, as: wait, description: "Waits a little.", fixed: {steps: 2}}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	demo := &catalog.Lists{Tools: []json.RawMessage{
		json.RawMessage(`{"name":"add","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"slow","inputSchema":{"type":"object","properties":{"steps":{"type":"integer"},"label":{"type":"string"}},"required":["steps"]}}`),
	}}
	v := catalog.Build(c.Server("support"), map[string]*catalog.Lists{"demo": demo})
	for _, t := range v.Tools {
		fmt.Println(string(t.Raw))
	}

	wait, _ := v.Tool("wait")
	args, _ := wait.Arguments(json.RawMessage(`{"label":"tea"}`))
	fmt.Println(wait.Server, wait.Orig, string(args))
	_, err = wait.Arguments(json.RawMessage(`{"steps":100}`))
	fmt.Println(err)
	// Output:
	// {"name":"add","inputSchema":{"type":"object"}}
	// {"description":"Waits a little.","inputSchema":{"properties":{"label":{"type":"string"}},"type":"object"},"name":"wait"}
	// demo slow {"label":"tea","steps":2}
	// the argument is fixed by the virtual server: "steps"
}

// The aggregate endpoint's names under the priority policy: a name one
// server offers stays bare, the first server in priority keeps a shared
// one, and every prefixed name stays callable.
func ExamplePolicy_Tools() {
	p := &catalog.Policy{Names: catalog.NamesPriority, Priority: []string{"github"}}
	n := p.Tools("__", []catalog.Ref{
		{Server: "jira", Name: "search"}, {Server: "github", Name: "search"}, {Server: "fs", Name: "read_file"},
	})
	for _, a := range n.List() {
		fmt.Println(a.Listed, "->", a.Server, a.Name)
	}
	a, _ := n.Lookup("github__search")
	fmt.Println(a.Listed)
	// Output:
	// jira__search -> jira search
	// read_file -> fs read_file
	// search -> github search
	// search
}
