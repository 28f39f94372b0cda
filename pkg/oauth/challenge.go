package oauth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The error codes of a Bearer challenge (RFC 6750 section 3.1).
const (
	// ErrorInvalidRequest: the request is malformed (a token sent twice,
	// say). HTTP 400.
	ErrorInvalidRequest = "invalid_request"
	// ErrorInvalidToken: the token is expired, revoked, malformed or not
	// meant for this resource: every refusal of Verify. HTTP 401.
	ErrorInvalidToken = "invalid_token"
	// ErrorInsufficientScope: the token is valid but lacks a scope the
	// request needs; Scope says which (step-up authorization). HTTP 403.
	ErrorInsufficientScope = "insufficient_scope"
)

// Bearer is a Bearer challenge, for the WWW-Authenticate header of a 401 or
// 403 (RFC 6750 section 3, RFC 9728 section 5.1). Empty members are left
// out.
type Bearer struct {
	// Realm is the protection space; rarely useful.
	Realm string
	// ResourceMetadata is the URL of the resource's Protected Resource
	// Metadata (see ResourceMetadataURL): how an MCP client finds where to
	// get a token.
	ResourceMetadata string
	// Scope lists the scopes the request needs.
	Scope []string
	// Error is one of ErrorInvalidRequest, ErrorInvalidToken,
	// ErrorInsufficientScope; empty when no token was sent.
	Error string
	// Description is a short human-readable reason (see Describe).
	Description string
}

// String returns the challenge as a WWW-Authenticate header value, each
// parameter a quoted string: backslashes and double quotes escaped, and
// anything RFC 6750 does not allow there (control characters, non-ASCII)
// replaced by "?", so that no value can end the header or forge another
// parameter.
func (b Bearer) String() string {
	c := Challenge{Scheme: "Bearer"}
	add := func(name, value string) {
		if value != "" {
			c.Params = append(c.Params, Param{name, value})
		}
	}
	add("realm", b.Realm)
	add("resource_metadata", b.ResourceMetadata)
	add("scope", strings.Join(b.Scope, " "))
	add("error", b.Error)
	add("error_description", b.Description)
	return c.String()
}

// Challenge is one challenge of a WWW-Authenticate header (RFC 9110
// section 11.6.1): a scheme, then either a token68 or parameters.
type Challenge struct {
	// Scheme is the authentication scheme ("Bearer"), as sent: compare it
	// with strings.EqualFold.
	Scheme string
	// Token68 is the challenge's token68 form, if it has one instead of
	// parameters.
	Token68 string
	// Params are the parameters in order, names lower-cased.
	Params []Param
}

// Param is a parameter of a challenge.
type Param struct {
	Name, Value string
}

// Param returns the value of the parameter name (lower-case), or "".
func (c Challenge) Param(name string) string {
	for _, p := range c.Params {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// String returns the challenge in the header's syntax, every parameter
// value quoted.
func (c Challenge) String() string {
	var b strings.Builder
	b.WriteString(c.Scheme)
	if c.Token68 != "" {
		b.WriteString(" " + c.Token68)
	}
	for i, p := range c.Params {
		if i == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteString(", ")
		}
		b.WriteString(p.Name + "=" + quote(p.Value))
	}
	return b.String()
}

// quote returns s as a quoted-string (RFC 9110 section 5.6.4).
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// BearerChallenge returns the first Bearer challenge among WWW-Authenticate
// header values, and whether there is one. Values that do not parse are
// passed over.
func BearerChallenge(values []string) (Challenge, bool) {
	for _, v := range values {
		cs, _ := ParseChallenges(v)
		for _, c := range cs {
			if strings.EqualFold(c.Scheme, "Bearer") {
				return c, true
			}
		}
	}
	return Challenge{}, false
}

// ParseChallenges parses a WWW-Authenticate header value: one or more
// challenges separated by commas. It returns the challenges read before
// an error, if any.
func ParseChallenges(header string) ([]Challenge, error) {
	p := challengeParser{s: header}
	var out []Challenge
	for {
		p.skipListSeparators()
		if p.done() {
			break
		}
		c, err := p.challenge()
		if err != nil {
			return out, fmt.Errorf("WWW-Authenticate at %d: %w", p.i, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("WWW-Authenticate: no challenge")
	}
	return out, nil
}

// challengeParser reads the grammar of RFC 9110 sections 11.6.1 and 5.6.
type challengeParser struct {
	s string
	i int
}

func (p *challengeParser) done() bool { return p.i >= len(p.s) }

func (p *challengeParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *challengeParser) skipListSeparators() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

// token reads a token (RFC 9110 section 5.6.2), maybe empty.
func (p *challengeParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func isTokenChar(c byte) bool {
	return c > 0x20 && c < 0x7f && !strings.ContainsRune(`"(),/:;<=>?@[\]{}`, rune(c))
}

// challenge reads a scheme and what follows it, up to the next challenge.
func (p *challengeParser) challenge() (Challenge, error) {
	c := Challenge{Scheme: p.token()}
	if c.Scheme == "" {
		return c, fmt.Errorf("expected an auth scheme, found %q", p.s[p.i])
	}
	p.skipSpace()
	if t, ok := p.token68(); ok {
		c.Token68 = t
		return c, nil
	}
	for {
		save := p.i
		p.skipListSeparators()
		if p.done() {
			return c, nil
		}
		start := p.i
		name := p.token()
		p.skipSpace()
		if name == "" || p.done() || p.s[p.i] != '=' {
			// Not a parameter: the next challenge's scheme starts here.
			if name == "" {
				return c, fmt.Errorf("unexpected %q", p.s[start])
			}
			p.i = save
			return c, nil
		}
		p.i++ // '='
		p.skipSpace()
		value, err := p.value()
		if err != nil {
			return c, err
		}
		name = strings.ToLower(name)
		if slices.ContainsFunc(c.Params, func(q Param) bool { return q.Name == name }) {
			return c, fmt.Errorf("parameter %q given twice", name)
		}
		c.Params = append(c.Params, Param{name, value})
	}
}

// token68 reads a token68 (RFC 9110 section 11.2) if one stands here: its
// characters, maybe "=" padding, then the end or a comma. Otherwise (a
// parameter, "name=value", or nothing) it reads nothing.
func (p *challengeParser) token68() (string, bool) {
	j := p.i
	for j < len(p.s) && (isAlnum(p.s[j]) || strings.IndexByte("-._~+/", p.s[j]) >= 0) {
		j++
	}
	if j == p.i {
		return "", false
	}
	for j < len(p.s) && p.s[j] == '=' {
		j++
	}
	end := j
	for end < len(p.s) && (p.s[end] == ' ' || p.s[end] == '\t') {
		end++
	}
	if end < len(p.s) && p.s[end] != ',' {
		return "", false
	}
	t := p.s[p.i:j]
	p.i = end
	return t, true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// value reads a parameter value: a token or a quoted-string.
func (p *challengeParser) value() (string, error) {
	if p.done() || p.s[p.i] != '"' {
		v := p.token()
		if v == "" {
			return "", errors.New("expected a parameter value")
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return b.String(), nil
		case c == '\\':
			if p.done() {
				return "", errors.New("unterminated quoted-pair")
			}
			b.WriteByte(p.s[p.i])
			p.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated quoted string")
}
