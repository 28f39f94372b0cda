package gosdk_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// bothEras runs a test with the SDK in its default mode (2026-07-28) and
// asking for 2025-11-25.
func bothEras(t *testing.T, test func(t *testing.T, version string)) {
	t.Run("2026-07-28", func(t *testing.T) { test(t, "") })
	t.Run("2025-11-25", func(t *testing.T) { test(t, "2025-11-25") })
}

// negotiated checks that the SDK speaks the revision it asked for.
func negotiated(t *testing.T, cs *sdk.ClientSession, version string) {
	t.Helper()
	want := version
	if want == "" {
		want = "2026-07-28"
	}
	assert.Equal(t, want, cs.InitializeResult().ProtocolVersion)
}

// TestGoSDK_hubAggregates points the SDK at the hub's /mcp, where two
// servers are one: their tools under <server>__<name>, each call routed to
// its own server.
func TestGoSDK_hubAggregates(t *testing.T) { bothEras(t, testGoSDK_hubAggregates) }

func testGoSDK_hubAggregates(t *testing.T, version string) {
	srv := startHub(t, nil, nil)
	one, two := newFixture(), newFixture()
	dialOut(t, one.Server, srv, "one")
	dialOut(t, two.Server, srv, "two")
	cs := connectVersion(t, srv.URL+"/mcp", srv.Client(), version, &sdk.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "Paris"}}, nil
		},
	})
	ctx := testCtx(t)
	negotiated(t, cs, version)
	assert.Equal(t, "switchboard", cs.InitializeResult().ServerInfo.Name)
	var tools []string
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err)
		tools = append(tools, tool.Name)
	}
	for _, want := range []string{"one__add", "one__ask", "two__add", "two__slow"} {
		assert.Contains(t, tools, want)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "two__add", Arguments: map[string]int{"a": 40, "b": 2}})
	require.NoError(t, err)
	assert.Equal(t, "42", res.Content[0].(*sdk.TextContent).Text)
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "one__ask"})
	require.NoError(t, err)
	assert.Equal(t, "model: Paris", res.Content[0].(*sdk.TextContent).Text)
}

// TestGoSDK_acrossInstances puts two hub instances behind a round-robin
// load balancer without affinity, the server on the second: the SDK's
// session (or, in 2026-07-28, its requests, a sampling call's retry
// included) works wherever its requests land.
func TestGoSDK_acrossInstances(t *testing.T) { bothEras(t, testGoSDK_acrossInstances) }

func testGoSDK_acrossInstances(t *testing.T, version string) {
	broker := pubsub.NewMemory()
	t.Cleanup(func() { broker.Close() })
	a, b := startHub(t, broker, nil), startHub(t, broker, nil)
	f := newFixture()
	dialOut(t, f.Server, b, "")
	var next atomic.Int64
	var proxies []*httputil.ReverseProxy
	for _, srv := range []*httptest.Server{a, b} {
		u, err := url.Parse(srv.URL)
		require.NoError(t, err)
		proxies = append(proxies, &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = r.In.Host }, FlushInterval: -1})
	}
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[int(next.Add(1))%2].ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)

	progress := make(chan float64, 16)
	updated := make(chan string, 16)
	changed := make(chan struct{}, 16)
	cs := connectVersion(t, lb.URL+"/mcp", lb.Client(), version, &sdk.ClientOptions{
		ToolListChangedHandler: func(ctx context.Context, req *sdk.ToolListChangedRequest) { changed <- struct{}{} },
		ProgressNotificationHandler: func(ctx context.Context, req *sdk.ProgressNotificationClientRequest) {
			progress <- req.Params.Progress
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		},
		CreateMessageHandler: func(ctx context.Context, req *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: "Lyon"}}, nil
		},
	})
	ctx := testCtx(t)
	negotiated(t, cs, version)
	for range 4 {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "switchboard-fixture__add", Arguments: map[string]int{"a": 1, "b": 2}})
		require.NoError(t, err)
		assert.Equal(t, "3", res.Content[0].(*sdk.TextContent).Text)
	}
	_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "switchboard-fixture__slow", Meta: sdk.Meta{"progressToken": "p"}})
	require.NoError(t, err)
	var got []float64
	for range 3 {
		got = append(got, recv(t, progress))
	}
	assert.True(t, slices.IsSorted(got), "progress in order: %v", got)
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "switchboard-fixture__ask"})
	require.NoError(t, err)
	assert.Equal(t, "model: Lyon", res.Content[0].(*sdk.TextContent).Text)
	require.NoError(t, cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "test://one"}))
	assert.Equal(t, "test://one", recv(t, f.subscribed), "the subscription reached the server")
	f.ResourceUpdated(ctx, "test://one")
	assert.Equal(t, "test://one", recv(t, updated))

	f.AddTool(&mcp.Tool{Name: "late", Description: "added later"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("late")}}, nil
	})
	recv(t, changed)
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "switchboard-fixture__late"})
	require.NoError(t, err)
	assert.Equal(t, "late", res.Content[0].(*sdk.TextContent).Text)

	started := f.addWait()
	recv(t, changed)
	cancelCall(t, cs, f, "switchboard-fixture__wait", started)
}
