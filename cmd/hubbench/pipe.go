package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/coder/websocket"

	"github.com/switchboard-mcp/switchboard/internal/deathsig"
)

// pipeRelay is the floor of `hub connect`'s own cost: it dials the hub as
// a server at url, runs argv as its child, and copies each WebSocket frame
// to the child's standard input as a line and each line of its standard
// output to the hub as a frame, looking at nothing. What the connector
// does beyond (checking and routing messages, leases, keepalives,
// restarts) is what it costs over this.
func pipeRelay(ctx context.Context, url string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("pipe-relay: no command after --")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"mcp"}})
	if err != nil {
		return fmt.Errorf("pipe-relay: dialing %s: %w", url, err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(64 << 20)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = deathsig.Attr()
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Wait() //nolint:errcheck // it was killed with ctx
	defer cancel()
	up := make(chan error, 1)
	go func() { // child -> hub
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			if err := ws.Write(ctx, websocket.MessageText, sc.Bytes()); err != nil {
				up <- err
				return
			}
		}
		up <- sc.Err()
	}()
	in := bufio.NewWriterSize(stdin, 64<<10)
	for { // hub -> child
		_, frame, err := ws.Read(ctx)
		if err != nil {
			return nil // the hub or hubbench ended it
		}
		in.Write(frame)
		in.WriteByte('\n')
		if err := in.Flush(); err != nil {
			return fmt.Errorf("pipe-relay: writing to the child: %w", err)
		}
		select {
		case err := <-up:
			return err
		default:
		}
	}
}
