package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// profileResult is a CPU profile of one hub twin under the 64x16 load of
// one case, with the twin's CPU and allocations per call.
type profileResult struct {
	what      string // the case, and which twin when it has several
	payload   payload
	file      string
	allocFile string // the allocations made meanwhile (alloc_objects)
	rate      float64
	allocs    float64
	allocsOK  bool
	cpu       time.Duration // per call
	top, cum  string        // go tool pprof -top, by flat and by cumulative time
	toolError error
}

// profileCase is a load under which twins are profiled, each at once.
type profileCase struct {
	what    string
	payload payload
	twins   []*hubRef
	dial    func(params json.RawMessage) dialer
}

// runProfile starts the instrumented twins of the hub (`hub serve` in a
// hubbench process, with net/http/pprof): one alone with an MCP server
// behind it, and two sharing a redis-server with an MCP server behind the
// second. It drives the 64x16 load through each path (one instance at every
// payload, two instances, and Streamable HTTP answered as JSON and as SSE
// at 100 B, in a session and as stateless 2026-07-28 POSTs) while the twins record CPU profiles.
func runProfile(ctx context.Context, cfg *config, sup *benchlab.Supervisor, dir string, sh shape, progress func(string)) ([]*profileResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "hubbench-profile-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	twin := func(name, redisURL string) (*hubRef, error) {
		args := []string{"-role", roleHub, "-addr", "127.0.0.1:0"}
		if redisURL != "" {
			args = append(args, "-redis", redisURL)
		}
		c, addr, err := startRole(ctx, sup, name, args...)
		if err != nil {
			return nil, err
		}
		return &hubRef{name: name, addr: addr, c: c}, nil
	}
	solo, err := twin("hub twin", "")
	if err != nil {
		return nil, err
	}
	redisAddr, err := startRedis(sup, tmp)
	if err != nil {
		return nil, err
	}
	redisURL := "redis://" + redisAddr + "/0"
	twinA, err := twin("hub twin A", redisURL)
	if err != nil {
		return nil, err
	}
	twinB, err := twin("hub twin B", redisURL)
	if err != nil {
		return nil, err
	}
	for _, h := range []*hubRef{solo, twinB} {
		if _, _, err := startRole(ctx, sup, "mcp server ("+h.name+")", "-role", roleMCP, "-url", h.ws("/mcp/server?name=bench&era=session")); err != nil {
			return nil, err
		}
	}
	for _, h := range []*hubRef{solo, twinA} {
		if err := waitListed(ctx, h, toolNames, echoTool); err != nil {
			return nil, err
		}
	}
	for _, h := range []*hubRef{solo, twinA, twinB} {
		h.stats = findStats(ctx, h.addr)
	}
	var cases []profileCase
	for _, pl := range cfg.payloads {
		cases = append(cases, profileCase{what: epHub, payload: pl, twins: []*hubRef{solo},
			dial: func(p json.RawMessage) dialer { return hubDialer{url: solo.ws("/mcp"), params: p} }})
	}
	cases = append(cases,
		profileCase{what: epHub2, payload: payloads[0], twins: []*hubRef{twinA, twinB},
			dial: func(p json.RawMessage) dialer { return hubDialer{url: twinA.ws("/mcp"), params: p} }},
		profileCase{what: epHTTP, payload: payloads[0], twins: []*hubRef{solo},
			dial: func(p json.RawMessage) dialer { return leanHTTPDialer{url: solo.http("/mcp"), params: p} }},
		profileCase{what: epHTTPSSE, payload: payloads[0], twins: []*hubRef{solo},
			dial: func(p json.RawMessage) dialer {
				return leanHTTPDialer{url: solo.http("/mcp"), params: p, progress: true}
			}},
		profileCase{what: epHTTPModern, payload: payloads[0], twins: []*hubRef{solo},
			dial: func(p json.RawMessage) dialer {
				return leanHTTPDialer{url: solo.http("/mcp"), params: p, modern: true}
			}},
		profileCase{what: epHTTPModernSSE, payload: payloads[0], twins: []*hubRef{solo},
			dial: func(p json.RawMessage) dialer {
				return leanHTTPDialer{url: solo.http("/mcp"), params: p, progress: true, modern: true}
			}})
	if len(cfg.profilePaths) > 0 {
		cases = slices.DeleteFunc(cases, func(pc profileCase) bool { return !cfg.profiles(pc.what) })
	}
	var out []*profileResult
	if n := slices.Max(cfg.fanoutSizes); n > 0 && cfg.profiles("fan-out") {
		progress(fmt.Sprintf("profile: fan-out to %s on the hub twin, %v", benchlab.FormatCount(int64(n)), cfg.profile))
		r, err := profileFanout(ctx, cfg, sup, solo, dir, n, progress)
		if err != nil {
			return nil, fmt.Errorf("fan-out: %w", err)
		}
		out = append(out, r)
	}
	for _, pc := range cases {
		progress(fmt.Sprintf("profile: %s, tools/call %s %s, %v", pc.what, sh, pc.payload.name, cfg.profile))
		rs, err := profileOne(ctx, cfg, pc, dir, sh)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", pc.what, pc.payload.name, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// profiles reports whether the case named what is profiled.
func (cfg *config) profiles(what string) bool {
	if len(cfg.profilePaths) == 0 {
		return true
	}
	for _, p := range cfg.profilePaths {
		if strings.TrimSpace(p) == what {
			return true
		}
	}
	return false
}

// profileOne drives one case's load while each of its twins records a CPU
// profile.
func profileOne(ctx context.Context, cfg *config, pc profileCase, dir string, sh shape) ([]*profileResult, error) {
	conns, err := dialAll(ctx, pc.dial(callParams(pc.payload.size)), sh.conns)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)

	secs := int(cfg.profile / time.Second)
	type fetched struct {
		body []byte
		err  error
	}
	var results []*profileResult
	profs := make([]chan fetched, len(pc.twins))
	allocProfs := make([]chan fetched, len(pc.twins))
	meters := make([]meter, len(pc.twins))
	readings := make([]reading, len(pc.twins))
	for i, tw := range pc.twins {
		what, twin := pc.what+" "+sh.String(), ""
		if len(pc.twins) > 1 {
			what += ": " + tw.name
			twin = "-" + tw.name
		}
		slug := strings.NewReplacer(" ", "", "(", "", ")", "", ":", "-").Replace(pc.what + twin + "-" + sh.String() + "-" + pc.payload.name)
		results = append(results, &profileResult{what: what, payload: pc.payload,
			file: filepath.Join(dir, slug+".pprof"), allocFile: filepath.Join(dir, slug+".allocs.pprof")})
		profs[i] = make(chan fetched, 1)
		allocProfs[i] = make(chan fetched, 1)
		meters[i] = meter{pids: []int{tw.c.PID()}, stats: []*statsSource{tw.stats}}
	}
	// The profiles start as the window opens; the window outlasts them a
	// little, so that the whole profile sees the load.
	w, err := measure(ctx, conns, sh.inflight, cfg.warmup, time.Duration(secs)*time.Second+200*time.Millisecond, func(open bool) {
		for i, tw := range pc.twins {
			if open {
				go func() {
					b, err := fetch(ctx, "http://"+tw.addr+"/debug/pprof/profile?seconds="+strconv.Itoa(secs))
					profs[i] <- fetched{b, err}
				}()
				go func() {
					b, err := fetch(ctx, "http://"+tw.addr+"/debug/pprof/allocs?seconds="+strconv.Itoa(secs))
					allocProfs[i] <- fetched{b, err}
				}()
				meters[i].start(ctx)
			} else {
				readings[i] = meters[i].stop(ctx)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for i, res := range results {
		f := <-profs[i]
		if f.err != nil {
			return nil, fmt.Errorf("CPU profile of %s: %w", pc.twins[i].name, f.err)
		}
		if err := os.WriteFile(res.file, f.body, 0o644); err != nil {
			return nil, err
		}
		if a := <-allocProfs[i]; a.err == nil {
			if err := os.WriteFile(res.allocFile, a.body, 0o644); err != nil {
				return nil, err
			}
		} else {
			res.allocFile = ""
		}
		res.rate = w.rate()
		if n := w.calls(); n > 0 {
			res.cpu = readings[i].cpu / time.Duration(n)
			if readings[i].mallocsOK {
				res.allocs, res.allocsOK = readings[i].mallocs/float64(n), true
			}
		}
		res.top, res.toolError = pprofTop(ctx, res.file, false)
		if res.toolError == nil {
			res.cum, res.toolError = pprofTop(ctx, res.file, true)
		}
	}
	return results, nil
}

func fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// pprofTop runs go tool pprof -top on a profile: the 15 costliest functions
// by flat time, or by cumulative time.
func pprofTop(ctx context.Context, file string, cum bool) (string, error) {
	args := []string{"tool", "pprof", "-top", "-nodecount=15"}
	if cum {
		args = append(args, "-cum")
	}
	out, err := exec.CommandContext(ctx, "go", append(args, file)...).Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// heading names the profile with its figures.
func (p *profileResult) heading() string {
	allocs := "n/a"
	if p.allocsOK {
		allocs = benchlab.FormatPerOp(p.allocs)
	}
	return fmt.Sprintf("%s, %s: %s, CPU %s/call, %s allocs/call", p.what, p.payload.name, benchlab.FormatRate(p.rate), benchlab.FormatDuration(p.cpu), allocs)
}

// profileFanout profiles the twin while it fans updates out to n
// subscribers, round after round, for the length of the profile.
func profileFanout(ctx context.Context, cfg *config, sup *benchlab.Supervisor, twin *hubRef, dir string, n int, progress func(string)) (*profileResult, error) {
	p, stop, err := hubFanout(ctx, []*hubRef{twin})
	if err != nil {
		return nil, err
	}
	defer stop()
	res := &profileResult{what: "fan-out, 1 instance", payload: payload{name: benchlab.FormatCount(int64(n)) + " subs"},
		file: filepath.Join(dir, fmt.Sprintf("fanout-%d.pprof", n)), allocFile: filepath.Join(dir, fmt.Sprintf("fanout-%d.allocs.pprof", n))}
	secs := int(cfg.profile / time.Second)
	type fetched struct {
		body []byte
		err  error
	}
	prof, allocs := make(chan fetched, 1), make(chan fetched, 1)
	mt := meter{pids: []int{twin.c.PID()}, stats: []*statsSource{twin.stats}}
	// Enough rounds to outlast the profile: the measured run of runFanout,
	// with the profile taken meanwhile.
	pcfg := *cfg
	pcfg.fanoutRounds = 1000
	pcfg.fanoutUntil = time.Duration(secs)*time.Second + 200*time.Millisecond
	pcfg.fanoutStart = func() {
		go func() {
			b, err := fetch(ctx, "http://"+twin.addr+"/debug/pprof/profile?seconds="+strconv.Itoa(secs))
			prof <- fetched{b, err}
		}()
		go func() {
			b, err := fetch(ctx, "http://"+twin.addr+"/debug/pprof/allocs?seconds="+strconv.Itoa(secs))
			allocs <- fetched{b, err}
		}()
		mt.start(ctx)
	}
	results, err := runFanout(ctx, &pcfg, p, []int{n}, nil, progress)
	if err != nil {
		return nil, err
	}
	r := mt.stop(ctx)
	delivered := results[0].delivered
	f := <-prof
	if f.err != nil {
		return nil, f.err
	}
	if err := os.WriteFile(res.file, f.body, 0o644); err != nil {
		return nil, err
	}
	if a := <-allocs; a.err == nil {
		if err := os.WriteFile(res.allocFile, a.body, 0o644); err != nil {
			return nil, err
		}
	} else {
		res.allocFile = ""
	}
	res.rate = results[0].rate
	if delivered > 0 {
		res.cpu = r.cpu / time.Duration(delivered)
		if r.mallocsOK {
			res.allocs, res.allocsOK = r.mallocs/float64(delivered), true
		}
	}
	res.top, res.toolError = pprofTop(ctx, res.file, false)
	if res.toolError == nil {
		res.cum, res.toolError = pprofTop(ctx, res.file, true)
	}
	return res, nil
}
