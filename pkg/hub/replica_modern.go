package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// Servers of the 2026-07-28 revision. The hub speaks to each server in the
// newest revision both support: it asks server/discover first, as the
// SDKs' clients do, and opens a session with initialize only when the
// server refuses it (a server of the session revisions does not know the
// method), does not list 2026-07-28, or does not answer in time. From then
// on every request the hub sends a modern server describes itself in _meta
// (the revision, what the client can do, the log level it wants),
// list_changed and resource updates come on a subscriptions/listen stream
// the hub keeps open, and the server's input requests come back as
// InputRequiredResults: a modern client gets them as they are, and for a
// session-based one the hub asks the client and retries the call
// (routing_input.go).

// hubClientInfo is who the hub is to its servers.
var hubClientInfo = mcp.Implementation{Name: "switchboard", Title: "Switchboard hub", Version: Version}

// hubCaps is what the hub can do for its servers: whatever its clients can.
var hubCaps = mcp.ClientCapabilities{
	Sampling:    &mcp.SamplingCap{Context: &struct{}{}, Tools: &struct{}{}},
	Elicitation: &mcp.ElicitationCap{Form: &struct{}{}, URL: &struct{}{}},
	Roots:       &mcp.ListChangedCap{ListChanged: true},
}

// upstreamListen is the subscriptions/listen stream the hub keeps open at
// a modern server: list_changed of every kind the server offers, and the
// resources the cluster subscribed at it.
//
// One change at a time: a change holds the turn across its round trip to
// the server (the new stream's acknowledgement), which is why the turn is
// not a mutex: waiting for it honours the caller's context, so a server
// that never acknowledges holds up only the changes of its own stream, and
// each only until its context ends. The fields are the turn holder's.
type upstreamListen struct {
	turn chan struct{} // holds a value while a change runs; made with the replica
	uris map[string]bool
	id   jsonrpc.ID // the stream open now
	open bool
}

// open learns which revision to speak with the server, the newest both
// support, and returns what the server offers as an InitializeResult:
// server/discover first (2026-07-28, rp.modern), then initialize (the
// session revisions) when the server refuses discover, answers it without
// 2026-07-28, or is silent for Config.DiscoverTimeout (a server of the
// session revisions should refuse a method it does not know at once; one
// that ignores it would hold its handshake). A server that closes its
// connection on discover (some older servers take an unknown method for a
// fatal error, and `hub connect` restarts them) is remembered, and sent
// initialize first when it comes back, then discover if it refuses that. A
// server that says it needs a session (?era=session: its tools send the
// client requests of their own mid-call, which 2026-07-28 has not) is
// initialized only.
func (rp *replica) open(ctx context.Context, nameHint string) (*mcp.InitializeResult, error) {
	key := rp.who.name + "\x00" + rp.intendedName(nameHint)
	first := !rp.needsSession && !rp.hub.closers.has(key)
	var refused error
	if first {
		d, err := rp.discover(ctx)
		if err == nil {
			return d, nil
		}
		select {
		case <-rp.peer.Done():
			rp.hub.closers.add(key)
			return nil, fmt.Errorf("the server closed the connection on server/discover (it is sent initialize first when it comes back): %w", err)
		default:
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("server/discover: %w", err)
		}
		refused = err
	}
	var init mcp.InitializeResult
	err := rp.peer.Call(ctx, mcp.MethodInitialize, &mcp.InitializeParams{
		ProtocolVersion: mcp.LatestVersion,
		Capabilities:    hubCaps,
		ClientInfo:      hubClientInfo,
	}, &init)
	var rpcErr *jsonrpc.Error
	if !first && !rp.needsSession && errors.As(err, &rpcErr) && rpcErr != peer.ErrClosed {
		// Refused with an answer, the connection open: a server of
		// 2026-07-28 only, whose name once closed on discover.
		if d, derr := rp.discover(ctx); derr == nil {
			return d, nil
		}
	}
	switch {
	case err != nil && refused != nil:
		return nil, fmt.Errorf("initialize failed: %w (server/discover failed first: %v)", err, refused)
	case err != nil:
		return nil, fmt.Errorf("initialize failed: %w", err)
	case !mcp.IsSupportedVersion(init.ProtocolVersion):
		return nil, fmt.Errorf("unsupported protocol version %q", init.ProtocolVersion)
	}
	rp.log.Debug("server initialized: it speaks a session revision", "version", init.ProtocolVersion, "discover", refused)
	return &init, nil
}

// discover asks the server whether it speaks the stateless revision, within
// Config.DiscoverTimeout, and returns what it offers as an InitializeResult.
func (rp *replica) discover(ctx context.Context) (*mcp.InitializeResult, error) {
	ctx, cancel := context.WithTimeout(ctx, rp.hub.cfg.DiscoverTimeout)
	defer cancel()
	var d mcp.DiscoverResult
	if err := rp.peer.Call(ctx, mcp.MethodServerDiscover, rp.modernMeta(nil, nil), &d); err != nil {
		return nil, err
	}
	if !slices.Contains(d.SupportedVersions, mcp.ModernVersion) {
		return nil, fmt.Errorf("it does not speak %s (it has %v)", mcp.ModernVersion, d.SupportedVersions)
	}
	init := &mcp.InitializeResult{ProtocolVersion: mcp.ModernVersion, Capabilities: d.Capabilities, Instructions: d.Instructions}
	if raw, ok := d.Meta[mcp.MetaServerInfo]; ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &init.ServerInfo)
	}
	rp.modern = true
	return init, nil
}

// closersKept is how long the hub remembers a server that closed its
// connection on server/discover, and closersMax how many it remembers (the
// oldest is forgotten first): a server may be upgraded meanwhile, and a
// forgotten one costs one more failed attempt.
const (
	closersKept = time.Hour
	closersMax  = 4096
)

// closers are the servers that closed their connection on server/discover,
// by owner and intended name, and when.
type closers struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (c *closers) has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.seen[key]
	if ok && time.Since(at) > closersKept {
		delete(c.seen, key)
		return false
	}
	return ok
}

func (c *closers) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]time.Time{}
	}
	if _, ok := c.seen[key]; !ok && len(c.seen) >= closersMax {
		oldest, at := "", time.Time{}
		for k, t := range c.seen {
			if oldest == "" || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(c.seen, oldest)
	}
	c.seen[key] = time.Now()
}

// modernMeta returns params (an object, or nil) with the _meta of a request
// of the stateless revision (requestMeta).
func (rp *replica) modernMeta(c caller, params json.RawMessage) json.RawMessage {
	return requestMeta(c, params)
}

// requestMeta returns params (an object, or nil) with the _meta of a
// request of the stateless revision. The hub's own requests (lists,
// listen; c nil) declare what the hub can do; a call for a client declares
// what that client can do, and the log level it wants. A request that
// already describes itself (a modern client's) is returned as it is.
//
// Every call of a session client to a server of 2026-07-28 passes here, so
// the members are written as bytes, from encodings made once (the hub's
// capabilities, each combination of a client's, the hub's clientInfo),
// after the request's own _meta members (a progress token) and before its
// other params; a _meta that already names one of them is edited member by
// member instead (requestMetaEdited).
func requestMeta(c caller, params json.RawMessage) json.RawMessage {
	if len(params) == 0 || params[0] != '{' {
		params = json.RawMessage(`{}`)
	}
	meta, hasMeta := jsonrpc.Member(params, "_meta")
	if !hasMeta || len(meta) == 0 || meta[0] != '{' {
		meta = []byte(`{}`)
	}
	edit := false
	for name := range jsonrpc.Members(meta) {
		switch string(name) {
		case mcp.MetaProtocolVersion:
			return params
		case mcp.MetaClientCapabilities, mcp.MetaClientInfo, mcp.MetaLogLevel:
			edit = true
		}
	}
	if edit {
		return requestMetaEdited(c, params, meta)
	}
	caps, level := hubCapsJSON, mcp.LoggingLevel("")
	if c != nil {
		caps, level = declaredCapsJSON[c.caps().index()], c.logLevel()
	}
	rest := bytes.TrimSpace(params[1:]) // the params' members after the brace, and the closing one
	ownMeta := bytes.TrimSpace(meta[1 : len(meta)-1])
	b := make([]byte, 0, len(params)+len(caps)+len(hubClientInfoJSON)+160)
	b = append(b, `{"_meta":{"`+mcp.MetaProtocolVersion+`":"`+mcp.ModernVersion+`","`+mcp.MetaClientCapabilities+`":`...)
	b = append(b, caps...)
	b = append(b, `,"`+mcp.MetaClientInfo+`":`...)
	b = append(b, hubClientInfoJSON...)
	if level != "" {
		b = append(b, `,"`+mcp.MetaLogLevel+`":`...)
		b = jsonrpc.AppendString(b, string(level))
	}
	if len(ownMeta) > 0 {
		b = append(b, ',')
		b = append(b, ownMeta...)
	}
	b = append(b, '}')
	if !hasMeta {
		if len(rest) > 1 { // members beside the closing brace
			b = append(b, ',')
		}
		return append(b, rest...)
	}
	if p, err := jsonrpc.SetMember(params, "_meta", b[len(`{"_meta":`):]); err == nil {
		return p
	}
	return params
}

// requestMetaEdited is requestMeta for a request whose _meta already names
// one of the members it sets: each is set on its own, replacing it.
func requestMetaEdited(c caller, params, meta json.RawMessage) json.RawMessage {
	caps, level := hubCaps, mcp.LoggingLevel("")
	if c != nil {
		caps, level = c.caps().declared(), c.logLevel()
	}
	set := func(key string, v any) {
		raw, err := jsonrpc.Marshal(v)
		if err != nil {
			return
		}
		if m, err := jsonrpc.SetMember(meta, key, raw); err == nil {
			meta = m
		}
	}
	set(mcp.MetaProtocolVersion, mcp.ModernVersion)
	set(mcp.MetaClientCapabilities, caps)
	set(mcp.MetaClientInfo, hubClientInfo)
	if level != "" {
		set(mcp.MetaLogLevel, level)
	}
	if p, err := jsonrpc.SetMember(params, "_meta", meta); err == nil {
		params = p
	}
	return params
}

// The encodings requestMeta writes: the hub's capabilities, a client's as
// declared (by capsTable's index), the hub's clientInfo.
var (
	hubCapsJSON       = encodeJSON(hubCaps)
	hubClientInfoJSON = encodeJSON(hubClientInfo)
	declaredCapsJSON  = func() (t [len(capsTable)][]byte) {
		for i, c := range capsTable {
			t[i] = encodeJSON(c.declared())
		}
		return t
	}()
)

// call sends the server one of the hub's own requests, in the server's
// revision.
func (rp *replica) call(ctx context.Context, method string, params any, result any) error {
	if !rp.modern {
		return rp.peer.Call(ctx, method, params, result)
	}
	raw, err := jsonrpc.Marshal(params)
	if err != nil {
		return err
	}
	return rp.peer.Call(ctx, method, rp.modernMeta(nil, raw), result)
}

// subscribe keeps uri subscribed at the server (for subscriptions.go):
// resources/subscribe, or for a modern server its listen stream, reopened
// with the URI.
func (rp *replica) subscribe(ctx context.Context, uri string) error {
	if !rp.modern {
		return rp.peer.Call(ctx, mcp.MethodResourcesSubscribe, &mcp.ResourceParams{URI: uri}, nil)
	}
	return rp.relisten(ctx, uri, true)
}

// unsubscribe is subscribe undone.
func (rp *replica) unsubscribe(ctx context.Context, uri string) error {
	if !rp.modern {
		return rp.peer.Call(ctx, mcp.MethodResourcesUnsubscribe, &mcp.ResourceParams{URI: uri}, nil)
	}
	return rp.relisten(ctx, uri, false)
}

// relisten replaces a modern server's listen stream with one whose filter
// adds (or drops) uri: the new stream is acknowledged before the old one is
// cancelled, so that no notification falls between them.
func (rp *replica) relisten(ctx context.Context, uri string, add bool) error {
	l := &rp.listen
	select {
	case l.turn <- struct{}{}:
		defer func() { <-l.turn }()
	case <-ctx.Done():
		return ctx.Err()
	}
	if l.uris == nil {
		l.uris = map[string]bool{}
	}
	if uri != "" {
		if l.uris[uri] == add {
			return nil
		}
		if add {
			l.uris[uri] = true
		} else {
			delete(l.uris, uri)
		}
	}
	caps := rp.currentInfo()
	var offered mcp.ServerCapabilities
	if caps != nil {
		_ = json.Unmarshal(caps.Capabilities, &offered)
	}
	filter := mcp.SubscriptionFilter{
		ToolsListChanged:     offered.Tools != nil && offered.Tools.ListChanged,
		PromptsListChanged:   offered.Prompts != nil && offered.Prompts.ListChanged,
		ResourcesListChanged: offered.Resources != nil && offered.Resources.ListChanged,
	}
	for u := range l.uris {
		filter.ResourceSubscriptions = append(filter.ResourceSubscriptions, u)
	}
	slices.Sort(filter.ResourceSubscriptions)
	old, wasOpen := l.id, l.open
	if filter.ToolsListChanged || filter.PromptsListChanged || filter.ResourcesListChanged || len(filter.ResourceSubscriptions) > 0 {
		id, err := rp.openListen(ctx, &filter)
		if err != nil {
			if uri != "" {
				if add {
					delete(l.uris, uri)
				} else {
					l.uris[uri] = true
				}
			}
			return err
		}
		l.id, l.open = id, true
	} else {
		l.open = false
	}
	if wasOpen {
		rp.peer.Abort(old, context.Canceled) // the server hears notifications/cancelled
	}
	return nil
}

// openListen opens a listen stream and waits for its acknowledgement.
func (rp *replica) openListen(ctx context.Context, filter *mcp.SubscriptionFilter) (jsonrpc.ID, error) {
	raw, err := jsonrpc.Marshal(&mcp.ListenParams{Notifications: filter})
	if err != nil {
		return jsonrpc.ID{}, err
	}
	id := rp.peer.NextID()
	acked := make(chan struct{})
	ended := make(chan error, 1)
	rp.mu.Lock()
	rp.acks[id] = acked
	rp.mu.Unlock()
	defer func() {
		rp.mu.Lock()
		delete(rp.acks, id)
		rp.mu.Unlock()
	}()
	if err := rp.peer.Go(id, mcp.MethodSubscriptionsListen, rp.modernMeta(nil, raw), func(resp *jsonrpc.Response, err error) {
		if err == nil && resp.Error != nil {
			err = resp.Error
		}
		ended <- err
	}); err != nil {
		return jsonrpc.ID{}, err
	}
	select {
	case <-acked:
		return id, nil
	case err := <-ended:
		if err == nil {
			err = errors.New("the server ended its listen stream at once")
		}
		return jsonrpc.ID{}, fmt.Errorf("subscriptions/listen: %w", err)
	case <-ctx.Done():
		rp.peer.Abort(id, context.Canceled)
		return jsonrpc.ID{}, ctx.Err()
	}
}

// acknowledged takes a modern server's notifications/subscriptions/acknowledged.
func (rp *replica) acknowledged(_ context.Context, params json.RawMessage) {
	meta, _ := jsonrpc.Member(params, "_meta")
	raw, ok := jsonrpc.Member(meta, mcp.MetaSubscriptionID)
	if !ok {
		return
	}
	var id jsonrpc.ID
	if json.Unmarshal(raw, &id) != nil {
		return
	}
	rp.mu.Lock()
	ch := rp.acks[id]
	delete(rp.acks, id)
	rp.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// modernMetaPrefix starts the _meta keys of the stateless revision.
const modernMetaPrefix = "io.modelcontextprotocol/"

// withoutModernMeta returns a modern client's params as a session-based
// server must see them: without the _meta that describes a request of the
// stateless revision. The hub speaks the server's revision to it (a server
// that speaks both would take the call for a stateless one, and refuse to
// ask the client anything).
func withoutModernMeta(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(modernMetaPrefix)) {
		return params
	}
	// Edited as bytes: decoding params into a map and encoding them again
	// cost a modern client's call to a legacy server some 40 allocations.
	return mcp.WithoutMeta(params, func(name []byte) bool { return bytes.HasPrefix(name, []byte(modernMetaPrefix)) })
}

// withoutSubscriptionID returns a notification's params without the
// server's stream id, which is the hub's business, not its clients'.
func withoutSubscriptionID(params json.RawMessage) json.RawMessage {
	if !mayHaveMeta(params) {
		return params
	}
	o, err := mcp.ParseObject(params)
	if err != nil {
		return params
	}
	if _, ok := o.MetaValue(mcp.MetaSubscriptionID); !ok {
		return params
	}
	o.DeleteMeta(mcp.MetaSubscriptionID)
	return o.Raw()
}

// declared turns what routing knows of a client's capabilities back into
// the capabilities object a modern server reads.
func (c clientCaps) declared() mcp.ClientCapabilities {
	var out mcp.ClientCapabilities
	if c.Sampling {
		out.Sampling = &mcp.SamplingCap{}
		if c.SamplingTools {
			out.Sampling.Tools = &struct{}{}
		}
	}
	if c.ElicitForm || c.ElicitURL {
		out.Elicitation = &mcp.ElicitationCap{}
		if c.ElicitForm {
			out.Elicitation.Form = &struct{}{}
		}
		if c.ElicitURL {
			out.Elicitation.URL = &struct{}{}
		}
	}
	if c.Roots {
		out.Roots = &mcp.ListChangedCap{}
	}
	return out
}
