package gosdk_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/e2e/gosdk/askserver"
	hubconnect "github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Published servers behind `hub connect`, unchanged: a Go SDK server and a
// TypeScript SDK McpServer over stdio, whose requests to clients cannot
// name the call they serve, and the Go SDK server over Streamable HTTP
// (--upstream). Their tool asks the calling client for sampling, elicitation
// and its roots; many clients call it at once, and each answer must be the
// calling client's.

const (
	askClients = 8
	askCalls   = 20
)

// askServers are the servers under test, each as the connector runs it.
var askServers = []struct {
	name   string
	server func(t *testing.T) hubconnect.Server
}{
	{"go-sdk-stdio", goSDKStdio},
	{"ts-sdk-stdio", tsSDKStdio},
	{"go-sdk-http", goSDKHTTP},
}

// TestConnect_serverRequestsReachTheCallingClient: 8 Go SDK clients make 20
// calls each at once of a published server behind the connector; every
// sampling, elicitation and roots request reaches the client whose call
// asked (the tool's answer holds what that client answered: its identity),
// on one hub instance, and with the clients spread over two instances
// sharing a redis-server. Two of the clients speak 2026-07-28 (the hub asks
// them through input requests), the others hold sessions.
func TestConnect_serverRequestsReachTheCallingClient(t *testing.T) {
	for _, srv := range askServers {
		t.Run(srv.name, func(t *testing.T) {
			t.Run("one-instance", func(t *testing.T) {
				h := startHub(t, nil, nil)
				runConnector(t, h, srv.server(t))
				askEveryone(t, []*httptest.Server{h})
			})
			t.Run("two-instances", func(t *testing.T) {
				rs := redistest.Start(t)
				prefix := redistest.Prefix(t)
				a, b := startHub(t, redisBroker(t, rs, prefix), nil), startHub(t, redisBroker(t, rs, prefix), nil)
				runConnector(t, b, srv.server(t))
				askEveryone(t, []*httptest.Server{a, b})
			})
		})
	}
}

// goSDKStdio is askserver built as a program (cmd/askserver), run on stdio
// in a pool of 1..4 children.
func goSDKStdio(t *testing.T) hubconnect.Server {
	bin := filepath.Join(t.TempDir(), "askserver")
	out, err := exec.Command("go", "build", "-o", bin, "./askserver/cmd/askserver").CombinedOutput()
	require.NoError(t, err, "building askserver: %s", out)
	// Session: the SDK's server speaks both eras, but its tool asks with
	// requests of its own, which the SDK refuses in 2026-07-28.
	return hubconnect.Server{Name: "ask", Command: bin, Pool: hubconnect.Pool{Min: 1, Max: 4}, Session: true}
}

// tsSDKStdio is e2e/test/askserver.mjs, run by node on stdio in a pool of
// 1..4 children.
func tsSDKStdio(t *testing.T) hubconnect.Server {
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is missing: run 'make deps' (scripts/deps.sh installs Node and the TypeScript SDK)")
	_, file, _, _ := runtime.Caller(0)
	e2e := filepath.Join(filepath.Dir(file), "..")
	_, err = os.Stat(filepath.Join(e2e, "node_modules", "@modelcontextprotocol", "sdk"))
	require.NoError(t, err, "the TypeScript SDK is not installed: run 'make deps' (npm ci in e2e/)")
	return hubconnect.Server{Name: "ask", Command: node, Args: []string{filepath.Join(e2e, "test", "askserver.mjs")},
		Pool: hubconnect.Pool{Min: 1, Max: 4}}
}

// goSDKHTTP is askserver behind the SDK's StreamableHTTPHandler, one
// session for every client: the connector names each request's call from
// the POST stream that carries it.
func goSDKHTTP(t *testing.T) hubconnect.Server {
	s := askserver.New()
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return hubconnect.Server{Name: "ask", Upstream: srv.URL + "/mcp", Session: true}
}

func redisBroker(t *testing.T, rs *redistest.Server, prefix string) pubsub.Broker {
	t.Helper()
	b, err := pubsub.NewRedis(context.Background(), pubsub.RedisOptions{URL: rs.URL(), KeyPrefix: prefix, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// runConnector runs the connector for srv toward the hub h until the test
// ends; its log is shown when the test fails.
func runConnector(t *testing.T, h *httptest.Server, srv hubconnect.Server) {
	t.Helper()
	var log syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- hubconnect.Run(ctx, []hubconnect.Server{srv}, &hubconnect.Options{
			URL:    "ws" + strings.TrimPrefix(h.URL, "http") + "/mcp/server",
			Logger: slog.New(slog.NewTextHandler(&log, nil)),
			Retry:  link.Retry{MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
		})
	}()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
		if t.Failed() {
			t.Logf("the connector's log:\n%s", log.String())
		}
	})
}

// askEveryone connects askClients clients, spread over hubs, waits until
// each lists ask__ask, then has each make askCalls calls at once and checks
// every answer.
func askEveryone(t *testing.T, hubs []*httptest.Server) {
	t.Helper()
	sessions := make([]*sdk.ClientSession, askClients)
	for i := range sessions {
		id := fmt.Sprintf("client-%d", i)
		version := "2025-11-25"
		if i >= askClients-2 {
			version = "" // the SDK's default: 2026-07-28
		}
		c := sdk.NewClient(&sdk.Implementation{Name: id, Version: "1.8.0"}, &sdk.ClientOptions{
			CreateMessageHandler: func(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
				return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: id}}, nil
			},
			ElicitationHandler: func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": id}}, nil
			},
		})
		c.AddRoots(&sdk.Root{URI: "file:///clients/" + id, Name: id})
		sessions[i] = connectClient(t, c, hubs[i%len(hubs)], version)
	}
	for _, cs := range sessions {
		require.Eventually(t, func() bool {
			res, err := cs.ListTools(t.Context(), nil)
			return err == nil && slices.ContainsFunc(res.Tools, func(tool *sdk.Tool) bool { return tool.Name == "ask__ask" })
		}, wait, 20*time.Millisecond, "the server is on every instance")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrong := map[string]int{}
	for i, cs := range sessions {
		id := fmt.Sprintf("client-%d", i)
		want := fmt.Sprintf("sampling=%s elicitation=%s roots=file:///clients/%s", id, id, id)
		for range askCalls {
			wg.Go(func() {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ask__ask"})
				got := ""
				switch {
				case err != nil:
					got = "error: " + err.Error()
				case res.IsError || len(res.Content) == 0:
					got = "tool error:"
					for _, c := range res.Content {
						if text, ok := c.(*sdk.TextContent); ok {
							got += " " + text.Text
						}
					}
				default:
					got = res.Content[0].(*sdk.TextContent).Text
				}
				if got != want {
					mu.Lock()
					wrong[id+" got "+got]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	assert.Empty(t, wrong, "every request reached the client whose call asked, and only that one")
}

// connectClient connects the SDK client c to the hub's /mcp, asking for
// version ("" for its default).
func connectClient(t *testing.T, c *sdk.Client, h *httptest.Server, version string) *sdk.ClientSession {
	t.Helper()
	cs, err := c.Connect(testCtx(t), &sdk.StreamableClientTransport{Endpoint: h.URL + "/mcp", HTTPClient: h.Client()},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// syncBuffer is a log destination read while the connector writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
