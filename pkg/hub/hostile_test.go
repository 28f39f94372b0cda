package hub

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
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
	for _, path := range []string{"/mcp", "/mcp/server?name=demo", "/metrics"} {
		assert.Equal(t, http.StatusForbidden, upgradeStatus(t, th, path, evil, "http://"+evil), "%s with a rebound Host", path)
		assert.Equal(t, http.StatusForbidden, upgradeStatus(t, th, path, evil, ""), "%s with a rebound Host and no Origin", path)
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
