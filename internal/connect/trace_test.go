package connect_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/connect"
	"github.com/switchboard-mcp/switchboard/internal/jaegertest"
	"github.com/switchboard-mcp/switchboard/internal/tracing"
	"github.com/switchboard-mcp/switchboard/pkg/hub"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// tracedUpstream is a Streamable HTTP MCP server whose tool "echo" records
// the traceparent of its _meta, and which records the traceparent header
// of each POST.
type tracedUpstream struct {
	srv     *httptest.Server
	mu      sync.Mutex
	metas   []string
	headers []string
}

func startTracedUpstream(t *testing.T) *tracedUpstream {
	u := &tracedUpstream{}
	s := mcp.NewServer(mcp.Implementation{Name: "remote", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		tp, _ := req.Params.Meta[mcp.MetaTraceparent].(string)
		u.mu.Lock()
		u.metas = append(u.metas, tp)
		u.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("echo")}}, nil
	})
	h := mcp.NewStreamableHandler(&mcp.StreamableOptions{
		Open: func(r *http.Request, ss *mcp.StreamSession) error {
			go s.Serve(ss.Context(), ss.Conn())
			return nil
		},
	})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Traceparent") != "" {
			u.mu.Lock()
			u.headers = append(u.headers, r.Header.Get("Traceparent"))
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	t.Cleanup(h.Close)
	return u
}

// TestRun_tracesTheHop: with tracing on at the hub and at the connector, a
// call to a server behind `hub connect --upstream` is one trace: the hub's
// span of the request it sent, the connector's span of its hop (service
// switchboard-connect) as its child, and the server receiving the hop's
// context in _meta and as the POST's traceparent header.
func TestRun_tracesTheHop(t *testing.T) {
	j := jaegertest.Start(t)
	cfg := tracing.Config{Enabled: true, Endpoint: j.OTLPHTTP(), BatchDelay: 20 * time.Millisecond}
	th := startHub(t, hub.Config{Tracing: cfg})
	cfg.Service, cfg.InstanceID = tracing.ServiceName+"-connect", "connector-1"
	tr, err := tracing.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	up := startTracedUpstream(t)
	runConnector(t, []connect.Server{{Name: "remote", Upstream: up.srv.URL}}, connect.Options{URL: th.url("/mcp/server"), Tracing: tr})
	c := th.client(t, nil)
	waitTool(t, c, "remote__echo", true)
	_, err = c.CallTool(ctxFor(t), "remote__echo", nil, nil)
	require.NoError(t, err)

	up.mu.Lock()
	require.NotEmpty(t, up.metas)
	meta := up.metas[len(up.metas)-1]
	assert.Contains(t, up.headers, meta, "the POST carried the request's context as its traceparent header")
	up.mu.Unlock()
	parts := strings.Split(meta, "-")
	require.Len(t, parts, 4, meta)
	require.NoError(t, tr.ForceFlush(ctxFor(t)))
	trace := j.WaitTrace(t, parts[1], 3)
	var sent, hop *jaegertest.Span
	for _, s := range trace.Spans {
		switch {
		case s.Name == "tools/call echo" && s.Resource["service.name"] == tracing.ServiceName:
			sent = s
		case s.Name == "tools/call echo" && s.Resource["service.name"] == tracing.ServiceName+"-connect":
			hop = s
		}
	}
	require.NotNil(t, sent, "%v", trace.Names())
	require.NotNil(t, hop, "%v", trace.Names())
	assert.Equal(t, sent.SpanID, hop.ParentID, "the hop is the child of the hub's request")
	assert.Equal(t, hop.SpanID, parts[2], "the server continues from the hop")
	assert.Equal(t, "CLIENT", hop.Kind)
	assert.Equal(t, "remote", hop.Attributes["switchboard.server.name"])
	assert.Equal(t, "http", hop.Attributes["network.protocol.name"])
}
