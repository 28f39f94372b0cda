package cli

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/stdio"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// stdioOptions are the flags of `hub stdio`.
type stdioOptions struct {
	hub    string
	token  string
	server string
	log    logFlags
}

func stdioCommand(o *stdioOptions) *command {
	c := newCommand("stdio")
	c.summary = "hub stdio: the hub as a local stdio MCP server, for clients that launch their servers as a command\n" +
		"(desktop apps, IDEs). The client gets every server of the hub (tools named SERVER__TOOL), or one\n" +
		"server under its own names with --server. Progress, cancellation, subscriptions and the servers'\n" +
		"requests (sampling, elicitation, roots) pass through. It reconnects to the hub by itself, restoring\n" +
		"the client's session; standard output carries the protocol only, standard error says what happens."
	c.usage = []string{"hub stdio --hub URL [--server NAME] [--token TOKEN]"}
	c.examples = []string{
		"hub stdio --hub ws://127.0.0.1:8080",
		"hub stdio --hub wss://hub.example --server memory --token $TOKEN",
		"",
		"In a desktop client's configuration (claude_desktop_config.json and the like):",
		`  {"mcpServers": {"switchboard": {"command": "hub", "args": ["stdio", "--hub", "ws://127.0.0.1:8080"]}}}`,
	}
	fs := c.fs
	fs.StringVar(&o.hub, "hub", "", "the hub: `URL` ws://HOST:PORT (or wss://, http://, https://; the path defaults to /mcp)")
	fs.StringVar(&o.token, "token", "", "`token` for the hub (sent as Authorization: Bearer)")
	fs.StringVar(&o.server, "server", "", "one server of the hub, by `name`, under its own names (/servers/NAME/mcp) instead of all of them")
	o.log.add(fs)
	return c
}

// runStdio is `hub stdio`.
func runStdio(ctx context.Context, args []string, env *Env) error {
	var o stdioOptions
	c := stdioCommand(&o)
	if err := c.parse(args, env); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if c.fs.NArg() > 0 {
		return usagef("stdio", "unexpected arguments: %v", c.fs.Args())
	}
	if o.hub == "" {
		return usagef("stdio", "--hub is required (or SWITCHBOARD_HUB): the hub's URL, e.g. ws://127.0.0.1:8080")
	}
	path := "/mcp"
	if o.server != "" {
		path = "/servers/" + url.PathEscape(o.server) + "/mcp"
		if u, err := url.Parse(o.hub); err == nil && strings.Contains(o.hub, "://") && u.Path != "" && u.Path != "/" {
			return usagef("stdio", "give --server or a --hub URL with a path, not both")
		}
	}
	hubURL, header, err := endpoint(o.hub, path, o.token)
	if err != nil {
		return usagef("stdio", "--hub: %w", err)
	}
	log, err := o.log.logger("stdio", env.Stderr)
	if err != nil {
		return err
	}
	in, restoreIn := pollable(env.Stdin)
	defer restoreIn()
	out, restoreOut := interruptible(env.Stdout)
	defer restoreOut()
	conn := peer.NewStdio(in, out, nil)
	served := make(chan error, 1)
	go func() { served <- stdio.Serve(ctx, conn, &stdio.Options{URL: hubURL, Header: header, Logger: log}) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Told to stop: a second signal ends the process at once, and the
	// first within stdioStopGrace whatever the client does.
	signal.Reset(os.Interrupt, syscall.SIGTERM)
	t := time.NewTimer(stdioStopGrace)
	defer t.Stop()
	select {
	case err := <-served:
		return err
	case <-t.C:
		log.Warn("stopping without waiting for the client: it does not read what it was sent")
		return nil
	}
}

// stdioStopGrace bounds how long `hub stdio`, told to stop, waits for a
// write to its client that nothing can interrupt (standard output is a
// terminal, or a file on a stuck device: a pipe or a socket is interrupted
// at once). The command then returns and the process exits, the write
// abandoned.
const stdioStopGrace = 3 * time.Second

// writerOnly hides a Close method: the process's standard output stays
// open until it exits, whatever ends the session.
type writerOnly struct{ io.Writer }
