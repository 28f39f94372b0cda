package mcp_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// TestStreamableHandler_screen: Screen sees every valid POST's messages
// before they reach a session (or open one), and its refusal answers the
// whole POST with its status and headers; invalid JSON-RPC never reaches
// it; the session goes on after a refused POST.
func TestStreamableHandler_screen(t *testing.T) {
	var screened atomic.Int32
	hs := serveHTTP(t, testHTTPServer(), &mcp.StreamableOptions{
		Screen: func(r *http.Request, msgs []jsonrpc.Message) error {
			screened.Add(1)
			for _, m := range msgs {
				if req, ok := m.(*jsonrpc.Request); ok && req.Method == mcp.MethodToolsCall {
					return &mcp.HTTPError{Status: http.StatusForbidden, Code: mcp.CodeForbidden, Message: "not that one",
						Header: http.Header{"WWW-Authenticate": {`Bearer error="insufficient_scope", scope="more"`}}}
				}
			}
			return nil
		},
	})
	c := newRaw(t, hs)
	resp := c.do(http.MethodPost, initBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	c.session = resp.Header.Get(mcp.HeaderSessionID)
	assert.Equal(t, int32(1), screened.Load(), "the initialize POST too")

	resp = c.do(http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}]`)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a batch is refused whole")
	assert.Equal(t, `Bearer error="insufficient_scope", scope="more"`, resp.Header.Get("WWW-Authenticate"))
	b, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(b), `"code":-32003`)

	before := screened.Load()
	resp = c.do(http.MethodPost, `{"jsonrpc":"2.0","id":3,`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, before, screened.Load(), "invalid JSON-RPC is answered before")

	resp = c.do(http.MethodPost, `{"jsonrpc":"2.0","id":4,"method":"ping"}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the session goes on")
	b, _ = io.ReadAll(resp.Body)
	assert.True(t, strings.Contains(string(b), `"id":4`), "%s", b)
}
