package mcp

import (
	"regexp"
	"strings"
)

// URITemplate matches URIs against an RFC 6570 template, as resource
// templates use them. Matching is what the hub needs to find the server of a
// resource that was not listed; expansion is not needed.
type URITemplate struct {
	raw string
	re  *regexp.Regexp
}

// ParseURITemplate compiles a template. Expressions may use the operators of
// levels 1 to 3 (none, +, #, ., /, ;, ?, &); a malformed template matches
// only itself.
func ParseURITemplate(t string) *URITemplate {
	var b strings.Builder
	b.WriteString("^")
	rest := t
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		close := strings.IndexByte(rest[open:], '}')
		if close < 0 {
			return &URITemplate{raw: t}
		}
		expr := rest[open+1 : open+close]
		if !validExpression(expr) {
			return &URITemplate{raw: t}
		}
		b.WriteString(regexp.QuoteMeta(rest[:open]))
		b.WriteString(expressionPattern(expr))
		rest = rest[open+close+1:]
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return &URITemplate{raw: t}
	}
	return &URITemplate{raw: t, re: re}
}

// validExpression checks an expression's syntax: an optional operator, then
// comma-separated variable names (letters, digits, '_', '.', %-escapes),
// each with an optional :length or * modifier.
func validExpression(expr string) bool {
	if expr != "" && strings.IndexByte("+#./;?&", expr[0]) >= 0 {
		expr = expr[1:]
	}
	if expr == "" {
		return false
	}
	for _, v := range strings.Split(expr, ",") {
		name, mod, hasMod := strings.Cut(v, ":")
		name = strings.TrimSuffix(name, "*")
		if name == "" || hasMod && (mod == "" || strings.Trim(mod, "0123456789") != "") {
			return false
		}
		for _, c := range name {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '%') {
				return false
			}
		}
	}
	return true
}

func expressionPattern(expr string) string {
	if expr == "" {
		return ""
	}
	op := expr[0]
	switch op {
	case '+', '#':
		prefix := ""
		if op == '#' {
			prefix = "#"
		}
		return "(?:" + regexp.QuoteMeta(prefix) + ".*)?"
	case '.':
		return `(?:\.[^/?#]*)*`
	case '/':
		return `(?:/[^/?#]*)*`
	case ';':
		return `(?:;[^/?#]*)*`
	case '?', '&':
		return `(?:[?&][^#]*)?`
	}
	return `[^/?#]*`
}

// Literal returns the template's text before its first expression: every
// URI it matches starts with it.
func (t *URITemplate) Literal() string {
	if t.re == nil {
		return t.raw
	}
	if i := strings.IndexByte(t.raw, '{'); i >= 0 {
		return t.raw[:i]
	}
	return t.raw
}

// String returns the template.
func (t *URITemplate) String() string { return t.raw }

// Match reports whether uri is an expansion of the template.
func (t *URITemplate) Match(uri string) bool {
	if t.re == nil {
		return uri == t.raw
	}
	return t.re.MatchString(uri)
}
