package jaegertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// module is the test-only module that pins Jaeger (as a go tool), relative
// to the repository's root.
const module = "e2e/tracing"

// jaegerPackage is the Jaeger v2 all-in-one command.
const jaegerPackage = "github.com/jaegertracing/jaeger/cmd/jaeger"

// EnvBinary names a Jaeger binary to use instead of building one.
const EnvBinary = "SWITCHBOARD_JAEGER"

// Binary returns the path of the Jaeger binary: $SWITCHBOARD_JAEGER when
// set, else the one built from e2e/tracing's go.mod, which it builds the
// first time (minutes: Jaeger is large) into the user's cache directory,
// under a key of that go.mod, its go.sum, the Go version and the platform,
// so that later runs, and every test binary of one run, find it there. A
// file lock lets one process build while the others wait for it.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("jaegertest: %s=%s: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	dir, err := moduleDir()
	if err != nil {
		return "", err
	}
	key, err := buildKey(dir)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("jaegertest: no cache directory for the Jaeger binary: %w", err)
	}
	root := filepath.Join(cache, "switchboard", "jaeger")
	bin := filepath.Join(root, key, "jaeger")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("jaegertest: %w", err)
	}
	unlock, err := lockFile(filepath.Join(root, "build.lock"))
	if err != nil {
		return "", fmt.Errorf("jaegertest: lock the Jaeger build: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another process built it while this one waited
	}
	if err := build(dir, bin); err != nil {
		return "", err
	}
	removeOthers(root, key)
	return bin, nil
}

// removeOthers removes the builds of other keys (each over 100 MB), which
// no test will run again once e2e/tracing has changed. Best effort.
func removeOthers(root, key string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() && e.Name() != key {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// build builds Jaeger from the module in dir into bin, through a temporary
// file so that bin is never half written.
func build(dir, bin string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return errors.New("jaegertest: cannot build Jaeger: the go command is not on PATH")
	}
	tmp := bin + ".tmp"
	cmd := exec.Command(goBin, "build", "-o", tmp, jaegerPackage)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("jaegertest: cannot build Jaeger (go build %s in %s, which needs the Go module proxy the first time; `make deps` does it): %w\n%s",
			jaegerPackage, module, err, tail(out, 40))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("jaegertest: %w", err)
	}
	return nil
}

// moduleDir finds e2e/tracing above the working directory (a test runs in
// its package's directory, anywhere below the repository's root).
func moduleDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("jaegertest: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, module, "go.mod")); err == nil {
			return filepath.Join(d, module), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("jaegertest: no %s/go.mod above %s: run from within the repository, or set %s", module, wd, EnvBinary)
		}
	}
}

// buildKey names a build: a change of Jaeger's version (go.mod), of any
// dependency (go.sum), of Go or of the platform makes a new one.
func buildKey(dir string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("jaegertest: %w", err)
		}
		h.Write(b)
	}
	fmt.Fprintf(h, "%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(string(bytes.TrimSpace(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
