package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/catalog"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Golden conversations: the hub's routing rules as data. Each file of
// testdata/golden is a txtar archive: a prose header saying what it shows
// (and which bug it once caught), then a "script" section, replayed by
// TestGolden frame by frame against real hubs over loopback: WebSockets
// here, Streamable HTTP requests in golden_http_test.go.
//
// Script lines (# starts a comment):
//
//	broker redis                 the instances share a real redis-server (first
//	                             line; else an in-memory broker)
//	instance A [timeout=200ms] [rate=1] [burst=1] [responses=sse] [taskafter=50ms]
//	                             start a hub instance (all share one broker)
//	server S [on A] [name=N]     a raw server connection to /mcp/server?name=N (N defaults to S)
//	client C [on A]              a raw client connection to /mcp
//	C > FRAME                    C sends FRAME
//	C < FRAME                    the next frame C receives must match FRAME
//	C << FRAME                   consecutive lines: C's next frames match these, in any order
//	S answer METHOD RESULT       S receives a request METHOD and answers RESULT
//	C initialize [CAPS]          client C opens its session (initialize with CAPS,
//	                             any answer, notifications/initialized)
//	S initialize CAPS            server S refuses the hub's server/discover (-32601, a
//	                             server of the session revisions), answers its
//	                             initialize with CAPS and receives
//	                             notifications/initialized
//	sync A S N                   wait until instance A lists server S with N replicas
//	close C                      close C's connection
//	quiet C                      C has received nothing it was not expected to
//	distinct V...                the values (JSON, or bound "$name"s) differ pairwise:
//	                             e.g. the ids the hub gave two calls
//	instance A catalog=F [discovery=search]
//	                             A reads its catalog from a file of its own,
//	                             written from the archive's section F
//	catalog A F                  A's catalog file is rewritten from section F;
//	                             wait until A serves it (or refused it: then
//	                             until it says so)
//	client C [on A] [path=P]     a raw client connection to P (default /mcp)
//
// In an expected frame, a string "$name" matches any value and binds it;
// a batch's answers match in any order;
// later uses must be equal, and a frame sent with "$name" sends the bound
// value. "$_" matches anything. Objects compare without regard to member
// order. go test -run TestGolden -update rewrites the expected lines from
// what the hub sent, keeping the placeholders.

var update = flag.Bool("update", false, "rewrite the golden conversations' expected frames")

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.txtar")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			t.Parallel()
			runGolden(t, file)
		})
	}
}

// txtar is a parsed archive: its header and its files, in order.
type txtar struct {
	comment string
	files   []txtarFile
}

type txtarFile struct {
	name string
	data string
}

func parseTxtar(s string) txtar {
	var a txtar
	lines := strings.SplitAfter(s, "\n")
	cur := -1
	var b strings.Builder
	flush := func() {
		if cur < 0 {
			a.comment = b.String()
		} else {
			a.files[cur].data = b.String()
		}
		b.Reset()
	}
	for _, line := range lines {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			a.files = append(a.files, txtarFile{name: strings.TrimSpace(trimmed[3 : len(trimmed)-3])})
			cur = len(a.files) - 1
			continue
		}
		b.WriteString(line)
	}
	flush()
	return a
}

func (a txtar) format() string {
	var b strings.Builder
	b.WriteString(a.comment)
	for _, f := range a.files {
		fmt.Fprintf(&b, "-- %s --\n", f.name)
		b.WriteString(f.data)
	}
	return b.String()
}

// goldenConn is one raw WebSocket connection of a script, with the frames
// it has received and not yet matched.
type goldenConn struct {
	name   string
	server bool
	conn   *peer.WebSocket
	inbox[string]
}

func (gc *goldenConn) read() {
	for {
		b, err := gc.conn.Read(context.Background())
		if err != nil {
			gc.fail(err)
			return
		}
		gc.put(string(b))
	}
}

// inbox holds what a connection or an HTTP response of a script has
// received and the script has not yet matched, in order.
type inbox[T any] struct {
	mu    sync.Mutex
	items []T
	more  chan struct{}
	err   error // why nothing more will come
	shut  bool  // what comes now is dropped unseen
}

func (q *inbox[T]) wake() {
	if q.more != nil {
		close(q.more)
	}
	q.more = make(chan struct{})
}

// put adds what was received.
func (q *inbox[T]) put(v T) {
	q.mu.Lock()
	if !q.shut {
		q.items = append(q.items, v)
		q.wake()
	}
	q.mu.Unlock()
}

// shutDown drops what was received and not matched, and all that comes
// later: the script's client has gone.
func (q *inbox[T]) shutDown() {
	q.mu.Lock()
	q.shut = true
	q.items = nil
	q.err = errors.New("closed by the script")
	q.wake()
	q.mu.Unlock()
}

// fail records that nothing more will come, and why.
func (q *inbox[T]) fail(err error) {
	q.mu.Lock()
	q.err = err
	q.wake()
	q.mu.Unlock()
}

// next waits for the next item, for line of the script, from who.
func (q *inbox[T]) next(t *testing.T, line int, who string) T {
	t.Helper()
	deadline := time.After(wait)
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return v
		}
		if q.err != nil {
			err := q.err
			q.mu.Unlock()
			t.Fatalf("line %d: %s: connection ended (%v) before the expected frame", line, who, err)
		}
		if q.more == nil {
			q.more = make(chan struct{})
		}
		more := q.more
		q.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			t.Fatalf("line %d: %s received nothing in %v", line, who, wait)
		}
	}
}

// left returns what was received and not matched.
func (q *inbox[T]) left() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.items)
}

type goldenRun struct {
	t         *testing.T
	broker    pubsub.Broker     // the instances' broker, unless redis
	redis     *redistest.Server // "broker redis": each instance has a client of it
	prefix    string            // the instances' Redis key prefix
	hubs      map[string]*testHub
	conns     map[string]*goldenConn
	clients   map[string]*goldenHTTP
	responses map[string]*goldenResponse
	vars      map[string]any
	arch      txtar // the archive: catalog files are its sections
	wg        sync.WaitGroup
}

// section returns the archive's section name.
func (r *goldenRun) section(n int, name string) string {
	for _, f := range r.arch.files {
		if f.name == name {
			return f.data
		}
	}
	r.t.Fatalf("line %d: the archive has no section %q", n, name)
	return ""
}

// rewriteCatalog writes an instance's catalog file anew and waits until it
// serves that catalog, or says it refused it.
func (r *goldenRun) rewriteCatalog(n int, th *testHub, data string) {
	t := r.t
	path := th.cfg.CatalogFile
	require.NotEmpty(t, path, "line %d: the instance has no catalog file", n)
	th.catalog.mu.Lock()
	before := th.catalog.refused
	th.catalog.mu.Unlock()
	require.NoError(t, os.WriteFile(path, []byte(data), 0o644), "line %d", n)
	sum := catalogSum([]byte(data))
	require.Eventually(t, func() bool {
		if v := th.reg.view(); v.cat != nil && v.cat.source != nil && v.cat.source.sum == sum {
			return true
		}
		th.catalog.mu.Lock()
		defer th.catalog.mu.Unlock()
		return th.catalog.refused != nil && th.catalog.refused != before
	}, wait, time.Millisecond, "line %d: the instance never took or refused its new catalog", n)
}

func runGolden(t *testing.T, file string) {
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	arch := parseTxtar(string(raw))
	scriptIdx := -1
	for i, f := range arch.files {
		if f.name == "script" {
			scriptIdx = i
		}
	}
	require.GreaterOrEqual(t, scriptIdx, 0, "%s has no script section", file)

	shared := pubsub.NewMemory()
	t.Cleanup(func() { shared.Close() })
	r := &goldenRun{t: t, broker: shared, hubs: map[string]*testHub{}, conns: map[string]*goldenConn{},
		clients: map[string]*goldenHTTP{}, responses: map[string]*goldenResponse{}, vars: map[string]any{}}
	t.Cleanup(func() {
		for _, gc := range r.conns {
			gc.conn.Close(peer.CloseNormal, "")
		}
		r.wg.Wait()
	})

	r.arch = arch
	lines := strings.Split(arch.files[scriptIdx].data, "\n")
	for i := 0; i < len(lines); i++ {
		if name, ok := unordered(lines[i]); ok {
			j := i + 1
			for j < len(lines) {
				if next, ok := unordered(lines[j]); !ok || next != name {
					break
				}
				j++
			}
			r.expectSet(i+1, name, lines[i:j])
			i = j - 1
			continue
		}
		if out, changed := r.step(i+1, lines[i]); changed {
			lines[i] = out
		}
	}
	for name, gc := range r.conns {
		if left := gc.left(); len(left) > 0 {
			t.Errorf("%s received frames the script does not expect: %v", name, left)
		}
	}
	for name, resp := range r.responses {
		if left := resp.unexpected(); len(left) > 0 {
			t.Errorf("%s received what the script does not expect: %v", name, left)
		}
	}
	if *update {
		arch.files[scriptIdx].data = strings.Join(lines, "\n")
		require.NoError(t, os.WriteFile(file, []byte(arch.format()), 0o644))
	}
}

// step runs one script line; for an expectation under -update it returns
// the line rewritten from what was received.
func (r *goldenRun) step(n int, line string) (string, bool) {
	t := r.t
	t.Helper()
	text := strings.TrimSpace(line)
	if text == "" || strings.HasPrefix(text, "#") {
		return "", false
	}
	fields := strings.Fields(text)
	opts := map[string]string{}
	var words []string
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		switch k, v, ok := strings.Cut(f, "="); {
		case ok && !strings.ContainsAny(f, "{[\""):
			opts[k] = v
		case f == "on" && i+1 < len(fields) && len(words) >= 2 && (words[0] == "server" || words[0] == "client"):
			i++
			opts["on"] = fields[i] // "client c on B": the instance it connects to
		default:
			words = append(words, f)
		}
	}
	switch words[0] {
	case "broker":
		require.Equal(t, []string{"broker", "redis"}, words, "line %d: broker redis", n)
		require.Empty(t, r.hubs, "line %d: the broker comes before the instances", n)
		r.redis, r.prefix = redistest.Start(t), redistest.Prefix(t)
		return "", false
	case "instance":
		var cfg Config
		if v := opts["timeout"]; v != "" {
			d, err := time.ParseDuration(v)
			require.NoError(t, err, "line %d", n)
			cfg.CallTimeout = d
		}
		if v := opts["rate"]; v != "" {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, "line %d", n)
			cfg.RateLimit = f
			cfg.RateBurst = 1
		}
		if v := opts["burst"]; v != "" {
			b, err := strconv.Atoi(v)
			require.NoError(t, err, "line %d", n)
			cfg.RateBurst = b
		}
		if sec := opts["catalog"]; sec != "" {
			cfg.CatalogFile = filepath.Join(r.t.TempDir(), "catalog.yaml")
			require.NoError(t, os.WriteFile(cfg.CatalogFile, []byte(r.section(n, sec)), 0o644), "line %d", n)
		}
		cfg.Discovery = catalog.Discovery(opts["discovery"])
		if v := opts["taskafter"]; v != "" {
			d, err := time.ParseDuration(v)
			require.NoError(t, err, "line %d", n)
			cfg.TaskAfter = d
		}
		switch opts["responses"] {
		case "", "auto":
		case "sse":
			cfg.HTTPResponses = mcp.ResponseSSE
		default:
			t.Fatalf("line %d: responses=auto or responses=sse", n)
		}
		r.startInstance(words[1], cfg)
		for _, th := range r.hubs {
			require.Eventually(t, func() bool { return len(th.remoteInstances()) == len(r.hubs)-1 }, wait, time.Millisecond,
				"line %d: the instances never heard each other", n)
			th.settle() // they are all there: one not heard is none (its heartbeats an hour apart, it would take hours)
		}
		return "", false
	case "server", "client":
		if words[0] == "client" && len(words) > 2 && words[2] == "http" {
			r.httpClient(n, words[1], opts)
			return "", false
		}
		th := r.instance(n, opts["on"])
		path := "/mcp"
		if p := opts["path"]; p != "" {
			path = p
		}
		if words[0] == "server" {
			name := words[1]
			if opts["name"] != "" {
				name = opts["name"]
			}
			path = "/mcp/server?name=" + name
		}
		conn, err := peer.Dial(ctxFor(t), th.wsURL(path), nil)
		require.NoError(t, err, "line %d", n)
		gc := &goldenConn{name: words[1], server: words[0] == "server", conn: conn}
		r.conns[words[1]] = gc
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			gc.read()
		}()
		return "", false
	case "sync":
		require.Len(t, words, 4, "line %d: sync INSTANCE SERVER N", n)
		want, err := strconv.Atoi(words[3])
		require.NoError(t, err, "line %d", n)
		r.instance(n, words[1]).waitFor(fmt.Sprintf("line %d: %s with %d replicas", n, words[2], want),
			func(v *view) bool { return len(v.servers[words[2]]) == want })
		return "", false
	case "close":
		if resp, ok := r.responses[words[1]]; ok {
			resp.drop()
			return "", false
		}
		r.conn(n, words[1]).conn.Close(peer.CloseNormal, "")
		return "", false
	case "catalog":
		require.Len(t, words, 3, "line %d: catalog INSTANCE SECTION", n)
		r.rewriteCatalog(n, r.instance(n, words[1]), r.section(n, words[2]))
		return "", false
	case "distinct":
		var vals []string
		for _, w := range words[1:] {
			vals = append(vals, r.substitute(n, w))
		}
		for i := range vals {
			for j := range i {
				require.NotEqual(t, vals[j], vals[i], "line %d: %s and %s are the same", n, words[1+j], words[1+i])
			}
		}
		return "", false
	case "owns":
		require.Len(t, words, 3, "line %d: owns INSTANCE SESSION", n)
		id := r.headerValue(n, words[2])
		require.NotNil(t, r.instance(n, words[1]).streamable.Session(id), "line %d: %s does not hold session %s", n, words[1], id)
		return "", false
	case "quiet":
		if resp, ok := r.responses[words[1]]; ok {
			require.Empty(t, resp.unexpected(), "line %d: %s received what the script does not expect", n, words[1])
			return "", false
		}
		require.Empty(t, r.conn(n, words[1]).left(), "line %d: %s received frames the script does not expect", n, words[1])
		return "", false
	}
	rest := strings.TrimSpace(strings.TrimPrefix(text, words[0]))
	if c, ok := r.clients[words[0]]; ok {
		r.httpStep(n, c, rest)
		return "", false
	}
	if resp, ok := r.responses[words[0]]; ok {
		return r.expectHTTP(n, resp, rest)
	}
	gc := r.conn(n, words[0])
	switch {
	case strings.HasPrefix(rest, ">"):
		frame := r.substitute(n, strings.TrimSpace(rest[1:]))
		require.NoError(t, gc.conn.Write(ctxFor(t), []byte(frame)), "line %d", n)
	case strings.HasPrefix(rest, "<"):
		want := strings.TrimSpace(rest[1:])
		got := gc.next(t, n, gc.name)
		if !r.match(n, want, got) {
			if *update {
				// Bound as the rewritten line binds them, for the lines after.
				rewritten := r.rewrite(want, got)
				r.match(n, rewritten, got)
				return words[0] + " < " + rewritten, true
			}
			t.Fatalf("line %d: %s received\n\t%s\nwant\n\t%s", n, words[0], got, want)
		}
	case strings.HasPrefix(rest, "initialize"):
		caps := strings.TrimSpace(strings.TrimPrefix(rest, "initialize"))
		if caps == "" {
			caps = "{}"
		}
		if r.isServer(words[0]) {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			got := gc.next(t, n, gc.name)
			require.NoError(t, json.Unmarshal([]byte(got), &req), "line %d", n)
			require.Equal(t, "server/discover", req.Method, "line %d: %s received %s", n, words[0], got)
			refuse := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`
			require.NoError(t, gc.conn.Write(ctxFor(t), []byte(refuse)), "line %d", n)
			got = gc.next(t, n, gc.name)
			require.NoError(t, json.Unmarshal([]byte(got), &req), "line %d", n)
			require.Equal(t, "initialize", req.Method, "line %d: %s received %s", n, words[0], got)
			frame := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":` +
				caps + `,"serverInfo":{"name":"` + words[0] + `","version":"1"}}}`
			require.NoError(t, gc.conn.Write(ctxFor(t), []byte(frame)), "line %d", n)
			require.JSONEq(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, gc.next(t, n, gc.name), "line %d", n)
			return "", false
		}
		frame := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` +
			caps + `,"clientInfo":{"name":"` + words[0] + `","version":"1"}}}`
		require.NoError(t, gc.conn.Write(ctxFor(t), []byte(frame)), "line %d", n)
		got := gc.next(t, n, gc.name)
		require.Contains(t, got, `"id":"init","result":`, "line %d: %s", n, got)
		require.NoError(t, gc.conn.Write(ctxFor(t), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)), "line %d", n)
	case strings.HasPrefix(rest, "answer "):
		method, result, _ := strings.Cut(strings.TrimSpace(rest[len("answer "):]), " ")
		got := gc.next(t, n, gc.name)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		require.NoError(t, json.Unmarshal([]byte(got), &req), "line %d", n)
		require.Equal(t, method, req.Method, "line %d: %s received %s", n, words[0], got)
		frame := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + r.substitute(n, result) + `}`
		require.NoError(t, gc.conn.Write(ctxFor(t), []byte(frame)), "line %d", n)
	default:
		t.Fatalf("line %d: cannot read %q", n, text)
	}
	return "", false
}

// unordered reports whether a line expects a frame in any order ("C <<"),
// and for which connection.
func unordered(line string) (string, bool) {
	name, rest, ok := strings.Cut(strings.TrimSpace(line), " ")
	return name, ok && strings.HasPrefix(strings.TrimSpace(rest), "<<")
}

// expectSet matches the next len(lines) frames of a connection with the
// lines' frames, in any order.
func (r *goldenRun) expectSet(n int, name string, lines []string) {
	t := r.t
	gc := r.conn(n, name)
	var want, got []any
	for _, line := range lines {
		_, rest, _ := strings.Cut(strings.TrimSpace(line), "<<")
		var w any
		require.NoError(t, decodeNumber(strings.TrimSpace(rest), &w), "line %d", n)
		want = append(want, w)
	}
	var raw []string
	for range lines {
		f := gc.next(t, n, gc.name)
		raw = append(raw, f)
		var g any
		require.NoError(t, decodeNumber(f, &g), "line %d", n)
		got = append(got, g)
	}
	bound := map[string]any{}
	if !r.matchAnyOrder(want, got, bound) {
		t.Fatalf("line %d: %s received, in some order,\n\t%s\nwant\n\t%s", n, name, strings.Join(raw, "\n\t"), strings.Join(lines, "\n\t"))
	}
	maps.Copy(r.vars, bound)
}

// startInstance starts instance name with cfg, on the script's broker.
func (r *goldenRun) startInstance(name string, cfg Config) {
	cfg.HeartbeatInterval = time.Hour
	if cfg.RateLimit == 0 {
		cfg.RateLimit = -1
	}
	if r.redis != nil {
		r.hubs[name] = startHubOn(r.t, r.redis, r.prefix, cfg)
		return
	}
	cfg.Broker = r.broker
	r.hubs[name] = startHub(r.t, cfg)
}

func (r *goldenRun) instance(n int, name string) *testHub {
	if name == "" {
		name = "A"
		if _, ok := r.hubs[name]; !ok && len(r.hubs) == 0 {
			r.startInstance(name, Config{})
		}
	}
	th, ok := r.hubs[name]
	require.True(r.t, ok, "line %d: no instance %s", n, name)
	return th
}

func (r *goldenRun) isServer(name string) bool {
	gc, ok := r.conns[name]
	return ok && gc.server
}

func (r *goldenRun) conn(n int, name string) *goldenConn {
	gc, ok := r.conns[name]
	require.True(r.t, ok, "line %d: no connection %s", n, name)
	return gc
}

// substitute replaces "$name" strings in a frame to send with their bound
// values.
func (r *goldenRun) substitute(n int, frame string) string {
	var v any
	require.NoError(r.t, decodeNumber(frame, &v), "line %d: not JSON: %s", n, frame)
	out, err := json.Marshal(r.bind(n, v))
	require.NoError(r.t, err)
	return string(out)
}

func (r *goldenRun) bind(n int, v any) any {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$") && x != "$_" {
			val, ok := r.vars[x]
			require.True(r.t, ok, "line %d: %s is not bound", n, x)
			return val
		}
	case map[string]any:
		for k, e := range x {
			x[k] = r.bind(n, e)
		}
	case []any:
		for i, e := range x {
			x[i] = r.bind(n, e)
		}
	}
	return v
}

// match compares a received frame with the expected one, binding
// placeholders.
func (r *goldenRun) match(n int, want, got string) bool {
	var w, g any
	require.NoError(r.t, decodeNumber(want, &w), "line %d: not JSON: %s", n, want)
	if decodeNumber(got, &g) != nil {
		return false
	}
	bound := map[string]any{}
	if wa, ok := w.([]any); ok {
		// A batch's answers come in any order.
		ga, ok := g.([]any)
		if !ok || !r.matchAnyOrder(wa, ga, bound) {
			return false
		}
	} else if !r.matchValue(w, g, bound) {
		return false
	}
	for k, v := range bound {
		r.vars[k] = v
	}
	return true
}

func (r *goldenRun) matchValue(w, g any, bound map[string]any) bool {
	if s, ok := w.(string); ok && strings.HasPrefix(s, "$") {
		if s == "$_" {
			return true
		}
		if prev, ok := r.vars[s]; ok {
			return reflect.DeepEqual(prev, g)
		}
		if prev, ok := bound[s]; ok {
			return reflect.DeepEqual(prev, g)
		}
		bound[s] = g
		return true
	}
	switch wx := w.(type) {
	case map[string]any:
		gx, ok := g.(map[string]any)
		if !ok || len(gx) != len(wx) {
			return false
		}
		for k, wv := range wx {
			gv, ok := gx[k]
			if !ok || !r.matchValue(wv, gv, bound) {
				return false
			}
		}
		return true
	case []any:
		gx, ok := g.([]any)
		if !ok || len(gx) != len(wx) {
			return false
		}
		for i := range wx {
			if !r.matchValue(wx[i], gx[i], bound) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(w, g)
}

// matchAnyOrder matches the elements of a batch, each expected one with a
// different received one.
func (r *goldenRun) matchAnyOrder(w, g []any, bound map[string]any) bool {
	if len(w) != len(g) {
		return false
	}
	if len(w) == 0 {
		return true
	}
	for i := range g {
		try := maps.Clone(bound)
		if !r.matchValue(w[0], g[i], try) {
			continue
		}
		rest := append(append([]any{}, g[:i]...), g[i+1:]...)
		if r.matchAnyOrder(w[1:], rest, try) {
			maps.Copy(bound, try)
			return true
		}
	}
	return false
}

// rewrite returns the received frame in place of the expected one, keeping
// the expected placeholders where the two line up (-update).
func (r *goldenRun) rewrite(want, got string) string {
	var w, g any
	decodeNumber(want, &w)
	if decodeNumber(got, &g) != nil {
		return got
	}
	out, _ := json.Marshal(keepPlaceholders(w, g))
	return string(out)
}

func keepPlaceholders(w, g any) any {
	if s, ok := w.(string); ok && strings.HasPrefix(s, "$") {
		return s
	}
	switch gx := g.(type) {
	case map[string]any:
		wx, _ := w.(map[string]any)
		keys := make([]string, 0, len(gx))
		for k := range gx {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gx[k] = keepPlaceholders(wx[k], gx[k])
		}
	case []any:
		wx, _ := w.([]any)
		for i := range gx {
			var wi any
			if i < len(wx) {
				wi = wx[i]
			}
			gx[i] = keepPlaceholders(wi, gx[i])
		}
	}
	return g
}

// decodeNumber decodes JSON keeping numbers as json.Number, so that ids
// compare exactly.
func decodeNumber(s string, v any) error {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	return d.Decode(v)
}
