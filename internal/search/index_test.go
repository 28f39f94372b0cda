package search_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/search"
)

func schema(props map[string]string) json.RawMessage {
	p := map[string]any{}
	for k, d := range props {
		p[k] = map[string]any{"type": "string", "description": d}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": p})
	return b
}

var github = []search.Tool{
	{Name: "github__create_issue", Server: "github", Description: "Create a new issue in a GitHub repository",
		InputSchema: schema(map[string]string{"owner": "Repository owner", "repo": "Repository name", "title": "Issue title", "body": "Issue body"})},
	{Name: "github__list_commits", Server: "github", Description: "Get list of commits of a branch in a GitHub repository",
		InputSchema: schema(map[string]string{"owner": "Repository owner", "repo": "Repository name", "sha": "Branch name or SHA"})},
	{Name: "github__search_code", Server: "github", Description: "Search for code across GitHub repositories",
		InputSchema: schema(map[string]string{"q": "Search query"})},
}

var fs = []search.Tool{
	{Name: "fs__read_file", Server: "fs", Description: "Read the complete contents of a file from the file system.",
		InputSchema: schema(map[string]string{"path": "Path of the file"})},
	{Name: "fs__search_files", Server: "fs", Description: "Recursively search for files and directories matching a pattern.",
		InputSchema: schema(map[string]string{"path": "Where to start", "pattern": "Glob pattern"})},
	{Name: "fs__create_directory", Server: "fs", Description: "Create a new directory or ensure a directory exists.",
		InputSchema: schema(map[string]string{"path": "Directory path"})},
}

func newIndex() *search.Index {
	x := search.New()
	x.SetServer("github", github)
	x.SetServer("fs", fs)
	return x
}

func resultNames(rs []search.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Tool.Name)
	}
	return out
}

func TestSearch_ranks(t *testing.T) {
	t.Parallel()
	x := newIndex()
	assert.Equal(t, 6, x.Len())
	for q, want := range map[string]string{
		"open a ticket in a repo":             "github__create_issue",
		"show the commit history of a branch": "github__list_commits",
		"cat a file":                          "fs__read_file",
		"find files by glob":                  "fs__search_files",
		"make a folder":                       "fs__create_directory",
		"look for code on GitHub":             "github__search_code",
	} {
		rs := x.Search(q, 3, search.Filter{})
		require.NotEmpty(t, rs, q)
		assert.Equal(t, want, rs[0].Tool.Name, "%q: %v", q, resultNames(rs))
		for i := 1; i < len(rs); i++ {
			assert.GreaterOrEqual(t, rs[i-1].Score, rs[i].Score)
		}
	}
	assert.Empty(t, x.Search("the of and", 5, search.Filter{}), "stop words only")
	assert.Empty(t, x.Search("", 5, search.Filter{}))
	assert.Empty(t, x.Search("zebra", 5, search.Filter{}))
	assert.Empty(t, x.Search("file", 0, search.Filter{}))
	assert.Len(t, x.Search("file", 1, search.Filter{}), 1)
}

// A filtered search never returns a tool the filter refuses, asks the tool
// filter only of tools that would make the results, and never reads a
// refused server.
func TestSearch_filter(t *testing.T) {
	t.Parallel()
	x := newIndex()
	var asked atomic.Int32
	f := search.Filter{
		Server: func(s string) bool { return s != "fs" },
		Tool: func(tl *search.Tool) bool {
			asked.Add(1)
			require.NotEqual(t, "fs", tl.Server, "a refused server's tools are not read")
			return tl.Name != "github__search_code"
		},
	}
	rs := x.Search("search files and code", 10, f)
	for _, r := range rs {
		assert.NotEqual(t, "fs", r.Tool.Server)
		assert.NotEqual(t, "github__search_code", r.Tool.Name)
	}
	all := x.Search("search files and code", 10, search.Filter{})
	assert.Contains(t, resultNames(all), "github__search_code")
	assert.Contains(t, resultNames(all), "fs__search_files")

	// One result wanted: the filter is asked of the best until one passes.
	asked.Store(0)
	rs = x.Search("search code", 1, search.Filter{Tool: func(tl *search.Tool) bool {
		asked.Add(1)
		return tl.Name != "github__search_code"
	}})
	require.Len(t, rs, 1)
	assert.NotEqual(t, "github__search_code", rs[0].Tool.Name)
	assert.LessOrEqual(t, asked.Load(), int32(3))
}

// Scores do not depend on who asks: a tool a filter allows ranks as it
// does for everyone.
func TestSearch_scoresIndependentOfFilter(t *testing.T) {
	t.Parallel()
	x := newIndex()
	all := x.Search("create", 10, search.Filter{})
	some := x.Search("create", 10, search.Filter{Server: func(s string) bool { return s == "fs" }})
	require.NotEmpty(t, some)
	for _, r := range some {
		for _, a := range all {
			if a.Tool.Name == r.Tool.Name {
				assert.Equal(t, a.Score, r.Score)
			}
		}
	}
}

func TestIndex_updates(t *testing.T) {
	t.Parallel()
	x := newIndex()
	x.SetServer("fs", fs[:1]) // the server now lists one tool
	assert.Equal(t, 4, x.Len())
	assert.Empty(t, x.Search("directory", 5, search.Filter{Server: func(s string) bool { return s == "fs" }}))
	x.RemoveServer("github")
	assert.Equal(t, 1, x.Len())
	assert.Empty(t, x.Search("issue", 5, search.Filter{}))
	x.RemoveServer("nobody")
	x.SetServer("fs", nil)
	assert.Equal(t, 0, x.Len())
	assert.Empty(t, x.Search("file", 5, search.Filter{}))
}

// Equal scores come in the order of names, so every instance answers the
// same.
func TestSearch_tiesByName(t *testing.T) {
	t.Parallel()
	x := search.New()
	var tools []search.Tool
	for i := range 30 {
		tools = append(tools, search.Tool{Name: fmt.Sprintf("t%02d", 29-i), Server: "s", Description: "same words"})
	}
	x.SetServer("s", tools)
	rs := x.Search("same words", 5, search.Filter{})
	assert.Equal(t, []string{"t00", "t01", "t02", "t03", "t04"}, resultNames(rs))
}

// Searches run while servers come and go see each server's tools all or
// none (run with -race).
func TestIndex_concurrent(t *testing.T) {
	t.Parallel()
	x := newIndex()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rs := x.Search("file directory", 10, search.Filter{})
				n := 0
				for _, r := range rs {
					if r.Tool.Server == "fs" {
						n++
					}
				}
				if n != 0 && n != 3 {
					t.Errorf("saw %d of fs's 3 file tools", n)
					return
				}
			}
		})
	}
	for i := range 200 {
		if i%2 == 0 {
			x.RemoveServer("fs")
		} else {
			x.SetServer("fs", fs)
		}
		x.SetServer(fmt.Sprintf("s%d", i%7), github)
	}
	close(stop)
	wg.Wait()
}

func TestSchemaTexts(t *testing.T) {
	t.Parallel()
	x := search.New()
	x.SetServer("s", []search.Tool{{Name: "deploy", Server: "s", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"target":{"type":"object","description":"destination","properties":{"kubernetesNamespace":{"type":"string"}}},` +
			`"items":{"type":"array","items":{"type":"object","properties":{"checksum":{"type":"string"}}}}}}`)}})
	for _, q := range []string{"namespace", "checksum", "destination"} {
		assert.Len(t, x.Search(q, 5, search.Filter{}), 1, q)
	}
}

// A query of thousands of different words costs little more than one of
// a few dozen: its first words count, the rest are ignored (a search's
// working memory grows with the words that count).
func TestSearch_longQuery(t *testing.T) {
	x := newIndex()
	var b strings.Builder
	b.WriteString("read a file")
	for i := range 5000 {
		fmt.Fprintf(&b, " w%d", i)
	}
	long := b.String()
	rs := x.Search(long, 5, search.Filter{})
	require.NotEmpty(t, rs)
	assert.Equal(t, "fs__read_file", rs[0].Tool.Name)
	bytes := func(q string) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		x.Search(q, 5, search.Filter{})
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	assert.Less(t, bytes(long), 4*uint64(len(long))+(256<<10), "bytes allocated for a query of %d bytes", len(long))
}
