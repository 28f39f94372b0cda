// Package search is the hub's tool search: an index of the tools of every
// server that answers a few words ("open a ticket for this bug") with the
// tools that do it, best first, without a network or a model at run time.
//
// # Ranking
//
// BM25F over seven fields of each tool, each with its weight: the name
// (split at case changes, '_', '-' and '.'), the title, the description, its
// first sentence (which says what the tool does; the rest often says how),
// the input schema's parameter names and their descriptions (two levels
// deep), and the server's name (with the beginnings of its longer words, so
// "mongo" finds mongodb). A tool's counts of a term are combined over the
// fields, each discounted by the field's length against the average (little
// for names, more for descriptions), then saturated (k1) and weighed by the
// term's rarity over every tool indexed, damped (idf^0.5: a rare word that
// is incidental to a question should not outweigh the common one that is
// its point).
//
// Words are lowered, stop words and fillers dropped and plurals, -ing and
// -ed reduced (analyze.go). A query word also matches the words of its
// synonym groups (find and search, repo and repository) at 0.4 of its
// weight; a word and its synonyms are one concept, whose matches in a tool
// are added up before they are saturated, as Lucene's SynonymQuery does,
// so a tool that says a thing two ways ("List/enumerate") does not count
// it twice.
//
// # Updates and readers
//
// Each server's tools are one segment, a small inverted index of its own:
// SetServer builds it (a server with 500 tools well within 50 ms) and
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
// testdata/corpus holds real tools/list output of published MCP servers
// (its README names each, with its licence) and queries written as a user
// would ask, for quality_test.go, which also checks that a filtered search
// never returns a refused tool; bench_test.go measures searches over 10,000
// tools and a server of 500 joining them; testdata/collect is how the
// corpus was collected.
package search
