package hub

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// signinServer asks for URL-mode elicitations: "signin" sends the calling
// client's user to a URL (elicitation/create), "needs" answers -32042
// listing one; "done" tells of an elicitation's end from a call of its own,
// as a server does when the user comes back from the URL, whoever calls.
func signinServer() *mcp.Server {
	s := sessionServer("signin", nil)
	type idArgs struct {
		ID string `json:"id"`
	}
	mcp.AddTypedTool(s, &mcp.Tool{Name: "signin", Description: "sign in at a URL"}, func(ctx context.Context, req *mcp.ToolRequest, a idArgs) (*mcp.CallToolResult, error) {
		res, err := req.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.test/signin/" + a.ID, ElicitationID: a.ID})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent(res.Action)}}, nil
	})
	mcp.AddTypedTool(s, &mcp.Tool{Name: "needs", Description: "needs a sign-in first"}, func(ctx context.Context, req *mcp.ToolRequest, a idArgs) (*mcp.CallToolResult, error) {
		data, _ := json.Marshal(map[string]any{"elicitations": []mcp.ElicitParams{{Mode: "url", Message: "Sign in", URL: "https://example.test/signin/" + a.ID, ElicitationID: a.ID}}})
		return nil, &jsonrpc.Error{Code: mcp.CodeURLElicitationRequired, Message: "sign in first", Data: data}
	})
	mcp.AddTypedTool(s, &mcp.Tool{Name: "done", Description: "the user is back"}, func(ctx context.Context, req *mcp.ToolRequest, a idArgs) (*mcp.CallToolResult, error) {
		if err := req.Session.Peer().Notify(ctx, mcp.NotificationElicitationComplete, map[string]string{"elicitationId": a.ID}); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("ok")}}, nil
	})
	return s
}

// elicitingClient connects a client that accepts URL-mode elicitations and
// collects its notifications.
func elicitingClient(t *testing.T, url string) (*mcp.Client, *notes) {
	t.Helper()
	n := newNotes()
	c, err := mcp.Connect(ctxFor(t), url, sessionOpts(&mcp.ClientOptions{
		ElicitURL: true,
		Elicitation: func(_ context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			if p.Mode != "url" || p.ElicitationID == "" {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		OnNotification: n.add,
	}))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, n
}

// completesFor has a calls "signin" (or "needs"), then b "done", and checks
// that the notice reached a, and b heard nothing of it.
func completesFor(t *testing.T, a, b *mcp.Client, an, bn *notes, prefix, id string) {
	t.Helper()
	ctx := ctxFor(t)
	res, err := a.CallTool(ctx, prefix+"signin", map[string]string{"id": id + "-1"}, nil)
	require.NoError(t, err)
	require.NotEmpty(t, res.Content)
	assert.Equal(t, "accept", res.Content[0].Text)
	_, err = a.CallTool(ctx, prefix+"needs", map[string]string{"id": id + "-2"}, nil)
	assert.Equal(t, mcp.CodeURLElicitationRequired, jsonrpc.CodeOf(err), "the server's answer passes through")

	for _, id := range []string{id + "-1", id + "-2"} {
		_, err = b.CallTool(ctx, prefix+"done", map[string]string{"id": id}, nil)
		require.NoError(t, err)
		an.wait(t, mcp.NotificationElicitationComplete, 1, func(p json.RawMessage) bool {
			got, _ := jsonrpc.StringMember(p, "elicitationId")
			return got == id
		})
	}
	assert.Equal(t, 2, an.count(mcp.NotificationElicitationComplete))
	assert.Zero(t, bn.count(mcp.NotificationElicitationComplete), "the notice went to the client the elicitation went to only")
}

func TestElicitationComplete_reachesTheClientTheElicitationWentTo(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(signinServer(), "signin")
	for _, ep := range []struct{ path, prefix string }{{"/mcp", "signin__"}, {"/servers/signin/mcp", ""}} {
		for _, transport := range []string{"ws", "http"} {
			t.Run(transport+ep.path, func(t *testing.T) {
				url := th.srv.URL + ep.path
				if transport == "ws" {
					url = th.wsURL(ep.path)
				}
				a, an := elicitingClient(t, url)
				b, bn := elicitingClient(t, url)
				completesFor(t, a, b, an, bn, ep.prefix, transport+strings.ReplaceAll(ep.path, "/", "-"))
			})
		}
	}
	// Each notice was passed on once: one that comes again finds nobody,
	// and is counted.
	c, _ := elicitingClient(t, th.wsURL("/mcp"))
	_, err := c.CallTool(ctxFor(t), "signin__done", map[string]string{"id": "ws-mcp-1"}, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return scrape(t, th, `switchboard_server_notifications_unrouted_total{method="notifications/elicitation/complete",reason="no_destination"}`) == 1
	}, wait, 10*time.Millisecond)
}

func TestElicitationComplete_acrossInstances(t *testing.T) {
	t.Parallel()
	_, hubs := startCluster(t, 2)
	near, far := hubs[0], hubs[1]
	far.runServer(signinServer(), "signin")
	near.waitFor("signin across the cluster", func(v *view) bool { return len(v.servers["signin"]) == 1 })
	for _, transport := range []string{"ws", "http"} {
		t.Run(transport, func(t *testing.T) {
			url := near.srv.URL + "/mcp"
			if transport == "ws" {
				url = near.wsURL("/mcp")
			}
			a, an := elicitingClient(t, url)               // on the instance without the server
			b, bn := elicitingClient(t, far.wsURL("/mcp")) // on the server's
			completesFor(t, a, b, an, bn, "signin__", "far-"+transport)
		})
	}
}

// TestElicitationComplete_forgottenWhenTheClientLeaves checks that where an
// elicitation went is forgotten with its client.
func TestElicitationComplete_forgottenWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.runServer(signinServer(), "signin")
	a, _ := elicitingClient(t, th.wsURL("/mcp"))
	_, err := a.CallTool(ctxFor(t), "signin__signin", map[string]string{"id": "gone"}, nil)
	require.NoError(t, err)
	th.elicits.mu.Lock()
	kept := len(th.elicits.servers["signin"].to)
	th.elicits.mu.Unlock()
	require.Equal(t, 1, kept, "where the accepted elicitation went is kept")
	require.NoError(t, a.Close())
	require.Eventually(t, func() bool {
		th.elicits.mu.Lock()
		defer th.elicits.mu.Unlock()
		return len(th.elicits.servers) == 0
	}, wait, 10*time.Millisecond, "forgotten with its client")
}

// TestElicitations_bounded checks the bound on one server's elicitations:
// the oldest go first.
func TestElicitations_bounded(t *testing.T) {
	t.Parallel()
	var e elicitations
	for i := range maxElicitationsPerServer + 10 {
		e.note("s", strconv.Itoa(i), "client")
		if i%2 == 1 {
			e.forget("s", strconv.Itoa(i))
		}
	}
	_, ok := e.take("s", "0")
	assert.True(t, ok, "fewer than the bound are live")
	for i := 2; i < maxElicitationsPerServer*3; i += 2 {
		e.note("s", "x"+strconv.Itoa(i), "client")
	}
	_, ok = e.take("s", "2")
	assert.False(t, ok, "the oldest left")
	e.mu.Lock()
	defer e.mu.Unlock()
	se := e.servers["s"]
	assert.Len(t, se.to, maxElicitationsPerServer)
	assert.LessOrEqual(t, len(se.order), 2*maxElicitationsPerServer+16, "forgotten ids do not pile up")
}

// TestReplica_unroutedNotificationsAreCounted checks that a server's
// notification that goes nowhere is counted by method and reason, never
// silently dropped: one MCP defines but the hub never passes on, one MCP
// does not define, and ones about nothing in flight.
func TestReplica_unroutedNotificationsAreCounted(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	rs := startRawServer(th, "noisy", `{"tools":{}}`, nil)
	for _, frame := range []string{
		`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t","status":"working"}}`,
		`{"jsonrpc":"2.0","method":"notifications/mine","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"nobody"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"sb-0","progress":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nothing"}}`,
	} {
		rs.write(frame)
	}
	for series, want := range map[string]float64{
		`{method="notifications/tasks/status",reason="not_routed"}`:             1,
		`{method="other",reason="unknown"}`:                                     1,
		`{method="notifications/elicitation/complete",reason="no_destination"}`: 1,
		`{method="notifications/progress",reason="no_destination"}`:             1,
		`{method="notifications/cancelled",reason="no_destination"}`:            1,
	} {
		require.Eventually(t, func() bool {
			return scrape(t, th, "switchboard_server_notifications_unrouted_total"+series) == want
		}, wait, 10*time.Millisecond, series)
	}
}
