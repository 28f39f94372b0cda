package hub

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// TestHub_drain checks graceful shutdown: readiness goes, new connections
// and new calls are refused, the call in flight finishes, then everyone is
// closed with 1001.
func TestHub_drain(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	started, release := make(chan struct{}), make(chan struct{})
	s := mcp.NewServer(mcp.Implementation{Name: "d", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("finished")}}, nil
	})
	th.runServer(s, "d")
	c := th.client(nil)
	result := make(chan error, 1)
	go func() {
		res, err := c.CallTool(context.Background(), "d__work", nil, nil)
		if err == nil && res.Content[0].Text != "finished" {
			err = assert.AnError
		}
		result <- err
	}()
	<-started

	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		drained <- th.Drain(ctx)
	}()
	require.Eventually(t, func() bool { return readyz(t, th) == http.StatusServiceUnavailable }, wait, 5*time.Millisecond)
	assert.Equal(t, http.StatusServiceUnavailable, dialStatus(t, th.wsURL("/mcp"), nil), "no new connections")
	_, err := c.CallTool(ctxFor(t), "d__work", nil, nil)
	assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "no new calls: %v", err)
	assert.ErrorContains(t, err, "shutting down")
	select {
	case <-drained:
		t.Fatal("the drain did not wait for the call in flight")
	default:
	}

	close(release)
	require.NoError(t, <-result, "the call in flight finished")
	require.NoError(t, <-drained)
	<-c.Done()
	assert.Equal(t, peer.CloseGoingAway, peer.CloseStatus(c.Peer().Err()))
}
