// Package mcp holds the Model Context Protocol types, method names and error
// codes the hub routes, and Go helpers to write an MCP server that dials out
// to the hub and a client that connects to it.
package mcp
