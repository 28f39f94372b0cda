package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// handshakeTimeout bounds a server's initialize and listing.
const handshakeTimeout = 30 * time.Second

// maxPages bounds the pages of one list, so that a server whose cursors
// never end cannot hold the hub.
const maxPages = 1000

// replica is one connection of an MCP server dialing out to this instance.
// Toward it the hub is the MCP client.
type replica struct {
	hub     *Hub
	id      string
	peer    *peer.Peer
	log     *slog.Logger
	who     *principal
	release func() // frees the token's connection slot

	mu         sync.Mutex
	info       *replicaInfo // published; nil until registered
	calls      map[jsonrpc.ID]*upstreamCall
	tokens     map[string]*upstreamCall // by the raw JSON of the hub's progress token
	refreshing bool
	dirty      [numKinds]bool
}

// upstreamCall is a request this instance forwarded to the replica.
type upstreamCall struct {
	origin      downstream
	clientToken json.RawMessage // the caller's progress token, restored on progress reports
}

func (h *Hub) serveServer(w http.ResponseWriter, r *http.Request) {
	who, release := h.admit(w, r, "/mcp/server", RoleServer)
	if who == nil {
		return
	}
	conn, err := peer.Accept(w, r, h.acceptOptions())
	if err != nil {
		release()
		return // Accept has answered with an HTTP error
	}
	rp := &replica{
		hub:     h,
		id:      h.id + "/" + h.nextID(),
		who:     who,
		release: release,
		calls:   map[jsonrpc.ID]*upstreamCall{},
		tokens:  map[string]*upstreamCall{},
	}
	rp.log = h.log.With("replica", rp.id[len(h.id)+1:])
	rp.peer = peer.New(conn, &peer.Options{
		Handler:        peer.HandlerFunc(rp.handle),
		MaxConcurrent:  16,
		Limits:         h.cfg.limits(),
		SendQueue:      h.cfg.SendQueue,
		CloseOnInvalid: true,
		OnCancel:       rp.onCancel,
		Logger:         rp.log,
	})
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		release()
		conn.Close(peer.CloseGoingAway, "hub shutting down")
		return
	}
	h.replicas[rp] = struct{}{}
	h.mu.Unlock()
	h.metrics.connections.WithLabelValues("server").Inc()
	rp.peer.Start(h.ctx)
	nameHint := r.URL.Query().Get("name")
	if !h.goOwned(func() { rp.run(nameHint) }) {
		rp.peer.CloseWith(peer.CloseGoingAway, "hub shutting down")
	}
}

// run registers the replica, waits until it disconnects and unregisters it.
func (rp *replica) run(nameHint string) {
	h := rp.hub
	defer func() {
		rp.release()
		h.mu.Lock()
		delete(h.replicas, rp)
		h.mu.Unlock()
		h.metrics.connections.WithLabelValues("server").Dec()
		rp.peer.Wait()
	}()
	if err := rp.handshake(nameHint); err != nil {
		code, reason := peer.ClosePolicyViolation, err.Error()
		var ce *peer.CloseError
		if errors.As(err, &ce) {
			code, reason = ce.Code, ce.Reason
		}
		rp.log.Warn("server dropped during its handshake", "reason", reason)
		rp.peer.CloseWith(code, reason)
		rp.peer.Wait()
		return
	}
	<-rp.peer.Done()
	err := rp.peer.Err()
	if errors.Is(err, peer.ErrSlowConsumer) {
		h.metrics.slowConsumers.Inc()
	}
	h.removeLocal(rp.id)
	rp.log.Info("server disconnected", "reason", err)
}

// handshake initializes the server, lists what it offers and registers it.
func (rp *replica) handshake(nameHint string) error {
	h := rp.hub
	ctx, cancel := context.WithTimeout(h.ctx, handshakeTimeout)
	defer cancel()
	var init mcp.InitializeResult
	err := rp.peer.Call(ctx, mcp.MethodInitialize, &mcp.InitializeParams{
		ProtocolVersion: mcp.LatestVersion,
		Capabilities: mcp.ClientCapabilities{
			Sampling:    &mcp.SamplingCap{Context: &struct{}{}, Tools: &struct{}{}},
			Elicitation: &mcp.ElicitationCap{Form: &struct{}{}, URL: &struct{}{}},
			Roots:       &mcp.ListChangedCap{ListChanged: true},
		},
		ClientInfo: mcp.Implementation{Name: "switchboard", Title: "Switchboard hub", Version: Version},
	}, &init)
	if err != nil {
		return fmt.Errorf("initialize failed: %w", err)
	}
	if !mcp.IsSupportedVersion(init.ProtocolVersion) {
		return fmt.Errorf("unsupported protocol version %q", init.ProtocolVersion)
	}
	// The name comes from the credentials when they fix one, else from
	// ?name=, else from serverInfo.name.
	raw := rp.who.fixedServerName()
	if raw == "" {
		raw = nameHint
	}
	if raw == "" {
		raw = init.ServerInfo.Name
	}
	name := normalizeName(raw)
	switch {
	case name == "":
		return errors.New("server name is empty: set serverInfo.name or ?name=")
	case name == reservedName:
		return fmt.Errorf("server name %q is reserved", name)
	case h.cfg.Tokens != nil && !rp.who.mayRegister(name):
		return fmt.Errorf("token %q may not register server name %q", rp.who.name, name)
	}
	if err := rp.peer.Notify(ctx, mcp.NotificationInitialized, nil); err != nil {
		return err
	}
	info := &replicaInfo{
		ID:              rp.id,
		Name:            name,
		Instance:        h.id,
		ServerInfo:      init.ServerInfo,
		ProtocolVersion: init.ProtocolVersion,
		ConnectedAt:     time.Now().UTC(),
		Owner:           rp.who.name,
		local:           rp,
		inflight:        new(atomic.Int64),
	}
	caps := init.Capabilities
	for k := range numKinds {
		if !offersKind(caps, k) {
			continue
		}
		items, err := rp.fetchList(ctx, k, name)
		if err != nil {
			return err
		}
		info.lists[k] = items
	}
	rp.mu.Lock()
	rp.info = info
	rp.mu.Unlock()
	rp.log = rp.log.With("server", name)
	if err := h.setLocal(info); err != nil {
		return err
	}
	rp.log.Info("server registered", "serverInfo", init.ServerInfo.Name, "version", init.ProtocolVersion,
		"tools", len(info.lists[kindTools]), "resources", len(info.lists[kindResources]),
		"templates", len(info.lists[kindTemplates]), "prompts", len(info.lists[kindPrompts]))
	return nil
}

func offersKind(c mcp.ServerCapabilities, k listKind) bool {
	switch k {
	case kindTools:
		return c.Tools != nil
	case kindResources, kindTemplates:
		return c.Resources != nil
	}
	return c.Prompts != nil
}

// fetchList reads every page of one list.
func (rp *replica) fetchList(ctx context.Context, k listKind, server string) ([]listItem, error) {
	var items []listItem
	cursor := ""
	for range maxPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var raw json.RawMessage
		if err := rp.peer.Call(ctx, k.method(), params, &raw); err != nil {
			if k == kindTemplates && errors.Is(err, jsonrpc.ErrMethodNotFound) {
				return nil, nil // a server with resources but no templates
			}
			return nil, fmt.Errorf("%s failed: %w", k.method(), err)
		}
		res, err := mcp.ParseObject(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: result is not an object", k.method())
		}
		var page []json.RawMessage
		if f, ok := res[k.field()]; ok && json.Unmarshal(f, &page) != nil {
			return nil, fmt.Errorf("%s: %q is not an array", k.method(), k.field())
		}
		for _, r := range page {
			it, ok := newListItem(k, server, rp.hub.cfg.Separator, r)
			if !ok {
				return nil, fmt.Errorf("%s: an item has no %q", k.method(), k.key())
			}
			items = append(items, it)
		}
		next, _ := res.String("nextCursor")
		if next == "" {
			return items, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("%s: more than %d pages", k.method(), maxPages)
}

// refresh re-lists the given kinds after the server said they changed. One
// refresh runs at a time per replica; changes announced meanwhile are picked
// up by the next round.
func (rp *replica) refresh(kinds ...listKind) {
	rp.mu.Lock()
	for _, k := range kinds {
		rp.dirty[k] = true
	}
	if rp.refreshing || rp.info == nil {
		rp.mu.Unlock()
		return
	}
	rp.refreshing = true
	rp.mu.Unlock()
	started := rp.hub.goOwned(func() {
		for {
			rp.mu.Lock()
			dirty := rp.dirty
			rp.dirty = [numKinds]bool{}
			info := rp.info
			if dirty == ([numKinds]bool{}) {
				rp.refreshing = false
				rp.mu.Unlock()
				return
			}
			rp.mu.Unlock()

			next := *info
			ctx, cancel := context.WithTimeout(rp.hub.ctx, handshakeTimeout)
			var err error
			for k := range numKinds {
				if dirty[k] {
					next.lists[k], err = rp.fetchList(ctx, k, info.Name)
					if err != nil {
						break
					}
				}
			}
			cancel()
			if err != nil {
				rp.log.Warn("refreshing lists failed; dropping the server", "err", err)
				rp.peer.CloseWith(peer.ClosePolicyViolation, err.Error())
				rp.mu.Lock()
				rp.refreshing = false
				rp.mu.Unlock()
				return
			}
			rp.mu.Lock()
			rp.info = &next
			rp.mu.Unlock()
			select {
			case <-rp.peer.Done():
			default:
				_ = rp.hub.setLocal(&next) // the same replica: its name is its own
			}
		}
	})
	if !started {
		rp.mu.Lock()
		rp.refreshing = false
		rp.mu.Unlock()
	}
}

// currentInfo returns what the replica published (nil before).
func (rp *replica) currentInfo() *replicaInfo {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.info
}

func (rp *replica) name() string {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.info == nil {
		return ""
	}
	return rp.info.Name
}

// onCancel tells the server that the hub gave up on a request it forwarded
// (the client cancelled or left, or the call timed out).
func (rp *replica) onCancel(id jsonrpc.ID, cause error) {
	reason := "cancelled by the client"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "request timed out"
	}
	_ = rp.peer.Notify(context.Background(), mcp.NotificationCancelled, &mcp.CancelledParams{RequestID: id, Reason: reason})
}

// call forwards one request to this replica and waits for the answer.
func (rp *replica) call(ctx context.Context, inflight *atomic.Int64, origin downstream, method string, params json.RawMessage) (json.RawMessage, error) {
	id := rp.peer.NextID()
	params, token := rp.register(id, origin, params)
	inflight.Add(1)
	defer func() {
		inflight.Add(-1)
		rp.unregister(id, token)
	}()
	var raw json.RawMessage
	err := rp.peer.CallID(ctx, id, method, params, &raw)
	return raw, err
}

// callAsync forwards one request to this replica and returns at once; done
// runs with the answer on the connection's read loop (or at once, if the
// request could not be sent). The call times out after the hub's call
// timeout; Abort on the peer with the returned id cancels it.
func (rp *replica) callAsync(inflight *atomic.Int64, origin downstream, method string, params json.RawMessage, done func(json.RawMessage, error)) jsonrpc.ID {
	id := rp.peer.NextID()
	params, token := rp.register(id, origin, params)
	inflight.Add(1)
	timer := time.AfterFunc(rp.hub.cfg.CallTimeout, func() { rp.peer.Abort(id, context.DeadlineExceeded) })
	finish := func(resp *jsonrpc.Response, err error) {
		timer.Stop()
		inflight.Add(-1)
		rp.unregister(id, token)
		var raw json.RawMessage
		switch {
		case err != nil:
		case resp.Error != nil:
			err = resp.Error
		default:
			raw = resp.Result
		}
		done(raw, err)
	}
	if err := rp.peer.Go(id, method, params, finish); err != nil {
		finish(nil, err)
	}
	return id
}

// register records a request forwarded under id, so that the server's
// progress reports and requests about it find their way back: the id maps
// to its caller and, if the caller asked for progress, a progress token of
// the hub's replaces the caller's, so that tokens of two clients never
// collide here. It returns the params to send.
func (rp *replica) register(id jsonrpc.ID, origin downstream, params json.RawMessage) (json.RawMessage, string) {
	uc := &upstreamCall{origin: origin}
	var token string
	if mayHaveMeta(params) {
		params, token = rp.swapToken(uc, params)
	}
	rp.mu.Lock()
	rp.calls[id] = uc
	if token != "" {
		rp.tokens[token] = uc
	}
	rp.mu.Unlock()
	return params, token
}

// mayHaveMeta reports whether params may hold a _meta member: a search for
// the key, much faster than walking params member by member, rules out
// most calls (those without progress). An escape might spell the key, so
// params with any escape are walked anyway.
func mayHaveMeta(params []byte) bool {
	return bytes.Contains(params, []byte(`_meta"`)) || bytes.Contains(params, []byte(`\u`))
}

// swapToken puts a progress token of the hub's in place of the caller's,
// which it notes in uc.
func (rp *replica) swapToken(uc *upstreamCall, params json.RawMessage) (json.RawMessage, string) {
	var token string
	if meta, ok := jsonrpc.Member(params, "_meta"); ok {
		if t, ok := jsonrpc.Member(meta, mcp.MetaProgressToken); ok {
			uc.clientToken = t
			token = `"sb-` + rp.hub.nextID() + `"`
			if meta, err := jsonrpc.SetMember(meta, mcp.MetaProgressToken, []byte(token)); err == nil {
				params, _ = jsonrpc.SetMember(params, "_meta", meta)
			}
		}
	}
	return params, token
}

func (rp *replica) unregister(id jsonrpc.ID, token string) {
	rp.mu.Lock()
	delete(rp.calls, id)
	if token != "" {
		delete(rp.tokens, token)
	}
	rp.mu.Unlock()
}

// handle answers the server's requests and notifications.
func (rp *replica) handle(ctx context.Context, req *jsonrpc.Request) (any, error) {
	switch req.Method {
	case mcp.MethodPing:
		// A ping naming a call goes to that call's client; any other ping
		// is the server checking on the hub, which answers it.
		if meta, ok := jsonrpc.Member(req.Params, "_meta"); ok {
			if _, ok := jsonrpc.Member(meta, mcp.MetaRelatedRequest); ok {
				return rp.routeToClient(ctx, req)
			}
		}
		return struct{}{}, nil
	case mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate, mcp.MethodRootsList:
		return rp.routeToClient(ctx, req)
	case mcp.NotificationProgress:
		rp.progress(req.Params)
	case mcp.NotificationCancelled:
		var p mcp.CancelledParams
		if json.Unmarshal(req.Params, &p) == nil {
			rp.peer.Cancel(p.RequestID)
		}
	case mcp.NotificationResourceUpdated:
		if name := rp.name(); name != "" {
			rp.hub.subs.publishUpdate(ctx, name, req.Params)
		}
	case mcp.NotificationMessage:
		if name := rp.name(); name != "" {
			rp.hub.subs.publishLog(ctx, name, req.Params)
		}
	case mcp.NotificationToolsListChanged:
		rp.refresh(kindTools)
	case mcp.NotificationResourcesListChanged:
		rp.refresh(kindResources, kindTemplates)
	case mcp.NotificationPromptsListChanged:
		rp.refresh(kindPrompts)
	default:
		if req.IsCall() {
			return nil, jsonrpc.Errorf(jsonrpc.ErrMethodNotFound, "the hub does not answer %s", req.Method)
		}
	}
	return nil, nil
}

// progress maps a progress report back to the caller's token and sends it
// to the caller.
func (rp *replica) progress(params json.RawMessage) {
	token, ok := jsonrpc.Member(params, mcp.MetaProgressToken)
	if !ok {
		return
	}
	rp.mu.Lock()
	uc := rp.tokens[string(token)]
	rp.mu.Unlock()
	if uc == nil {
		return // the call already ended, or the token is not the hub's
	}
	if params, err := jsonrpc.SetMember(params, mcp.MetaProgressToken, uc.clientToken); err == nil {
		uc.origin.notify(mcp.NotificationProgress, params)
	}
}

// routeToClient sends a server's request to the client whose call the server
// is serving: the one named by _meta["switchboard/relatedRequest"], else the
// only client with a call in flight to this replica. The hub never guesses
// between two clients.
func (rp *replica) routeToClient(ctx context.Context, req *jsonrpc.Request) (any, error) {
	params, err := mcp.ParseObject(req.Params)
	if err != nil {
		return nil, err
	}
	var origin downstream
	if raw, ok := params.MetaValue(mcp.MetaRelatedRequest); ok {
		var id jsonrpc.ID
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidParams, "_meta[%q] must be a request id", mcp.MetaRelatedRequest)
		}
		rp.mu.Lock()
		if uc := rp.calls[id]; uc != nil {
			origin = uc.origin
		}
		rp.mu.Unlock()
		if origin == nil {
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidRequest,
				"cannot route %s: request %s is not in flight", req.Method, id)
		}
		params.DeleteMeta(mcp.MetaRelatedRequest)
	} else {
		rp.mu.Lock()
		n := 0
		for _, uc := range rp.calls {
			if origin == nil {
				origin, n = uc.origin, 1
			} else if origin.key() != uc.origin.key() {
				n = 2
				break
			}
		}
		rp.mu.Unlock()
		switch {
		case n == 0:
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidRequest,
				"cannot route %s: no client has a call in flight to this server", req.Method)
		case n > 1:
			return nil, jsonrpc.Errorf(jsonrpc.ErrInvalidRequest,
				"cannot route %s: several clients have calls in flight; set _meta[%q] to the id of the call it serves",
				req.Method, mcp.MetaRelatedRequest)
		}
	}
	if err := origin.caps().check(req.Method, params); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, rp.hub.cfg.CallTimeout)
	defer cancel()
	res, err := origin.request(ctx, req.Method, params.Raw())
	if err != nil {
		return nil, rp.hub.downstreamError(ctx, err)
	}
	return res, nil
}
