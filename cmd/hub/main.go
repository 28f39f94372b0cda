// Command hub is Switchboard: `hub` (or `hub serve`) runs the hub, `hub
// connect` puts MCP servers on a hub, and `hub stdio` is the hub as a stdio
// MCP server for clients that launch a command. `hub --help` says more.
//
// Every flag has an environment equivalent: --log-level is
// SWITCHBOARD_LOG_LEVEL, and so on. A flag given on the command line wins.
// The command's logic is in internal/cli.
package main

import "github.com/switchboard-mcp/switchboard/internal/cli"

func main() { cli.Main() }
