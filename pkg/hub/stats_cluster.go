package hub

import (
	"context"
	"encoding/json"
	"sort"
	"time"
)

// Statistics across instances. While someone watches, every instance
// publishes its summary once an interval on the broker's topicStats: its
// items' totals and window, its servers' per-interval counts, its
// connections and counters, and, when watched, its clients and its call
// log's new entries. No message travels per call. A summary also says what
// its instance's own subscribers watch: an instance that hears a summary
// with watchers wakes its loop and publishes its own, until it has heard
// none for remoteLinger intervals. Each instance keeps the latest summary of
// every other and adds them up when a client reads: counts and rates add,
// latency histograms (fixed buckets, the same everywhere) merge before
// percentiles are taken.
const topicStats = "stats"

// Bounds of what a summary carries, and of what a receiver keeps of one.
const (
	maxSummaryClients = 1000 // clients listed per instance; clientsTotal counts them all
	maxSummaryCalls   = 100  // call log entries per summary
)

// summary is one instance's share of the statistics at one tick, as
// published (short JSON names: it goes out every interval).
type summary struct {
	Instance   string    `json:"i"`
	At         time.Time `json:"at"`
	IntervalMs int64     `json:"iv"`
	Ticks      int64     `json:"tk"`          // intervals counted since its loop started
	Watch      uint32    `json:"w,omitempty"` // what its own subscribers and readers watch

	Items  []itemSummary   `json:"it,omitempty"`
	Series []serverSeries  `json:"se,omitempty"`
	Conns  map[string]int  `json:"cn,omitempty"` // open connections by "kind/transport"
	Counts instanceCounts  `json:"ct"`
	Calls  []*callEntry    `json:"ca,omitempty"` // its call log's entries since its last summary
	Client *clientsSummary `json:"cl,omitempty"`
}

// instanceCounts are an instance's gauges and counters since it started.
type instanceCounts struct {
	InFlight       int64 `json:"fl,omitempty"` // its clients' requests being served
	Serving        int   `json:"sv,omitempty"` // calls other instances routed to its servers
	RateLimited    int64 `json:"rl,omitempty"` // requests refused with -32004 by the rate limit
	SlowConsumers  int64 `json:"sc,omitempty"` // connections closed for not reading
	DroppedNotices int64 `json:"dn,omitempty"` // notifications not sent to clients that read too slowly
	CallsSkipped   int64 `json:"cs,omitempty"` // calls its call log left out (callLogPerTick)
}

// clientsSummary lists an instance's clients.
type clientsSummary struct {
	List  []clientDoc `json:"l"`
	Total int         `json:"n"`
}

// itemSummary is one item of one instance.
type itemSummary struct {
	Server       string           `json:"s,omitempty"` // "" for the hub's own refusals
	Method       string           `json:"m"`
	Name         string           `json:"n,omitempty"`
	Total        int64            `json:"t"`            // calls since the instance started
	ErrorsTotal  int64            `json:"et,omitempty"` // of which errors
	Outcomes     map[string]int64 `json:"o,omitempty"`  // in the window, by outcome name
	Hist         []int64          `json:"h,omitempty"`  // in the window: bucket, count, bucket, count...
	Recent       int64            `json:"rc,omitempty"` // calls in the last rateTicks intervals
	RecentErrors int64            `json:"re,omitempty"`
	Last         int64            `json:"lc,omitempty"` // calls in the last interval
	LastErrors   int64            `json:"le,omitempty"`
}

// serverSeries is one server's calls and errors per interval over the
// window, oldest first ("" for the hub's own refusals).
type serverSeries struct {
	Server string  `json:"s,omitempty"`
	Calls  []int64 `json:"c"`
	Errors []int64 `json:"e"`
}

// remoteSummary is the latest summary of another instance, and when it
// came.
type remoteSummary struct {
	sum *summary
	at  time.Time
}

// start subscribes to the other instances' summaries.
func (st *stats) start(ctx context.Context) error {
	sub, err := st.hub.broker.Subscribe(ctx, topicStats, st.onSummary)
	if err != nil {
		return err
	}
	st.sub = sub
	return nil
}

func (st *stats) close() {
	if st.sub != nil {
		st.sub.Close()
	}
}

// instanceSummary starts this instance's summary: what it knows of its
// connections and counters, its clients and its new call log entries as
// far as watched. The items are summarizeItems's.
func (st *stats) instanceSummary(now time.Time, local, want uint32) *summary {
	h := st.hub
	sum := &summary{Instance: h.id, At: now.UTC(), IntervalMs: st.interval.Milliseconds(), Watch: local, Conns: map[string]int{}}
	sessions := h.sessionList()
	for _, s := range sessions {
		sum.Conns[s.role()+"/"+s.transport()]++
	}
	h.mu.Lock()
	if n := len(h.replicas); n > 0 {
		sum.Conns["server/websocket"] = n
	}
	h.mu.Unlock()
	sum.Counts = instanceCounts{InFlight: h.inflight.Load(), Serving: h.cluster.serving(), CallsSkipped: st.log.skipped.Load()}
	if mfs, err := st.counters.Gather(); err == nil {
		for _, mf := range mfs {
			var v float64
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
			switch mf.GetName() {
			case "switchboard_rate_limited_total":
				sum.Counts.RateLimited = int64(v)
			case "switchboard_slow_consumers_dropped_total":
				sum.Counts.SlowConsumers = int64(v)
			case "switchboard_notifications_dropped_total":
				sum.Counts.DroppedNotices = int64(v)
			}
		}
	}
	if want&watchClients != 0 {
		list := clientsOf(h, sessions)
		sum.Client = &clientsSummary{Total: len(list), List: list[:min(len(list), maxSummaryClients)]}
	}
	if want&watchCalls != 0 {
		sum.Calls = st.log.unpublished(maxSummaryCalls)
	}
	return sum
}

// summarizeItems adds the items and the servers' series to sum, from the
// window at tick n. It runs under st.mu.
func (st *stats) summarizeItems(sum *summary, n int64, items map[itemKey]*counters) {
	sum.Ticks = n
	series := map[string]*serverSeries{}
	for k, c := range items {
		is := itemSummary{Server: k.server, Method: k.method, Name: k.name}
		for i := range c.outcomes {
			v := c.outcomes[i].Load()
			is.Total += v
			if i >= outcomeFirstCode {
				is.ErrorsTotal += v
			}
		}
		if w := st.windows[c]; w != nil && n > 0 {
			st.summarizeWindow(&is, w, n)
			ss := series[k.server]
			if ss == nil {
				ss = &serverSeries{Server: k.server, Calls: make([]int64, windowTicks), Errors: make([]int64, windowTicks)}
				series[k.server] = ss
			}
			for j := range windowTicks {
				t := n - windowTicks + 1 + int64(j)
				if t >= 1 {
					tc := w.ticks[t%windowTicks]
					ss.Calls[j] += tc.calls
					ss.Errors[j] += tc.errors
				}
			}
		}
		if is.Total > 0 {
			sum.Items = append(sum.Items, is)
		}
	}
	sort.Slice(sum.Items, func(i, j int) bool {
		a, b := &sum.Items[i], &sum.Items[j]
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		return a.Name < b.Name
	})
	for _, ss := range series {
		sum.Series = append(sum.Series, *ss)
	}
	sort.Slice(sum.Series, func(i, j int) bool { return sum.Series[i].Server < sum.Series[j].Server })
}

// summarizeWindow fills the window's figures of one item at tick n.
func (st *stats) summarizeWindow(is *itemSummary, w *itemWindow, n int64) {
	var out [numOutcomes]int64
	var hist [numBuckets]int64
	for i := range w.slots {
		for o, v := range w.slots[i].outcomes {
			out[o] += v
		}
		for b, v := range w.slots[i].hist {
			hist[b] += v
		}
	}
	for o, v := range out {
		if v > 0 {
			if is.Outcomes == nil {
				is.Outcomes = map[string]int64{}
			}
			is.Outcomes[outcomeName(o)] = v
		}
	}
	for b, v := range hist {
		if v > 0 {
			is.Hist = append(is.Hist, int64(b), v)
		}
	}
	for t := max(n-rateTicks+1, 1); t <= n; t++ {
		tc := w.ticks[t%windowTicks]
		is.Recent += tc.calls
		is.RecentErrors += tc.errors
	}
	last := w.ticks[n%windowTicks]
	is.Last, is.LastErrors = last.calls, last.errors
}

// publish sends this instance's summary to the others.
func (st *stats) publish(sum *summary) {
	h := st.hub
	b, err := json.Marshal(sum)
	if err != nil {
		h.log.Error("encoding the stats summary failed", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, st.interval)
	defer cancel()
	if err := h.broker.Publish(ctx, topicStats, b); err != nil {
		h.log.Debug("publishing the stats summary failed", "err", err)
	}
}

// announce tells the other instances at once what this one's watchers
// watch, when that grew between two ticks: the latest summary again, with
// the new watch bits (and without the call log entries it already sent).
// The loop wakes the instances that were not running.
func (st *stats) announce() {
	h := st.hub
	st.mu.Lock()
	latest, readAt := st.latest, st.readAt
	st.mu.Unlock()
	if latest == nil || !h.cluster.hasRemotes() {
		return
	}
	sum := *latest
	sum.Watch = latest.Watch | st.localWatch(time.Now(), readAt)
	sum.Calls = nil
	st.publish(&sum)
}

// onSummary keeps another instance's summary; one that says someone
// watches there makes this instance record what they watch from now on,
// and wakes its loop.
func (st *stats) onSummary(_ context.Context, _ string, payload []byte) {
	sum, ok := decodeSummary(payload)
	if !ok || sum.Instance == st.hub.id {
		return
	}
	st.rmu.Lock()
	if old := st.remote[sum.Instance]; old == nil || !sum.At.Before(old.sum.At) {
		st.remote[sum.Instance] = &remoteSummary{sum: sum, at: time.Now()}
	}
	st.rmu.Unlock()
	if st.log.addRemote(sum.Calls) {
		st.tell(uriCalls) // at once: the entries are already a summary's interval old
		st.tell(uriCallsArgs)
	}
	if w := sum.Watch; w != 0 {
		if w&watchArgs != 0 {
			w |= watchCalls
		}
		st.pending.Or(w)
		st.want.Or(w)
		if !st.isRunning() {
			st.hub.goOwned(st.wake)
		}
	}
}

// decodeSummary reads a summary another instance published; what it
// carries beyond the bounds is dropped.
func decodeSummary(payload []byte) (*summary, bool) {
	var sum summary
	if json.Unmarshal(payload, &sum) != nil || sum.Instance == "" || sum.IntervalMs <= 0 {
		return nil, false
	}
	if len(sum.Items) > 2*maxStatsItems {
		sum.Items = sum.Items[:2*maxStatsItems]
	}
	if len(sum.Calls) > maxSummaryCalls {
		sum.Calls = sum.Calls[len(sum.Calls)-maxSummaryCalls:]
	}
	calls := sum.Calls[:0]
	for _, e := range sum.Calls {
		if e != nil {
			e.Instance = sum.Instance
			calls = append(calls, e)
		}
	}
	sum.Calls = calls
	if sum.Client != nil && len(sum.Client.List) > maxSummaryClients {
		sum.Client.List = sum.Client.List[:maxSummaryClients]
	}
	for i := range sum.Items {
		if len(sum.Items[i].Hist)%2 != 0 {
			sum.Items[i].Hist = nil
		}
	}
	series := sum.Series[:0]
	for _, ss := range sum.Series {
		if len(ss.Calls) == windowTicks && len(ss.Errors) == windowTicks {
			series = append(series, ss)
		}
	}
	sum.Series = series
	return &sum, true
}

// fresh reports whether a summary that came at at still counts: within
// remoteLinger intervals, its sender's or ours, whichever is longer.
func (st *stats) fresh(rs *remoteSummary, now time.Time) bool {
	iv := max(st.interval, time.Duration(rs.sum.IntervalMs)*time.Millisecond)
	return now.Sub(rs.at) <= remoteLinger*iv
}

// remoteWatch returns what the other instances' subscribers watch, and
// forgets the summaries that are no longer fresh.
func (st *stats) remoteWatch(now time.Time) uint32 {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	var w uint32
	for id, rs := range st.remote {
		if !st.fresh(rs, now) {
			delete(st.remote, id)
			continue
		}
		w |= rs.sum.Watch
	}
	if w&watchArgs != 0 {
		w |= watchCalls
	}
	return w
}

// remoteSummaries returns the fresh summaries of the other instances,
// sorted by instance.
func (st *stats) remoteSummaries(now time.Time) []*summary {
	st.rmu.Lock()
	defer st.rmu.Unlock()
	out := make([]*summary, 0, len(st.remote))
	for _, rs := range st.remote {
		if st.fresh(rs, now) {
			out = append(out, rs.sum)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Instance < out[j].Instance })
	return out
}

// current returns this instance's latest summary, or, when the loop is not
// running (or has not ticked yet), one with totals only.
func (st *stats) current(now time.Time) *summary {
	st.mu.Lock()
	sum := st.latest
	st.mu.Unlock()
	if sum != nil {
		return sum
	}
	sum = st.instanceSummary(now, 0, 0)
	st.mu.Lock()
	st.summarizeItems(sum, 0, *st.rec.items.Load())
	st.mu.Unlock()
	return sum
}
