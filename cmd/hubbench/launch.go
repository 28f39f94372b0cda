package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
)

// The processes of a run, as children of the lab's supervisor: bin/hub,
// built from this tree; hubbench itself in its roles (roles.go); and
// redis-server.

// hubListening matches the hub's log line announcing its address.
var hubListening = regexp.MustCompile(`msg="switchboard listening".*\baddr=(\S+)`)

// roleReady matches the line a hubbench role prints once it listens.
var roleReady = regexp.MustCompile(`^hubbench: ready addr=(\S+)`)

// startHub starts bin/hub on a free loopback port, with redisURL when set,
// waits until it is ready and finds where it exposes runtime figures.
//
// Its environment is hubbench's without any SWITCHBOARD_* setting of the
// user's, plus SWITCHBOARD_RATE_LIMIT=-1: the per-connection rate limit is
// a policy, not a cost, and a benchmark that hits it measures the policy.
// (Set through the environment, which a hub without that flag ignores.)
func startHub(ctx context.Context, sup *benchlab.Supervisor, name, bin, redisURL string, extra ...string) (*hubRef, error) {
	return startHubEnv(ctx, sup, name, bin, redisURL, nil, extra...)
}

// startHubEnv is startHub with variables (KEY=VALUE) added to the hub's
// environment: OTEL_* for its tracing.
func startHubEnv(ctx context.Context, sup *benchlab.Supervisor, name, bin, redisURL string, vars []string, extra ...string) (*hubRef, error) {
	argv := []string{bin, "--addr", "127.0.0.1:0", "--log-level", "info"}
	if redisURL != "" {
		argv = append(argv, "--redis", redisURL)
	}
	argv = append(argv, extra...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SWITCHBOARD_") {
			env = append(env, kv)
		}
	}
	env = append(append(env, "SWITCHBOARD_RATE_LIMIT=-1"), vars...)
	c, addr, err := sup.Start(ctx, name, argv, env, hubListening)
	if err != nil {
		return nil, err
	}
	if err := benchlab.WaitHTTP(ctx, c, "http://"+addr+"/readyz"); err != nil {
		return nil, err
	}
	return &hubRef{name: name, addr: addr, c: c, stats: findStats(ctx, addr)}, nil
}

// startRole starts this executable in a role; it prints its address once
// it listens (roles that dial out print nothing and are not waited for).
// The hub twin is `hub serve`, and says so as the hub does.
func startRole(ctx context.Context, sup *benchlab.Supervisor, name string, args ...string) (*benchlab.Child, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	var ready *regexp.Regexp
	for i, a := range args {
		if a == "-addr" && ready == nil {
			ready = roleReady
		}
		if a == "-role" && i+1 < len(args) && args[i+1] == roleHub {
			ready = hubListening
		}
	}
	return sup.Start(ctx, name, append([]string{self}, args...), nil, ready)
}

// startRedis starts the redis-server that two hubs share.
func startRedis(sup *benchlab.Supervisor, dir string) (string, error) {
	addr, err := sup.StartRedis(dir)
	if err != nil {
		return "", fmt.Errorf("%w (needed for the cross-instance measurements)", err)
	}
	return addr, nil
}

// buildHub compiles ./cmd/hub of the module at root into dir, so that the
// hub measured is the one of this tree.
func buildHub(ctx context.Context, root, dir string) (string, error) {
	return goBuild(ctx, root, "./cmd/hub", filepath.Join(dir, "hub"))
}

// goBuild builds the package pkg of the module in moduleDir into out.
func goBuild(ctx context.Context, moduleDir, pkg, out string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// moduleRoot finds the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside a Go module: run hubbench from the Switchboard repository")
		}
		dir = parent
	}
}
