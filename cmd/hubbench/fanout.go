package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// fanoutURI is the resource every fan-out subscriber watches.
const fanoutURI = "bench://fanout"

// fanoutTimeout bounds the wait for one notification to reach everyone.
const fanoutTimeout = 30 * time.Second

// hubRef is a running hub process.
type hubRef struct {
	name  string
	addr  string
	c     *benchlab.Child
	stats *statsSource // nil when the hub exposes no runtime figures
}

func (h *hubRef) ws(path string) string   { return "ws://" + h.addr + path }
func (h *hubRef) http(path string) string { return "http://" + h.addr + path }

func pidsOf(hubs []*hubRef) []int {
	var out []int
	for _, h := range hubs {
		out = append(out, h.c.PID())
	}
	return out
}

func statsOf(hubs []*hubRef) []*statsSource {
	var out []*statsSource
	for _, h := range hubs {
		out = append(out, h.stats)
	}
	return out
}

// fanoutResult is one fan-out size in one setting. Figures are medians
// over the rounds.
type fanoutResult struct {
	setting             string // "1 instance", "2 instances", or the raw baseline's
	raw                 bool   // the raw baseline
	instances           int
	subs                int
	rounds              int
	p50, p99, max       time.Duration
	rate                float64 // notifications delivered per second
	delivered, expected int64
	cpu                 time.Duration
	mallocs             float64
	mallocsOK           bool
	split               benchlab.CPUSplit
	// Against the raw baseline of the same size: rate / raw rate and p99 /
	// raw p99, medians of the rounds' when alternated with the baseline's
	// (runFanoutPair), else against the baseline measured just before; 0
	// when there is none.
	rateRatio, p99Ratio float64
	alternated          bool
}

// cpuCell is the hubs' CPU per delivery, when enough time was measured for
// the 10 ms ticks of /proc to say.
func (f *fanoutResult) cpuCell() string {
	if !f.split.Enough() {
		return "-"
	}
	return cpuPerOp(f.cpu, f.delivered)
}

// deliveries records when each subscriber received the current round's
// notification. The server runs in this process, so the send time and the
// receipt times are read from one clock.
type deliveries struct {
	t0     time.Time
	round  atomic.Int64
	sentAt atomic.Int64 // ns since t0
	want   atomic.Int64
	got    atomic.Int64
	done   atomic.Pointer[chan struct{}]
	seen   []atomic.Int64 // the last round each subscriber received
	lat    []atomic.Int64 // its delivery latency in that round, ns
}

func newDeliveries(n int) *deliveries {
	return &deliveries{t0: time.Now(), seen: make([]atomic.Int64, n), lat: make([]atomic.Int64, n)}
}

// handler returns subscriber i's notification callback. It runs on the
// subscriber's read loop, one notification at a time.
func (d *deliveries) handler(i int) func(string, json.RawMessage) {
	return func(method string, _ json.RawMessage) {
		if method != mcp.NotificationResourceUpdated {
			return
		}
		now := time.Since(d.t0)
		r := d.round.Load()
		if d.seen[i].Load() == r {
			return
		}
		d.lat[i].Store(int64(now) - d.sentAt.Load())
		d.seen[i].Store(r)
		if d.got.Add(1) == d.want.Load() {
			close(*d.done.Load())
		}
	}
}

// send starts a round for the first n subscribers and sends the update
// with update.
func (d *deliveries) send(ctx context.Context, update func(context.Context), n int) <-chan struct{} {
	ch := make(chan struct{})
	d.done.Store(&ch)
	d.got.Store(0)
	d.want.Store(int64(n))
	d.round.Add(1)
	d.sentAt.Store(int64(time.Since(d.t0)))
	update(ctx)
	return ch
}

// collect returns the latencies of the subscribers [0, n) that received
// the current round.
func (d *deliveries) collect(n int) []time.Duration {
	r := d.round.Load()
	out := make([]time.Duration, 0, n)
	for i := range n {
		if d.seen[i].Load() == r {
			out = append(out, time.Duration(d.lat[i].Load()))
		}
	}
	return out
}

// fanoutServer is the MCP server whose resource is updated. It runs in this
// process and dials out to the hub like any server.
type fanoutServer struct {
	*mcp.Server
	cancel context.CancelFunc
	done   chan error
}

func startFanoutServer(ctx context.Context, url string) *fanoutServer {
	s := mcp.NewServer(mcp.Implementation{Name: "fanout", Version: "1.0.0"}, nil)
	s.AddResource(&mcp.Resource{URI: fanoutURI, Name: "fanout", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "x"}}}, nil
		})
	ctx, cancel := context.WithCancel(ctx)
	fs := &fanoutServer{Server: s, cancel: cancel, done: make(chan error, 1)}
	go func() { fs.done <- s.Dial(ctx, url, nil) }()
	return fs
}

func (fs *fanoutServer) stop() {
	fs.cancel()
	<-fs.done
}

// waitListed polls the hub until what lists says contains want.
func waitListed(ctx context.Context, h *hubRef, lists func(context.Context, *mcp.Client) ([]string, error), want string) error {
	c, err := mcp.Connect(ctx, h.ws("/mcp"), &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion, WebSocket: noKeepalive})
	if err != nil {
		return fmt.Errorf("%s: %w", h.name, err)
	}
	defer c.Close()
	return benchlab.Poll(ctx, h.c, func() error {
		names, err := lists(ctx, c)
		if err != nil {
			return err
		}
		if !slices.Contains(names, want) {
			return fmt.Errorf("%s does not list %s yet", h.name, want)
		}
		return nil
	})
}

func resourceURIs(ctx context.Context, c *mcp.Client) ([]string, error) {
	rs, err := c.AllResources(ctx)
	var out []string
	for _, r := range rs {
		out = append(out, r.URI)
	}
	return out, err
}

func toolNames(ctx context.Context, c *mcp.Client) ([]string, error) {
	ts, err := c.AllTools(ctx)
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out, err
}

// fanoutPath is what a fan-out is measured through: hubs with an MCP
// server whose resource is updated, or the raw fan-out server.
type fanoutPath struct {
	setting   string
	raw       bool
	instances int
	urls      []string // where subscribers connect, in turn
	pids      []int    // processes whose CPU is charged to the deliveries
	stats     []*statsSource
	update    func(context.Context) // sends one update
}

// hubFanout is the fan-out through hubs: the server dials the first, the
// subscribers are spread over all. stop ends the server.
func hubFanout(ctx context.Context, hubs []*hubRef) (p *fanoutPath, stop func(), err error) {
	setting := "1 instance"
	if len(hubs) > 1 {
		setting = fmt.Sprintf("%d instances", len(hubs))
	}
	srv := startFanoutServer(ctx, hubs[0].ws("/mcp/server?name=fanout"))
	for _, h := range hubs {
		if err := waitListed(ctx, h, resourceURIs, fanoutURI); err != nil {
			srv.stop()
			return nil, nil, err
		}
	}
	p = &fanoutPath{setting: setting, instances: len(hubs), pids: pidsOf(hubs), stats: statsOf(hubs),
		update: func(ctx context.Context) { srv.ResourceUpdated(ctx, fanoutURI) }}
	for _, h := range hubs {
		p.urls = append(p.urls, h.ws("/mcp"))
	}
	return p, srv.stop, nil
}

// subscribers are one path's fan-out clients, and the figures of the size
// being measured.
type subscribers struct {
	p          *fanoutPath
	d          *deliveries
	clients    []*mcp.Client
	subscribed int
	mt         meter
	first      time.Time     // of the size's first measured round
	res        *fanoutResult // of the size being measured
	p50s, p99s []time.Duration
	maxs       []time.Duration
	rates      []float64
}

// connectSubscribers connects n clients spread over the path's URLs; the
// caller closes them with closeAll. cpuAll reads the CPU time of every
// process of the run.
func connectSubscribers(ctx context.Context, p *fanoutPath, n int, cpuAll func() map[string]time.Duration, progress func(string)) (*subscribers, error) {
	s := &subscribers{p: p, d: newDeliveries(n), clients: make([]*mcp.Client, n),
		mt: meter{pids: p.pids, stats: p.stats, all: cpuAll}}
	progress(fmt.Sprintf("fan-out %s: connecting %s clients", p.setting, benchlab.FormatCount(int64(n))))
	err := forEach(ctx, n, 32, func(i int) error {
		c, err := mcp.Connect(ctx, p.urls[i%len(p.urls)], &mcp.ClientOptions{
			ProtocolVersion: mcp.LatestVersion, // resources/subscribe, on a session
			WebSocket:       noKeepalive,
			OnNotification:  s.d.handler(i),
		})
		s.clients[i] = c
		return err
	})
	if err != nil {
		s.closeAll(ctx, progress)
		return nil, fmt.Errorf("connecting subscribers: %w", err)
	}
	return s, nil
}

func (s *subscribers) closeAll(ctx context.Context, progress func(string)) {
	progress(fmt.Sprintf("fan-out %s: closing %s clients", s.p.setting, benchlab.FormatCount(int64(len(s.clients)))))
	_ = forEach(context.WithoutCancel(ctx), len(s.clients), 64, func(i int) error {
		if s.clients[i] != nil {
			_ = s.clients[i].Close()
		}
		return nil
	})
}

// subscribe subscribes the first size clients and starts the figures of
// that size.
func (s *subscribers) subscribe(ctx context.Context, cfg *config, size int) error {
	err := forEach(ctx, size-s.subscribed, 32, func(i int) error {
		return s.clients[s.subscribed+i].Subscribe(ctx, fanoutURI)
	})
	if err != nil {
		return fmt.Errorf("subscribing: %w", err)
	}
	s.subscribed = size
	p := s.p
	s.res = &fanoutResult{setting: p.setting, raw: p.raw, instances: p.instances, subs: size, rounds: cfg.fanoutRounds, mallocsOK: true}
	s.first, s.p50s, s.p99s, s.maxs, s.rates = time.Time{}, nil, nil, nil, nil
	return nil
}

// round sends one update to the subscribed clients and waits until every
// one has it (or fanoutTimeout passed); a warm-up round is not counted.
func (s *subscribers) round(ctx context.Context, cfg *config, warmup bool) error {
	size := s.subscribed
	if !warmup && s.first.IsZero() {
		s.first = time.Now()
		if cfg.fanoutStart != nil {
			cfg.fanoutStart()
		}
	}
	s.mt.start(ctx)
	began := time.Now()
	done := s.d.send(ctx, s.p.update, size)
	t := time.NewTimer(fanoutTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	lat := s.d.collect(size)
	if warmup {
		return nil
	}
	took := time.Since(began)
	r := s.mt.stop(ctx)
	res := s.res
	res.split.Add(r.all0, r.all1, took)
	res.cpu += r.cpu
	res.mallocs += r.mallocs
	res.mallocsOK = res.mallocsOK && r.mallocsOK
	res.delivered += int64(len(lat))
	res.expected += int64(size)
	if len(lat) == 0 {
		return errors.New("fan-out: no subscriber received the update")
	}
	sum := benchlab.Summarize(lat)
	s.p50s, s.p99s, s.maxs = append(s.p50s, sum.P50), append(s.p99s, sum.P99), append(s.maxs, sum.Max)
	s.rates = append(s.rates, float64(len(lat))/sum.Max.Seconds())
	return nil
}

// result ends the size measured: its figures are the medians of its
// rounds'.
func (s *subscribers) result() *fanoutResult {
	res := s.res
	res.p50, res.p99, res.max = benchlab.MedianDuration(s.p50s), benchlab.MedianDuration(s.p99s), benchlab.MedianDuration(s.maxs)
	res.rate = benchlab.Median(s.rates)
	return res
}

// runFanout connects max(sizes) clients spread over the path's URLs, then
// for each size subscribes that many and sends rounds of one update each,
// the next once the previous has reached everyone, after a warm-up.
//
// cpuAll reads the CPU time of every process of the run.
func runFanout(ctx context.Context, cfg *config, p *fanoutPath, sizes []int, cpuAll func() map[string]time.Duration, progress func(string)) ([]*fanoutResult, error) {
	s, err := connectSubscribers(ctx, p, slices.Max(sizes), cpuAll, progress)
	if err != nil {
		return nil, err
	}
	defer s.closeAll(ctx, progress)
	var results []*fanoutResult
	for _, size := range sizes {
		progress(fmt.Sprintf("fan-out %s: %s subscribers", p.setting, benchlab.FormatCount(int64(size))))
		if err := s.subscribe(ctx, cfg, size); err != nil {
			return nil, err
		}
		for round := -1; round < cfg.fanoutRounds; round++ {
			if cfg.fanoutUntil > 0 && round > 0 && time.Since(s.first) > cfg.fanoutUntil {
				break
			}
			if err := s.round(ctx, cfg, round < 0); err != nil {
				return nil, err
			}
		}
		results = append(results, s.result())
	}
	return results, nil
}

// runFanoutPair measures a fan-out setting and the raw baseline in
// alternating rounds, each on clients of its own, all connected at once
// (twice the subscribers: the caller checks that the open files limit
// allows it): for each size both subscribe, then each round updates one
// and then the other (which one first alternates), so that the machine's
// drift falls on both alike, as in the calls' cells. The setting's ratios
// to the baseline are the medians of the rounds' ratios.
func runFanoutPair(ctx context.Context, cfg *config, raw, hub *fanoutPath, sizes []int, cpuAll func() map[string]time.Duration, progress func(string)) (rawRes, hubRes []*fanoutResult, err error) {
	n := slices.Max(sizes)
	rs, err := connectSubscribers(ctx, raw, n, cpuAll, progress)
	if err != nil {
		return nil, nil, fmt.Errorf("raw fan-out: %w", err)
	}
	defer rs.closeAll(ctx, progress)
	hs, err := connectSubscribers(ctx, hub, n, cpuAll, progress)
	if err != nil {
		return nil, nil, err
	}
	defer hs.closeAll(ctx, progress)
	for _, size := range sizes {
		progress(fmt.Sprintf("fan-out %s and raw, alternating: %s subscribers", hub.setting, benchlab.FormatCount(int64(size))))
		for _, s := range []*subscribers{rs, hs} {
			if err := s.subscribe(ctx, cfg, size); err != nil {
				return nil, nil, err
			}
		}
		for round := -1; round < cfg.fanoutRounds; round++ {
			pair := []*subscribers{rs, hs}
			if round%2 != 0 {
				pair[0], pair[1] = hs, rs
			}
			for _, s := range pair {
				if err := s.round(ctx, cfg, round < 0); err != nil {
					return nil, nil, err
				}
			}
		}
		var rateRatios, p99Ratios []float64
		for i := range min(len(rs.rates), len(hs.rates)) {
			if rs.rates[i] > 0 && rs.p99s[i] > 0 {
				rateRatios = append(rateRatios, hs.rates[i]/rs.rates[i])
				p99Ratios = append(p99Ratios, float64(hs.p99s[i])/float64(rs.p99s[i]))
			}
		}
		r, h := rs.result(), hs.result()
		h.rateRatio, h.p99Ratio, h.alternated = benchlab.Median(rateRatios), benchlab.Median(p99Ratios), true
		rawRes, hubRes = append(rawRes, r), append(hubRes, h)
	}
	return rawRes, hubRes, nil
}

// settle waits until a process's RSS stops moving (less than 0.5% over
// half a second), for at most three seconds: the last connections' buffers
// and goroutines are then in place.
func settle(ctx context.Context, pid int) error {
	deadline := time.Now().Add(3 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var window []int64
	for time.Now().Before(deadline) {
		mem, err := benchlab.Memory(pid)
		if err != nil {
			return err
		}
		window = append(window, mem.RSS)
		if len(window) > 5 {
			window = window[1:]
			lo, hi := slices.Min(window), slices.Max(window)
			if float64(hi-lo) < 0.005*float64(hi) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// measureFanout sets a fan-out path up, measures it at every size and
// takes it down.
func measureFanout(ctx context.Context, cfg *config, sup *benchlab.Supervisor, setup func() (*fanoutPath, func(), error), progress func(string)) ([]*fanoutResult, error) {
	p, stop, err := setup()
	if err != nil {
		return nil, err
	}
	defer stop()
	return runFanout(ctx, cfg, p, cfg.fanoutSizes, sup.CPUByProcess, progress)
}

// measureFanoutPair sets a fan-out setting and the raw baseline up,
// measures them in alternating rounds at every size (runFanoutPair) and
// takes them down.
func measureFanoutPair(ctx context.Context, cfg *config, sup *benchlab.Supervisor, raw, hub func() (*fanoutPath, func(), error), progress func(string)) (rawRes, hubRes []*fanoutResult, err error) {
	rp, stopRaw, err := raw()
	if err != nil {
		return nil, nil, fmt.Errorf("raw fan-out: %w", err)
	}
	defer stopRaw()
	hp, stopHub, err := hub()
	if err != nil {
		return nil, nil, err
	}
	defer stopHub()
	return runFanoutPair(ctx, cfg, rp, hp, cfg.fanoutSizes, sup.CPUByProcess, progress)
}

// againstRaw sets each result's ratios to the raw baseline of its size,
// measured just before.
func againstRaw(results, raw []*fanoutResult) {
	for _, r := range results {
		for _, b := range raw {
			if b.subs == r.subs && b.rate > 0 && b.p99 > 0 {
				r.rateRatio = r.rate / b.rate
				r.p99Ratio = float64(r.p99) / float64(b.p99)
			}
		}
	}
}
