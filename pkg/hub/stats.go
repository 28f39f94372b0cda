package hub

import (
	"context"
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Traffic statistics: what switchboard://stats, switchboard://calls and
// switchboard://clients show.
//
// Every routed call a client of this instance makes is recorded as it ends
// (observe, from forward; refused, for a call the hub refused before
// routing it): two atomic adds on the counters of its item (server, method,
// tool or prompt name), found in a copy-on-write map with neither a lock nor
// an allocation. Nothing else happens per call unless someone watches the
// call log.
//
// While someone watches (a subscription to one of the resources, a read in
// the last readLinger intervals, or another instance whose summary says it
// has watchers), a loop wakes every StatsInterval: it turns the counters
// into a sliding window (per-interval counts for rates and charts, slots of
// ten intervals for latency histograms and outcomes), builds this
// instance's summary, publishes it for the other instances
// (stats_cluster.go) and tells the local subscribers. When nobody watches
// it stops and frees the window: the counters alone remain.

// Watch bits: what someone watches, here or on another instance.
const (
	watchStats   uint32 = 1 << iota // switchboard://stats
	watchCalls                      // switchboard://calls
	watchArgs                       // switchboard://calls?arguments=1: the call log with arguments
	watchClients                    // switchboard://clients
)

// The sliding window, in intervals (StatsInterval, 1 s by default).
const (
	windowTicks  = 60 // per-interval counts kept: the charts' span
	slotTicks    = 10 // intervals per slot of histograms and outcomes
	numSlots     = windowTicks / slotTicks
	rateTicks    = 5  // intervals a rate is averaged over
	readLinger   = 10 // intervals a read keeps the loop running
	remoteLinger = 3  // intervals another instance's watchers count after its last summary
)

// maxStatsItems bounds the items counted on one instance; calls to items
// beyond are counted under otherItem of their server and method.
const maxStatsItems = 10_000

// otherItem names the items counted together once maxStatsItems is reached.
const otherItem = "(other)"

// outcomeCodes are the error codes counted one by one; any other code
// counts as outcomeOther.
var outcomeCodes = [...]jsonrpc.Code{
	mcp.CodeConnectionClosed, mcp.CodeRequestTimeout, mcp.CodeResourceNotFound, mcp.CodeForbidden, mcp.CodeRateLimited,
	jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams, jsonrpc.CodeInternalError,
}

// Outcomes of a call: ok, cancelled by its client (not an error), or an
// error by its code.
const (
	outcomeOK        = 0
	outcomeCancelled = 1
	outcomeFirstCode = 2
	outcomeOther     = outcomeFirstCode + len(outcomeCodes)
	numOutcomes      = outcomeOther + 1
)

// outcomeOf returns the outcome index of a call that ended with err.
func outcomeOf(err error) int {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, context.Canceled):
		return outcomeCancelled
	}
	code := jsonrpc.CodeOf(err)
	for i, c := range outcomeCodes {
		if c == code {
			return outcomeFirstCode + i
		}
	}
	return outcomeOther
}

// outcomeName names an outcome in the documents: "ok", "cancelled", the
// code in decimal, or "other".
func outcomeName(i int) string {
	switch {
	case i == outcomeOK:
		return "ok"
	case i == outcomeCancelled:
		return "cancelled"
	case i < outcomeOther:
		return strconv.Itoa(int(outcomeCodes[i-outcomeFirstCode]))
	}
	return "other"
}

// Latency histograms have fixed buckets, the same on every instance, so
// that they add up across instances: everything under 2^14 ns (16 µs) in the
// first, then four buckets per doubling up to 2^36 ns (69 s), then the rest.
const (
	histMinShift = 14
	histOctaves  = 22
	histPerOct   = 4
	numBuckets   = 1 + histOctaves*histPerOct + 1
)

// bucketOf returns the histogram bucket of a duration.
func bucketOf(d time.Duration) int {
	if d < 1<<histMinShift {
		return 0
	}
	ns := uint64(d)
	oct := bits.Len64(ns) - 1
	if oct >= histMinShift+histOctaves {
		return numBuckets - 1
	}
	sub := int(ns>>(oct-2)) & (histPerOct - 1)
	return 1 + (oct-histMinShift)*histPerOct + sub
}

// bucketBounds returns the durations, in ns, a bucket spans; the last one
// has no upper bound and returns its lower bound twice.
func bucketBounds(b int) (lo, hi float64) {
	switch {
	case b <= 0:
		return 0, 1 << histMinShift
	case b >= numBuckets-1:
		top := float64(uint64(1) << (histMinShift + histOctaves))
		return top, top
	}
	oct := (b-1)/histPerOct + histMinShift
	sub := float64((b - 1) % histPerOct)
	base := float64(uint64(1) << oct)
	return base * (1 + sub/histPerOct), base * (1 + (sub+1)/histPerOct)
}

// percentile estimates the q-quantile (0 < q <= 1) of a histogram, in ns,
// interpolating within its bucket; false when it is empty.
func percentile(hist *[numBuckets]int64, q float64) (float64, bool) {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return 0, false
	}
	rank := int64(q*float64(n) + 0.999999) // the nearest rank, rounded up
	rank = min(max(rank, 1), n)
	var seen int64
	for b, c := range hist {
		if c == 0 || seen+c < rank {
			seen += c
			continue
		}
		lo, hi := bucketBounds(b)
		return lo + (hi-lo)*float64(rank-seen)/float64(c), true
	}
	return 0, false // not reached
}

// itemKey names what calls are counted by: a server's tool or prompt (by
// the server's own name for it), or one of its other methods. The hub's own
// refusals have no server.
type itemKey struct{ server, method, name string }

// counters are one item's figures since the instance started, added to
// atomically from whichever goroutine a call ends on.
type counters struct {
	outcomes [numOutcomes]atomic.Int64
	hist     [numBuckets]atomic.Int64
}

// recorder finds the counters of an item. Readers load an immutable map;
// a new item copies it under mu, once.
type recorder struct {
	mu    sync.Mutex
	items atomic.Pointer[map[itemKey]*counters]
}

func newRecorder() *recorder {
	r := &recorder{}
	r.items.Store(&map[itemKey]*counters{})
	return r
}

// get returns the counters of k, made on first use.
func (r *recorder) get(k itemKey) *counters {
	if c := (*r.items.Load())[k]; c != nil {
		return c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.items.Load()
	if c := old[k]; c != nil {
		return c
	}
	if len(old) >= maxStatsItems && k.name != otherItem {
		k.name = otherItem
		if c := old[k]; c != nil {
			return c
		}
	}
	m := make(map[itemKey]*counters, len(old)+1)
	for key, c := range old {
		m[key] = c
	}
	c := &counters{}
	m[k] = c
	r.items.Store(&m)
	return c
}

// stats is an instance's traffic statistics: the counters, the window the
// loop keeps while someone watches, what the other instances sent, and the
// call log.
type stats struct {
	hub      *Hub
	rec      *recorder
	interval time.Duration
	want     atomic.Uint32 // watch bits in effect, here or elsewhere: what the hot path records
	pending  atomic.Uint32 // watch bits of watchers that came since the last tick began
	log      callLog
	counters *prometheus.Registry // the hub's counters of refusals and drops, read at each tick
	sub      pubsub.Subscription

	mu       sync.Mutex // guards what follows; a leaf
	running  bool
	gen      uint64 // counts the loop's starts: a loop of an older one stops
	tickNo   int64  // intervals since the loop started; 0 is the baseline
	windows  map[*counters]*itemWindow
	readAt   [numWatchBits]time.Time // when each watch bit's resource was last read here
	latest   *summary                // this instance's, built at the last tick
	docCache []byte                  // the operators' switchboard://stats of this tick
	clientFP uint64                  // of the last switchboard://clients told

	rmu    sync.Mutex // guards remote; a leaf
	remote map[string]*remoteSummary
}

const numWatchBits = 4

func newStats(h *Hub) *stats {
	st := &stats{hub: h, rec: newRecorder(), interval: h.cfg.StatsInterval, remote: map[string]*remoteSummary{},
		counters: prometheus.NewRegistry()}
	st.counters.MustRegister(h.metrics.rateLimited, h.metrics.slowConsumers, h.metrics.dropped)
	h.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_stats_watched",
		Help: "1 while someone watches switchboard://stats, clients or calls, here or on another instance, and the hub keeps their window.",
	}, func() float64 {
		if st.isRunning() {
			return 1
		}
		return 0
	}))
	return st
}

// observe records a routed call of a client of this instance as it ends:
// its item's outcome and latency and, while someone watches the call log,
// an entry.
func (st *stats) observe(ctx context.Context, t *target, c caller, method string, start time.Time, raw json.RawMessage, err error) {
	d := time.Since(start)
	ctr := st.rec.get(itemKey{server: t.server, method: method, name: t.item})
	o := outcomeOf(err)
	ctr.outcomes[o].Add(1)
	ctr.hist[bucketOf(d)].Add(1)
	if want := st.want.Load(); want&watchCalls != 0 {
		st.logCall(want, st.hub.tracing.TraceID(ctx), t, c, method, start, d, raw, err, o)
	}
}

// refused records a call the hub answered without routing it: over the
// rate limit, forbidden, for an unknown tool.
func (st *stats) refused(ctx context.Context, s *session, req *jsonrpc.Request, err error) {
	st.hub.auditRefused(s, req, err)
	o := outcomeOf(err)
	st.rec.get(itemKey{method: req.Method}).outcomes[o].Add(1)
	if st.want.Load()&watchCalls != 0 {
		st.logRefused(st.hub.tracing.TraceID(ctx), s, req, err, o)
	}
}

// itemWindow is one item's share of the sliding window.
type itemWindow struct {
	outcomes [numOutcomes]int64 // the counters at the last tick
	hist     [numBuckets]int64
	ticks    [windowTicks]tickCount // by tick number modulo windowTicks
	slots    [numSlots]windowSlot   // by tick number / slotTicks modulo numSlots
}

// tickCount is what one item did in one interval.
type tickCount struct{ calls, errors int64 }

// windowSlot is what one item did in slotTicks intervals.
type windowSlot struct {
	outcomes [numOutcomes]int64
	hist     [numBuckets]int64
}

// advance takes the counters' change since the last tick into tick n.
func (w *itemWindow) advance(c *counters, n int64) {
	var tc tickCount
	slot := &w.slots[(n/slotTicks)%numSlots]
	if n%slotTicks == 0 {
		*slot = windowSlot{}
	}
	for i := range c.outcomes {
		cur := c.outcomes[i].Load()
		d := cur - w.outcomes[i]
		w.outcomes[i] = cur
		if d == 0 {
			continue
		}
		slot.outcomes[i] += d
		tc.calls += d
		if i >= outcomeFirstCode {
			tc.errors += d
		}
	}
	for i := range c.hist {
		cur := c.hist[i].Load()
		if d := cur - w.hist[i]; d != 0 {
			slot.hist[i] += d
			w.hist[i] = cur
		}
	}
	w.ticks[n%windowTicks] = tc
}

// baseline takes the counters as they are, without counting them.
func (w *itemWindow) baseline(c *counters) {
	for i := range c.outcomes {
		w.outcomes[i] = c.outcomes[i].Load()
	}
	for i := range c.hist {
		w.hist[i] = c.hist[i].Load()
	}
}

// wake starts the loop if it is not running. Its first tick is taken at
// once, on this goroutine, so that what a reader gets right away is
// current.
func (st *stats) wake() {
	st.mu.Lock()
	if st.running {
		st.mu.Unlock()
		return
	}
	st.running = true
	st.gen++
	gen := st.gen
	st.tickNo = 0
	st.windows = map[*counters]*itemWindow{}
	st.mu.Unlock()
	if !st.tick(gen, time.Now()) {
		return
	}
	if !st.hub.goOwned(func() { st.loop(gen) }) {
		st.stop(gen)
	}
}

// watched notes that a resource of the hub's was read or subscribed to:
// the loop runs while someone watches it. A read keeps it running for
// readLinger intervals.
func (st *stats) watched(uri string, read bool) {
	bit := watchBit(uri)
	if bit == 0 {
		return
	}
	if read {
		st.mu.Lock()
		st.readAt[bits.TrailingZeros32(bit)] = time.Now()
		st.mu.Unlock()
	}
	if bit == watchArgs {
		bit |= watchCalls
	}
	// Calls record what it needs from now on, not from the next tick,
	// which may have looked before this watcher came (pending); the other
	// instances hear of it at once too.
	st.pending.Or(bit)
	if old := st.want.Or(bit); old&bit != bit {
		st.announce()
	}
	st.wake()
}

// watchBit returns the watch bit of one of the hub's resources; 0 for
// those the loop does not serve.
func watchBit(uri string) uint32 {
	switch uri {
	case uriStats:
		return watchStats
	case uriCalls:
		return watchCalls
	case uriCallsArgs:
		return watchArgs
	case uriClients:
		return watchClients
	}
	return 0
}

// isRunning reports whether the loop runs.
func (st *stats) isRunning() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.running
}

// stop stops the loop of generation gen, if it is the current one, and
// frees the window.
func (st *stats) stop(gen uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gen != gen || !st.running {
		return
	}
	st.running, st.windows, st.latest, st.docCache = false, nil, nil, nil
	st.want.Store(0)
}

// loop ticks every interval while someone watches. Each wait starts after
// the previous tick ended, so that ticks never come closer than the
// interval, however late one was.
func (st *stats) loop(gen uint64) {
	h := st.hub
	timer := time.NewTimer(st.interval)
	defer timer.Stop()
	for {
		select {
		case <-h.ctx.Done():
			st.stop(gen)
			return
		case <-timer.C:
		}
		if !st.tick(gen, time.Now()) {
			return
		}
		timer.Reset(st.interval)
	}
}

// localWatch returns the watch bits of this instance's subscribers and
// recent readers.
func (st *stats) localWatch(now time.Time, readAt [numWatchBits]time.Time) uint32 {
	var w uint32
	for _, uri := range []string{uriStats, uriCalls, uriCallsArgs, uriClients} {
		bit := watchBit(uri)
		if st.hub.subs.hasLocal(uri) || now.Sub(readAt[bits.TrailingZeros32(bit)]) < readLinger*st.interval {
			w |= bit
		}
	}
	if w&watchArgs != 0 {
		w |= watchCalls
	}
	return w
}

// subscribedTo reports whether a session subscribes to uri.
func (s *subscriptions) subscribedTo(ss *session, uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.bySession[ss][uri]
	return ok
}

// hasLocal reports whether a session of this instance subscribes to uri.
func (s *subscriptions) hasLocal(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.local[uri]) > 0
}

// tick advances the window, builds this instance's summary, publishes it
// and tells the subscribers. It reports false, having stopped, when nobody
// watches any more, here or elsewhere, or when a newer loop took over.
func (st *stats) tick(gen uint64, now time.Time) bool {
	h := st.hub
	st.mu.Lock()
	current, readAt := st.gen == gen && st.running, st.readAt
	st.mu.Unlock()
	if !current {
		return false
	}
	pending := st.pending.Swap(0)
	local := st.localWatch(now, readAt)
	remote := st.remoteWatch(now)
	if local|remote|pending == 0 {
		st.stop(gen)
		return false
	}
	want := local | remote | pending
	st.want.Store(want)
	st.want.Or(st.pending.Load())               // a watcher that came meanwhile keeps its bits
	sum := st.instanceSummary(now, local, want) // takes the hub's locks: not under st.mu

	st.mu.Lock()
	if st.gen != gen || !st.running {
		st.mu.Unlock()
		return false
	}
	n := st.tickNo
	items := *st.rec.items.Load()
	for _, c := range items {
		w := st.windows[c]
		switch {
		case w == nil && n == 0:
			w = &itemWindow{}
			w.baseline(c)
			st.windows[c] = w
			continue
		case w == nil: // new since the baseline: all its calls are in this interval
			w = &itemWindow{}
			st.windows[c] = w
		case n == 0:
			continue
		}
		w.advance(c, n)
	}
	st.summarizeItems(sum, n, items)
	st.latest, st.docCache = sum, nil
	st.tickNo++
	st.mu.Unlock()
	st.log.refill()

	if h.cluster.hasRemotes() {
		st.publish(sum)
	}
	if local&watchStats != 0 {
		st.tell(uriStats)
	}
	if local&watchCalls != 0 && st.log.changed() {
		st.tell(uriCalls)
		st.tell(uriCallsArgs)
	}
	if local&watchClients != 0 && st.clientsChanged() {
		st.tell(uriClients)
	}
	return true
}

// tell tells the local subscribers of uri that it changed.
func (st *stats) tell(uri string) {
	st.hub.subs.deliverLocal(uri, encodeNotification(mcp.NotificationResourceUpdated, &mcp.ResourceUpdatedParams{URI: uri}))
}
