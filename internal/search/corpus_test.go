package search_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/internal/search"
)

// The corpus: real tools/list output of published MCP servers
// (testdata/corpus/<server>.json, collected by testdata/collect), and
// queries written as a user would ask, each with the tools that answer it
// (testdata/corpus/queries.yaml).

const corpusDir = "testdata/corpus"

// corpusServer is one server's file.
type corpusServer struct {
	Name    string `json:"name"`
	Package string `json:"package"`
	Version string `json:"version"`
	License string `json:"license"`
	Source  string `json:"source"`
	Tools   []struct {
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
}

// loadCorpus reads every server's tools, as the aggregate names them
// (server__tool), by server.
func loadCorpus(tb testing.TB) map[string][]search.Tool {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.json"))
	require.NoError(tb, err)
	out := map[string][]search.Tool{}
	for _, f := range files {
		if filepath.Base(f) == "manifest.json" {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(tb, err)
		var s corpusServer
		require.NoError(tb, json.Unmarshal(b, &s), f)
		require.NotEmpty(tb, s.Tools, f)
		for _, t := range s.Tools {
			out[s.Name] = append(out[s.Name], search.Tool{Name: s.Name + "__" + t.Name, Server: s.Name, Title: t.Title,
				Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	return out
}

// corpusQuery is one question and the tools that answer it (any of them).
type corpusQuery struct {
	Query  string   `yaml:"q"`
	Answer []string `yaml:"a"`
}

func loadQueries(tb testing.TB) []corpusQuery {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, "queries.yaml"))
	require.NoError(tb, err)
	var qs []corpusQuery
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(tb, dec.Decode(&qs))
	return qs
}

// indexCorpus indexes the corpus; copies > 1 adds renamed copies of every
// server (server-2, ...), for an index of realistic tools at any size.
func indexCorpus(corpus map[string][]search.Tool, copies int) *search.Index {
	x := search.New()
	for _, name := range sortedServers(corpus) {
		for c := 1; c <= copies; c++ {
			x.SetServer(copyName(name, c), renamed(corpus[name], copyName(name, c)))
		}
	}
	return x
}

func copyName(server string, c int) string {
	if c == 1 {
		return server
	}
	return server + "-" + strconv.Itoa(c)
}

// renamed returns tools as a server of another name offers them.
func renamed(tools []search.Tool, server string) []search.Tool {
	out := slices.Clone(tools)
	for i := range out {
		own := out[i].Name[strings.Index(out[i].Name, "__")+2:]
		out[i].Name, out[i].Server = server+"__"+own, server
	}
	return out
}

func sortedServers(corpus map[string][]search.Tool) []string {
	var names []string
	for n := range corpus {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
