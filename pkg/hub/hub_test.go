package hub

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

func TestMain(m *testing.M) {
	http.DefaultClient = &http.Client{Transport: defaultTransport}
	goleak.VerifyTestMain(stopsJaeger{m})
}

// defaultTransport is http.DefaultClient's in these tests, not
// http.DefaultTransport: httptest.Server.Close closes the idle connections
// of http.DefaultTransport, and a parallel test's request that had just
// taken one failed ("CloseIdleConnections called"). Closed at the end
// (stopsJaeger), and by the tests that count goroutines.
var defaultTransport = http.DefaultTransport.(*http.Transport).Clone()

const wait = 10 * time.Second

// testLogger shows the hub's logs with -v when SWITCHBOARD_TEST_LOG is set:
// from the level it names (debug, info, warn, error; debug for any other
// value), so that a long run under load can keep the warnings alone.
func testLogger() *slog.Logger {
	if v := os.Getenv("SWITCHBOARD_TEST_LOG"); v != "" {
		var level slog.Level
		if level.UnmarshalText([]byte(v)) != nil {
			level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.DiscardHandler)
}

// testHub is a hub serving on a loopback port.
type testHub struct {
	*Hub
	t   *testing.T
	srv *httptest.Server
}

func startHub(t *testing.T, cfg Config) *testHub {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	srv := httptest.NewUnstartedServer(nil) // its address is known before the hub is made
	if cfg.OAuth != nil && cfg.OAuth.PublicURL == "" {
		o := *cfg.OAuth
		o.PublicURL = "http://" + srv.Listener.Addr().String()
		cfg.OAuth = &o
	}
	h, err := New(cfg)
	if err != nil {
		srv.Close()
	}
	require.NoError(t, err)
	srv.Config = h.NewHTTPServer() // the same timeouts as the command's
	srv.Start()
	th := &testHub{Hub: h, t: t, srv: srv}
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, h.Close())
	})
	return th
}

func (th *testHub) wsURL(path string) string {
	return "ws" + strings.TrimPrefix(th.srv.URL, "http") + path
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// sessionOpts returns opts asking for a session (initialize at
// mcp.LatestVersion) unless they name a version: these tests are of the
// hub's sessions (logging/setLevel, resources/subscribe, logs not tied to a
// call), and pkg/mcp's client speaks 2026-07-28 first by default.
func sessionOpts(opts *mcp.ClientOptions) *mcp.ClientOptions {
	o := mcp.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = mcp.LatestVersion
	}
	return &o
}

// sessionServer returns a pkg/mcp Server of the session revisions only,
// which the hub initializes (it refuses server/discover): for tests of what
// only a session-based server does (requests to a client in the middle of
// a call, leases, logs outside any call). A server of both eras is spoken
// to in 2026-07-28.
func sessionServer(name string, opts *mcp.ServerOptions) *mcp.Server {
	o := mcp.ServerOptions{}
	if opts != nil {
		o = *opts
	}
	o.ProtocolVersions = mcp.SupportedVersions
	return mcp.NewServer(mcp.Implementation{Name: name, Version: "1"}, &o)
}

// client connects an MCP client to the hub, with a session.
func (th *testHub) client(opts *mcp.ClientOptions) *mcp.Client {
	th.t.Helper()
	c, err := mcp.Connect(ctxFor(th.t), th.wsURL("/mcp"), sessionOpts(opts))
	require.NoError(th.t, err)
	th.t.Cleanup(func() { c.Close() })
	return c
}

// runServer dials s out to the hub (with ?name= when name is set) and waits
// until the hub lists it with at least one more replica than before.
func (th *testHub) runServer(s *mcp.Server, name string) (stop func()) {
	th.t.Helper()
	registeredAs := name
	if registeredAs == "" {
		registeredAs = "demo"
	}
	before := len(th.reg.view().servers[registeredAs])
	query := ""
	if name != "" {
		query = "?name=" + name
	}
	stop = th.dial(s, query)
	require.NoError(th.t, th.waitView(ctxFor(th.t), func(v *view) bool {
		return len(v.servers[registeredAs]) > before
	}), "server %q never registered", registeredAs)
	return stop
}

// dial dials s out to the hub's /mcp/server with query until stop (or the
// test's end).
func (th *testHub) dial(s *mcp.Server, query string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Dial(ctx, th.wsURL("/mcp/server")+query, &mcp.DialOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	th.t.Cleanup(stop)
	return stop
}

// waitFor waits until the hub's view satisfies ok.
func (th *testHub) waitFor(what string, ok func(*view) bool) {
	th.t.Helper()
	require.NoError(th.t, th.waitView(ctxFor(th.t), ok), "waiting for %s", what)
}

// within returns the next value of ch, failing the test with what when
// none comes in time.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatal(what)
		var zero T
		return zero
	}
}

// notes collects a client's notifications and lets a test wait for one.
type notes struct {
	mu   sync.Mutex
	all  []note
	more chan struct{}
}

type note struct {
	method string
	params json.RawMessage
}

func newNotes() *notes { return &notes{more: make(chan struct{})} }

func (n *notes) add(method string, params json.RawMessage) {
	n.mu.Lock()
	n.all = append(n.all, note{method, append(json.RawMessage(nil), params...)})
	close(n.more)
	n.more = make(chan struct{})
	n.mu.Unlock()
}

// wait waits for the count-th notification (1-based) of method matching ok,
// and returns it.
func (n *notes) wait(t *testing.T, method string, count int, ok func(json.RawMessage) bool) json.RawMessage {
	t.Helper()
	deadline := time.After(wait)
	for {
		n.mu.Lock()
		seen := 0
		for _, x := range n.all {
			if x.method == method && (ok == nil || ok(x.params)) {
				if seen++; seen == count {
					n.mu.Unlock()
					return x.params
				}
			}
		}
		more := n.more
		n.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("timed out waiting for %s #%d", method, count)
		}
	}
}

func (n *notes) count(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, x := range n.all {
		if x.method == method {
			c++
		}
	}
	return c
}

// rawClient is a client driven frame by frame, for tests about ids.
type rawClient struct {
	t    *testing.T
	conn *peer.WebSocket
}

func (th *testHub) rawClient(initialize bool) *rawClient {
	th.t.Helper()
	conn, err := peer.Dial(ctxFor(th.t), th.wsURL("/mcp"), nil)
	require.NoError(th.t, err)
	th.t.Cleanup(func() { conn.Close(peer.CloseNormal, "") })
	rc := &rawClient{t: th.t, conn: conn}
	if initialize {
		rc.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		rc.recv()
		rc.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	return rc
}

func (rc *rawClient) send(frame string) {
	rc.t.Helper()
	require.NoError(rc.t, rc.conn.Write(ctxFor(rc.t), []byte(frame)))
}

func (rc *rawClient) recv() string {
	rc.t.Helper()
	b, err := rc.conn.Read(ctxFor(rc.t))
	require.NoError(rc.t, err)
	return string(b)
}

// recvResponse reads until a response (skipping notifications) and decodes
// it.
func (rc *rawClient) recvResponse() *jsonrpc.Response {
	rc.t.Helper()
	for {
		m, err := jsonrpc.DecodeMessage([]byte(rc.recv()))
		require.NoError(rc.t, err)
		if r, ok := m.(*jsonrpc.Response); ok {
			return r
		}
	}
}

func rpcCode(err error) jsonrpc.Code { return jsonrpc.CodeOf(err) }

func peerDial(t *testing.T, url string) (*peer.WebSocket, error) {
	t.Helper()
	c, err := peer.Dial(ctxFor(t), url, nil)
	if err == nil {
		t.Cleanup(func() { c.Close(peer.CloseNormal, "") })
	}
	return c, err
}

// coordOf returns, under the lock, how many instances this instance keeps
// uri subscribed for and at how many of its replicas (more than one would
// be a leak).
func (s *subscriptions) coordOf(uri string) (instances, replicas int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, c := range s.coord {
		if key.uri == uri {
			replicas++
			instances += len(c.instances)
		}
	}
	return instances, replicas
}

// told reports, under the lock, whether no subscribe or unsubscribe of uri
// is under way at a replica: coordOf counts a coordination before its
// replica subscribed upstream.
func (s *subscriptions) told(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.busy {
		if key.uri == uri {
			return false
		}
	}
	return true
}
