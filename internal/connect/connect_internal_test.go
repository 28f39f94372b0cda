package connect

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestServer_label(t *testing.T) {
	for _, tc := range []struct {
		srv  Server
		want string
	}{
		{Server{Name: "files", Command: "npx"}, "files"},
		{Server{Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}}, "server-memory"},
		{Server{Command: "/usr/bin/npx", Args: []string{"-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"}}, "server-everything"},
		{Server{Command: "uvx", Args: []string{"mcp-server-git@1.0"}}, "mcp-server-git"},
		{Server{Command: "/opt/bin/my-server", Args: []string{"--port", "1"}}, "my-server"},
		{Server{Upstream: "http://user:pw@h:1/mcp?key=x"}, "http://h:1/mcp"},
	} {
		assert.Equal(t, tc.want, tc.srv.label(), "%+v", tc.srv)
	}
}
