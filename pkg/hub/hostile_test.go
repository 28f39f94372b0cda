package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Hostile peers: each case attacks the hub with a well-behaved client
// beside it, and checks that the client kept working and that nothing
// leaked.

// bystander is a well-behaved client that checks, when asked, that it can
// still call the demo server.
type bystander struct {
	t *testing.T
	c *mcp.Client
}

func newBystander(th *testHub) *bystander {
	return &bystander{t: th.t, c: th.client(nil)}
}

func (b *bystander) stillWorks() {
	b.t.Helper()
	res, err := b.c.CallTool(ctxFor(b.t), "demo__echo", map[string]string{"text": "fine"}, nil)
	require.NoError(b.t, err, "the bystander's call failed")
	assert.Equal(b.t, "fine", res.Content[0].Text)
}

// upgradeStatus sends a WebSocket upgrade with the given Host and Origin
// to the hub's own address and returns the status.
func upgradeStatus(t *testing.T, th *testHub, path, host, origin string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, th.srv.URL+path, nil)
	require.NoError(t, err)
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// httpStatus sends a plain HTTP request with the given Host and Origin to
// the hub's own address and returns the status.
func httpStatus(t *testing.T, th *testHub, method, path, host, origin, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, th.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := scrapeClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// A page whose name an attacker points at 127.0.0.1 (DNS rebinding) used to
// get in without tokens: Origin and Host both its own, so they matched. It
// could list and call tools and join the demo server as a replica.
func TestHostile_dnsRebinding(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{AllowedHosts: []string{"hub.internal"}})
	th.runServer(demo.New(nil).Server, "")
	good := newBystander(th)
	port := th.srv.URL[strings.LastIndex(th.srv.URL, ":")+1:]
	evil := "rebind.attacker.example:" + port
	for _, path := range []string{"/mcp", "/servers/demo/mcp", "/mcp/server?name=demo", "/metrics"} {
		assert.Equal(t, http.StatusForbidden, upgradeStatus(t, th, path, evil, "http://"+evil), "%s with a rebound Host", path)
		assert.Equal(t, http.StatusForbidden, upgradeStatus(t, th, path, evil, ""), "%s with a rebound Host and no Origin", path)
	}
	// The Streamable HTTP face, the dashboard and its login are guarded the
	// same way; health checks answer any Host (load balancers use IPs).
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/mcp", initializeBody},
		{http.MethodPost, "/servers/demo/mcp", initializeBody},
		{http.MethodGet, "/mcp", ""},
		{http.MethodGet, "/", ""},
		{http.MethodPost, "/login", ""},
		{http.MethodPost, "/logout", ""},
	} {
		assert.Equal(t, http.StatusForbidden, httpStatus(t, th, r.method, r.path, evil, "http://"+evil, r.body), "%s %s with a rebound Host", r.method, r.path)
		assert.Equal(t, http.StatusForbidden, httpStatus(t, th, r.method, r.path, evil, "", r.body), "%s %s with a rebound Host and no Origin", r.method, r.path)
	}
	for _, path := range []string{"/mcp", "/servers/demo/mcp"} {
		assert.Equal(t, http.StatusOK, httpStatus(t, th, http.MethodPost, path, "localhost:"+port, "", initializeBody), "POST %s on loopback", path)
	}
	assert.Equal(t, http.StatusOK, httpStatus(t, th, http.MethodGet, "/", "127.0.0.1:"+port, "", ""), "the dashboard on loopback")
	for _, path := range []string{"/healthz", "/readyz"} {
		assert.Equal(t, http.StatusOK, httpStatus(t, th, http.MethodGet, path, evil, "", ""), "%s answers any Host", path)
	}
	assert.Equal(t, http.StatusForbidden, upgradeStatus(t, th, "/mcp", "localhost:"+port, "http://"+evil), "a foreign Origin")
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "app.localhost:" + port, "hub.internal:" + port} {
		assert.Equal(t, http.StatusSwitchingProtocols, upgradeStatus(t, th, "/mcp", host, ""), "Host %s", host)
	}
	assert.Len(t, th.reg.view().servers["demo"], 1, "no replica joined the demo server")
	assert.Positive(t, scrape(t, th, `switchboard_auth_failures_total{reason="host"}`))
	good.stillWorks()

	// With tokens the token is the guard: any Host will do.
	tokened := authedHub(t, Config{})
	assert.Equal(t, http.StatusUnauthorized, upgradeStatus(t, tokened, "/mcp", evil, ""))
}

// Any server's notifications/resources/updated used to reach every
// subscriber, for another server's URI or the hub's own.
func TestHostile_spoofedUpdates(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	d := demo.New(&demo.Options{ClockInterval: time.Hour})
	th.runServer(d.Server, "")
	good := newBystander(th)
	spoofer := startRawServer(th, "aaa", `{"tools":{}}`, nil)
	notes := newNotes()
	victim := th.client(&mcp.ClientOptions{OnNotification: notes.add})
	require.NoError(t, victim.Subscribe(ctxFor(t), demo.CounterURI))

	for _, uri := range []string{demo.CounterURI, "switchboard://servers"} {
		spoofer.write(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"` + uri + `","spoofed":true}}`)
	}
	require.Eventually(t, func() bool { return scrape(t, th, `switchboard_refused_total{reason="foreign_update"}`) == 2 },
		wait, time.Millisecond, "both spoofed updates were refused")
	_, err := good.c.CallTool(ctxFor(t), "demo__increment", nil, nil) // the real server's update
	require.NoError(t, err)
	got := notes.wait(t, mcp.NotificationResourceUpdated, 1, nil)
	assert.NotContains(t, string(got), "spoofed")
	assert.Equal(t, 1, notes.count(mcp.NotificationResourceUpdated), "only the real update arrived")
	good.stillWorks()
}

// A duplicated _meta used to carry the client's own progress token past
// the rewriting, to the server: the second _meta was rewritten, the first
// was read.
func TestHostile_duplicateMeta(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(demo.New(nil).Server, "")
	good := newBystander(th)
	rc := th.rawClient(true)
	for i, params := range []string{
		`{"name":"demo__slow","arguments":{"steps":1},"_meta":{"progressToken":"mine"},"_meta":{"other":1}}`,
		`{"uri":"demo://counter","_meta":{"progressToken":"mine"},"_meta":{}}`,
	} {
		method := "tools/call"
		if i == 1 {
			method = "resources/read"
		}
		rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, i, method, params))
		resp := rc.recvResponse()
		require.NotNil(t, resp.Error, "%s with two _meta", method)
		assert.Equal(t, jsonrpc.CodeInvalidParams, resp.Error.Code)
		assert.Contains(t, resp.Error.Message, "_meta")
	}
	good.stillWorks()
}

// tokenClient connects an MCP client with a token.
func (th *testHub) tokenClient(token string, opts *mcp.ClientOptions) *mcp.Client {
	th.t.Helper()
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	opts.Token = token
	return th.client(opts)
}

// A server's log naming one client's call used to reach every client, and
// a Go server's per-call logs went out unnamed, so to everyone. A log that
// names a call now goes to that call's client only; one that names none
// goes to operators and to the clients calling that server.
func TestHostile_logsStayWithTheirClient(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{})
	good := &bystander{t: t, c: th.tokenClient("alice-secret", nil)}
	release := make(chan struct{})
	defer close(release)
	srv := startRawServerWith(th, "weather", "weather-secret", `{"tools":{},"logging":{}}`, func(method string, _ json.RawMessage) string {
		switch method {
		case mcp.MethodToolsList:
			return `{"tools":[{"name":"work","inputSchema":{"type":"object"}}]}`
		case mcp.MethodToolsCall:
			<-release
		}
		return ""
	})
	na, nb, nc, nd := newNotes(), newNotes(), newNotes(), newNotes()
	a := th.tokenClient("alice-secret", &mcp.ClientOptions{OnNotification: na.add})
	b := th.tokenClient("alice-secret", &mcp.ClientOptions{OnNotification: nb.add})
	th.tokenClient("alice-secret", &mcp.ClientOptions{OnNotification: nc.add}) // calls nothing
	th.tokenClient("ops-secret", &mcp.ClientOptions{OnNotification: nd.add})   // a dashboard
	for _, c := range []*mcp.Client{a, b} {
		go c.CallTool(context.Background(), "weather__work", nil, nil)
	}
	<-srv.calls
	idB := <-srv.calls // the second call in flight is B's or A's: find out by naming it
	srv.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"for one call","_meta":{"switchboard/relatedRequest":%s}}}`, idB))
	srv.write(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"about the server"}}`)

	isServerLog := func(p json.RawMessage) bool { return strings.Contains(string(p), "about the server") }
	for _, n := range []*notes{na, nb, nd} {
		n.wait(t, mcp.NotificationMessage, 1, isServerLog)
	}
	named := 0
	for _, n := range []*notes{na, nb} {
		if n.count(mcp.NotificationMessage) == 2 {
			named++
		}
	}
	assert.Equal(t, 1, named, "the named log reached exactly one of the two callers")
	assert.Equal(t, 1, nd.count(mcp.NotificationMessage), "the dashboard got the server's log only")
	require.Eventually(t, func() bool {
		// The named line to its caller, the server's line to A, B and the dashboard.
		return scrape(t, th, `switchboard_notifications_fanned_out_total{method="notifications/message"}`) == 4
	}, wait, time.Millisecond, "fanned out: %v", scrape(t, th, `switchboard_notifications_fanned_out_total{method="notifications/message"}`))
	assert.Zero(t, nc.count(mcp.NotificationMessage), "a client that calls nothing got neither")
	good.stillWorks()
}

// A client could knock a server offline with a flood of
// notifications/roots/list_changed: each was forwarded, the server's queue
// overflowed, and the hub dropped the server. They are now rate-limited
// and coalesced per server.
func TestHostile_rootsFlood(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{SendQueue: 64, RateLimit: 100, RateBurst: 50})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	good := newBystander(th)
	release := make(chan struct{})
	var roots atomic.Int64
	s := mcp.NewServer(mcp.Implementation{Name: "victim", Version: "1"}, &mcp.ServerOptions{
		OnRootsChanged: func(*mcp.ServerSession) { roots.Add(1) },
	})
	s.AddTool(&mcp.Tool{Name: "wait"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		<-release
		return &mcp.CallToolResult{}, nil
	})
	th.runServer(s, "victim")
	rc := th.rawClient(true)
	rc.send(`{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"victim__wait"}}`)
	require.Eventually(t, func() bool { return th.reg.view().servers["victim"][0].inflight.Load() == 1 }, wait, time.Millisecond)
	start := time.Now()
	frame := `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`
	for range 20_000 {
		rc.send(frame)
	}
	close(release)
	resp := rc.recvResponse()
	assert.Nil(t, resp.Error, "the flooder's own call finished: %v", resp.Error)
	took := time.Since(start)
	assert.LessOrEqual(t, roots.Load(), int64(2+took/DefaultListChangedInterval), "the server heard of it once per interval at most")
	assert.Len(t, th.reg.view().servers["victim"], 1, "the server is still connected")
	good.stillWorks()
	assert.Positive(t, scrape(t, th, `switchboard_refused_total{reason="notification_rate"}`))
}

// One connection could subscribe to 100,000 URIs; now each connection and
// each token have a limit (-32004 beyond), and leaving releases them, here
// and upstream.
func TestHostile_subscriptionLimits(t *testing.T) {
	t.Parallel()
	th := authedHub(t, Config{MaxSubscriptions: 3, MaxSubscriptionsPerToken: 4})
	good := &bystander{t: t, c: th.tokenClient("admin-secret", nil)}
	srv := startRawServerWith(th, "weather", "weather-secret", subscribableCaps,
		listing("weather://0", "weather://1", "weather://2", "weather://x", "weather://y", "weather://z"))
	a := th.tokenClient("alice-secret", nil)
	ctx := ctxFor(t)
	for i := range 3 {
		uri := fmt.Sprintf("weather://%d", i)
		require.NoError(t, a.Subscribe(ctx, uri))
		srv.expect("resources/subscribe " + uri)
	}
	err := a.Subscribe(ctx, "weather://x")
	assert.Equal(t, mcp.CodeRateLimited, rpcCode(err), "a connection's fourth: %v", err)
	b := th.tokenClient("alice-secret", nil)
	require.NoError(t, b.Subscribe(ctx, "weather://y"))
	srv.expect("resources/subscribe weather://y")
	err = b.Subscribe(ctx, "weather://z")
	assert.Equal(t, mcp.CodeRateLimited, rpcCode(err), "the token's fifth: %v", err)
	srv.expectNothing() // nothing refused was subscribed upstream
	require.NoError(t, good.c.Subscribe(ctx, "demo://counter"), "another token is not limited by alice's")

	require.NoError(t, a.Close())
	srv.expectSet("resources/unsubscribe weather://0", "resources/unsubscribe weather://1", "resources/unsubscribe weather://2")
	require.NoError(t, b.Subscribe(ctx, "weather://z"), "leaving released the connection's subscriptions")
	srv.expect("resources/subscribe weather://z")
	good.stillWorks()
}

// A server whose list really changes could make the hub send every client
// hundreds of list_changed a second; each client now hears at most one per
// interval, and always the last.
func TestHostile_listChangedStorm(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{ListChangedInterval: 50 * time.Millisecond})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	good := newBystander(th)
	notes := newNotes()
	c := th.client(&mcp.ClientOptions{OnNotification: notes.add})
	var version atomic.Int64
	srv := startRawServer(th, "storm", `{"tools":{"listChanged":true}}`, func(method string, _ json.RawMessage) string {
		if method == mcp.MethodToolsList {
			return fmt.Sprintf(`{"tools":[{"name":"v%d","inputSchema":{"type":"object"}}]}`, version.Load())
		}
		return ""
	})
	notes.wait(t, mcp.NotificationToolsListChanged, 1, nil) // storm joined
	start := time.Now()
	for i := 1; i <= 300; i++ {
		version.Store(int64(i))
		srv.write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	}
	th.waitFor("the last version", func(v *view) bool { return v.lookup(kindTools, "storm__v300") != nil })
	took := time.Since(start)
	// The changes after storm joined are told (TestCoalescer checks that
	// the last always is), and after them the client lists v300.
	notes.wait(t, mcp.NotificationToolsListChanged, 2, nil)
	tools, err := c.AllTools(ctxFor(t))
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(tools, func(tl *mcp.Tool) bool { return tl.Name == "storm__v300" }))
	told := notes.count(mcp.NotificationToolsListChanged) - 1
	t.Logf("300 changes in %v: the client was told %d times", took, told)
	assert.LessOrEqual(t, told, 3+int(took/(50*time.Millisecond)), "at most one per interval")
	good.stillWorks()
}

// A server whose list changes again each time the hub lists it used to make
// its instance re-list, and republish its snapshot to the cluster, without
// pause. Re-listing rounds now start ListChangedInterval apart at least,
// and the last change is always listed.
func TestHostile_relistingIsPaced(t *testing.T) {
	t.Parallel()
	const interval, rounds = 100 * time.Millisecond, 5
	th := startHub(t, Config{ListChangedInterval: interval})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	good := newBystander(th)
	var lists atomic.Int64
	relisted := make(chan time.Time, rounds)
	var srv *rawServer
	srv = startRawServer(th, "relist", `{"tools":{"listChanged":true}}`, func(method string, _ json.RawMessage) string {
		if method != mcp.MethodToolsList {
			return ""
		}
		n := lists.Add(1) // 1: the handshake's
		if n > 1 {
			relisted <- time.Now()
		}
		if n > 1 && n <= rounds {
			// Changed again already: the hub hears it before this answer.
			srv.write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		}
		return fmt.Sprintf(`{"tools":[{"name":"v%d","inputSchema":{"type":"object"}}]}`, n)
	})
	start := time.Now() // no round can start before the first announcement
	srv.write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	var last time.Time
	for range rounds {
		select {
		case last = <-relisted:
		case <-time.After(wait):
			t.Fatal("the hub stopped re-listing")
		}
	}
	took := last.Sub(start)
	t.Logf("%d re-listings in %v", rounds, took)
	assert.GreaterOrEqual(t, took, (rounds-1)*interval, "re-listings start an interval apart at least")
	th.waitFor("the last change", func(v *view) bool { return v.lookup(kindTools, fmt.Sprintf("relist__v%d", rounds+1)) != nil })
	good.stillWorks()
}

// A server's flood of notifications used to close every reading client as
// a slow consumer, the bystander too, and the server went on unthrottled.
// Now each server's notifications are rate-limited, and a client that
// keeps reading loses notifications (counted), not its connection.
func TestHostile_serverNotificationFlood(t *testing.T) {
	t.Parallel()
	// A low rate, so that the flood is mostly refused however slowly a loaded
	// machine reads it: 20,000 notifications at 100/s beyond a burst of 200.
	th := startHub(t, Config{SendQueue: 256, ServerNotificationRate: 100, ServerNotificationBurst: 200})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	good := newBystander(th)
	flood := startRawServer(th, "flood", `{"resources":{"subscribe":true},"logging":{}}`, listing("flood://r"))
	var readers []*mcp.Client
	for range 2 {
		c := th.client(&mcp.ClientOptions{OnNotification: func(string, json.RawMessage) {}})
		require.NoError(t, c.SetLoggingLevel(ctxFor(t), mcp.LevelDebug))
		require.NoError(t, c.Subscribe(ctxFor(t), "flood://r"))
		readers = append(readers, c)
	}
	var batch []string
	for i := range 50 {
		batch = append(batch, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"%d %s"}}`, i, strings.Repeat("x", 200)),
			`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"flood://r"}}`)
	}
	frame := "[" + strings.Join(batch, ",") + "]"
	for range 200 {
		flood.write(frame) // 20,000 notifications
	}
	require.Eventually(t, func() bool {
		return scrape(t, th, `switchboard_refused_total{reason="server_notification_rate"}`) > 10_000
	}, wait, 10*time.Millisecond, "the server was throttled")
	for i, c := range readers {
		_, err := c.CallTool(ctxFor(t), "demo__echo", map[string]string{"text": "x"}, nil)
		require.NoError(t, err, "reader %d was not dropped", i)
	}
	assert.Zero(t, scrape(t, th, "switchboard_slow_consumers_dropped_total"), "no one was dropped")
	good.stillWorks()
}

// The server notification rate limit used to drop every kind of
// notification alike: a list_changed beyond it left the hub's lists stale
// for good, and a call's last progress report was lost. list_changed is
// never limited now (re-listing is coalesced), and the last progress
// report of a call, held back, goes before its answer.
func TestHostile_rateLimitedServerKeepsListsAndLastProgress(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{ServerNotificationRate: 0.001, ServerNotificationBurst: 1})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	good := newBystander(th)
	var version atomic.Int64
	var srv *rawServer
	srv = startRawServer(th, "busy", `{"tools":{"listChanged":true}}`, func(method string, params json.RawMessage) string {
		switch method {
		case mcp.MethodToolsList:
			return fmt.Sprintf(`{"tools":[{"name":"v%d","inputSchema":{"type":"object"}}]}`, version.Load())
		case mcp.MethodToolsCall:
			meta, _ := jsonrpc.Member(params, "_meta")
			token, _ := jsonrpc.Member(meta, mcp.MetaProgressToken)
			for i := 1; i <= 10; i++ { // one within the burst, nine beyond
				srv.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"total":10}}`, token, i))
			}
			version.Store(1)
			srv.write(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
			return `{"content":[{"type":"text","text":"done"}]}`
		}
		return ""
	})
	var progress []float64
	res, err := th.client(nil).CallTool(ctxFor(t), "busy__v0", nil, &mcp.CallOptions{Progress: func(p *mcp.ProgressParams) {
		progress = append(progress, p.Progress)
	}})
	require.NoError(t, err)
	assert.Equal(t, "done", res.Content[0].Text)
	assert.Equal(t, []float64{1, 10}, progress, "the first report, and the last, held back until the answer")
	th.waitFor("the tools listed after the change", func(v *view) bool { return v.lookup(kindTools, "busy__v1") != nil })
	assert.Positive(t, scrape(t, th, `switchboard_refused_total{reason="server_notification_rate"}`))
	good.stillWorks()
}

// Beyond the rate, a server's resources/updated were dropped like any
// notification: a subscriber could miss a resource's last change for good.
// The last update of each resource is held back now, and goes out when the
// rate allows.
func TestHostile_rateLimitedServerKeepsLastUpdates(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{ServerNotificationRate: 20, ServerNotificationBurst: 1})
	uris := []string{"hot://a", "hot://b", "hot://c"}
	srv := startRawServer(th, "hot", subscribableCaps, listing(uris...))
	notes := newNotes()
	c := th.client(&mcp.ClientOptions{OnNotification: notes.add})
	for _, uri := range uris {
		require.NoError(t, c.Subscribe(ctxFor(t), uri))
		srv.expect("resources/subscribe " + uri)
	}
	// Ten changes of each, at once: the first within the burst, nearly all
	// the others beyond it.
	for n := 1; n <= 10; n++ {
		for _, uri := range uris {
			srv.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":%q,"n":%d}}`, uri, n))
		}
	}
	for _, uri := range uris {
		notes.wait(t, mcp.NotificationResourceUpdated, 1, func(p json.RawMessage) bool {
			return string(p) == fmt.Sprintf(`{"uri":%q,"n":10}`, uri)
		})
	}
	assert.Positive(t, scrape(t, th, `switchboard_refused_total{reason="server_notification_rate"}`))
	assert.Less(t, notes.count(mcp.NotificationResourceUpdated), 30, "the rest were dropped")
}

// dialRawServer dials a server named name whose answers come from answer,
// and returns how the hub closed it (nil if it registered).
func dialRawServer(th *testHub, name, caps string, answer func(method string, params json.RawMessage) string) error {
	t := th.t
	conn, err := peerDial(t, th.wsURL("/mcp/server?name="+name))
	require.NoError(t, err)
	ended := make(chan error, 1)
	go func() {
		for {
			b, err := conn.Read(context.Background())
			if err != nil {
				ended <- err
				return
			}
			m, err := jsonrpc.DecodeMessage(b)
			if err != nil {
				ended <- err
				return
			}
			req, ok := m.(*jsonrpc.Request)
			if !ok || req.IsNotification() {
				continue
			}
			res := ""
			if req.Method == mcp.MethodInitialize {
				res = `{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"serverInfo":{"name":"` + name + `","version":"1"}}`
			} else {
				res = answer(req.Method, req.Params)
			}
			if res == "" {
				res = "{}"
			}
			conn.Write(context.Background(), []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, res)))
		}
	}()
	registered := make(chan error, 1)
	go func() { registered <- th.waitView(ctxFor(t), func(v *view) bool { return v.servers[name] != nil }) }()
	select {
	case err := <-ended:
		return err
	case err := <-registered:
		require.NoError(t, err, "the server neither registered nor was closed")
		return nil
	}
}

// pagedTools answers tools/list one tool per page, each with a description
// of size bytes.
func pagedTools(n, size int) func(string, json.RawMessage) string {
	return func(method string, params json.RawMessage) string {
		if method != mcp.MethodToolsList {
			return ""
		}
		i := 0
		if c, ok := jsonrpc.StringMember(params, "cursor"); ok {
			fmt.Sscan(c, &i)
		}
		next := ""
		if i+1 < n {
			next = fmt.Sprintf(`,"nextCursor":"%d"`, i+1)
		}
		return fmt.Sprintf(`{"tools":[{"name":"t%03d","description":"%s","inputSchema":{"type":"object"}}]%s}`, i, strings.Repeat("d", size), next)
	}
}

// Twelve tools of 3 MiB each made every tools/list page a 36 MiB frame, too
// large for any client to read. Items, lists and pages are bounded now: a
// server beyond is refused with the reason, and pages are cut by bytes.
func TestHostile_oversizedLists(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{PageBytes: 256 << 10, MaxListItems: 30})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	good := newBystander(th)

	err := dialRawServer(th, "huge", `{"tools":{}}`, pagedTools(12, 3<<20))
	assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(err), "%v", err)
	assert.ErrorContains(t, err, "over the hub's limit")
	assert.Empty(t, th.reg.view().servers["huge"])

	err = dialRawServer(th, "numerous", `{"tools":{}}`, pagedTools(31, 10)) // 31 tools, over MaxListItems
	assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(err), "%v", err)
	assert.ErrorContains(t, err, "more than 30 items")
	assert.Empty(t, th.reg.view().servers["numerous"])

	err = dialRawServer(th, "many", `{"tools":{}}`, pagedTools(20, 100<<10)) // 2 MiB: allowed
	require.NoError(t, err)
	rc := th.rawClient(true)
	cursor, pages, tools := "", 0, 0
	for {
		params := `{}`
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		rc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":%s}`, pages, params))
		resp := rc.recvResponse()
		require.Nil(t, resp.Error)
		assert.LessOrEqual(t, len(resp.Result), 256<<10+200<<10, "a page is bounded by bytes (one item may pass the bound)")
		var page mcp.ListToolsResult
		require.NoError(t, json.Unmarshal(resp.Result, &page))
		tools += len(page.Tools)
		pages++
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	assert.Equal(t, 20+5, tools, "every tool, the demo's too")
	assert.GreaterOrEqual(t, pages, 8, "cut by bytes")
	good.stillWorks()
}

// The same 36 MiB lists went to other instances as one snapshot, above
// Redis's limit for a subscriber, which dropped every hub's connection.
// Snapshots now go in parts of bounded size.
func TestHostile_largeSnapshotsGoInParts(t *testing.T) {
	t.Parallel()
	a, b, _, hb := startPair(t, Config{SnapshotChunkBytes: 64 << 10})
	a.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	b.waitServer("demo", 1)
	good := newBystander(b) // calls A's demo server from B, through the broker
	good.stillWorks()
	var largest atomic.Int64
	hook := func(ctx context.Context, topic string, payload []byte) error {
		if topic == topicRegistry {
			for {
				cur := largest.Load()
				if int64(len(payload)) <= cur || largest.CompareAndSwap(cur, int64(len(payload))) {
					break
				}
			}
		}
		return nil
	}
	hb.beforePublish.Store(&hook)
	require.NoError(t, dialRawServer(b, "big", `{"tools":{}}`, pagedTools(40, 20<<10))) // 800 KiB of lists
	a.waitFor("all 40 tools of big on A", func(v *view) bool { sl := v.own["big"]; return sl != nil && len(sl.lists[kindTools]) == 40 })
	assert.LessOrEqual(t, largest.Load(), int64(64<<10*4/3+4<<10), "no message much larger than a part")
	assert.Positive(t, largest.Load())
	good.stillWorks()
}

// A server with 50,000 templates made every other server's registration
// take seconds (each template compiled again at every registry change) and
// a read of an unlisted URI tens of milliseconds (templates tried one by
// one). Templates are capped per server, compiled once, and found through
// an index by scheme.
func TestHostile_templateAmplification(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{MaxTemplates: 100})
	th.runServer(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "")
	good := newBystander(th)
	templates := func(n int) func(string, json.RawMessage) string {
		return func(method string, _ json.RawMessage) string {
			if method != mcp.MethodResourcesTemplatesList {
				return ""
			}
			var items []string
			for i := range n {
				items = append(items, fmt.Sprintf(`{"uriTemplate":"x://t%d/{+rest}","name":"t%d"}`, i, i))
			}
			return `{"resourceTemplates":[` + strings.Join(items, ",") + `]}`
		}
	}
	err := dialRawServer(th, "amplifier", `{"resources":{}}`, templates(101))
	assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(err), "%v", err)
	assert.ErrorContains(t, err, "more than 100 items")

	require.NoError(t, dialRawServer(th, "many", `{"resources":{}}`, templates(100)))
	before := th.reg.view()
	th.runServer(mcp.NewServer(mcp.Implementation{Name: "late", Version: "1"}, nil), "late")
	after := th.reg.view()
	assert.Same(t, before.lookup(kindTemplates, "x://t7/{+rest}").tmpl, after.lookup(kindTemplates, "x://t7/{+rest}").tmpl,
		"a template is compiled once, when listed, not at every registry change")
	assert.Len(t, after.templates.byScheme["x"], 100)
	assert.Len(t, after.templates.byScheme["demo"], 1, "a demo:// URI is tried against the demo template only")
	_, err = good.c.ReadResource(ctxFor(t), "demo://greeting/ann")
	require.NoError(t, err)
	good.stillWorks()
}

// readText reads a resource and returns its text.
func readText(t *testing.T, c *mcp.Client, uri string) (string, error) {
	t.Helper()
	res, err := c.ReadResource(ctxFor(t), uri)
	if err != nil {
		return "", err
	}
	return res.Contents[0].Text, nil
}

// resourcesOf answers a server's resource requests with text naming it.
func resourcesOf(who string, uris []string, templates []string) func(string, json.RawMessage) string {
	return func(method string, params json.RawMessage) string {
		switch method {
		case mcp.MethodResourcesList:
			return listing(uris...)(method, params)
		case mcp.MethodResourcesTemplatesList:
			var items []string
			for _, tpl := range templates {
				items = append(items, fmt.Sprintf(`{"uriTemplate":%q,"name":"t"}`, tpl))
			}
			return `{"resourceTemplates":[` + strings.Join(items, ",") + `]}`
		case mcp.MethodResourcesRead:
			uri, _ := jsonrpc.StringMember(params, "uri")
			return fmt.Sprintf(`{"contents":[{"uri":%q,"text":"from %s"}]}`, uri, who)
		}
		return ""
	}
}

// A server whose token allows only the name aaa used to take over another
// server's resources: the first server by name won a URI, and templates
// were tried in key order ("{+" first). The first server to register now
// keeps what it lists; a later one's copy is not served, and operators see
// the conflict.
func TestHostile_resourceHijack(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Tokens: writeTokens(t, `
tokens:
  - {name: weather, token: weather-secret, roles: [server], servers: [weather]}
  - {name: aaa, token: aaa-secret, roles: [server], servers: [aaa]}
  - {name: fenced, token: fenced-secret, roles: [server], servers: [fenced], resources: ["fenced://*"]}
  - {name: app, token: app-secret, roles: [client]}
  - {name: ops, token: ops-secret, roles: [dashboard]}
`)})
	caps := `{"resources":{"subscribe":true}}`
	weather := startRawServerWith(th, "weather", "weather-secret", caps,
		resourcesOf("weather", []string{"weather://report"}, []string{"weather://city/{name}"}))
	startRawServerWith(th, "aaa", "aaa-secret", caps,
		resourcesOf("aaa", []string{"weather://report", "weather://city/paris"}, []string{"weather://city/{+x}", "weather://{+y}"}))
	startRawServerWith(th, "fenced", "fenced-secret", caps,
		resourcesOf("fenced", []string{"fenced://ok", "nobody://else"}, nil))
	app := th.tokenClient("app-secret", nil)

	for _, uri := range []string{"weather://report", "weather://city/paris", "weather://city/lyon"} {
		text, err := readText(t, app, uri)
		require.NoError(t, err, uri)
		assert.Equal(t, "from weather", text, "%s stays with the server that registered first", uri)
	}
	require.NoError(t, app.Subscribe(ctxFor(t), "weather://report"))
	weather.expect("resources/subscribe weather://report")
	text, err := readText(t, app, "fenced://ok")
	require.NoError(t, err)
	assert.Equal(t, "from fenced", text)
	_, err = readText(t, app, "nobody://else")
	assert.Equal(t, mcp.CodeResourceNotFound, rpcCode(err), "outside its token's resources, fenced serves nothing")

	ops := th.tokenClient("ops-secret", nil)
	doc, err := readText(t, ops, "switchboard://servers")
	require.NoError(t, err)
	var servers struct{ Conflicts []conflict }
	require.NoError(t, json.Unmarshal([]byte(doc), &servers))
	assert.Contains(t, servers.Conflicts, conflict{Kind: "resource", Key: "weather://report", Kept: "weather", Refused: "aaa"})
	assert.Contains(t, servers.Conflicts, conflict{Kind: "resource", Key: "weather://city/paris", Kept: "weather", Refused: "aaa"})
	doc, err = readText(t, app, "switchboard://servers")
	require.NoError(t, err)
	assert.NotContains(t, doc, "conflicts", "only operators see conflicts")
}

// A URI's owner used to be the oldest server connected now: when the
// server that registered first redeployed, a squatter of another token
// became the oldest and served its URIs and templates (and kept them once
// the owner was back). A server that leaves now keeps its place, reserved
// to its token, for ReservationPeriod: its URIs and name are no one
// else's meanwhile, it gets them back when it returns, and only after the
// period does the next server in line get them.
func TestHostile_resourceHijackAfterARedeploy(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Tokens: writeTokens(t, `
tokens:
  - {name: demo, token: demo-secret, roles: [server], servers: [demo]}
  - {name: weather, token: weather-secret, roles: [server], servers: [weather]}
  - {name: aaa, token: aaa-secret, roles: [server], servers: [aaa]}
  - {name: rival, token: rival-secret, roles: [server], servers: ["weather*"]}
  - {name: app, token: app-secret, roles: [client]}
  - {name: ops, token: ops-secret, roles: [dashboard]}
`)})
	th.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
	good := &bystander{t: t, c: th.tokenClient("app-secret", nil)}
	caps := `{"resources":{"subscribe":true}}`
	weather := resourcesOf("weather", []string{"weather://report"}, []string{"weather://city/{name}"})
	owner := startRawServerWith(th, "weather", "weather-secret", caps, weather)
	startRawServerWith(th, "aaa", "aaa-secret", caps,
		resourcesOf("aaa", []string{"weather://report", "weather://city/paris", "aaa://own"}, []string{"weather://{+y}", "aaa://t/{x}"}))
	app := th.tokenClient("app-secret", nil)
	reads := func(want string) {
		t.Helper()
		for _, uri := range []string{"weather://report", "weather://city/paris", "weather://city/lyon"} {
			text, err := readText(t, app, uri)
			require.NoError(t, err, uri)
			assert.Equal(t, want, text, uri)
		}
		text, err := readText(t, app, "aaa://own")
		require.NoError(t, err, "the squatter keeps what is its own")
		assert.Equal(t, "from aaa", text)
	}
	reads("from weather")
	assert.Contains(t, th.reg.view().conflicts,
		conflict{Kind: "resourceTemplate", Key: "weather://{+y}", Kept: "weather", Refused: "aaa"},
		"a template of another token that overlaps the owner's is not served")

	// The owner redeploys: while it is away its place is kept.
	owner.conn.Close(peer.CloseGoingAway, "redeploying")
	th.waitFor("weather gone", func(v *view) bool { return len(v.servers["weather"]) == 0 })
	for _, uri := range []string{"weather://report", "weather://city/paris", "weather://city/lyon"} {
		_, err := readText(t, app, uri)
		assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "%s while its server is away: %v", uri, err)
	}
	resources, err := app.AllResources(ctxFor(t))
	require.NoError(t, err)
	for _, r := range resources {
		assert.NotContains(t, r.URI, "weather://", "the squatter's copies are not listed")
	}
	rival, err := registerRaw(th, "weather", "rival-secret")
	assert.False(t, rival, "another token may not take the name meanwhile")
	assert.ErrorContains(t, err, "kept for the server of another token")
	good.stillWorks()

	// It comes back, later than the squatter: its place is its again.
	owner = startRawServerWith(th, "weather", "weather-secret", caps, weather)
	reads("from weather")
	require.NoError(t, app.Subscribe(ctxFor(t), "weather://report"))
	owner.expect("resources/subscribe weather://report")
	good.stillWorks()

	// A rolling restart: a new replica joins, the old one leaves. The
	// server keeps its rank throughout, and the subscription moves with it.
	next := startRawServerWith(th, "weather", "weather-secret", caps, weather)
	owner.conn.Close(peer.CloseGoingAway, "replaced")
	th.waitFor("one weather replica", func(v *view) bool { return len(v.servers["weather"]) == 1 })
	reads("from weather")
	next.expect("resources/subscribe weather://report")

	// Once it has been away for longer than the period, the next in line
	// gets what it lists.
	next.conn.Close(peer.CloseGoingAway, "retired")
	th.waitFor("weather gone", func(v *view) bool { return len(v.servers["weather"]) == 0 })
	th.reg.expire(time.Now().Add(DefaultReservationPeriod))
	reads("from aaa")
	good.stillWorks()
}

// Allow-patterns used to cover tools only: a client restricted to one tool
// still read and subscribed to every server's resources, listed and got
// every prompt, and switchboard://servers showed it every replica's token,
// instance address and load.
func TestHostile_restrictionsCoverEverything(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Tokens: writeTokens(t, `
tokens:
  - {name: demo, token: demo-secret, roles: [server], servers: [demo]}
  - {name: secret, token: secret-secret, roles: [server], servers: [secret]}
  - {name: limited, token: limited-secret, roles: [client], tools: ["demo__echo"]}
  - {name: admin, token: admin-secret, roles: [admin]}
`)})
	th.runServerWith(demo.New(&demo.Options{ClockInterval: time.Hour}).Server, "demo", "demo-secret")
	secret := mcp.NewServer(mcp.Implementation{Name: "secret", Version: "1"}, nil)
	secret.AddResource(&mcp.Resource{URI: "secret://plans", Name: "plans"}, func(ctx context.Context, req *mcp.ResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{{URI: req.URI, Text: "the plans"}}}, nil
	})
	secret.AddPrompt(&mcp.Prompt{Name: "leak"}, func(ctx context.Context, req *mcp.PromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: mcp.TextContent("leaked")}}}, nil
	})
	th.runServerWith(secret, "secret", "secret-secret")
	good := &bystander{t: t, c: th.tokenClient("admin-secret", nil)}
	c := th.tokenClient("limited-secret", nil)
	ctx := ctxFor(t)

	tools, err := c.AllTools(ctx)
	require.NoError(t, err)
	require.Len(t, tools, 1)
	assert.Equal(t, "demo__echo", tools[0].Name)
	prompts, err := c.AllPrompts(ctx)
	require.NoError(t, err)
	assert.Empty(t, prompts, "no prompt matches demo__echo")
	resources, err := c.AllResources(ctx)
	require.NoError(t, err)
	for _, r := range resources {
		assert.NotEqual(t, "secret://plans", r.URI, "another server's resources are not listed")
	}
	_, err = c.ReadResource(ctx, "secret://plans")
	assert.Equal(t, mcp.CodeForbidden, rpcCode(err), "%v", err)
	assert.Equal(t, mcp.CodeForbidden, rpcCode(c.Subscribe(ctx, "secret://plans")))
	_, err = c.GetPrompt(ctx, "secret__leak", nil)
	assert.Equal(t, mcp.CodeForbidden, rpcCode(err), "%v", err)
	_, err = c.Complete(ctx, &mcp.CompleteParams{Ref: mcp.CompleteRef{Type: "ref/prompt", Name: "secret__leak"}, Argument: mcp.CompleteArgument{Name: "x"}})
	assert.Equal(t, mcp.CodeForbidden, rpcCode(err), "%v", err)
	_, err = c.Complete(ctx, &mcp.CompleteParams{Ref: mcp.CompleteRef{Type: "ref/prompt", Name: "secret__nothing"}, Argument: mcp.CompleteArgument{Name: "x"}})
	assert.Equal(t, mcp.CodeForbidden, rpcCode(err), "a name the token may not use is forbidden, whether it exists or not: %v", err)

	doc, err := readText(t, c, "switchboard://servers")
	require.NoError(t, err)
	assert.NotContains(t, doc, `"secret"`, "the built-in resources show only what the token may use")
	assert.NotContains(t, doc, `"owner"`)
	assert.NotContains(t, doc, `"inFlight"`)
	assert.NotContains(t, doc, `"addr"`)
	text, err := readText(t, c, "demo://counter")
	require.NoError(t, err, "its own server's resources are fine")
	assert.NotEmpty(t, text)
	good.stillWorks()
}
