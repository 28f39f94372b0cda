package search

import (
	"cmp"
	"container/heap"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
)

// Tool is one tool to index: what a caller calls it by, its server, and
// the texts that say what it does.
type Tool struct {
	// Name is what a caller calls it by, unique in the index: the
	// aggregate's server__tool name, or a virtual server's effective name.
	Name   string
	Server string
	Title  string
	// Description and InputSchema are as clients see them; the schema's
	// parameter names and descriptions are indexed (two levels deep).
	Description string
	InputSchema json.RawMessage
}

// Result is one tool a search found, and how well it matched.
type Result struct {
	Tool  *Tool
	Score float64
}

// Filter says which tools a search may return: a principal never finds a
// tool it may not call. Either func may be nil, which allows all.
type Filter struct {
	// Server is asked once per server; false skips its tools unread.
	Server func(server string) bool
	// Tool is asked only of the tools that would make the results, best
	// first, until enough are allowed.
	Tool func(*Tool) bool
}

// Index is a tool-search index over servers' tools, ranked by BM25F.
// Searches read an immutable snapshot without locking; SetServer and
// RemoveServer build the next snapshot (one server's part anew, the rest
// shared) and swap it in, so a search sees a server's tools all or none.
// The zero value is not ready: use New.
type Index struct {
	mu  sync.Mutex // serialises writers
	cur atomic.Pointer[snapshot]
}

// New returns an empty index.
func New() *Index {
	x := &Index{}
	x.cur.Store(&snapshot{})
	return x
}

// snapshot is the index at one moment: one segment per server.
type snapshot struct {
	segs    []*segment // sorted by server
	docs    int
	lenSum  [numFields]int
	maxDocs int // the largest segment's tools: the size of a search's scratch
}

// segment is one server's tools, indexed: a small inverted index of its
// own, built when the server's tools change and shared by every snapshot
// after.
type segment struct {
	server string
	tools  []*Tool
	lens   [][numFields]uint16 // each tool's field lengths in terms
	post   map[string][]posting
	lenSum [numFields]int
}

// posting is one tool that has a term, and how often in each field.
type posting struct {
	doc uint32
	tf  [numFields]uint8
}

// The fields of a tool, each with its weight (how much a match there
// counts) and its length normalisation b (how much a long field is
// discounted: little for names, which are short and all alike).
type field int

const (
	fieldName field = iota
	fieldTitle
	fieldDescription
	fieldLead // the description's first sentence, which says what the tool does; the rest says how
	fieldParams
	fieldParamDescriptions
	fieldServer
	numFields
)

var (
	fieldWeight = [numFields]float64{3.0, 2.0, 1.5, 1.0, 0.7, 0.4, 2.5}
	fieldB      = [numFields]float64{0.3, 0.3, 0.75, 0.3, 0.5, 0.75, 0.0}
)

const (
	k1            = 2.0 // how soon more matches of a concept stop counting
	synonymWeight = 0.4 // a synonym's share of a query word's weight
	// idfPower damps rarity: with stop words gone a query has few words,
	// and a rare word that is incidental to the question ("disk" in "the
	// file on my disk") should not outweigh the common one that is its
	// point.
	idfPower = 0.5
	// maxQueryWords bounds the words of a query that count; the rest are
	// ignored.
	maxQueryWords = 32
)

// SetServer indexes a server's tools, replacing those it had. An empty
// list removes the server.
func (x *Index) SetServer(server string, tools []Tool) {
	var seg *segment
	if len(tools) > 0 {
		seg = newSegment(server, tools)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cur.Store(x.cur.Load().with(server, seg))
}

// RemoveServer drops a server's tools.
func (x *Index) RemoveServer(server string) { x.SetServer(server, nil) }

// Len returns how many tools are indexed.
func (x *Index) Len() int { return x.cur.Load().docs }

// with returns a snapshot with the server's segment replaced by seg (nil:
// removed).
func (s *snapshot) with(server string, seg *segment) *snapshot {
	segs := slices.DeleteFunc(slices.Clone(s.segs), func(g *segment) bool { return g.server == server })
	if seg != nil {
		i, _ := slices.BinarySearchFunc(segs, server, func(g *segment, name string) int { return cmp.Compare(g.server, name) })
		segs = slices.Insert(segs, i, seg)
	}
	n := &snapshot{segs: segs}
	for _, g := range segs {
		n.docs += len(g.tools)
		n.maxDocs = max(n.maxDocs, len(g.tools))
		for f := range numFields {
			n.lenSum[f] += g.lenSum[f]
		}
	}
	return n
}

// newSegment indexes one server's tools.
func newSegment(server string, tools []Tool) *segment {
	g := &segment{server: server, post: map[string][]posting{}, lens: make([][numFields]uint16, len(tools))}
	serverTerms := serverTerms(server)
	var buf []string
	in := interner{}
	counts := map[string][numFields]uint8{}
	for i := range tools {
		t := tools[i]
		g.tools = append(g.tools, &t)
		clear(counts)
		count := func(f field, ts []string) {
			g.lens[i][f] = uint16(min(len(ts), math.MaxUint16))
			g.lenSum[f] += len(ts)
			for _, term := range ts {
				if c := counts[term]; c[f] < math.MaxUint8 {
					c[f]++
					counts[term] = c
				}
			}
		}
		names, descs := schemaTexts(t.InputSchema)
		for f, text := range [...]string{fieldName: t.Name, fieldTitle: t.Title, fieldDescription: t.Description,
			fieldLead: leadSentence(t.Description), fieldParams: names, fieldParamDescriptions: descs} {
			buf = in.terms(buf[:0], text)
			count(field(f), buf)
		}
		count(fieldServer, serverTerms)
		for term, c := range counts {
			g.post[term] = append(g.post[term], posting{doc: uint32(i), tf: c})
		}
	}
	return g
}

// leadSentence returns the first sentence of a description: up to the
// first full stop, colon or line break after some words, or its first 30
// words.
func leadSentence(d string) string {
	d = strings.TrimSpace(d)
	words := 0
	for i := 0; i < len(d); i++ {
		switch c := d[i]; {
		case c == ' ':
			if words++; words >= 30 {
				return d[:i]
			}
		case c == '\n' && words > 0, (c == '.' || c == ':') && words > 2 && (i+1 == len(d) || d[i+1] == ' ' || d[i+1] == '\n'):
			return d[:i]
		}
	}
	return d
}

// serverTerms are the terms of a server's name, with the beginnings (five
// letters or more) of its longer words: people shorten server names
// ("mongo" for mongodb, "kuber" for kubernetes), and a server's name is
// short enough for every beginning of it to mean that server.
func serverTerms(server string) []string {
	ts := terms(nil, server)
	for _, t := range ts {
		for n := 5; n < len(t); n++ {
			ts = append(ts, t[:n])
		}
	}
	return ts
}

// schemaTexts returns the parameter names and descriptions of an input
// schema, each joined into one text, two levels deep (the parameters and
// the members of object or array parameters). It reads the schema in place,
// without decoding it: schemas are the bulk of a server's tools.
func schemaTexts(raw json.RawMessage) (names, descriptions string) {
	var n, d []byte
	var walk func(props []byte, depth int)
	walk = func(props []byte, depth int) {
		for name, p := range jsonrpc.Members(props) {
			n = append(append(n, name...), ' ')
			for k, v := range jsonrpc.Members(p) {
				switch string(k) {
				case "description":
					if s, ok := jsonrpc.Unquote(v); ok {
						d = append(append(d, s...), ' ')
					}
				case "properties":
					if depth > 0 {
						walk(v, depth-1)
					}
				case "items":
					if sub, ok := jsonrpc.Member(v, "properties"); ok && depth > 0 {
						walk(sub, depth-1)
					}
				}
			}
		}
	}
	if props, ok := jsonrpc.Member(raw, "properties"); ok {
		walk(props, 1)
	}
	return string(n), string(d)
}

// queryTerm is a term of a query: one of its own words (weight 1), or a
// synonym of one (less). concept is the index of the word it stands for: a
// word and its synonyms are one concept, whose matches in a tool are
// added up and saturated together, so a tool that says a thing two ways
// ("List/enumerate") does not count it twice.
type queryTerm struct {
	term    string
	weight  float64
	concept int
}

// analyzeQuery returns the query's terms and their synonyms, and how many
// concepts they make.
func analyzeQuery(q string) ([]queryTerm, int) {
	var out []queryTerm
	has := func(t string) bool { return slices.ContainsFunc(out, func(qt queryTerm) bool { return qt.term == t }) }
	for _, t := range terms(nil, q) {
		if len(out) == maxQueryWords {
			break // a search's memory grows with its words: a question has few
		}
		if !has(t) {
			out = append(out, queryTerm{t, 1, len(out)})
		}
	}
	n := len(out)
	for c := range n {
		for _, s := range synonyms[out[c].term] {
			if !has(s) {
				out = append(out, queryTerm{s, synonymWeight, c})
			}
		}
	}
	return out, n
}

// scratch is a search's working memory, pooled: a score per tool of the
// segment being scored, and the tools touched.
type scratch struct {
	acc     []float64
	touched []uint32
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

// Search returns up to limit tools that match the query best, best first,
// among those the filter allows. Ties are broken by name, so the order is
// the same on every instance.
func (x *Index) Search(query string, limit int, f Filter) []Result {
	s := x.cur.Load()
	qts, concepts := analyzeQuery(query)
	if limit <= 0 || len(qts) == 0 || s.docs == 0 {
		return nil
	}
	// Statistics over every tool, allowed or not, so that a tool scores
	// the same for everyone. A concept is as rare as its own word, or, when
	// no tool has that word, as its most common synonym.
	idf := make([]float64, concepts)
	synDF := make([]int, concepts) // the most common synonym's
	for i, qt := range qts {
		df := 0
		for _, g := range s.segs {
			df += len(g.post[qt.term])
		}
		if i < concepts {
			idf[i] = s.idf(df) // the query's own words come first
		} else {
			synDF[qt.concept] = max(synDF[qt.concept], df)
		}
	}
	for c := range idf {
		if idf[c] == 0 {
			idf[c] = s.idf(synDF[c])
		}
	}
	var norm [numFields]float64 // b/avglen per field
	for fl := range numFields {
		if s.lenSum[fl] > 0 {
			norm[fl] = fieldB[fl] * float64(s.docs) / float64(s.lenSum[fl])
		}
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	if need := s.maxDocs * concepts; len(sc.acc) < need {
		sc.acc = make([]float64, need)
	}
	top := &results{}
	for _, g := range s.segs {
		if f.Server != nil && !f.Server(g.server) {
			continue
		}
		sc.touched = sc.touched[:0]
		for _, qt := range qts {
			for _, p := range g.post[qt.term] {
				var tfn float64
				lens := &g.lens[p.doc]
				for fl := range numFields {
					if p.tf[fl] > 0 {
						tfn += fieldWeight[fl] * float64(p.tf[fl]) / (1 - fieldB[fl] + norm[fl]*float64(lens[fl]))
					}
				}
				row := sc.acc[int(p.doc)*concepts : int(p.doc+1)*concepts]
				if !slices.ContainsFunc(row, func(v float64) bool { return v != 0 }) {
					sc.touched = append(sc.touched, p.doc)
				}
				row[qt.concept] += qt.weight * tfn
			}
		}
		for _, d := range sc.touched {
			row := sc.acc[int(d)*concepts : int(d+1)*concepts]
			score := 0.0
			for c, tfn := range row {
				score += idf[c] * tfn * (k1 + 1) / (k1 + tfn)
				row[c] = 0
			}
			top.offer(Result{Tool: g.tools[d], Score: score}, limit, f.Tool)
		}
	}
	out := make([]Result, top.Len())
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(top).(Result)
	}
	return out
}

// idf is the rarity of a term that df of the snapshot's tools have,
// damped by idfPower.
func (s *snapshot) idf(df int) float64 {
	if df == 0 {
		return 0
	}
	return math.Pow(math.Log(1+(float64(s.docs)-float64(df)+0.5)/(float64(df)+0.5)), idfPower)
}

// results keeps the best results seen so far: a min-heap whose root is the
// worst of them.
type results []Result

// worse orders results: lower score, then later name.
func worse(a, b Result) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return a.Tool.Name > b.Tool.Name
}

func (r results) Len() int           { return len(r) }
func (r results) Less(i, j int) bool { return worse(r[i], r[j]) }
func (r results) Swap(i, j int)      { r[i], r[j] = r[j], r[i] }
func (r *results) Push(v any)        { *r = append(*r, v.(Result)) }
func (r *results) Pop() any {
	old := *r
	v := old[len(old)-1]
	*r = old[:len(old)-1]
	return v
}

// offer adds a candidate if it beats the worst kept and the filter allows
// it: the filter is asked only of candidates that would be kept.
func (r *results) offer(c Result, limit int, allow func(*Tool) bool) {
	if len(*r) >= limit && !worse((*r)[0], c) {
		return
	}
	if allow != nil && !allow(c.Tool) {
		return
	}
	if len(*r) < limit {
		heap.Push(r, c)
		return
	}
	(*r)[0] = c
	heap.Fix(r, 0)
}
