// Package hub is the Switchboard hub: sessions, the registry of MCP servers,
// routing, subscriptions and the HTTP endpoints.
package hub
