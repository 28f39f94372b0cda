package hub

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The Streamable HTTP half of the golden conversations. A client of this
// face has no connection to script: it sends requests, and each request's
// response is a stream of its own, named by the script, on which the
// script expects the status and headers, then the JSON body or the SSE
// events, then the end:
//
//	client C http [on A] [version=V] [path=P]
//	                             a Streamable HTTP client of /mcp (or P) on A.
//	                             It keeps the first Mcp-Session-Id it is
//	                             given and sends it on every request, and
//	                             sends MCP-Protocol-Version: V (when given)
//	                             on every request but an initialize; at
//	                             2026-07-28, a POST's Mcp-Method and
//	                             Mcp-Name mirror its body
//	C initialize [CAPS]          C opens its session: initialize (at V, else
//	                             2025-11-25) and notifications/initialized
//	C POST R [on B] [HEADER]... FRAME
//	                             C POSTs FRAME (to instance B); R names the
//	                             response (names are the script's, unique)
//	C GET R [on B] [HEADER]...   C opens a GET stream (a resumption with
//	                             Last-Event-ID:$e)
//	C DELETE R [on B] [HEADER]... C ends its session
//	R < STATUS [TYPE] [HEADER]... R's status, media type (none when not
//	                             given) and the headers named
//	R < FRAME                    R's JSON body, or its next SSE event, which
//	                             has no id
//	R < id=ID [retry=MS] [FRAME] R's next SSE event, with its id (and
//	                             retry); without FRAME, one with empty data
//	                             (a priming event)
//	R < end                      R has ended
//	close R                      C drops R: it closes the connection
//	quiet R                      R has received nothing unexpected
//	owns A ID                    instance A holds the session ID ("$sid")
//
// A HEADER is Name:value (sent, or expected, with "$name" placeholders as
// in frames) or !Name (not sent, or expected absent). A request is sent
// when its line runs, and the lines after it do not wait for its answer:
// a script observes that a request was served (its status, what a server
// received) before another of the same client must follow it.

// goldenHTTP is a Streamable HTTP client of a script.
type goldenHTTP struct {
	name    string
	on      string // the instance it talks to, unless a request says
	path    string
	version string

	mu      sync.Mutex
	session string // the Mcp-Session-Id it was given
}

// goldenResponse is the response to one request of a script.
type goldenResponse struct {
	name   string
	client *goldenHTTP
	cancel context.CancelFunc
	inbox[httpItem]
}

// httpItem is one thing a response brought: its head, a body, an SSE
// event, or its end.
type httpItem struct {
	head    *http.Response // status and header
	event   bool
	id      string
	hasID   bool
	retry   string
	data    string
	end     bool
	readErr error
}

func (it httpItem) String() string {
	switch {
	case it.head != nil:
		return it.head.Status
	case it.end:
		return "end"
	case it.event:
		return fmt.Sprintf("event id=%q retry=%q %s", it.id, it.retry, it.data)
	}
	return it.data
}

// unexpected returns what the response brought and the script did not
// match; an end the script did not wait for is not unexpected.
func (resp *goldenResponse) unexpected() []httpItem {
	var out []httpItem
	for _, it := range resp.left() {
		if !it.end {
			out = append(out, it)
		}
	}
	return out
}

// drop closes the response's connection, as a client whose network fails:
// what it brought and the script did not match is lost with it.
func (resp *goldenResponse) drop() {
	resp.shutDown()
	resp.cancel()
}

func (r *goldenRun) httpClient(n int, name string, opts map[string]string) {
	_, taken := r.conns[name]
	_, taken2 := r.clients[name]
	require.False(r.t, taken || taken2, "line %d: %s is taken", n, name)
	c := &goldenHTTP{name: name, on: opts["on"], path: "/mcp", version: opts["version"]}
	if p := opts["path"]; p != "" {
		c.path = p
	}
	r.instance(n, c.on) // it exists
	r.clients[name] = c
}

// httpStep runs a line of an HTTP client: a request, or initialize.
func (r *goldenRun) httpStep(n int, c *goldenHTTP, rest string) {
	t := r.t
	if strings.HasPrefix(rest, "initialize") {
		r.httpInitialize(n, c, strings.TrimSpace(strings.TrimPrefix(rest, "initialize")))
		return
	}
	fields := strings.Fields(rest)
	require.GreaterOrEqual(t, len(fields), 2, "line %d: %s METHOD NAME ...", n, c.name)
	method, name := fields[0], fields[1]
	require.Contains(t, []string{http.MethodPost, http.MethodGet, http.MethodDelete}, method, "line %d", n)
	_, taken := r.responses[name]
	_, taken2 := r.conns[name]
	require.False(t, taken || taken2, "line %d: %s is taken", n, name)
	on, body := c.on, ""
	var set [][2]string // in order: {name, value}, or {name, ""} to remove
	rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(rest, method)), name))
	for rest != "" {
		if rest[0] == '{' || rest[0] == '[' {
			body = r.substitute(n, rest)
			break
		}
		tok, after, _ := strings.Cut(rest, " ")
		rest = strings.TrimSpace(after)
		switch k, v, ok := strings.Cut(tok, ":"); {
		case tok == "on":
			on, rest, _ = strings.Cut(rest, " ")
			rest = strings.TrimSpace(rest)
		case strings.HasPrefix(tok, "!"):
			set = append(set, [2]string{tok[1:], ""})
		case ok:
			set = append(set, [2]string{k, r.headerValue(n, v)})
		default:
			t.Fatalf("line %d: cannot read %q", n, tok)
		}
	}
	header := c.defaultHeader(method, isInitialize(body))
	if method == http.MethodPost && mcp.IsModernVersion(c.version) {
		mirror(header, body)
	}
	for _, kv := range set {
		if kv[1] == "" {
			header.Del(kv[0])
		} else {
			header.Set(kv[0], kv[1])
		}
	}
	r.responses[name] = r.send(n, c, name, method, r.instance(n, on).srv.URL+c.path, header, body)
}

// defaultHeader returns what c sends with a request of method: the
// protocol version on every request but an initialize, before which the
// client knows none.
func (c *goldenHTTP) defaultHeader(method string, initialize bool) http.Header {
	h := http.Header{}
	switch method {
	case http.MethodGet:
		h.Set("Accept", "text/event-stream")
	case http.MethodPost:
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("Content-Type", "application/json")
	}
	c.mu.Lock()
	if c.session != "" {
		h.Set(mcp.HeaderSessionID, c.session)
	}
	c.mu.Unlock()
	if c.version != "" && !initialize {
		h.Set(mcp.HeaderProtocolVersion, c.version)
	}
	return h
}

// mirror sets the headers a client of 2026-07-28 mirrors a request's body
// in (SEP-2243): Mcp-Method, and Mcp-Name for the methods that name
// something. A script's own headers, or !Name, replace them.
func mirror(h http.Header, body string) {
	var m struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal([]byte(body), &m) != nil || m.Method == "" {
		return
	}
	h.Set(mcp.HeaderMethod, m.Method)
	if key := mcp.NameMember(m.Method); key != "" {
		if name, ok := jsonrpc.StringMember(m.Params, key); ok {
			h.Set(mcp.HeaderName, mcp.EncodeHeaderValue(name))
		}
	}
}

// isInitialize reports whether a body is an initialize request.
func isInitialize(body string) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal([]byte(body), &m) == nil && m.Method == mcp.MethodInitialize
}

// headerValue substitutes a header value's placeholder.
func (r *goldenRun) headerValue(n int, v string) string {
	if !strings.HasPrefix(v, "$") {
		return v
	}
	val, ok := r.vars[v]
	require.True(r.t, ok, "line %d: %s is not bound", n, v)
	if s, ok := val.(string); ok {
		return s
	}
	b, err := json.Marshal(val)
	require.NoError(r.t, err)
	return string(b)
}

// send starts a request; what its response brings goes to the returned
// response's inbox, read by a goroutine of the run.
func (r *goldenRun) send(n int, c *goldenHTTP, name, method, url string, header http.Header, body string) *goldenResponse {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	require.NoError(r.t, err, "line %d", n)
	req.Header = header
	resp := &goldenResponse{name: name, client: c, cancel: cancel}
	done := make(chan struct{})
	// Before the instances' cleanups (registered earlier, run later): an
	// instance's server waits for the requests it is serving.
	r.t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		resp.read(req)
	}()
	return resp
}

// read sends req and puts what its response brings in the inbox.
func (resp *goldenResponse) read(req *http.Request) {
	res, err := scrapeClient.Do(req)
	if err != nil {
		resp.fail(err)
		return
	}
	defer res.Body.Close()
	if id := res.Header.Get(mcp.HeaderSessionID); id != "" {
		c := resp.client
		c.mu.Lock()
		if c.session == "" {
			c.session = id
		}
		c.mu.Unlock()
	}
	resp.put(httpItem{head: res})
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		b, err := io.ReadAll(res.Body)
		if len(b) > 0 {
			resp.put(httpItem{data: string(b)})
		}
		resp.put(httpItem{end: true, readErr: err})
		return
	}
	br := bufio.NewReader(res.Body)
	for {
		ev, err := nextEvent(br)
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			resp.put(httpItem{end: true, readErr: err})
			return
		}
		resp.put(ev)
	}
}

// nextEvent reads the next event of an SSE stream (comments skipped), or
// io.EOF at its end.
func nextEvent(br *bufio.Reader) (httpItem, error) {
	ev := httpItem{event: true}
	fields, hasData := 0, false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return httpItem{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if fields > 0 {
				return ev, nil
			}
		case field == "": // a comment: keep-alive
		case field == "id":
			ev.id, ev.hasID = value, true
			fields++
		case field == "retry":
			ev.retry = value
			fields++
		case field == "data":
			if hasData {
				ev.data += "\n"
			}
			ev.data += value
			fields, hasData = fields+1, true
		default:
			fields++
		}
	}
}

// httpInitialize opens c's session: initialize, then
// notifications/initialized, each waited for.
func (r *goldenRun) httpInitialize(n int, c *goldenHTTP, caps string) {
	t := r.t
	if caps == "" {
		caps = "{}"
	}
	version := c.version
	if version == "" {
		version = mcp.LatestVersion
	}
	url := r.instance(n, c.on).srv.URL + c.path
	init := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":` + caps + `,"clientInfo":{"name":"` + c.name + `","version":"1"}}}`
	resp := r.send(n, c, c.name+" initialize", http.MethodPost, url, c.defaultHeader(http.MethodPost, true), init)
	head := resp.next(t, n, resp.name)
	require.NotNil(t, head.head, "line %d", n)
	require.Equal(t, http.StatusOK, head.head.StatusCode, "line %d", n)
	answer := resp.next(t, n, resp.name) // a JSON body, or SSE events
	for answer.data == "" && !answer.end {
		answer = resp.next(t, n, resp.name) // a priming event
	}
	require.Contains(t, answer.data, `"result":`, "line %d", n)
	require.True(t, resp.next(t, n, resp.name).end, "line %d", n)
	c.mu.Lock()
	require.NotEmpty(t, c.session, "line %d: initialize gave no session", n)
	c.mu.Unlock()

	resp = r.send(n, c, c.name+" initialized", http.MethodPost, url, c.defaultHeader(http.MethodPost, false),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	head = resp.next(t, n, resp.name)
	require.NotNil(t, head.head, "line %d", n)
	require.Equal(t, http.StatusAccepted, head.head.StatusCode, "line %d", n)
}

// httpWant is an expectation of a response line.
type httpWant struct {
	end    bool
	status int
	mt     string
	header []headerWant
	event  bool // id= or retry= given: an SSE event with these
	id     string
	hasID  bool
	retry  string
	frame  string // "" for none
}

type headerWant struct {
	name   string // as the script spells it
	value  string
	absent bool
}

func parseHTTPWant(text string) (httpWant, error) {
	var w httpWant
	if text == "end" {
		w.end = true
		return w, nil
	}
	fields := strings.Fields(text)
	if len(fields) > 0 && fields[0] != "" && fields[0][0] >= '0' && fields[0][0] <= '9' {
		status, err := strconv.Atoi(fields[0])
		if err != nil {
			return w, err
		}
		w.status = status
		for _, f := range fields[1:] {
			switch k, v, ok := strings.Cut(f, ":"); {
			case strings.HasPrefix(f, "!"):
				w.header = append(w.header, headerWant{name: f[1:], absent: true})
			case ok:
				w.header = append(w.header, headerWant{name: k, value: v})
			case strings.Contains(f, "/") && w.mt == "":
				w.mt = f
			default:
				return w, fmt.Errorf("cannot read %q", f)
			}
		}
		return w, nil
	}
	for text != "" && text[0] != '{' && text[0] != '[' && text[0] != '"' {
		tok, after, _ := strings.Cut(text, " ")
		text = strings.TrimSpace(after)
		switch k, v, _ := strings.Cut(tok, "="); k {
		case "id":
			w.event, w.id, w.hasID = true, v, true
		case "retry":
			w.event, w.retry = true, v
		default:
			return w, fmt.Errorf("cannot read %q", tok)
		}
	}
	w.frame = text
	return w, nil
}

// expectHTTP matches the next thing a response brought; under -update a
// mismatch returns the line rewritten from it.
func (r *goldenRun) expectHTTP(n int, resp *goldenResponse, rest string) (string, bool) {
	t := r.t
	t.Helper()
	require.True(t, strings.HasPrefix(rest, "<"), "line %d: %s < ...", n, resp.name)
	text := strings.TrimSpace(rest[1:])
	w, err := parseHTTPWant(text)
	require.NoError(t, err, "line %d", n)
	got := resp.next(t, n, resp.name)
	bound := map[string]any{}
	if r.matchHTTP(n, w, got, bound) {
		maps.Copy(r.vars, bound)
		return "", false
	}
	if *update {
		// Bound as the rewritten line binds them, for the lines after.
		rewritten := r.rewriteHTTP(w, got)
		if w, err := parseHTTPWant(rewritten); err == nil {
			bound := map[string]any{}
			if r.matchHTTP(n, w, got, bound) {
				maps.Copy(r.vars, bound)
			}
		}
		return resp.name + " < " + rewritten, true
	}
	t.Fatalf("line %d: %s received\n\t%s\nwant\n\t%s", n, resp.name, describe(got), text)
	return "", false
}

func (r *goldenRun) matchHTTP(n int, w httpWant, got httpItem, bound map[string]any) bool {
	switch {
	case w.end || got.end:
		return w.end && got.end && got.readErr == nil
	case w.status != 0 || got.head != nil:
		if got.head == nil || got.head.StatusCode != w.status {
			return false
		}
		if mt, _, _ := mime.ParseMediaType(got.head.Header.Get("Content-Type")); mt != w.mt {
			return false
		}
		for _, h := range w.header {
			vs := got.head.Header.Values(h.name)
			if h.absent != (len(vs) == 0) || !h.absent && (len(vs) != 1 || !r.matchValue(h.value, vs[0], bound)) {
				return false
			}
		}
		return true
	}
	if got.hasID != w.hasID || w.hasID && !r.matchValue(w.id, got.id, bound) || got.retry != w.retry {
		return false
	}
	if w.frame == "" || got.data == "" {
		return w.frame == "" && got.data == ""
	}
	var wv any
	require.NoError(r.t, decodeNumber(w.frame, &wv), "line %d: not JSON: %s", n, w.frame)
	return r.matchValue(wv, bodyValue(got.data), bound)
}

// bodyValue returns a body or an event's data as JSON decodes it, or as a
// string when it is not one JSON value (a plain text error).
func bodyValue(data string) any {
	d := json.NewDecoder(strings.NewReader(data))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || strings.TrimSpace(data[d.InputOffset():]) != "" {
		return data
	}
	return v
}

// describe shows what a response brought, for a failure.
func describe(got httpItem) string {
	if got.head == nil {
		return got.String()
	}
	var hs []string
	for k, vs := range got.head.Header {
		if k != "Date" && k != "Content-Length" {
			hs = append(hs, k+":"+strings.Join(vs, ","))
		}
	}
	sort.Strings(hs)
	return strconv.Itoa(got.head.StatusCode) + " " + strings.Join(hs, " ")
}

// rewriteHTTP returns the expectation of what was received, keeping w's
// placeholders where the two line up (-update).
func (r *goldenRun) rewriteHTTP(w httpWant, got httpItem) string {
	switch {
	case got.end:
		return "end"
	case got.head != nil:
		out := strconv.Itoa(got.head.StatusCode)
		if mt, _, _ := mime.ParseMediaType(got.head.Header.Get("Content-Type")); mt != "" {
			out += " " + mt
		}
		for _, h := range w.header {
			v := got.head.Header.Get(h.name)
			switch {
			case v == "":
				out += " !" + h.name
			case strings.HasPrefix(h.value, "$"):
				out += " " + h.name + ":" + h.value
			default:
				out += " " + h.name + ":" + v
			}
		}
		return out
	}
	var parts []string
	switch {
	case got.hasID && w.hasID && strings.HasPrefix(w.id, "$"):
		parts = append(parts, "id="+w.id)
	case got.hasID && got.id != "":
		parts = append(parts, "id=$_") // never a random value
	case got.hasID:
		parts = append(parts, "id=")
	}
	if got.retry != "" {
		parts = append(parts, "retry="+got.retry)
	}
	if got.data != "" {
		if s, ok := bodyValue(got.data).(string); ok {
			b, _ := json.Marshal(s)
			parts = append(parts, string(b))
		} else if w.frame != "" {
			parts = append(parts, r.rewrite(w.frame, got.data))
		} else {
			parts = append(parts, got.data)
		}
	}
	return strings.Join(parts, " ")
}
