package search

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"get_issue_comments":    {"get", "issue", "comments"},
		"getIssueComments":      {"get", "issue", "comments", "getissuecomments"},
		"get-issue-comments":    {"get", "issue", "comments"},
		"HTTPServer":            {"http", "server", "httpserver"},
		"parseJSONBody":         {"parse", "json", "body", "parsejsonbody"},
		"GitHub issues":         {"git", "hub", "github", "issues"},
		"browser_take_snapshot": {"browser", "take", "snapshot"},
		"s3Bucket v2":           {"s3", "bucket", "s3bucket", "v2"},
		"Ünïcode wörds":         {"ünïcode", "wörds"},
		"":                      nil,
		"--__":                  nil,
	} {
		assert.Equal(t, want, words(nil, in), in)
	}
}

func TestStem(t *testing.T) {
	t.Parallel()
	same := [][]string{
		{"file", "files"},
		{"create", "creates", "creating", "created"},
		{"update", "updates", "updating", "updated"},
		{"entry", "entries"},
		{"query", "queries"},
		{"process", "processes"},
		{"match", "matches"},
		{"run", "running"},
		{"list", "lists", "listing", "listed"},
		{"branch", "branches"},
	}
	for _, group := range same {
		for _, w := range group[1:] {
			assert.Equal(t, stem(group[0]), stem(w), "%s ~ %s", group[0], w)
		}
	}
	for _, keep := range []string{"status", "analysis", "class", "need", "get", "css"} {
		assert.Equal(t, stem(keep), stem(keep+""), keep)
	}
	assert.NotEqual(t, stem("organization"), stem("organ"))
	assert.Equal(t, "status", stem("status"))
}

func TestTerms(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"creat", "issu", "git", "hub", "github", "repo"}, terms(nil, "Create an issue in the GitHub repo"))
	assert.Equal(t, []string{"3"}, terms(nil, "a 3 x"), "single digits stay, single letters go")
}

func TestSynonyms(t *testing.T) {
	t.Parallel()
	assert.Contains(t, synonyms[stem("find")], stem("search"))
	assert.Contains(t, synonyms[stem("search")], stem("find"))
	assert.Contains(t, synonyms["repo"], stem("repository"))
	assert.NotContains(t, synonyms[stem("find")], stem("find"))
}
