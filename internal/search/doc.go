// Package search is the hub's tool search: an index of the tools of every
// server that answers a few words ("open a ticket for this bug") with the
// tools that do it, best first, without a network or a model at run time.
//
// # Ranking
//
// BM25F over six fields of each tool, each with its weight: the name (split
// at case changes, '_', '-' and '.'), the title, the description, the input
// schema's parameter names and their descriptions, and the server's name.
// A tool's field counts are combined, each discounted by the field's
// length against the average (little for names, more for descriptions),
// then saturated once (k1), and weighed by each term's rarity (idf) over
// every tool indexed. Words are lowered, stop words dropped and plurals,
// -ing and -ed reduced (analyze.go); a query word also matches the words of
// its synonym groups (find and search, repo and repository) at a lower
// weight.
//
// # Updates and readers
//
// Each server's tools are one segment, a small inverted index of its own:
// SetServer builds it (a server with 500 tools in a few milliseconds) and
// swaps in a new snapshot that shares every other segment. Search reads
// the current snapshot without a lock. Statistics (how many tools have a
// term, average field lengths) are summed over the segments at search
// time, so a change to one server needs no work on the others.
//
// # Filters
//
// A Filter keeps a search within what its caller may call: whole servers
// are skipped unread, and a per-tool check is asked only of the tools that
// would make the results. Scores do not depend on the filter: a tool ranks
// the same for everyone who may see it.
//
// # Files
//
//	analyze.go  words, stop words, stemming, synonyms
//	index.go    Index, Tool, Filter, Search; segments and snapshots
//
// testdata/corpus holds real tools/list output of published MCP servers and
// queries written as a user would ask, for quality_test.go; testdata/collect
// is how it was collected.
package search
