package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// The load of the Streamable HTTP rows: a lean client of the hub's /mcp,
// so that the load generator, which shares the machine's cores with the
// hub, costs about what the WebSocket rows' client does. pkg/mcp's client
// conn, like any SDK's, goes through net/http's client, a goroutine and a
// decode per call, and spent more CPU per call than the hub.
//
// Each connection of the shape is one session, opened with initialize and
// notifications/initialized (through net/http); each of its calls in
// flight has a keep-alive TCP connection of its own, on which it writes
// the POST of a tools/call by hand and reads the response: a JSON body, or
// an SSE stream until its end.

// leanHTTPDialer opens sessions on the hub's Streamable HTTP endpoint. With
// progress set, every call carries a progress token of its own, and the
// MCP server reports progress once before it answers: the hub then answers
// the POST with an SSE stream instead of one JSON body.
type leanHTTPDialer struct {
	url      string
	params   json.RawMessage
	progress bool
	// raw: the raw HTTP echo, which echoes the request: no session, and
	// the answer is checked for the call's id only.
	raw bool
	// modern: no session either, each POST a request of the 2026-07-28
	// revision that says what it is in its _meta and headers.
	modern bool
}

// leanHTTPConn is one session and the connections of its calls.
type leanHTTPConn struct {
	addr     string // host:port
	head     []byte // the POST's request line and headers, up to Content-Length's value
	params   json.RawMessage
	progress bool
	raw      bool
	modern   bool
	ids      atomic.Int64
	done     chan struct{} // closed by close: the slots' connections end
	once     sync.Once
	closeReq func()
}

func (d leanHTTPDialer) dial(ctx context.Context) (loadConn, error) {
	u, err := url.Parse(d.url)
	if err != nil {
		return nil, err
	}
	if d.raw || d.modern {
		head := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host +
			"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
		if d.modern {
			name, _ := jsonrpc.StringMember(d.params, "name")
			head += mcp.HeaderProtocolVersion + ": " + mcp.ModernVersion + "\r\n" + mcp.HeaderMethod + ": " + mcp.MethodToolsCall +
				"\r\n" + mcp.HeaderName + ": " + name + "\r\n"
		}
		return &leanHTTPConn{addr: u.Host, head: []byte(head + "Content-Length: "), params: d.params, progress: d.progress, raw: d.raw,
			modern: d.modern, done: make(chan struct{}), closeReq: func() {}}, nil
	}
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	post := func(body string, header http.Header) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader([]byte(body)))
		if err != nil {
			return nil, nil, err
		}
		req.Header = header.Clone()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode/100 != 2 {
			err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		return resp, b, err
	}
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"hubbench","version":"1"}}}`,
		mcp.LatestVersion)
	resp, body, err := post(init, http.Header{})
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	session := resp.Header.Get(mcp.HeaderSessionID)
	if session == "" {
		return nil, fmt.Errorf("initialize: no %s in the answer: %s", mcp.HeaderSessionID, body)
	}
	h := http.Header{}
	h.Set(mcp.HeaderSessionID, session)
	h.Set(mcp.HeaderProtocolVersion, mcp.LatestVersion)
	if _, _, err := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, h); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	head := "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		mcp.HeaderSessionID + ": " + session + "\r\n" + mcp.HeaderProtocolVersion + ": " + mcp.LatestVersion +
		"\r\nContent-Length: "
	c := &leanHTTPConn{addr: u.Host, head: []byte(head), params: d.params, progress: d.progress, done: make(chan struct{})}
	c.closeReq = func() {
		req, err := http.NewRequest(http.MethodDelete, d.url, nil)
		if err != nil {
			return
		}
		req.Header = h
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req); err == nil {
			resp.Body.Close()
		}
	}
	return c, nil
}

func (c *leanHTTPConn) drive(ctx context.Context, inflight int, lr *loadRun, rec *recorder) {
	callSlots(ctx, inflight, lr, rec, func() slot {
		s := &leanSlot{c: c}
		stop := context.AfterFunc(ctx, s.close)
		return slot{
			call: s.call,
			goOn: func() bool {
				if ctx.Err() != nil {
					return false
				}
				s.close() // the next call connects again
				return true
			},
			release: func() { stop(); s.close() },
		}
	})
}

func (c *leanHTTPConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.closeReq()
	})
}

// leanSlot is one call in flight at a time on one keep-alive connection.
type leanSlot struct {
	c   *leanHTTPConn
	mu  sync.Mutex // guards nc against close from ctx's end
	nc  net.Conn
	rd  *bufio.Reader
	buf []byte
}

func (s *leanSlot) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil {
		s.nc.Close()
		s.nc = nil
	}
}

// call makes one tools/call and reads its whole answer.
func (s *leanSlot) call() error {
	s.mu.Lock()
	nc := s.nc
	s.mu.Unlock()
	if nc == nil {
		var err error
		if nc, err = net.Dial("tcp", s.c.addr); err != nil {
			return err
		}
		s.mu.Lock()
		s.nc, s.rd = nc, bufio.NewReaderSize(nc, 16<<10)
		s.mu.Unlock()
	}
	id := s.c.ids.Add(1)
	body := make([]byte, 0, len(s.c.params)+96)
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = strconv.AppendInt(body, id, 10)
	body = append(body, `,"method":"tools/call","params":`...)
	switch {
	case s.c.modern:
		body = append(body, `{"_meta":{"`+mcp.MetaProtocolVersion+`":"`+mcp.ModernVersion+`","`+mcp.MetaClientCapabilities+`":{}`...)
		if s.c.progress {
			body = append(body, `,"progressToken":`...)
			body = strconv.AppendInt(body, id, 10)
		}
		body = append(body, "},"...)
		body = append(body, s.c.params[1:]...)
	case s.c.progress:
		body = append(body, `{"_meta":{"progressToken":`...)
		body = strconv.AppendInt(body, id, 10)
		body = append(body, "},"...)
		body = append(body, s.c.params[1:]...)
	default:
		body = append(body, s.c.params...)
	}
	body = append(body, '}')
	b := append(s.buf[:0], s.c.head...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	s.buf = b
	if _, err := nc.Write(b); err != nil {
		return err
	}
	answer, err := readHTTPResponse(s.rd)
	if err != nil {
		return err
	}
	// The answer is the JSON-RPC response with our id, alone or the last
	// event of the stream.
	want := []byte(`"id":` + strconv.FormatInt(id, 10) + `,`)
	if !bytes.Contains(answer, want) || !s.c.raw && !bytes.Contains(answer, []byte(`"result"`)) {
		return fmt.Errorf("unexpected answer: %.200s", answer)
	}
	return nil
}

// readHTTPResponse reads one HTTP/1.1 response and returns its body: a 200
// with Content-Length or chunked transfer coding. Anything else is an
// error carrying what came.
func readHTTPResponse(rd *bufio.Reader) ([]byte, error) {
	status, err := rd.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return nil, fmt.Errorf("status %q", bytes.TrimSpace(status))
	}
	length, chunked := -1, false
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return nil, fmt.Errorf("Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		}
	}
	switch {
	case length >= 0:
		body := make([]byte, length)
		_, err := io.ReadFull(rd, body)
		return body, err
	case chunked:
		var body []byte
		for {
			line, err := rd.ReadSlice('\n')
			if err != nil {
				return nil, err
			}
			n, err := strconv.ParseInt(string(bytes.TrimRight(line, "\r\n")), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("chunk size %q", line)
			}
			if n == 0 {
				_, err := rd.Discard(2) // the last chunk's CRLF (no trailers)
				return body, err
			}
			start := len(body)
			body = append(body, make([]byte, n)...)
			if _, err := io.ReadFull(rd, body[start:]); err != nil {
				return nil, err
			}
			if _, err := rd.Discard(2); err != nil {
				return nil, err
			}
		}
	}
	return nil, errors.New("a response with neither Content-Length nor chunks")
}
