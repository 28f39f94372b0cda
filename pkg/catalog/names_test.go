package catalog_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/catalog"
)

var refs = []catalog.Ref{
	{Server: "github", Name: "search"},
	{Server: "jira", Name: "search"},
	{Server: "docs", Name: "search"},
	{Server: "github", Name: "create_issue"},
	{Server: "jira", Name: "create_issue"},
	{Server: "demo", Name: "add"},
	{Server: "demo", Name: "odd__name"},
	{Server: "fs", Name: "read_file"},
}

func listed(n *catalog.Names) map[string]catalog.Ref {
	out := map[string]catalog.Ref{}
	for _, a := range n.List() {
		out[a.Listed] = a.Ref
	}
	return out
}

func TestPolicy_prefixByDefault(t *testing.T) {
	t.Parallel()
	var p *catalog.Policy // the default
	n := p.Tools("__", refs)
	require.Len(t, n.List(), len(refs))
	for _, a := range n.List() {
		assert.Equal(t, a.Server+"__"+a.Name, a.Listed)
		assert.Equal(t, a.Listed, a.Canonical)
	}
	assert.True(t, slices.IsSortedFunc(n.List(), func(a, b catalog.Assignment) int { return cmp.Compare(a.Listed, b.Listed) }))
	assert.Empty(t, n.Conflicts())
}

func TestPolicy_priority(t *testing.T) {
	t.Parallel()
	p := &catalog.Policy{Names: catalog.NamesPriority, Priority: []string{"jira", "git*"},
		Aliases: []catalog.Alias{{Server: "docs", Tool: "search", As: "search_docs"}, {Server: "demo", Tool: "add", As: "read_file"}}}
	n := p.Tools("__", refs)
	assert.Equal(t, map[string]catalog.Ref{
		"search":               {Server: "jira", Name: "search"},         // first in priority
		"github__search":       {Server: "github", Name: "search"},       // lost it
		"search_docs":          {Server: "docs", Name: "search"},         // an alias
		"create_issue":         {Server: "jira", Name: "create_issue"},   // jira before git*
		"github__create_issue": {Server: "github", Name: "create_issue"}, // lost it
		"read_file":            {Server: "demo", Name: "add"},            // an alias beats a bare name
		"fs__read_file":        {Server: "fs", Name: "read_file"},        // so fs is prefixed
		"demo__odd__name":      {Server: "demo", Name: "odd__name"},      // a name with the separator is never bare
	}, listed(n))
	assert.Empty(t, n.Conflicts())

	// The prefixed name is always callable, listed or not.
	for name, want := range map[string]catalog.Ref{
		"search": {Server: "jira", Name: "search"}, "jira__search": {Server: "jira", Name: "search"},
		"docs__search": {Server: "docs", Name: "search"}, "demo__add": {Server: "demo", Name: "add"},
		"fs__read_file": {Server: "fs", Name: "read_file"},
	} {
		a, ok := n.Lookup(name)
		require.True(t, ok, name)
		assert.Equal(t, want, a.Ref, name)
	}
	_, ok := n.Lookup("add")
	assert.False(t, ok, "an aliased tool's bare name is not its")
	_, ok = n.Lookup("nothing")
	assert.False(t, ok)
}

// Servers the priority list does not name come after the named ones, by
// name; a name one server offers stays bare.
func TestPolicy_priorityUnlisted(t *testing.T) {
	t.Parallel()
	p := &catalog.Policy{Names: catalog.NamesPriority}
	got := listed(p.Tools("__", refs))
	assert.Equal(t, catalog.Ref{Server: "docs", Name: "search"}, got["search"])
	assert.Equal(t, catalog.Ref{Server: "github", Name: "create_issue"}, got["create_issue"])
	assert.Equal(t, catalog.Ref{Server: "demo", Name: "add"}, got["add"])
}

// The names depend on the set of tools only: the same on every instance,
// whatever order its registry holds them in.
func TestPolicy_orderFree(t *testing.T) {
	t.Parallel()
	p := &catalog.Policy{Names: catalog.NamesPriority, Priority: []string{"github"},
		Aliases: []catalog.Alias{{Server: "fs", Tool: "read_file", As: "cat"}}}
	want := p.Tools("__", refs).List()
	for range 50 {
		r := slices.Clone(refs)
		rand.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
		r = append(r, r[0]) // a duplicate (two replicas) counts once
		assert.Equal(t, want, p.Tools("__", r).List())
	}
}

// A separator that server names may contain ("-") can make two prefixed
// names alike: the first server in rank keeps the name, the other is
// reported, never listed twice. An alias containing the separator is
// refused the same way.
func TestPolicy_conflicts(t *testing.T) {
	t.Parallel()
	p := &catalog.Policy{Aliases: []catalog.Alias{{Server: "a", Tool: "x", As: "a-x"}}}
	n := p.Tools("-", []catalog.Ref{{Server: "a-b", Name: "c"}, {Server: "a", Name: "b-c"}, {Server: "a", Name: "x"}})
	got := listed(n)
	assert.Equal(t, catalog.Ref{Server: "a", Name: "b-c"}, got["a-b-c"])
	assert.Equal(t, catalog.Ref{Server: "a", Name: "x"}, got["a-x"])
	assert.Len(t, got, 2)
	assert.Equal(t, []catalog.Conflict{
		{Ref: catalog.Ref{Server: "a", Name: "x"}, Name: "a-x"},
		{Ref: catalog.Ref{Server: "a-b", Name: "c"}, Name: "a-b-c", Holder: catalog.Ref{Server: "a", Name: "b-c"}},
	}, n.Conflicts())
}

func TestPolicy_prompts(t *testing.T) {
	t.Parallel()
	p := &catalog.Policy{Aliases: []catalog.Alias{{Server: "demo", Prompt: "greet", As: "hello"}, {Server: "demo", Tool: "greet", As: "wave"}}}
	n := p.Prompts("__", []catalog.Ref{{Server: "demo", Name: "greet"}})
	assert.Equal(t, map[string]catalog.Ref{"hello": {Server: "demo", Name: "greet"}}, listed(n))
	n = p.Tools("__", []catalog.Ref{{Server: "demo", Name: "greet"}})
	assert.Equal(t, map[string]catalog.Ref{"wave": {Server: "demo", Name: "greet"}}, listed(n))
}

func TestParse_aggregate(t *testing.T) {
	t.Parallel()
	c, err := catalog.Parse([]byte("aggregate:\n  names: priority\n  priority: [github]\n  aliases:\n    - {server: demo, tool: add, as: plus}\n"))
	require.NoError(t, err)
	require.NotNil(t, c.Aggregate)
	assert.Equal(t, catalog.NamesPriority, c.Aggregate.Names)
	assert.Equal(t, 5, c.Aggregate.Aliases[0].Line)
	got := listed(c.Aggregate.Tools("__", []catalog.Ref{{Server: "demo", Name: "add"}, {Server: "github", Name: "add"}}))
	assert.Equal(t, map[string]catalog.Ref{"plus": {Server: "demo", Name: "add"}, "add": {Server: "github", Name: "add"}}, got)

	c, err = catalog.Parse([]byte("aggregate: {}\n"))
	require.NoError(t, err)
	assert.Equal(t, catalog.NamesPrefix, c.Aggregate.Names)
}
