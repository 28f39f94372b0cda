package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// echoTool is the aggregated name of the bench server's tool on the hub.
const echoTool = "bench__echo"

// callParams returns the params of the tools/call every measurement sends:
// {"name":"bench__echo","arguments":{"text":"xxx..."}}, with arguments of
// exactly size bytes of JSON.
func callParams(size int) json.RawMessage { return toolParams(echoTool, size) }

// toolParams is callParams for another tool.
func toolParams(tool string, size int) json.RawMessage {
	const overhead = len(`{"text":""}`)
	text := strings.Repeat("x", max(size-overhead, 0))
	return json.RawMessage(`{"name":"` + tool + `","arguments":{"text":"` + text + `"}}`)
}

// callFrame is the whole request frame for params, as the raw baseline
// sends it.
func callFrame(params json.RawMessage) []byte {
	return (&jsonrpc.Request{ID: jsonrpc.Int64ID(1234567), Method: mcp.MethodToolsCall, Params: params}).Encode()
}

// rawDialer: coder/websocket clients of the raw echo server, sending the
// tools/call frame as bytes and reading the echo.
type rawDialer struct {
	url   string
	frame []byte
}

type rawConn struct {
	ws    *websocket.Conn
	frame []byte
}

func (d rawDialer) dial(ctx context.Context) (loadConn, error) {
	ws, _, err := websocket.Dial(ctx, d.url, &websocket.DialOptions{Subprotocols: []string{peer.Subprotocol}})
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(peer.DefaultReadLimit)
	return &rawConn{ws: ws, frame: d.frame}, nil
}

// drive writes frames from this goroutine and reads echoes on another, with
// at most inflight outstanding. The echo keeps order, so the send times wait
// in a FIFO for their answers.
func (c *rawConn) drive(ctx context.Context, inflight int, lr *loadRun, rec *recorder) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, inflight)
	sent := make(chan time.Time, inflight)
	rd := tally{run: lr}
	wr := tally{run: lr}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		readInOrder(sent, slots, inflight, lr, &rd, cancel, func() error {
			_, r, err := c.ws.Reader(ctx)
			if err == nil {
				_, err = io.Copy(io.Discard, r)
			}
			return err
		})
	}()
	for !lr.stop.Load() {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		sent <- time.Now()
		if err := c.ws.Write(ctx, websocket.MessageText, c.frame); err != nil {
			wr.fail(err)
			cancel()
			break
		}
	}
	close(sent)
	<-readerDone
	rec.add(&rd)
	rec.add(&wr)
}

func (c *rawConn) close() { _ = c.ws.Close(websocket.StatusNormalClosure, "") }

// peerDialer: pkg/peer clients calling the peer echo server directly.
type peerDialer struct {
	url    string
	params json.RawMessage
}

// hubDialer: MCP clients of the hub (initialized sessions), calling the
// bench server's echo tool with raw peer calls of the same shape.
type hubDialer struct {
	url    string
	params json.RawMessage
}

// callConn makes JSON-RPC calls on a peer, inflight goroutines at a time.
type callConn struct {
	p      *peer.Peer
	params json.RawMessage
	closer func() error
}

func (d peerDialer) dial(ctx context.Context) (loadConn, error) {
	c, err := peer.Dial(ctx, d.url, &peer.DialOptions{WebSocketOptions: noKeepalive})
	if err != nil {
		return nil, err
	}
	p := peer.New(c, nil)
	p.Start(context.Background())
	return &callConn{p: p, params: d.params, closer: p.Close}, nil
}

func (d hubDialer) dial(ctx context.Context) (loadConn, error) {
	c, err := mcp.Connect(ctx, d.url, &mcp.ClientOptions{ProtocolVersion: mcp.LatestVersion, WebSocket: noKeepalive})
	if err != nil {
		return nil, err
	}
	return &callConn{p: c.Peer(), params: d.params, closer: c.Close}, nil
}

// noKeepalive turns off the client side's pings: measurements are short,
// and the hub still pings every client.
var noKeepalive = peer.WebSocketOptions{PingInterval: -1}

// drive makes each call with CallBorrowing, its answer given back as soon
// as it came: as the raw echo's client, which reuses its buffers, the
// client reads a stream of answers without allocating one for each (the
// collections that allocating them cost fell on the p99 of both paths
// that use it, peer direct and the hub's).
func (c *callConn) drive(ctx context.Context, inflight int, lr *loadRun, rec *recorder) {
	callSlots(ctx, inflight, lr, rec, func() slot {
		var ans peer.Answer // one per slot: its calls follow each other
		return slot{
			call: func() error {
				err := c.p.CallBorrowing(ctx, mcp.MethodToolsCall, c.params, &ans)
				ans.Release()
				return err
			},
			goOn:    func() bool { return c.p.Err() == nil }, // not when the connection is gone
			release: func() {},
		}
	})
}

func (c *callConn) close() { _ = c.closer() }
