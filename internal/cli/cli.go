package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Env is what the command reads and writes besides its arguments, and the
// hooks a program that embeds it may set. Nil fields take the process's own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// LookupEnv reads an environment variable; nil means os.LookupEnv.
	LookupEnv func(key string) (string, bool)
	// Handler, when set, wraps the hub's HTTP handler in `hub serve`:
	// cmd/hubbench mounts net/http/pprof beside the hub this way, so that
	// the hub it profiles is assembled exactly as the command assembles it.
	Handler func(http.Handler) http.Handler
}

func (e *Env) withDefaults() *Env {
	var v Env
	if e != nil {
		v = *e
	}
	if v.Stdin == nil {
		v.Stdin = os.Stdin
	}
	if v.Stdout == nil {
		v.Stdout = os.Stdout
	}
	if v.Stderr == nil {
		v.Stderr = os.Stderr
	}
	if v.LookupEnv == nil {
		v.LookupEnv = os.LookupEnv
	}
	return &v
}

// ErrUsage matches the errors of a command line that cannot be run as
// given (an unknown flag or command, a missing argument): Main exits with
// status 2 for them, 1 for any other error.
var ErrUsage = errors.New("usage")

// usageError is a command line that cannot be run, with the command whose
// help would tell how.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() []error {
	return []error{ErrUsage, e.err}
}

func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// Main runs the command with the process's arguments, streams and
// environment, stops it on SIGINT or SIGTERM, and exits with its status.
func Main() {
	env := (&Env{}).withDefaults()
	if err := Run(context.Background(), os.Args[1:], env); err != nil {
		fmt.Fprintln(env.Stderr, "hub:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			help := "hub --help"
			if ue.cmd != "" {
				help = "hub " + ue.cmd + " --help"
			}
			fmt.Fprintf(env.Stderr, "Run '%s' for usage.\n", help)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// Run runs the command line args (without the program's name) until it is
// done or ctx ends; SIGINT and SIGTERM end it too. `hub` alone, or with
// flags only, is `hub serve`.
func Run(ctx context.Context, args []string, env *Env) error {
	env = env.withDefaults()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := "serve", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, rest = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		if len(args) > 0 && isHelp(args[0]) {
			return topHelp(env.Stdout)
		}
		return runServe(ctx, rest, env)
	case "connect":
		return runConnect(ctx, rest, env)
	case "stdio":
		return runStdio(ctx, rest, env)
	case "help":
		if len(rest) == 0 {
			return topHelp(env.Stdout)
		}
		switch rest[0] {
		case "serve", "connect", "stdio":
			return Run(ctx, []string{rest[0], "--help"}, env)
		}
		return usagef("", "no help on %q: the commands are serve, connect and stdio", rest[0])
	}
	return usagef("", "unknown command %q: the commands are serve, connect, stdio and help", cmd)
}

func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help":
		return true
	}
	return false
}

// command is one subcommand's flag set with its help text.
type command struct {
	name     string
	summary  string // what it does, first lines of its help
	usage    []string
	examples []string
	notes    string
	fs       *flag.FlagSet
	noEnv    map[string]bool // repeatable flags: no environment variable
}

func newCommand(name string) *command {
	fs := flag.NewFlagSet("hub "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, help is printed by help
	return &command{name: name, fs: fs, noEnv: map[string]bool{}}
}

// parse reads the environment (SWITCHBOARD_<FLAG>), then args, which win.
// It returns errHelp after printing the help for -h or --help.
func (c *command) parse(args []string, env *Env) error {
	var envErr error
	c.fs.VisitAll(func(f *flag.Flag) {
		if c.noEnv[f.Name] || envErr != nil {
			return
		}
		name := envName(f.Name)
		if v, ok := env.LookupEnv(name); ok {
			if err := f.Value.Set(v); err != nil {
				envErr = usagef(c.name, "%s: %w", name, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.help(env.Stdout)
			return errHelp
		}
		msg := strings.Replace(err.Error(), "flag -", "flag --", 1)
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			msg = "unknown flag --" + name
		}
		return usagef(c.name, "%s", msg)
	}
	return nil
}

// errHelp: the help was asked for and printed; the command ends there.
var errHelp = errors.New("help printed")

func envName(flagName string) string {
	return "SWITCHBOARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// help prints what the command does, how to call it, its flags and
// examples.
func (c *command) help(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage:\n", c.summary)
	for _, u := range c.usage {
		fmt.Fprintf(w, "  %s\n", u)
	}
	fmt.Fprintf(w, "\nFlags:\n")
	printFlags(w, c.fs, c.noEnv)
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.examples {
			if e == "" {
				fmt.Fprintln(w)
				continue
			}
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if c.notes != "" {
		fmt.Fprintf(w, "\n%s\n", c.notes)
	}
}

// printFlags lists flags as "--name VALUE   usage (default x)", aligned,
// with their environment variables.
func printFlags(w io.Writer, fs *flag.FlagSet, noEnv map[string]bool) {
	type row struct{ left, right string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if arg != "" {
			left += " " + strings.ToUpper(arg)
		}
		right := usage
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			right += " (default " + f.DefValue + ")"
		}
		if !noEnv[f.Name] {
			right += "; $" + envName(f.Name)
		}
		rows = append(rows, row{left, right})
		width = max(width, len(left))
	})
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.right)
	}
}

// logFlags adds --log-level and --log-format.
type logFlags struct{ level, format string }

func (l *logFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "`level`: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "`format`: text or json")
}

// logger writes to w at the chosen level and format.
func (l *logFlags) logger(cmd string, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef(cmd, "--log-level must be debug, info, warn or error, not %q", l.level)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, usagef(cmd, "--log-format must be text or json, not %q", l.format)
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// topHelp is `hub --help`: every command, then the flags of serve.
func topHelp(w io.Writer) error {
	fmt.Fprint(w, `hub: Switchboard, a hub for MCP (Model Context Protocol) clients and servers.
MCP servers dial out to it, clients dial in, and it routes everything between them.

Usage:
  hub [serve] [flags]                                  run the hub (what "hub" alone does)
  hub connect --hub URL [flags] -- COMMAND [ARGS...]   put a stdio MCP server on a hub
  hub connect --hub URL --config FILE                  put every server of a desktop-style config on a hub
  hub connect --hub URL --name NAME --upstream URL     put a Streamable HTTP MCP server on a hub
  hub stdio --hub URL [--server NAME]                  the hub as a stdio MCP server, for clients that launch a command
  hub help [COMMAND]                                   the flags and examples of a command

Examples:
  hub --demo                                  the hub and a demo server; open http://127.0.0.1:8080
  hub connect --hub ws://127.0.0.1:8080 -- npx -y @modelcontextprotocol/server-memory
  hub stdio --hub ws://127.0.0.1:8080         (as the command of a desktop client's MCP server entry)

`)
	s := serveCommand(&serveOptions{})
	fmt.Fprintf(w, "Flags of hub serve:\n")
	printFlags(w, s.fs, s.noEnv)
	fmt.Fprint(w, `
Every flag has an environment equivalent: --log-level is SWITCHBOARD_LOG_LEVEL, --token is
SWITCHBOARD_TOKEN, and so on; the command line wins. Documentation: README.md and docs/ in the
repository (docs/connect.md for connect and stdio).
`)
	return nil
}
