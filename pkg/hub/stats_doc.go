package hub

import (
	"encoding/json"
	"math"
	"sort"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// statsDoc is the content of switchboard://stats: the whole cluster's
// traffic as the session may see it (docs/protocol.md describes it).
type statsDoc struct {
	Instance      string    `json:"instance"`
	At            time.Time `json:"at"`
	IntervalMs    int64     `json:"intervalMs"`
	WindowSeconds float64   `json:"windowSeconds"` // what window figures (calls, errors, outcomes, percentiles) cover
	Hub           figures   `json:"hub"`
	// Refused are the calls the hub answered itself, before routing them
	// (rate limited, forbidden, unknown tools); operators only, and in Hub.
	Refused   *figures         `json:"refused,omitempty"`
	Servers   []serverFigures  `json:"servers"`
	Instances []instanceFigure `json:"instances,omitempty"` // operators only
}

// figures are the traffic of the hub, a server or an item.
type figures struct {
	Total       int64            `json:"total"`       // calls since the instances started
	ErrorsTotal int64            `json:"errorsTotal"` // of which errors
	Calls       int64            `json:"calls"`       // in the window
	Errors      int64            `json:"errors"`      // in the window
	Outcomes    map[string]int64 `json:"outcomes"`    // in the window: "ok", "cancelled", each error code, "other"
	Rate        float64          `json:"rate"`        // calls/s over the last rateTicks intervals
	ErrorRate   float64          `json:"errorRate"`   // errors/s, the same way
	P50Ms       *float64         `json:"p50Ms"`       // latency percentiles over the window; null without calls
	P99Ms       *float64         `json:"p99Ms"`
	Last        lastFigures      `json:"last"`             // in the latest interval
	Series      *seriesDoc       `json:"series,omitempty"` // the hub's and each server's, when the session sees all of it
}

// lastFigures are the calls and errors of the latest interval.
type lastFigures struct {
	Calls  int64 `json:"calls"`
	Errors int64 `json:"errors"`
}

// seriesDoc holds calls and errors per interval over the window, oldest
// first.
type seriesDoc struct {
	Calls  []int64 `json:"calls"`
	Errors []int64 `json:"errors"`
}

type serverFigures struct {
	Name string `json:"name"`
	figures
	Items []itemFigures `json:"items"`
}

// itemFigures are one tool's (or prompt's, by name) or one method's.
type itemFigures struct {
	Method string `json:"method"`
	Name   string `json:"name,omitempty"`
	figures
}

// instanceFigure is one instance's connections and counters.
type instanceFigure struct {
	ID             string         `json:"id"`
	Self           bool           `json:"self"`
	At             time.Time      `json:"at"`
	Connections    map[string]int `json:"connections"` // by "kind/transport": client/websocket, dashboard/http, server/websocket...
	InFlight       int64          `json:"inFlight"`
	Serving        int            `json:"serving"`
	Rate           float64        `json:"rate"` // its clients' calls/s
	ErrorRate      float64        `json:"errorRate"`
	Total          int64          `json:"total"`
	RateLimited    int64          `json:"rateLimited"`
	SlowConsumers  int64          `json:"slowConsumers"`
	DroppedNotices int64          `json:"droppedNotices"`
}

// tally adds up figures: counts and rates add, histograms merge.
type tally struct {
	total, errorsTotal int64
	outcomes           [numOutcomes]int64
	hist               [numBuckets]int64
	rate, errorRate    float64
	last               lastFigures
	series             *seriesDoc
	noSeries           bool // some of it has no series: show none
}

// addItem adds one instance's item; rateSpan is the seconds its rates are
// averaged over.
func (t *tally) addItem(is *itemSummary, rateSpan float64, latency bool) {
	t.total += is.Total
	t.errorsTotal += is.ErrorsTotal
	for name, v := range is.Outcomes {
		if o := outcomeIndex(name); o >= 0 {
			t.outcomes[o] += v
		}
	}
	if latency {
		for i := 0; i+1 < len(is.Hist); i += 2 {
			if b := is.Hist[i]; b >= 0 && b < numBuckets {
				t.hist[b] += is.Hist[i+1]
			}
		}
	}
	if rateSpan > 0 {
		t.rate += float64(is.Recent) / rateSpan
		t.errorRate += float64(is.RecentErrors) / rateSpan
	}
	t.last.Calls += is.Last
	t.last.Errors += is.LastErrors
}

// add adds another tally (a server's to the hub's).
func (t *tally) add(o *tally, latency bool) {
	t.total += o.total
	t.errorsTotal += o.errorsTotal
	for i, v := range o.outcomes {
		t.outcomes[i] += v
	}
	if latency {
		for i, v := range o.hist {
			t.hist[i] += v
		}
	}
	t.rate += o.rate
	t.errorRate += o.errorRate
	t.last.Calls += o.last.Calls
	t.last.Errors += o.last.Errors
	t.addSeries(o.series, o.noSeries)
}

// addSeries adds a series; a missing one (nil with missing set) makes the
// sum unknown.
func (t *tally) addSeries(s *seriesDoc, missing bool) {
	if missing {
		t.noSeries, t.series = true, nil
	}
	if s == nil || t.noSeries {
		return
	}
	if t.series == nil {
		t.series = &seriesDoc{Calls: make([]int64, windowTicks), Errors: make([]int64, windowTicks)}
	}
	for i := range windowTicks {
		t.series.Calls[i] += s.Calls[i]
		t.series.Errors[i] += s.Errors[i]
	}
}

// outcomeIndex is outcomeName's inverse; -1 for a name it never gives.
func outcomeIndex(name string) int {
	for o := range numOutcomes {
		if outcomeName(o) == name {
			return o
		}
	}
	return -1
}

// figures renders a tally.
func (t *tally) figures(withSeries bool) figures {
	f := figures{Total: t.total, ErrorsTotal: t.errorsTotal, Outcomes: map[string]int64{}, Last: t.last,
		Rate: round3(t.rate), ErrorRate: round3(t.errorRate)}
	for o, v := range t.outcomes {
		if v > 0 {
			f.Outcomes[outcomeName(o)] = v
			f.Calls += v
			if o >= outcomeFirstCode {
				f.Errors += v
			}
		}
	}
	if p, ok := percentile(&t.hist, 0.5); ok {
		ms := round3(p / 1e6)
		f.P50Ms = &ms
	}
	if p, ok := percentile(&t.hist, 0.99); ok {
		ms := round3(p / 1e6)
		f.P99Ms = &ms
	}
	if withSeries && !t.noSeries {
		f.Series = t.series
		if f.Series == nil {
			f.Series = &seriesDoc{Calls: make([]int64, windowTicks), Errors: make([]int64, windowTicks)}
		}
	}
	return f
}

// round3 rounds to three decimals: documents need no more.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// rateSpan is the seconds a summary's rates are averaged over.
func rateSpan(sum *summary) float64 {
	return float64(min(sum.Ticks, rateTicks)) * float64(sum.IntervalMs) / 1000
}

// statsView decides what of the statistics a session sees: operators
// everything; a client the servers and items its token may use, and the
// per-interval series only when it may use everything.
type statsView struct {
	s        *session
	operator bool
	all      bool // sees every server and item
	sep      string
}

// statsViewOf returns what of the statistics s sees.
func (h *Hub) statsViewOf(s *session) statsView {
	operator := s.who.has(RoleDashboard)
	return statsView{s: s, operator: operator, all: operator || s.who.isAdmin() || len(s.who.toolPatterns()) == 0, sep: h.cfg.Separator}
}

// seesServer reports whether the session sees a server's figures ("" for
// the hub's own refusals: operators only).
func (sv statsView) seesServer(server string) bool {
	if server == "" {
		return sv.operator
	}
	return sv.all || sv.s.who.mayUseServer(server, sv.sep)
}

// seesItem reports whether the session sees an item: a restricted client
// sees the tools and prompts its patterns name, and its servers' other
// methods.
func (sv statsView) seesItem(is *itemSummary) bool {
	if !sv.seesServer(is.Server) {
		return false
	}
	if sv.all {
		return true
	}
	switch is.Method {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet:
		return is.Name != otherItem && matchAny(sv.s.who.toolPatterns(), is.Server+sv.sep+is.Name)
	}
	return true
}

// statsJSON returns switchboard://stats as the session may see it. The
// operators' document is built once per tick.
func (st *stats) statsJSON(s *session) ([]byte, error) {
	sv := st.hub.statsViewOf(s)
	if sv.operator {
		st.mu.Lock()
		cached := st.docCache
		st.mu.Unlock()
		if cached != nil {
			return cached, nil
		}
	}
	now := time.Now()
	own := st.current(now)
	b, err := json.Marshal(st.buildStats(sv, own, st.remoteSummaries(now)))
	if err != nil {
		return nil, err
	}
	if sv.operator {
		st.mu.Lock()
		if st.latest == own {
			st.docCache = b
		}
		st.mu.Unlock()
	}
	return b, nil
}

// buildStats adds up this instance's summary and the others'.
func (st *stats) buildStats(sv statsView, own *summary, remote []*summary) *statsDoc {
	h := st.hub
	doc := &statsDoc{Instance: h.id, At: own.At, IntervalMs: own.IntervalMs, Servers: []serverFigures{},
		WindowSeconds: float64(min(own.Ticks, windowTicks)) * float64(own.IntervalMs) / 1000}
	type serverTally struct {
		tally
		items map[itemKey]*tally
	}
	servers := map[string]*serverTally{}
	serverOf := func(name string) *serverTally {
		t := servers[name]
		if t == nil {
			t = &serverTally{items: map[itemKey]*tally{}}
			servers[name] = t
		}
		return t
	}
	for _, name := range h.reg.view().names {
		if sv.seesServer(name) {
			serverOf(name)
		}
	}
	var hub tally
	for _, sum := range append([]*summary{own}, remote...) {
		span := rateSpan(sum)
		var inst tally
		for i := range sum.Items {
			is := &sum.Items[i]
			inst.addItem(is, span, false)
			if !sv.seesItem(is) {
				continue
			}
			srv := serverOf(is.Server)
			k := itemKey{server: is.Server, method: is.Method, name: is.Name}
			it := srv.items[k]
			if it == nil {
				it = &tally{}
				srv.items[k] = it
			}
			it.addItem(is, span, true)
			srv.addItem(is, span, true)
		}
		if sv.all {
			for i := range sum.Series {
				ss := &sum.Series[i]
				srv := serverOf(ss.Server)
				srv.addSeries(&seriesDoc{Calls: ss.Calls, Errors: ss.Errors}, false)
			}
		}
		if sv.operator {
			doc.Instances = append(doc.Instances, instanceFigure{ID: sum.Instance, Self: sum == own, At: sum.At,
				Connections: sum.Conns, InFlight: sum.Counts.InFlight, Serving: sum.Counts.Serving,
				Rate: round3(inst.rate), ErrorRate: round3(inst.errorRate), Total: inst.total,
				RateLimited: sum.Counts.RateLimited, SlowConsumers: sum.Counts.SlowConsumers, DroppedNotices: sum.Counts.DroppedNotices})
		}
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		srv := servers[name]
		if !sv.all {
			srv.noSeries = true
		}
		if name == "" {
			f := srv.figures(sv.all)
			f.P50Ms, f.P99Ms = nil, nil // answered at once: not a latency
			doc.Refused = &f
			hub.add(&srv.tally, false)
			continue
		}
		hub.add(&srv.tally, true)
		sf := serverFigures{Name: name, figures: srv.figures(sv.all), Items: []itemFigures{}}
		for k, it := range srv.items {
			sf.Items = append(sf.Items, itemFigures{Method: k.method, Name: k.name, figures: it.figures(false)})
		}
		sort.Slice(sf.Items, func(i, j int) bool {
			a, b := sf.Items[i], sf.Items[j]
			if a.Method != b.Method {
				return a.Method < b.Method
			}
			return a.Name < b.Name
		})
		doc.Servers = append(doc.Servers, sf)
	}
	if !sv.all {
		hub.noSeries = true
	}
	// Refusals add to the hub's counts, not to its latency.
	doc.Hub = hub.figures(sv.all)
	return doc
}
