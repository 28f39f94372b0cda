package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text becomes terms in three steps, alike for tools and queries: words are
// split at anything but letters and digits and at case changes (so
// getIssueComments, get_issue_comments and get-issue-comments are the same
// three words), lowered, stripped of stop words, and reduced by a light
// English stemmer (plurals, -ing, -ed, a final e), which joins "files" and
// "file", "creating" and "create" without the over-reach of a full Porter
// stemmer ("organization" stays apart from "organ").

// words appends the words of s, lowered and split as above, to dst. A run
// of letters and digits split at case changes is also kept whole
// (GitHub: github, git, hub), so that brand names match as written both
// ways.
func words(dst []string, s string) []string { return interner(nil).words(dst, s) }

// interner keeps one copy of each lowered word while a server's tools are
// indexed: most words recur, and lowering each anew was most of the
// allocations of indexing. A nil interner lowers without keeping.
type interner map[string]string

// lower returns s in lower case.
func (in interner) lower(s string) string {
	var b [64]byte
	if in == nil || len(s) > len(b) {
		return strings.ToLower(s)
	}
	upper := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return strings.ToLower(s)
		case c >= 'A' && c <= 'Z':
			upper = true
			b[i] = c + 'a' - 'A'
		default:
			b[i] = c
		}
	}
	if !upper {
		return s
	}
	if w, ok := in[string(b[:len(s)])]; ok {
		return w
	}
	w := string(b[:len(s)])
	in[w] = w
	return w
}

// words is words with the interner's copies.
func (in interner) words(dst []string, s string) []string {
	run, start := -1, -1 // start of the current run, and of its current word
	parts := 0
	var prev rune
	end := func(i int) {
		dst = append(dst, in.lower(s[start:i]))
		if parts > 0 {
			dst = append(dst, in.lower(s[run:i]))
		}
		run, start, parts = -1, -1, 0
	}
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case !isAlnum(r):
			if run >= 0 {
				end(i)
			}
		case run < 0:
			run, start = i, i
		case boundary(prev, r, s[i+size:]):
			dst = append(dst, in.lower(s[start:i]))
			start = i
			parts++
		}
		prev = r
		i += size
	}
	if run >= 0 {
		end(len(s))
	}
	return dst
}

// isAlnum reports whether r is a letter or a digit, ASCII first.
func isAlnum(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// boundary reports whether a word ends between prev and r: a lower-case
// letter or digit before an upper-case one (getIssue), or the last capital
// of an acronym before a lower-case letter (HTTPServer: HTTP, Server).
func boundary(prev, r rune, rest string) bool {
	if unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
		return true
	}
	if unicode.IsUpper(prev) && unicode.IsUpper(r) {
		next, _ := utf8.DecodeRuneInString(rest)
		return unicode.IsLower(next)
	}
	return false
}

// stopWords are words that say nothing about what a tool does. Verbs and
// nouns of the trade (list, get, file) are kept however common: the
// ranking's idf weighs them.
var stopWords = toSet(`a an and any are as at be been being but by can could do does doing
for from had has have having how i if in into is it its itself just me might more most must my
no nor not of on once only or other our out over own please same shall should so some such than
that the their them then there these they this those through to too under until up very was
we were what when where which while who whom why will with would you your yours want wants
need needs i'd i'm let lets using via also e.g eg etc all every each everything anything something
nothing thing things stuff lot lots many much really actually kindly thanks hey`)

func toSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// stem reduces a lowered word to its light stem.
func stem(w string) string {
	if len(w) <= 3 || !isASCIILetters(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "zes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	case strings.HasSuffix(w, "ing") && len(w) >= 6:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) >= 5 && !strings.HasSuffix(w, "eed"):
		w = undouble(w[:len(w)-2])
	}
	if strings.HasSuffix(w, "e") && len(w) >= 4 {
		w = w[:len(w)-1]
	}
	return w
}

// undouble drops one of a doubled final consonant (running: runn -> run).
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouls", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// terms appends the terms of s (words less stop words, stemmed) to dst.
func terms(dst []string, s string) []string { return interner(nil).terms(dst, s) }

// terms is terms with the interner's copies.
func (in interner) terms(dst []string, s string) []string {
	start := len(dst)
	dst = in.words(dst, s)
	out := dst[:start]
	for _, w := range dst[start:] {
		if len(w) < 2 && !isDigit(w) || stopWords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

func isDigit(w string) bool { return len(w) == 1 && w[0] >= '0' && w[0] <= '9' }

// synonyms are groups of words that tools and the people who ask for them
// use for one thing: the verbs of software (find and search, delete and
// remove) and its common abbreviations (repo, dir, db). A query term also
// looks for the other words of its groups, at a lower weight than its own.
// The groups are general vocabulary, not fitted to any corpus.
var synonymGroups = []string{
	// verbs
	"find search lookup look query locate seek",
	"get fetch retrieve read obtain view show",
	"download fetch save pull",
	"upload put push",
	"create make new add generate insert open",
	"delete remove erase destroy drop purge forget discard",
	"update edit modify change patch alter set",
	"list enumerate browse",
	"run execute launch invoke start trigger",
	"stop kill terminate cancel halt abort end",
	"send post publish submit",
	"write save store put",
	"move rename relocate",
	"copy duplicate clone",
	"navigate go visit open browse",
	"click press tap",
	"type fill enter input",
	"screenshot capture snapshot",
	"undo revert rollback restore",
	"test check verify validate assert",
	"summary summarize summarise",
	"translate convert",
	"transcribe recognize",
	"remember memory memorize recall store",
	"think reason reasoning thought",
	"watch monitor track observe",
	// nouns
	"repo repository project",
	"pr pull merge",
	"issue ticket bug",
	"dir directory folder",
	"db database",
	"doc document documentation docs",
	"msg message",
	"user member account person people",
	"customer client buyer",
	"contact lead person",
	"team group org organization",
	"email mail",
	"image picture photo png jpg jpeg gif",
	"speech voice audio",
	"web website site page url webpage internet online",
	"browser chrome",
	"k8s kubernetes kube",
	"vm machine instance",
	"container docker",
	"log logs logging",
	"history log changelog",
	"error exception failure crash",
	"alert alarm notification",
	"comment reply note",
	"info information detail details",
	"schedule cron timer recurring periodic",
	"calendar event meeting",
	"secret password credential token",
	"place location address street",
	"route direction directions",
	"height altitude elevation",
	"config configuration setting settings",
	"env environment",
	"stat stats statistic statistics metric metrics",
	"status health state",
	"latency slow performance",
	"cost price pricing fee billing",
	"payment pay charge checkout",
	"refund chargeback",
	"discount coupon promo voucher",
	"subscription plan membership",
	"app application",
	"ai llm model",
	"chart graph plot",
	"spreadsheet sheet",
}

// synonyms maps a term to the other terms of its groups.
var synonyms = func() map[string][]string {
	m := map[string][]string{}
	for _, g := range synonymGroups {
		ts := terms(nil, g)
		for _, t := range ts {
			for _, o := range ts {
				if o != t && !contains(m[t], o) {
					m[t] = append(m[t], o)
				}
			}
		}
	}
	return m
}()

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
