package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/internal/link"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Defaults of Options.
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	DefaultResetAfter = 30 * time.Second
	DefaultMaxHeld    = 1024
)

// Options configure Serve. Zero fields take their defaults.
type Options struct {
	// URL is the hub endpoint to dial: ws://host:port/mcp for every server
	// of the hub, ws://host:port/servers/NAME/mcp for one.
	URL string
	// Header is sent with every handshake (Authorization).
	Header http.Header
	// Logger receives what a person should know: connected, lost,
	// reconnecting, refused. Nil discards it.
	Logger *slog.Logger
	// Retry spaces out the attempts to reach the hub: the wait doubles
	// from MinBackoff to MaxBackoff (defaults 500 ms and 10 s), and a
	// connection that lasted ResetAfter (default 30 s) makes the next wait
	// MinBackoff again.
	link.Retry
	// MaxHeld bounds the client's frames held while the hub is not
	// reachable; requests beyond it fail at once with -32000. Default 1024.
	MaxHeld int
	// WebSocket tunes the connection to the hub.
	WebSocket peer.WebSocketOptions
}

func (o *Options) withDefaults() Options {
	var v Options
	if o != nil {
		v = *o
	}
	if v.Logger == nil {
		v.Logger = slog.New(slog.DiscardHandler)
	}
	v.Retry = v.Retry.Or(link.Retry{MinBackoff: DefaultMinBackoff, MaxBackoff: DefaultMaxBackoff, ResetAfter: DefaultResetAfter})
	if v.MaxHeld <= 0 {
		v.MaxHeld = DefaultMaxHeld
	}
	return v
}

// replayPrefix starts the ids of the requests the gateway sends the hub on
// its own (the replayed initialize, logging level and subscriptions), so
// that their answers are told from the client's.
const replayPrefix = "switchboard-stdio/"

// lostHub is the error of the client's calls in flight when the hub
// connection ends.
var lostHub = &jsonrpc.Error{Code: mcp.CodeConnectionClosed, Message: "connection closed: lost the hub; reconnecting"}

// unlimited: the gateway checks syntax only; the hub enforces its limits.
var unlimited = jsonrpc.Limits{MaxBytes: -1, MaxBatch: -1, MaxDepth: -1}

// Serve relays between client, the MCP client that launched this process
// (on its standard input and output), and the hub, until the client's
// stream ends or ctx ends (it returns nil), or the hub refuses the
// credentials (it returns an error matching link.Refused). It waits for
// every Read and Write of the client's to return before it does: give it a
// conn whose Close unblocks them, or a client that does not read can keep
// it from ending.
func Serve(ctx context.Context, client peer.Conn, opts *Options) error {
	o := opts.withDefaults()
	g := &gateway{
		client:   client,
		opts:     &o,
		log:      o.Logger,
		calls:    map[string]call{},
		hubCalls: map[int64]hubCall{},
		subs:     map[string]bool{},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	linked := make(chan error, 1)
	go func() { linked <- g.link(ctx) }()
	read := make(chan error, 1)
	go func() { read <- g.readClient(ctx) }()

	var err error
	select {
	case err = <-read:
		// The client's stream ended: nothing more goes to it, and a write
		// to it in progress (on the hub's side) must not hold the end.
		cancel()
		client.Close(peer.CloseGoingAway, "")
		<-linked
	case err = <-linked:
		cancel()
		client.Close(peer.CloseGoingAway, "")
		<-read
	case <-ctx.Done():
		client.Close(peer.CloseGoingAway, "")
		<-read
		<-linked
	}
	return err
}

// gateway is one client's bridge to the hub.
type gateway struct {
	client peer.Conn
	opts   *Options
	log    *slog.Logger

	clientW    sync.Mutex  // one Write at a time to the client
	clientGone atomic.Bool // its stream ended: nothing more is written to it

	// sendMu orders everything written to the hub and the switch between
	// holding the client's frames and sending them: the frames held while
	// the connection was being set up go out before any newer one.
	sendMu sync.Mutex
	hub    peer.Conn // nil between connections
	up     bool      // hub is set and replayed: frames go straight out
	held   [][]byte

	mu          sync.Mutex
	calls       map[string]call   // the client's requests in flight, by id
	hubCalls    map[int64]hubCall // the hub's requests to the client, by the id the client sees
	nextHubCall int64             // ids for those
	gen         int               // counts connections
	initParams  json.RawMessage   // the client's initialize, once the hub accepted it
	initialized bool              // the client sent notifications/initialized
	level       json.RawMessage   // the client's last logging/setLevel params
	subs        map[string]bool   // the client's resource subscriptions
	replayID    jsonrpc.ID        // the replayed initialize on this connection
	replaying   bool              // waiting for replayID's answer
	replaySeq   int64             // ids of replayed requests
}

// call is a request of the client's in flight.
type call struct {
	id     jsonrpc.ID
	method string
	uri    string          // resources/subscribe and unsubscribe
	params json.RawMessage // initialize
}

// hubCall is a request of the hub's to the client in flight.
type hubCall struct {
	gen int
	id  jsonrpc.ID // the hub's own id
}

// readClient reads the client's frames until its stream ends.
func (g *gateway) readClient(ctx context.Context) error {
	// A client that closed its end may have closed ours too: writing to it
	// then would be an error at best, SIGPIPE at worst.
	defer g.clientGone.Store(true)
	for {
		frame, err := g.client.Read(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading the client: %w", err)
		}
		g.fromClient(frame)
	}
}

// fromClient sends a frame of the client's to the hub, or holds it until
// the hub is reachable. What cannot be parsed is answered here: the hub
// would close a connection that sent it invalid UTF-8.
func (g *gateway) fromClient(frame []byte) {
	f := unlimited.Decode(frame)
	if !utf8.Valid(frame) {
		g.toClient((&jsonrpc.Response{ID: jsonrpc.NullID(), Error: jsonrpc.Errorf(jsonrpc.ErrParse, "invalid UTF-8")}).Encode())
		return
	}
	if !f.Batch && len(f.Replies) > 0 {
		g.toClient(f.Replies[0].Encode())
		return
	}
	for _, m := range f.Messages {
		if _, ok := m.(*jsonrpc.Response); ok {
			// An answer to the hub's request: its id is the gateway's.
			g.answersFromClient(f.Messages)
			return
		}
	}

	g.sendMu.Lock()
	if g.up {
		g.trackSent(f.Messages)
		err := g.hub.Write(context.Background(), frame)
		g.sendMu.Unlock()
		if err != nil {
			g.log.Debug("writing to the hub failed", "err", err)
		}
		return
	}
	if len(g.held) < g.opts.MaxHeld {
		g.held = append(g.held, frame)
		g.sendMu.Unlock()
		return
	}
	g.sendMu.Unlock()
	for _, m := range f.Messages {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			g.toClient((&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: mcp.CodeConnectionClosed,
				Message: "connection closed: the hub is unreachable and too many messages are waiting"}}).Encode())
		}
	}
}

// answersFromClient passes the client's answers to the hub's requests back
// under the hub's ids, and drops those whose connection has ended. A frame
// that mixes answers and requests is split into single messages.
func (g *gateway) answersFromClient(ms []jsonrpc.Message) {
	for _, m := range ms {
		var frame []byte
		switch m := m.(type) {
		case *jsonrpc.Response:
			n, ok := m.ID.Int64()
			g.mu.Lock()
			hc, found := g.hubCalls[n]
			delete(g.hubCalls, n)
			current := found && ok && hc.gen == g.gen
			g.mu.Unlock()
			if !current {
				g.log.Debug("dropping an answer to a request no longer in flight (cancelled, or of a previous hub connection)", "id", m.ID.String())
				continue
			}
			frame = (&jsonrpc.Response{ID: hc.id, Result: m.Result, Error: m.Error}).Encode()
		case *jsonrpc.Request:
			frame = m.Encode()
		}
		g.sendMu.Lock()
		if g.up {
			if req, ok := m.(*jsonrpc.Request); ok {
				g.trackSent([]jsonrpc.Message{req})
			}
			_ = g.hub.Write(context.Background(), frame)
		} else if _, ok := m.(*jsonrpc.Request); ok {
			g.held = append(g.held, frame)
		}
		g.sendMu.Unlock()
	}
}

// trackSent notes what the client's messages, about to be sent, change:
// calls in flight, initialize, the logging level. Called with sendMu held.
func (g *gateway) trackSent(ms []jsonrpc.Message) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range ms {
		req, ok := m.(*jsonrpc.Request)
		if !ok {
			continue
		}
		if req.IsNotification() {
			if req.Method == mcp.NotificationInitialized {
				g.initialized = true
			}
			continue
		}
		c := call{id: req.ID, method: req.Method}
		switch req.Method {
		case mcp.MethodInitialize:
			c.params = append(json.RawMessage(nil), req.Params...)
		case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
			c.uri, _ = jsonrpc.StringMember(req.Params, "uri")
		case mcp.MethodLoggingSetLevel:
			g.level = append(json.RawMessage(nil), req.Params...)
		}
		g.calls[req.ID.String()] = c
	}
}

// toClient writes one frame to the client.
func (g *gateway) toClient(frame []byte) {
	if g.clientGone.Load() {
		return
	}
	g.clientW.Lock()
	defer g.clientW.Unlock()
	if err := g.client.Write(context.Background(), frame); err != nil {
		g.log.Debug("writing to the client failed", "err", err)
	}
}

// link keeps a connection to the hub until ctx ends, reconnecting with
// backoff. It returns an error only when the hub refuses the credentials.
func (g *gateway) link(ctx context.Context) error {
	back := g.opts.Backoff()
	where := link.Redact(g.opts.URL)
	for {
		conn, err := link.Dial(ctx, g.opts.URL, g.opts.Header, g.opts.WebSocket)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if link.Refused(err) {
				g.log.Error(err.Error() + "; giving up")
				return err
			}
			wait := back.Next()
			g.log.Warn(fmt.Sprintf("%v; retrying in %v", err, link.Round(wait)))
			if !link.Sleep(ctx, wait) {
				return nil
			}
			continue
		}
		start := time.Now()
		g.log.Info("connected to the hub at " + where)
		stop := context.AfterFunc(ctx, func() { conn.Close(peer.CloseGoingAway, "client gone") })
		err = g.serveConn(conn)
		stop()
		g.lost(conn)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) >= g.opts.ResetAfter {
			back.Reset()
		}
		wait := back.Next()
		g.log.Warn(fmt.Sprintf("lost the hub (%v); calls in flight failed; reconnecting in %v", closeText(err), link.Round(wait)))
		if !link.Sleep(ctx, wait) {
			return nil
		}
	}
}

// closeText says how a connection ended, briefly.
func closeText(err error) string {
	var ce *peer.CloseError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			return fmt.Sprintf("closed with %d: %s", ce.Code, ce.Reason)
		}
		return fmt.Sprintf("closed with %d", ce.Code)
	}
	return err.Error()
}

// serveConn sets up a new connection (replaying the client's session when
// it had one) and passes the hub's frames to the client until it ends.
func (g *gateway) serveConn(conn peer.Conn) error {
	g.mu.Lock()
	g.gen++
	init := g.initParams
	g.replaying = init != nil
	if init != nil {
		g.replaySeq++
		g.replayID = jsonrpc.StringID(replayPrefix + strconv.FormatInt(g.replaySeq, 10))
	}
	replayID := g.replayID
	g.mu.Unlock()

	g.sendMu.Lock()
	g.hub = conn
	g.sendMu.Unlock()
	if init == nil {
		g.goUp()
	} else {
		g.sendMu.Lock()
		err := conn.Write(context.Background(), (&jsonrpc.Request{ID: replayID, Method: mcp.MethodInitialize, Params: init}).Encode())
		g.sendMu.Unlock()
		if err != nil {
			return err
		}
	}
	for {
		frame, err := conn.Read(context.Background())
		if err != nil {
			return err
		}
		if err := g.fromHub(conn, frame); err != nil {
			conn.Close(peer.CloseNormal, "")
			return err
		}
	}
}

// fromHub passes a frame of the hub's to the client. Answers to the
// client's calls and notifications go as they are; the hub's requests get
// an id of the gateway's, so that an answer that comes after the
// connection ended is never taken for the answer to a newer request.
func (g *gateway) fromHub(conn peer.Conn, frame []byte) error {
	f := unlimited.Decode(frame)
	if !f.Batch && len(f.Messages) == 1 {
		switch m := f.Messages[0].(type) {
		case *jsonrpc.Response:
			if m.ID.IsString() && strings.HasPrefix(idString(m.ID), replayPrefix) {
				return g.replayAnswered(conn, m)
			}
			g.answered(m)
			g.toClient(frame)
			return nil
		case *jsonrpc.Request:
			if m.IsNotification() {
				g.notificationFromHub(m, frame)
				return nil
			}
		}
	}
	for _, m := range f.Messages { // a batch, or a request: one at a time
		switch m := m.(type) {
		case *jsonrpc.Response:
			if m.ID.IsString() && strings.HasPrefix(idString(m.ID), replayPrefix) {
				if err := g.replayAnswered(conn, m); err != nil {
					return err
				}
				continue
			}
			g.answered(m)
			g.toClient(m.Encode())
		case *jsonrpc.Request:
			if m.IsNotification() {
				g.notificationFromHub(m, nil)
				continue
			}
			g.mu.Lock()
			g.nextHubCall++
			n := g.nextHubCall
			g.hubCalls[n] = hubCall{gen: g.gen, id: m.ID}
			g.mu.Unlock()
			g.toClient((&jsonrpc.Request{ID: jsonrpc.Int64ID(n), Method: m.Method, Params: m.Params}).Encode())
		}
	}
	return nil
}

// notificationFromHub passes a notification of the hub's to the client
// (frame is its encoding, nil to encode it here). A cancellation names one
// of the hub's requests to the client by the hub's id: it reaches the client
// under the id the client saw, or not at all when that request is no longer
// in flight (answered, or of an earlier connection), since the hub's id may
// be the id of another of the client's requests. Progress needs nothing of
// the kind: the tokens in both directions are the ones their requests
// carried, which pass unchanged.
func (g *gateway) notificationFromHub(m *jsonrpc.Request, frame []byte) {
	if m.Method == mcp.NotificationCancelled {
		var p mcp.CancelledParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			g.log.Debug("dropping a malformed cancellation from the hub", "err", err)
			return
		}
		n, ok := g.hubCallOf(p.RequestID)
		if !ok {
			g.log.Debug("dropping a cancellation of a request no longer in flight", "id", p.RequestID.String())
			return
		}
		p.RequestID = jsonrpc.Int64ID(n)
		params, _ := json.Marshal(&p)
		g.toClient((&jsonrpc.Request{Method: mcp.NotificationCancelled, Params: params}).Encode())
		return
	}
	if frame == nil {
		frame = m.Encode()
	}
	g.toClient(frame)
}

// hubCallOf finds the hub's request id on the current connection among
// those in flight to the client, and forgets it: the client is not to
// answer a cancelled request, and an answer it sends anyway is dropped.
func (g *gateway) hubCallOf(id jsonrpc.ID) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for n, hc := range g.hubCalls {
		if hc.gen == g.gen && hc.id == id {
			delete(g.hubCalls, n)
			return n, true
		}
	}
	return 0, false
}

// idString is a string id's value.
func idString(id jsonrpc.ID) string {
	s, _ := strconv.Unquote(id.String())
	return s
}

// answered notes the hub's answer to a client's call.
func (g *gateway) answered(resp *jsonrpc.Response) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := resp.ID.String()
	c, ok := g.calls[key]
	if !ok {
		return
	}
	delete(g.calls, key)
	if resp.Error != nil {
		return
	}
	switch c.method {
	case mcp.MethodInitialize:
		g.initParams = c.params
	case mcp.MethodResourcesSubscribe:
		g.subs[c.uri] = true
	case mcp.MethodResourcesUnsubscribe:
		delete(g.subs, c.uri)
	}
}

// replayAnswered handles the hub's answer to a request the gateway sent on
// its own. The answer to the replayed initialize completes the replay:
// initialized, the logging level and the subscriptions follow, then the
// frames held meanwhile.
func (g *gateway) replayAnswered(conn peer.Conn, resp *jsonrpc.Response) error {
	g.mu.Lock()
	isInit := g.replaying && resp.ID == g.replayID
	if isInit {
		g.replaying = false
	}
	initialized, level := g.initialized, g.level
	subs := make([]string, 0, len(g.subs))
	for uri := range g.subs {
		subs = append(subs, uri)
	}
	g.mu.Unlock()
	if !isInit {
		if resp.Error != nil {
			g.log.Warn("the hub refused a replayed request", "code", resp.Error.Code, "message", resp.Error.Message)
		}
		return nil
	}
	if resp.Error != nil {
		return fmt.Errorf("the hub refused the client's initialize on reconnection: %s", resp.Error.Message)
	}
	var frames [][]byte
	if initialized {
		frames = append(frames, (&jsonrpc.Request{Method: mcp.NotificationInitialized}).Encode())
	}
	if level != nil {
		frames = append(frames, (&jsonrpc.Request{ID: g.replayCallID(), Method: mcp.MethodLoggingSetLevel, Params: level}).Encode())
	}
	for _, uri := range subs {
		params, _ := json.Marshal(map[string]string{"uri": uri})
		frames = append(frames, (&jsonrpc.Request{ID: g.replayCallID(), Method: mcp.MethodResourcesSubscribe, Params: params}).Encode())
	}
	g.sendMu.Lock()
	for _, f := range frames {
		if err := conn.Write(context.Background(), f); err != nil {
			g.sendMu.Unlock()
			return err
		}
	}
	g.sendMu.Unlock()
	g.goUp()
	// What the hub offers may have changed while it was away.
	for _, method := range []string{mcp.NotificationToolsListChanged, mcp.NotificationResourcesListChanged, mcp.NotificationPromptsListChanged} {
		g.toClient((&jsonrpc.Request{Method: method}).Encode())
	}
	g.log.Info("the client's session was restored on the hub", "subscriptions", len(subs))
	return nil
}

func (g *gateway) replayCallID() jsonrpc.ID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.replaySeq++
	return jsonrpc.StringID(replayPrefix + strconv.FormatInt(g.replaySeq, 10))
}

// goUp sends the frames held so far, in order, and lets newer ones go
// straight out.
func (g *gateway) goUp() {
	g.sendMu.Lock()
	defer g.sendMu.Unlock()
	for _, frame := range g.held {
		g.trackSent(unlimited.Decode(frame).Messages)
		if err := g.hub.Write(context.Background(), frame); err != nil {
			break // the read loop will see the connection end
		}
	}
	g.held = nil
	g.up = true
}

// lost forgets a connection that ended: the client's calls in flight fail
// with -32000, and the hub's requests to the client are cancelled.
func (g *gateway) lost(conn peer.Conn) {
	conn.Close(peer.CloseNormal, "")
	g.sendMu.Lock()
	g.hub, g.up = nil, false
	g.sendMu.Unlock()

	g.mu.Lock()
	calls := g.calls
	g.calls = map[string]call{}
	var stale []int64
	for n, hc := range g.hubCalls {
		if hc.gen == g.gen {
			stale = append(stale, n)
			delete(g.hubCalls, n)
		}
	}
	g.replaying = false
	g.mu.Unlock()
	for _, c := range calls {
		g.toClient((&jsonrpc.Response{ID: c.id, Error: lostHub}).Encode())
	}
	for _, n := range stale {
		params, _ := json.Marshal(&mcp.CancelledParams{RequestID: jsonrpc.Int64ID(n), Reason: "lost the hub"})
		g.toClient((&jsonrpc.Request{Method: mcp.NotificationCancelled, Params: params}).Encode())
	}
}
