package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// profileResult is a CPU profile of the hub twin under the 64x16 load of
// one payload, with the twin's allocations per call.
type profileResult struct {
	payload   payload
	file      string
	rate      float64
	allocs    float64
	allocsOK  bool
	cpu       time.Duration // per call
	top, cum  string        // go tool pprof -top, by flat and by cumulative time
	toolError error
}

// runProfile starts the instrumented twin of the hub (pkg/hub in a hubbench
// process, with net/http/pprof), an MCP server behind it, and for each
// payload drives the 64x16 load while the twin records a CPU profile.
func runProfile(ctx context.Context, cfg *config, sup *supervisor, dir string, sh shape, progress func(string)) ([]*profileResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c, addr, err := sup.startRole(ctx, "hub twin", "-role", roleHub, "-addr", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	twin := &hubRef{name: "hub twin", addr: addr, c: c}
	if _, _, err := sup.startRole(ctx, "mcp server (twin)", "-role", roleMCP, "-url", twin.ws("/mcp/server?name=bench")); err != nil {
		return nil, err
	}
	if err := waitListed(ctx, twin, toolNames, echoTool); err != nil {
		return nil, err
	}
	twin.stats = findStats(ctx, addr)
	var out []*profileResult
	for _, pl := range cfg.payloads {
		progress(fmt.Sprintf("profile: hub twin, tools/call %s %s, %v", sh, pl.name, cfg.profile))
		r, err := profileOne(ctx, cfg, twin, dir, sh, pl)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func profileOne(ctx context.Context, cfg *config, twin *hubRef, dir string, sh shape, pl payload) (*profileResult, error) {
	conns, err := dialAll(ctx, hubDialer{url: twin.ws("/mcp"), params: callParams(pl.size)}, sh.conns)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)

	res := &profileResult{payload: pl, file: filepath.Join(dir, "hub-"+sh.String()+"-"+strings.ReplaceAll(pl.name, " ", "")+".pprof")}
	secs := int(cfg.profile / time.Second)
	type fetched struct {
		body []byte
		err  error
	}
	prof := make(chan fetched, 1)
	mt := meter{pids: []int{twin.c.PID()}, stats: []*statsSource{twin.stats}}
	var r reading
	// The profile starts as the window opens; the window outlasts it a
	// little, so that the whole profile sees the load.
	w, err := measure(ctx, conns, sh.inflight, cfg.warmup, time.Duration(secs)*time.Second+200*time.Millisecond, func(open bool) {
		if open {
			go func() {
				b, err := fetch(ctx, "http://"+twin.addr+"/debug/pprof/profile?seconds="+strconv.Itoa(secs))
				prof <- fetched{b, err}
			}()
			mt.start(ctx)
		} else {
			r = mt.stop(ctx)
		}
	})
	if err != nil {
		return nil, err
	}
	f := <-prof
	if f.err != nil {
		return nil, fmt.Errorf("CPU profile of the twin: %w", f.err)
	}
	if err := os.WriteFile(res.file, f.body, 0o644); err != nil {
		return nil, err
	}
	res.rate = w.rate()
	if n := w.calls(); n > 0 {
		res.cpu = r.cpu / time.Duration(n)
		if r.mallocsOK {
			res.allocs, res.allocsOK = r.mallocs/float64(n), true
		}
	}
	res.top, res.toolError = pprofTop(ctx, res.file, false)
	if res.toolError == nil {
		res.cum, res.toolError = pprofTop(ctx, res.file, true)
	}
	return res, nil
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
