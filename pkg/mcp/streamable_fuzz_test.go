package mcp

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzSSEReader feeds arbitrary bytes to the SSE reader: it never panics,
// never returns an event over its limit, and reads back exactly what
// appendSSEEvent wrote.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("id: a.1.0\nretry: 1000\ndata: \n\ndata: {\"x\":1}\n\n"), "a.1.2", []byte(`{"jsonrpc":"2.0"}`))
	f.Add([]byte(": comment\r\nevent: message\rdata:x\r\n\r\n"), "", []byte("line1\nline2\r\nline3\rend"))
	f.Add([]byte("data: cut off"), "id", []byte(""))
	f.Add([]byte("id: \x00\ndata\n\n"), "x", []byte("\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte, id string, data []byte) {
		const max = 1 << 12
		rd := newSSEReader(bytes.NewReader(stream), max)
		for range 1000 {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if len(ev.Data) > max {
				t.Fatalf("an event of %d bytes passed a limit of %d", len(ev.Data), max)
			}
		}
		// Round trip: an id without line breaks and data of any bytes.
		if strings.ContainsAny(id, "\r\n\x00") || len(data) > max/2 {
			return
		}
		out := appendSSEEvent(nil, id, data, 1500*time.Millisecond)
		ev, err := newSSEReader(bytes.NewReader(out), max).Next()
		if err != nil {
			t.Fatalf("reading back %q: %v", out, err)
		}
		want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data))
		if string(ev.Data) != want || ev.ID != id || ev.Retry != 1500*time.Millisecond {
			t.Fatalf("wrote id %q data %q, read id %q data %q retry %v", id, want, ev.ID, ev.Data, ev.Retry)
		}
	})
}

// FuzzEventID checks that parseEventID never panics and reads what eventID
// writes.
func FuzzEventID(f *testing.F) {
	f.Add("abcd1234.3.17", int64(3), int64(17))
	f.Add("..", int64(0), int64(0))
	f.Add("x.-1.2", int64(1<<62), int64(-5))
	f.Fuzz(func(t *testing.T, id string, num, seq int64) {
		if nonce, n, q, ok := parseEventID(id); ok && (nonce == "" || n < 0 || q < 0) {
			t.Fatalf("parseEventID(%q) accepted %q %d %d", id, nonce, n, q)
		}
		if num < 0 || seq < 0 {
			return
		}
		s := &StreamSession{nonce: "n0nce"}
		nonce, n, q, ok := parseEventID(s.eventID(num, seq))
		if !ok || nonce != "n0nce" || n != num || q != seq {
			t.Fatalf("eventID(%d, %d) read back as %q %d %d %v", num, seq, nonce, n, q, ok)
		}
	})
}

// FuzzAccept checks that the Accept parser never panics.
func FuzzAccept(f *testing.F) {
	f.Add("application/json, text/event-stream;q=0.5")
	f.Add("*/*;q=0")
	f.Add(`text/*; charset="a,b"`)
	f.Add("APPLICATION/JSON")
	f.Add("text/*, application/*")
	f.Fuzz(func(t *testing.T, header string) {
		for _, mt := range []string{"application/json", "text/event-stream"} {
			if got, want := accepts([]string{header, header}, mt), acceptsParsed([]string{header, header}, mt); got != want {
				t.Fatalf("accepts(%q, %s) = %v, parsing every part says %v", header, mt, got, want)
			}
		}
		mt, _, err := mime.ParseMediaType(header)
		if got, want := isJSON(header), err == nil && mt == "application/json"; got != want {
			t.Fatalf("isJSON(%q) = %v, mime.ParseMediaType says %v", header, got, want)
		}
	})
}

// acceptsParsed is accepts without its fast path: every part through
// mime.ParseMediaType.
func acceptsParsed(header []string, mt string) bool {
	typ, _, _ := strings.Cut(mt, "/")
	for _, h := range header {
		for part := range strings.SplitSeq(h, ",") {
			media, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil {
				continue
			}
			if q, ok := params["q"]; ok && strings.Trim(q, "0.") == "" {
				continue
			}
			if media == mt || media == "*/*" || media == typ+"/*" {
				return true
			}
		}
	}
	return false
}

// FuzzStreamablePOST sends arbitrary bodies and headers to a live session:
// every answer is a status the transport defines, a routing header given
// twice is always 400 -32020, and the session goes on serving. headers
// holds "Name: value" lines, each added as a header line.
func FuzzStreamablePOST(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`), "application/json", "application/json, text/event-stream", "")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","method":"x"}]`), "application/json", "*/*", "Mcp-Protocol-Version: 2025-03-26")
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}`), "application/json; charset=utf-8", "text/event-stream, application/json", "mcp-protocol-version: 2025-11-25")
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`), "application/json", "application/json, text/event-stream", "")
	f.Add([]byte(`{`), "text/plain", "", "Mcp-Protocol-Version: bogus")
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`),
		"application/json", "application/json, text/event-stream", "Mcp-Method: tools/call\nMcp-Method: tools/list\nMcp-Name: x")
	f.Add([]byte(`{"jsonrpc":"2.0","id":5,"method":"ping"}`), "application/json", "application/json, text/event-stream",
		"MCP-Protocol-Version: 2025-11-25\nMcp-Protocol-Version: 2025-11-25")

	s := NewServer(Implementation{Name: "fuzz", Version: "1"}, nil)
	h := NewStreamableHandler(&StreamableOptions{
		MaxBodyBytes: 1 << 14,
		Open: func(r *http.Request, sess *StreamSession) error {
			s.Serve(sess.Context(), sess.Conn())
			return nil
		},
	})
	f.Cleanup(h.Close)
	send := func(body []byte, ctype, accept string, header http.Header) *httptest.ResponseRecorder {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Accept", accept)
		for k, vs := range header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	init := send([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`),
		"application/json", "application/json, text/event-stream", nil)
	session := init.Header().Get(HeaderSessionID)
	if session == "" {
		f.Fatalf("no session: %d %s", init.Code, init.Body)
	}
	f.Fuzz(func(t *testing.T, body []byte, ctype, accept, headers string) {
		header := http.Header{}
		for line := range strings.SplitSeq(headers, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && k != "" && !strings.EqualFold(k, HeaderSessionID) {
				header.Add(k, strings.TrimSpace(v))
			}
		}
		header.Set(HeaderSessionID, session)
		start := time.Now()
		w := send(body, ctype, accept, header)
		if time.Since(start) > time.Second {
			t.Fatalf("the POST of %q took %v", body, time.Since(start))
		}
		switch w.Code {
		case http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusNotAcceptable,
			http.StatusUnsupportedMediaType, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
		if w.Code >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("an error without a JSON-RPC body: %d %q", w.Code, w.Body)
		}
		doubled := false
		for _, name := range routingHeaders {
			doubled = doubled || len(header.Values(name)) > 1
		}
		if doubled && w.Code != http.StatusNotAcceptable && w.Code != http.StatusUnsupportedMediaType &&
			(w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "-32020")) {
			t.Fatalf("a routing header given twice (%q) was answered %d: %s", headers, w.Code, w.Body)
		}
		ping := send([]byte(`{"jsonrpc":"2.0","id":"fuzz-ping","method":"ping"}`), "application/json", "application/json, text/event-stream",
			http.Header{HeaderSessionID: {session}})
		if ping.Code != http.StatusOK {
			b, _ := io.ReadAll(ping.Body)
			t.Fatalf("the session stopped answering after %q: %d %s", body, ping.Code, b)
		}
	})
}
