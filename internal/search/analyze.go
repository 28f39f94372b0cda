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
func words(dst []string, s string) []string {
	run, start := -1, -1 // start of the current run, and of its current word
	parts := 0
	var prev rune
	end := func(i int) {
		dst = append(dst, strings.ToLower(s[start:i]))
		if parts > 0 {
			dst = append(dst, strings.ToLower(s[run:i]))
		}
		run, start, parts = -1, -1, 0
	}
	for i, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !alnum:
			if run >= 0 {
				end(i)
			}
		case run < 0:
			run, start = i, i
		case boundary(prev, r, s[i+utf8.RuneLen(r):]):
			dst = append(dst, strings.ToLower(s[start:i]))
			start = i
			parts++
		}
		prev = r
	}
	if run >= 0 {
		end(len(s))
	}
	return dst
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
need needs i'd i'm let lets using via also e.g eg etc`)

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
func terms(dst []string, s string) []string {
	start := len(dst)
	dst = words(dst, s)
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
	"find search lookup look query locate seek",
	"get fetch retrieve read obtain view show",
	"download fetch save",
	"create make new add generate insert open",
	"delete remove erase destroy drop purge",
	"update edit modify change patch alter set",
	"list enumerate browse",
	"run execute launch invoke start",
	"stop kill terminate cancel halt abort end",
	"send post publish submit",
	"write save store put",
	"move rename relocate",
	"copy duplicate clone",
	"navigate go visit open browse",
	"click press tap",
	"type fill enter input",
	"screenshot capture snapshot",
	"repo repository",
	"pr pull merge",
	"issue ticket bug",
	"dir directory folder",
	"db database",
	"doc document documentation docs",
	"msg message",
	"user member account person people",
	"email mail",
	"image picture photo",
	"web website site page url webpage internet online",
	"k8s kubernetes kube",
	"log logs logging",
	"error exception failure",
	"comment reply note",
	"info information detail details",
	"summary summarize summarise",
	"schedule calendar event meeting",
	"place location address",
	"route direction directions",
	"remember memory memorize recall store",
	"think reason reasoning thought",
	"watch monitor track observe",
	"cost price pricing",
	"config configuration setting settings",
	"env environment",
	"stat stats statistic statistics metric metrics",
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
