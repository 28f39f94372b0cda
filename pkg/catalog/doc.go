// Package catalog reads the hub's catalog file and computes what it
// means: virtual servers (curated endpoints that offer chosen tools,
// prompts and resources of real servers under names and descriptions that
// fit, with some arguments fixed), the search mode's meta-tools, and how
// the aggregate endpoint names what several servers offer. It is pure: it
// holds no state, does no I/O but Load, and knows nothing of the hub, so
// every instance that reads the same file and sees the same servers
// computes the same thing.
//
// # The file
//
// Parse (or Load) reads YAML or JSON strictly: an unknown field, a bad
// glob, two virtual servers of one name, two picks giving one name, fixed
// arguments that are not an object are errors, each with its line, in one
// *Error. What depends on the servers connected is not: CheckNames says
// whether a virtual server takes a real server's name (an error the hub
// reports on load), and Build's warnings say what does not match yet.
//
//	virtualServers:
//	  - name: support              # served at /servers/support/mcp
//	    title: Support desk
//	    discovery: list            # or: search
//	    tools:
//	      - {server: demo, include: ["add", "echo"], exclude: []}
//	      - {server: demo, tool: slow, as: wait, description: "Waits.", fixed: {steps: 2}}
//	    prompts:   [{server: demo, include: ["*"]}]
//	    resources: [{server: demo, uriPrefix: "demo://"}]
//	aggregate:                     # how /mcp names tools (names.go)
//	  names: priority
//	  priority: [github]
//	  aliases: [{server: demo, tool: add, as: plus}]
//
// # The effective view
//
// Build takes one virtual server and its members' current lists (raw
// JSON, as the servers sent them) and returns a View: the lists its
// endpoint shows, in a fixed order, and the reverse map from a name to its
// server (View.Tool, View.Prompt, View.ServerOfURI). Item.Arguments turns
// a client's arguments into the server's: a fixed argument the client
// sends is refused (ErrFixedArgument), the fixed ones are spliced in
// without decoding the rest.
//
// # Search mode
//
// MetaTools are the two tools a search-mode endpoint lists; ParseSearchArgs,
// ParseCallArgs and SearchResult read their arguments and build
// search_tools' answer. The index itself is internal/search.
//
// # Where things are
//
//	file.go   Catalog, VirtualServer and the picks; Parse, Load, Error
//	check.go  what Parse checks; CheckNames; name rules
//	view.go   Build, View, Item: the effective lists and the reverse map;
//	          Summary, what the dashboard and switchboard://catalog show
//	fixed.go  fixed arguments: out of the schema, into the call
//	meta.go   search mode's meta-tools
//	names.go  the aggregate's naming policy (prefix, priority, aliases)
package catalog
