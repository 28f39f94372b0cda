package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags_environmentThenCommandLine(t *testing.T) {
	t.Setenv("SWITCHBOARD_ADDR", "127.0.0.1:9999")
	t.Setenv("SWITCHBOARD_LOG_FORMAT", "json")
	t.Setenv("SWITCHBOARD_DEMO", "true")
	o, err := parseFlags([]string{"--log-format", "text"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9999", o.addr, "the environment sets what the command line does not")
	assert.True(t, o.demo)
	assert.Equal(t, "text", o.logFormat, "the command line wins")

	t.Setenv("SWITCHBOARD_CALL_TIMEOUT", "soon")
	_, err = parseFlags(nil, io.Discard)
	assert.ErrorContains(t, err, "SWITCHBOARD_CALL_TIMEOUT")
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:80": true, "[::1]:8080": true, "127.1.2.3:1": true,
		":8080": false, "0.0.0.0:8080": false, "10.0.0.1:8080": false, "example.com:80": false, "nonsense": false,
	} {
		assert.Equal(t, want, isLoopback(addr), addr)
	}
}

func TestRun_refusesToExposeWithoutTokens(t *testing.T) {
	err := run(context.Background(), []string{"--addr", "0.0.0.0:0"}, io.Discard)
	assert.ErrorContains(t, err, "without --tokens")
	err = run(context.Background(), []string{"--log-format", "xml"}, io.Discard)
	assert.ErrorContains(t, err, "text or json")
	err = run(context.Background(), []string{"--tokens", "/nonexistent/tokens.yaml"}, io.Discard)
	require.Error(t, err)
}

// syncBuffer is a log destination the test reads while run writes.
type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

// TestRun_servesAndShutsDownCleanly runs the command with the demo server,
// finds the dashboard and the demo server, then stops it as a signal would.
func TestRun_servesAndShutsDownCleanly(t *testing.T) {
	logs := &syncBuffer{mu: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--demo", "--drain-timeout", "2s"}, logs) }()

	var addr string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "switchboard listening") {
				_, rest, _ := strings.Cut(line, "addr=")
				addr, _, _ = strings.Cut(rest, " ")
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the hub never said it was listening")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "server registered") }, 10*time.Second, 10*time.Millisecond,
		"the demo server never registered")

	resp, err := http.Get("http://" + addr + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("Content-Security-Policy"))

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "a signal ends the command cleanly (exit 0)")
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop")
	}
	assert.Contains(t, logs.String(), "draining")
}

// TestRun_demoWithTokens: with --tokens, the demo server gets credentials of
// its own and registers.
func TestRun_demoWithTokens(t *testing.T) {
	file := t.TempDir() + "/tokens.yaml"
	require.NoError(t, os.WriteFile(file, []byte("tokens: [{name: a, token: admin-secret, roles: [admin]}]"), 0o600))
	logs := &syncBuffer{mu: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--addr", "127.0.0.1:0", "--demo", "--tokens", file}, logs) }()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "server registered") }, 10*time.Second, 10*time.Millisecond,
		"the demo server never registered: %s", logs)
	cancel()
	require.NoError(t, <-done)
}
