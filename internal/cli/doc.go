// Package cli is the `hub` command: its subcommands, their flags and
// SWITCHBOARD_* environment variables, logging and signals. cmd/hub calls
// Main; another program runs the same command through Run with arguments of
// its own (cmd/hubbench runs `hub serve` this way, so that the hub it
// profiles is assembled exactly as the command assembles it).
//
//	hub [serve] [flags]                               the hub (pkg/hub)
//	hub connect --hub URL [flags] -- COMMAND ARGS...  a stdio server on a hub (internal/connect)
//	hub connect --hub URL --config FILE               many, from a desktop client's config file
//	hub stdio --hub URL [--server NAME]               the hub as a stdio server (internal/stdio)
//	hub help [COMMAND]
//
// Every flag of every subcommand has an environment variable, SWITCHBOARD_
// and the flag's name in capitals with underscores (--log-level is
// SWITCHBOARD_LOG_LEVEL, --token SWITCHBOARD_TOKEN), except the repeatable
// --root and --header; the command line wins. SIGINT and SIGTERM end every
// subcommand cleanly: serve drains, connect stops its children, stdio closes
// its connection (within 3 s even when its client reads nothing; a second
// signal ends it at once). Run's errors matching ErrUsage are mistakes in the command
// line: Main prints them with a pointer to the help and exits with status 2.
//
// The logic is elsewhere: this package turns flags into the options of
// pkg/hub, internal/connect and internal/stdio, and decides nothing else.
//
// # Files
//
//	doc.go                this overview
//	cli.go                Main, Run, Env; the subcommands' dispatch, flags
//	                      and their SWITCHBOARD_* variables, help and usage
//	serve.go              hub serve: pkg/hub's Config, tokens, OAuth, the
//	                      broker, reload on SIGHUP
//	connect.go            hub connect: the servers and their options, tokens
//	                      and secrets kept off the command line
//	stdio.go              hub stdio
//	stdstreams_unix.go    standard input and output, when pipes or sockets,
//	                      made so that closing them ends a read or a write
//	                      in progress (hub stdio ends on a signal)
//	stdstreams_other.go   elsewhere, as they are
package cli
