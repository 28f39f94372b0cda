package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// drainWait is how long the relay waits, after the child exits, for the
// rest of its output (its last answers), and after its output ends, for it
// to exit by itself.
const drainWait = time.Second

// maxGarbageNotices bounds the log messages a session sends the hub about
// lines that are not JSON-RPC: the connector's own log gets every one.
const maxGarbageNotices = 10

// endKind says why a session ended.
type endKind int

const (
	endStopped     endKind = iota // the connector is stopping
	endHubLost                    // the hub connection ended
	endExited                     // the child exited by itself
	endOutput                     // the child's standard output ended or broke, or its input did
	endInitTimeout                // the child did not answer initialize in time
	endRetired                    // the pool no longer needs this run
)

// end is why a session ended.
type end struct {
	kind    endKind
	err     error
	how     string // how the server ended by itself, for endExited
	http    bool   // the server is an HTTP upstream
	timeout time.Duration
}

// describe returns what to log and the close reason for the hub (at most
// 120 bytes; nothing from the child, no path, no secret).
func (e end) describe(wait time.Duration) (logMsg, reason string) {
	switch e.kind {
	case endHubLost:
		return "lost the hub; stopped the server and will reconnect", "lost the hub"
	case endExited:
		x := e.how
		return "the server " + x + "; restarting", fmt.Sprintf("server %s; restarting in %v", x, wait)
	case endInitTimeout:
		return fmt.Sprintf("the server did not answer initialize within %v; restarting", e.timeout),
			fmt.Sprintf("server did not answer initialize within %v; restarting in %v", e.timeout, wait)
	}
	if e.http {
		return "the upstream session ended; opening a new one",
			fmt.Sprintf("upstream session ended; reconnecting in %v", wait)
	}
	if ce := (*peer.CloseError)(nil); errors.As(e.err, &ce) && ce.Code == peer.CloseMessageTooBig {
		return "the server wrote a message too large on its standard output (" + ce.Reason + "); restarting",
			fmt.Sprintf("server wrote a message too large (%s); restarting in %v", ce.Reason, wait)
	}
	return "the server closed its standard input or output; restarting",
		fmt.Sprintf("server closed its standard input or output; restarting in %v", wait)
}

// upstream is one run of a server on the far side of a relay: a child
// process, or a session with an HTTP server.
type upstream interface {
	// ended is closed when the server ended by itself (a child exited).
	ended() <-chan struct{}
	// stop ends the server and waits until it has; it may be called after
	// ended is closed.
	stop(grace time.Duration)
	// how says how the server ended: "exited with status 1".
	how() string
}

var _ upstream = (*child)(nil)

// relay passes frames both ways between the hub and one run of a server,
// unchanged. It watches only the start: the hub's server/discover and, for
// a server of the session revisions, which refuses it, its initialize, and
// the server's answer to either (for the init timeout and the server's
// name), and it drops, logs and reports lines that are not JSON-RPC.
type relay struct {
	hub, server peer.Conn
	log         *slog.Logger
	initTimeout time.Duration
	http        bool            // the server is an HTTP upstream, not a child
	retire      <-chan struct{} // closed when the pool stops this run
	started     func()          // called once the server answered the hub's handshake
	// load, when set, is told whether the server has requests of the
	// hub's in flight, each time that changes (a pool that grows and
	// shrinks needs to know).
	load func(busy bool)
	hops *hops // the spans of the hub's requests at the server (trace.go); nil when not traced

	wg       sync.WaitGroup
	ends     chan end
	initDone chan struct{} // closed once the server answered initialize or server/discover

	mu         sync.Mutex
	startIDs   map[jsonrpc.ID]string // the hub's initialize and server/discover, by id: their method
	initAt     time.Time
	serverName string
	calls      map[jsonrpc.ID]struct{} // the hub's requests the server has not answered, when load is set

	garbage int // serverToHub only
}

// run relays until one side ends, then stops the child (and, when the
// connector stops, closes the hub connection with 1001). The caller closes
// the hub connection with a reason of its own otherwise, then calls wait.
func (r *relay) run(ctx context.Context, up upstream, grace time.Duration) end {
	r.ends = make(chan end, 2)
	r.initDone = make(chan struct{})
	r.startIDs = map[jsonrpc.ID]string{}
	r.wg.Add(2)
	go r.hubToServer()
	go r.serverToHub()

	timer := time.NewTimer(r.initTimeout)
	defer timer.Stop()
	initDone := r.initDone
	var e end
wait:
	for {
		select {
		case <-ctx.Done():
			e = end{kind: endStopped}
			break wait
		case e = <-r.ends:
			break wait
		case <-up.ended():
			e = end{kind: endExited}
			break wait
		case <-initDone:
			initDone = nil
			timer.Stop()
			if r.started != nil {
				r.started()
			}
		case <-r.retire:
			e = end{kind: endRetired}
			break wait
		case <-timer.C:
			if !r.initialized() {
				e = end{kind: endInitTimeout, timeout: r.initTimeout}
				break wait
			}
		}
	}

	switch e.kind {
	case endStopped:
		r.hub.Close(peer.CloseGoingAway, "connector stopping")
	case endRetired:
		r.hub.Close(peer.CloseNormal, "no call for a while: the connector's pool shrinks")
	case endExited: // let its last words through
		t := time.NewTimer(drainWait)
		select {
		case <-r.ends:
		case <-t.C:
		}
		t.Stop()
	case endOutput: // a child may be exiting
		if up.ended() == nil {
			break
		}
		t := time.NewTimer(drainWait)
		select {
		case <-up.ended():
		case <-t.C:
		}
		t.Stop()
	}
	select {
	case <-up.ended():
		if e.kind == endOutput {
			e.kind = endExited
		}
	default:
	}
	up.stop(grace)
	r.hops.close()
	e.how, e.http = up.how(), r.http
	return e
}

// wait waits for the relay's goroutines, once both connections are closed.
func (r *relay) wait() { r.wg.Wait() }

func (r *relay) initialized() bool {
	select {
	case <-r.initDone:
		return true
	default:
		return false
	}
}

// hubToServer passes the hub's frames to the server.
func (r *relay) hubToServer() {
	defer r.wg.Done()
	for {
		frame, err := r.hub.Read(context.Background())
		if err != nil {
			r.ends <- end{kind: endHubLost, err: err}
			return
		}
		if !r.initialized() {
			r.watchStart(frame)
		}
		if r.load != nil {
			r.count(jsonrpc.Decode(frame).Messages, true)
		}
		frame = r.hops.sent(frame)
		if err := r.server.Write(context.Background(), frame); err != nil {
			r.ends <- end{kind: endOutput, err: err}
			return
		}
	}
}

// watchStart notes the ids of the hub's server/discover and initialize:
// the answer to either starts the server (a server of the session
// revisions refuses discover and answers initialize; one of 2026-07-28 is
// never sent initialize).
func (r *relay) watchStart(frame []byte) {
	for _, m := range jsonrpc.Decode(frame).Messages {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() &&
			(req.Method == mcp.MethodInitialize || req.Method == mcp.MethodServerDiscover) {
			r.mu.Lock()
			r.startIDs[req.ID] = req.Method
			r.mu.Unlock()
		}
	}
}

// count keeps the hub's requests in flight at the server up to date, from
// messages of the hub's (fromHub) or of the server's, and tells load when
// the server becomes busy or idle. A request the hub cancels counts as
// answered: the server need not answer it.
func (r *relay) count(ms []jsonrpc.Message, fromHub bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := len(r.calls)
	for _, m := range ms {
		switch m := m.(type) {
		case *jsonrpc.Request:
			if !fromHub {
				continue
			}
			if m.IsCall() {
				if r.calls == nil {
					r.calls = map[jsonrpc.ID]struct{}{}
				}
				r.calls[m.ID] = struct{}{}
			} else if m.Method == mcp.NotificationCancelled {
				var p mcp.CancelledParams
				if json.Unmarshal(m.Params, &p) == nil {
					delete(r.calls, p.RequestID)
				}
			}
		case *jsonrpc.Response:
			if !fromHub {
				delete(r.calls, m.ID)
			}
		}
	}
	if after := len(r.calls); (before == 0) != (after == 0) {
		// Told under mu, so that the pool hears the changes of both
		// directions in the order they happened.
		r.load(after > 0)
	}
}

// unlimited: the relay checks syntax only; the hub enforces its limits.
var unlimited = jsonrpc.Limits{MaxBytes: -1, MaxBatch: -1, MaxDepth: -1}

// serverToHub passes the server's frames to the hub, dropping lines that
// are not JSON-RPC.
func (r *relay) serverToHub() {
	defer r.wg.Done()
	for {
		frame, err := r.server.Read(context.Background())
		if err != nil {
			r.ends <- end{kind: endOutput, err: err}
			return
		}
		f := unlimited.Decode(frame)
		if !utf8.Valid(frame) || len(f.Messages) == 0 || (!f.Batch && len(f.Replies) > 0) {
			if err := r.dropGarbage(frame); err != nil {
				r.ends <- end{kind: endHubLost, err: err}
				return
			}
			continue
		}
		if !r.initialized() {
			r.watchInitialized(f.Messages)
		}
		if r.load != nil {
			r.count(f.Messages, false)
		}
		r.hops.answered(f.Messages)
		if err := r.hub.Write(context.Background(), frame); err != nil {
			r.ends <- end{kind: endHubLost, err: err}
			return
		}
	}
}

// watchInitialized notes the server's answer to initialize or
// server/discover: the time, for the backoff, and serverInfo.name, for the
// connector's later connections.
func (r *relay) watchInitialized(ms []jsonrpc.Message) {
	for _, m := range ms {
		resp, ok := m.(*jsonrpc.Response)
		if !ok {
			continue
		}
		r.mu.Lock()
		method, mine := r.startIDs[resp.ID]
		r.mu.Unlock()
		if !mine {
			continue
		}
		if resp.Error != nil {
			if method == mcp.MethodServerDiscover {
				// A server of the session revisions, as most are: the hub
				// sends initialize next.
				r.log.Debug("the server does not speak 2026-07-28: the hub initializes it", "code", resp.Error.Code, "message", resp.Error.Message)
				continue
			}
			r.log.Info("the server refused initialize", "code", resp.Error.Code, "message", resp.Error.Message)
			continue
		}
		name := serverName(method, resp.Result)
		r.mu.Lock()
		r.initAt = time.Now()
		r.serverName = name
		r.mu.Unlock()
		close(r.initDone)
		r.log.Info("the server answered the hub's "+method, "server_info", name)
		return
	}
}

// serverName reads serverInfo.name from the answer to initialize, or from
// _meta of the answer to server/discover.
func serverName(method string, result json.RawMessage) string {
	info, ok := jsonrpc.Member(result, "serverInfo")
	if method == mcp.MethodServerDiscover {
		meta, _ := jsonrpc.Member(result, "_meta")
		info, ok = jsonrpc.Member(meta, mcp.MetaServerInfo)
	}
	if !ok {
		return ""
	}
	name, _ := jsonrpc.StringMember(info, "name")
	return name
}

// dropGarbage logs a line that is not JSON-RPC and tells the hub with a log
// message (notifications/message is allowed before initialization), a few
// times per session.
func (r *relay) dropGarbage(line []byte) error {
	r.garbage++
	r.log.Warn("the server wrote a line that is not JSON-RPC on its standard output; dropped it", "line", clip(line, 200))
	if r.garbage > maxGarbageNotices {
		return nil
	}
	text := "the server wrote a line that is not JSON-RPC on its standard output; the connector dropped it"
	if r.garbage == maxGarbageNotices {
		text += " (further ones are only in the connector's log)"
	}
	params, _ := json.Marshal(&mcp.LoggingMessageParams{Level: mcp.LevelError, Logger: "switchboard-connect", Data: text})
	frame := (&jsonrpc.Request{Method: mcp.NotificationMessage, Params: params}).Encode()
	return r.hub.Write(context.Background(), frame)
}

// clip shortens b for a log line.
func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + " [...]"
}
