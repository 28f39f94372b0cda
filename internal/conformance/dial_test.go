package conformance_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/conformance"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// TestFixture_dialsOutToHub runs the fixture the other way: dialed out to a
// hub (Server.Dial), as the suite will reach it through the hub. A client of
// the hub calls its tools, test_reconnection included (with no HTTP stream
// of its own to close, it simply answers), and answers its sampling.
func TestFixture_dialsOutToHub(t *testing.T) {
	h, err := hub.New(hub.Config{})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = h.NewHTTPServer()
	srv.Start()
	defer func() {
		srv.Close()
		assert.NoError(t, h.Close())
	}()
	ws := "ws" + strings.TrimPrefix(srv.URL, "http")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	dialCtx, stopDial := context.WithCancel(ctx)
	dialed := make(chan error, 1)
	go func() { dialed <- conformance.NewServer(nil).Dial(dialCtx, ws+"/mcp/server?name=conformance", nil) }()
	defer func() {
		stopDial()
		assert.ErrorIs(t, <-dialed, context.Canceled)
	}()

	c, err := mcp.Connect(ctx, ws+"/mcp", &mcp.ClientOptions{
		ProtocolVersion: mcp.LatestVersion, // the hub's sessions
		Sampling: func(ctx context.Context, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Content: mcp.TextContent("via the hub"), Model: "m"}, nil
		},
	})
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool {
		tools, err := c.AllTools(ctx)
		return err == nil && slices.ContainsFunc(tools, func(tl *mcp.Tool) bool { return tl.Name == "conformance__test_reconnection" })
	}, 10*time.Second, 10*time.Millisecond, "the fixture registers on the hub")

	for name, want := range map[string]string{
		"conformance__test_simple_text":  "This is a simple text response for testing.",
		"conformance__test_reconnection": "Reconnection test completed successfully.",
		"conformance__test_sampling":     "LLM response: via the hub",
	} {
		res, err := c.CallTool(ctx, name, map[string]string{"prompt": "hi"}, nil)
		require.NoError(t, err, name)
		require.NotEmpty(t, res.Content)
		assert.Contains(t, res.Content[0].Text, want, name)
	}
}
