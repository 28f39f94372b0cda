package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"sync"

	"github.com/coder/websocket"

	"github.com/switchboard-mcp/switchboard/internal/benchlab"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// The raw fan-out baseline: what this machine can do to deliver one frame
// to N WebSocket subscribers, with coder/websocket alone. The subscribers
// are the same MCP clients as the hub's (they connect, initialize and
// subscribe, and the server answers just enough for that); a control
// connection says when to send, and the server writes one prepared
// notifications/resources/updated frame to every subscriber, spread over
// one goroutine per core, each writing its share one after the other.

// methodFanout is the control notification that starts a fan-out.
const methodFanout = "hubbench/fanout"

// rawFanout is the raw fan-out server's state.
type rawFanout struct {
	frame []byte

	mu   sync.Mutex
	subs []*websocket.Conn
}

func newRawFanout() *rawFanout {
	frame := (&jsonrpc.Request{Method: mcp.NotificationResourceUpdated,
		Params: json.RawMessage(`{"uri":"` + fanoutURI + `"}`)}).Encode()
	return &rawFanout{frame: frame}
}

// serve answers one connection: initialize with the least a client takes,
// resources/subscribe by adding it to the subscribers, any other call
// with {}, and the control notification with a fan-out.
func (f *rawFanout) serve(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{peer.Subprotocol}})
	if err != nil {
		return
	}
	defer c.CloseNow()
	defer f.remove(c)
	ctx := r.Context()
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		for _, m := range jsonrpc.Decode(data).Messages {
			req, ok := m.(*jsonrpc.Request)
			if !ok {
				continue
			}
			if req.Method == methodFanout {
				f.fanout(ctx)
				continue
			}
			if !req.IsCall() {
				continue
			}
			result := json.RawMessage(`{}`)
			switch req.Method {
			case mcp.MethodInitialize:
				version, _ := jsonrpc.StringMember(req.Params, "protocolVersion")
				result, _ = json.Marshal(mcp.InitializeResult{ProtocolVersion: version,
					Capabilities: mcp.ServerCapabilities{Resources: &mcp.ResourcesCap{Subscribe: true}},
					ServerInfo:   mcp.Implementation{Name: "raw-fanout", Version: "1.0.0"}})
			case mcp.MethodResourcesSubscribe:
				f.mu.Lock()
				f.subs = append(f.subs, c)
				f.mu.Unlock()
			}
			resp := &jsonrpc.Response{ID: req.ID, Result: result}
			if err := c.Write(ctx, websocket.MessageText, resp.Encode()); err != nil {
				return
			}
		}
	}
}

func (f *rawFanout) remove(c *websocket.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.subs {
		if s == c {
			f.subs[i] = f.subs[len(f.subs)-1]
			f.subs = f.subs[:len(f.subs)-1]
			return
		}
	}
}

// fanout writes the frame to every subscriber, one goroutine per core.
func (f *rawFanout) fanout(ctx context.Context) {
	f.mu.Lock()
	subs := append([]*websocket.Conn(nil), f.subs...)
	f.mu.Unlock()
	workers := min(runtime.GOMAXPROCS(0), len(subs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(subs); i += workers {
				_ = subs[i].Write(ctx, websocket.MessageText, f.frame)
			}
		})
	}
	wg.Wait()
}

// rawFanoutPath is the fan-out through the raw server at addr, whose
// process is proc. stop closes the control connection.
func rawFanoutPath(ctx context.Context, proc *benchlab.Child, addr string) (p *fanoutPath, stop func(), err error) {
	url := "ws://" + addr + "/"
	ctl, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{peer.Subprotocol}})
	if err != nil {
		return nil, nil, fmt.Errorf("raw fan-out server: %w", err)
	}
	ctl.CloseRead(context.WithoutCancel(ctx))
	frame := (&jsonrpc.Request{Method: methodFanout}).Encode()
	// Its allocations are not read: the reading (net/http/pprof, with a
	// goroutine per subscriber) would cost more than what it measures.
	p = &fanoutPath{setting: "raw fan-out", raw: true, instances: 1, urls: []string{url},
		pids: []int{proc.PID()}, stats: []*statsSource{nil},
		update: func(ctx context.Context) { _ = ctl.Write(ctx, websocket.MessageText, frame) }}
	return p, func() { _ = ctl.Close(websocket.StatusNormalClosure, "") }, nil
}
