package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

func TestURITemplate_Match(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template string
		match    []string
		noMatch  []string
	}{
		{
			name:     "literal only",
			template: "file:///readme.md",
			match:    []string{"file:///readme.md"},
			noMatch:  []string{"file:///readme.mdx", "file:///readmeXmd", "xfile:///readme.md", "file:///README.md", ""},
		},
		{
			name:     "simple variable stays in one segment",
			template: "file:///{name}",
			match:    []string{"file:///a", "file:///a.txt", "file:///a%2Fb", "file:///"},
			noMatch:  []string{"file:///a/b", "file:///a?x=1", "file:///a#f", "http:///a", "file://a"},
		},
		{
			name:     "several simple variables",
			template: "db://{table}/{id}",
			match:    []string{"db://users/42", "db:///"},
			noMatch:  []string{"db://users", "db://users/42/x", "db:/users/42"},
		},
		{
			name:     "list of simple variables",
			template: "map://{x,y}",
			match:    []string{"map://1,2", "map://1"},
			noMatch:  []string{"map://1/2"},
		},
		{
			name:     "reserved expansion crosses segments",
			template: "file:///{+path}",
			match:    []string{"file:///a/b/c.txt", "file:///", "file:///a?x=1#f"},
			noMatch:  []string{"file://a", "files:///a"},
		},
		{
			name:     "reserved expansion in the middle",
			template: "repo://{owner}/{+path}/raw",
			match:    []string{"repo://me/a/b/raw", "repo://me//raw"},
			noMatch:  []string{"repo://me/a/b/raw/x", "repo://me/a/b"},
		},
		{
			name:     "fragment expansion",
			template: "http://h/p{#frag}",
			match:    []string{"http://h/p", "http://h/p#sec", "http://h/p#a/b?c"},
			noMatch:  []string{"http://h/px", "http://h/p/x", "http://h/p?x"},
		},
		{
			name:     "label expansion",
			template: "file:///f{.ext}",
			match:    []string{"file:///f", "file:///f.txt", "file:///f.tar.gz"},
			noMatch:  []string{"file:///fx", "file:///f/x", "file:///f.txt/x"},
		},
		{
			name:     "path segment expansion",
			template: "http://h{/seg}",
			match:    []string{"http://h", "http://h/a", "http://h/a/b"},
			noMatch:  []string{"http://hx", "http://h?x", "http://h#x"},
		},
		{
			name:     "path-style parameters",
			template: "http://h/m{;x,y}",
			match:    []string{"http://h/m", "http://h/m;x=1", "http://h/m;x=1;y=2", "http://h/m;x"},
			noMatch:  []string{"http://h/mx", "http://h/m/x", "http://h/m;x/y"},
		},
		{
			name:     "form-style query",
			template: "http://h/s{?q,lang}",
			match:    []string{"http://h/s", "http://h/s?q=a", "http://h/s?q=a&lang=en", "http://h/s?q=a%20b"},
			noMatch:  []string{"http://h/sx", "http://h/s/x", "http://h/s#f", "http://h/s?q=a#f"},
		},
		{
			name:     "form-style query continuation",
			template: "http://h/s?fixed=1{&x}",
			match:    []string{"http://h/s?fixed=1", "http://h/s?fixed=1&x=2", "http://h/s?fixed=1&x=2&y=3"},
			noMatch:  []string{"http://h/s?fixed=2", "http://h/s?fixed=1x", "http://h/sXfixed=1"},
		},
		{
			name:     "operators combined",
			template: "github://{owner}/{repo}/blob{/ref}{+path}{?raw}",
			match:    []string{"github://a/b/blob/main/src/x.go", "github://a/b/blob/main/src/x.go?raw=1", "github://a/b/blob"},
			noMatch:  []string{"gitlab://a/b/blob/main", "github://a/b/tree/main"},
		},
		{
			name:     "regex metacharacters in literals are literal",
			template: `re://a.b*c+(d)[e]|f^$\g?{x}`,
			match:    []string{`re://a.b*c+(d)[e]|f^$\g?v`, `re://a.b*c+(d)[e]|f^$\g?`},
			noMatch: []string{
				`re://aXb*c+(d)[e]|f^$\g?v`,
				`re://a.bbbc+(d)[e]|f^$\g?v`,
				`re://a.b*c+de|f^$\g?v`,
				`re://a.b*c+(d)[e]|f^$\gv`,
			},
		},
		{
			name:     "dot in a host is literal",
			template: "https://example.com/{id}",
			match:    []string{"https://example.com/1"},
			noMatch:  []string{"https://exampleXcom/1"},
		},
		{
			name:     "unicode literals",
			template: "notes://ñandú/{id}",
			match:    []string{"notes://ñandú/1"},
			noMatch:  []string{"notes://nandu/1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := mcp.ParseURITemplate(tt.template)
			assert.Equal(t, tt.template, tmpl.String())
			for _, uri := range tt.match {
				assert.True(t, tmpl.Match(uri), "%s should match %q", tt.template, uri)
			}
			for _, uri := range tt.noMatch {
				assert.False(t, tmpl.Match(uri), "%s should not match %q", tt.template, uri)
			}
		})
	}
}

// TestURITemplate_malformed checks the documented rule: "a malformed
// template matches only itself".
func TestURITemplate_malformed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		template string
		noMatch  []string // what the template would match if it were read as well-formed
	}{
		{"unclosed brace", "file:///{name", []string{"file:///x", "file:///"}},
		{"lone open brace", "{", []string{"", "x"}},
		{"second expression unclosed", "db://{table}/{id", []string{"db://t/{id", "db://t/1"}},
		{"close before open", "a}{b", []string{"a}", "a}x"}},
		// Bug: an empty expression is compiled to an empty pattern, so "a{}b"
		// matches "ab" and not itself.
		{"empty expression", "a{}b", []string{"ab"}},
		// Bug: a "{" inside an expression is taken as part of a variable name,
		// so the template matches "aXd" and not only itself.
		{"nested open brace", "a{b{c}d", []string{"aXd", "ad"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tmpl := mcp.ParseURITemplate(tt.template)
			assert.Equal(t, tt.template, tmpl.String())
			assert.True(t, tmpl.Match(tt.template), "a malformed template matches itself: %q", tt.template)
			for _, uri := range tt.noMatch {
				assert.False(t, tmpl.Match(uri), "malformed template %q must match only itself, but matches %q", tt.template, uri)
			}
		})
	}
}
