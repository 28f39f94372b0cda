package hub

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/mcp"
)

// BenchmarkStreamableCall is BenchmarkCall's one-instance tools/call of 100
// bytes over Streamable HTTP: 64 calls in flight, every call a POST on a
// keep-alive TCP connection of its own, answered with one JSON body; in
// sessions (4 sessions of 16 calls in flight), and as 2026-07-28 requests
// without a session ("modern"). The client writes its POSTs by hand and
// reads the answers without net/http (as cmd/hubbench's lean client
// does), so that ns/op, cpu-ns/op and allocs/op, which count the whole
// process, are mostly the hub's and its MCP server's: for A/B comparisons
// of the HTTP path with benchstat.
func BenchmarkStreamableCall(b *testing.B) {
	b.Run("session", func(b *testing.B) { benchStreamable(b, false) })
	b.Run("modern", func(b *testing.B) { benchStreamable(b, true) })
}

func benchStreamable(b *testing.B, modern bool) {
	th := benchHub(b, nil)
	dialBenchServer(b, th, newBenchServer(echoArguments))
	waitBenchServer(b, th)

	const sessions, inflight = 4, 16
	endpoint := th.srv.URL + "/mcp"
	var slots []*benchHTTPSlot
	for range sessions {
		head, err := benchModernHead(endpoint)
		if !modern {
			head, err = benchHTTPSession(endpoint, nil)
		}
		if err != nil {
			b.Fatal(err)
		}
		for range inflight {
			sl, err := newBenchHTTPSlot(endpoint, head)
			if err != nil {
				b.Fatal(err)
			}
			defer sl.conn.Close()
			slots = append(slots, sl)
		}
	}
	params := `{"name":"bench__echo","arguments":{"text":"` + strings.Repeat("x", 100-len(`{"text":""}`)) + `"}}`
	if modern {
		params = `{"_meta":{"` + mcp.MetaProtocolVersion + `":"` + mcp.ModernVersion + `","io.modelcontextprotocol/clientCapabilities":{}},` + params[1:]
	}
	var next, ids atomic.Int64
	b.SetParallelism(max(1, len(slots)/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		i := next.Add(1) - 1
		if i >= int64(len(slots)) {
			b.Error("more goroutines than calls in flight: GOMAXPROCS above 64")
			return
		}
		sl := slots[i]
		for pb.Next() {
			if err := sl.call(ids.Add(1), params); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchModernHead returns the head of a 2026-07-28 tools/call POST to
// bench__echo, up to Content-Length's value.
func benchModernHead(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	return "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		mcp.HeaderProtocolVersion + ": " + mcp.ModernVersion + "\r\n" + mcp.HeaderMethod + ": tools/call\r\n" +
		mcp.HeaderName + ": bench__echo\r\nContent-Length: ", nil
}

// benchHTTPSession opens a session (initialize, notifications/initialized)
// with the headers of auth (none, or Authorization), and returns the head
// of its POSTs, up to Content-Length's value.
func benchHTTPSession(endpoint string, auth http.Header) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	post := func(header http.Header, body string) (http.Header, error) {
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = header.Clone()
		for k, vs := range auth {
			req.Header[k] = vs
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, got)
		}
		return resp.Header, nil
	}
	got, err := post(http.Header{}, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+
		mcp.LatestVersion+`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	h := http.Header{}
	h.Set(mcp.HeaderSessionID, got.Get(mcp.HeaderSessionID))
	h.Set(mcp.HeaderProtocolVersion, mcp.LatestVersion)
	if _, err := post(h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return "", fmt.Errorf("notifications/initialized: %w", err)
	}
	var lines strings.Builder
	for k, vs := range auth {
		for _, v := range vs {
			lines.WriteString(k + ": " + v + "\r\n")
		}
	}
	return "POST " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" + lines.String() +
		mcp.HeaderSessionID + ": " + h.Get(mcp.HeaderSessionID) + "\r\n" +
		mcp.HeaderProtocolVersion + ": " + mcp.LatestVersion + "\r\nContent-Length: ", nil
}

// benchHTTPSlot is one call in flight: a keep-alive TCP connection on which
// it POSTs a call and reads its JSON answer, again and again.
type benchHTTPSlot struct {
	conn net.Conn
	r    *bufio.Reader
	head string
	req  []byte
	body []byte
}

func newBenchHTTPSlot(endpoint, head string) (*benchHTTPSlot, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	return &benchHTTPSlot{conn: conn, r: bufio.NewReader(conn), head: head}, nil
}

// call POSTs one tools/call with id and checks that its answer is a result.
func (sl *benchHTTPSlot) call(id int64, params string) error {
	body := sl.body[:0]
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = strconv.AppendInt(body, id, 10)
	body = append(body, `,"method":"tools/call","params":`...)
	body = append(body, params...)
	body = append(body, '}')
	sl.body = body
	req := append(sl.req[:0], sl.head...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(req, "\r\n\r\n"...)
	req = append(req, body...)
	sl.req = req
	_ = sl.conn.SetDeadline(time.Now().Add(wait))
	if _, err := sl.conn.Write(req); err != nil {
		return err
	}
	status, err := sl.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(status, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("status %q", bytes.TrimSpace(status))
	}
	length := -1
	for {
		line, err := sl.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return err
			}
		}
	}
	if length < 0 {
		return errors.New("an answer without Content-Length")
	}
	if cap(sl.body) < length {
		sl.body = make([]byte, length)
	}
	answer := sl.body[:length]
	if _, err := io.ReadFull(sl.r, answer); err != nil {
		return err
	}
	if !bytes.Contains(answer, []byte(`"result"`)) {
		return fmt.Errorf("not a result: %s", answer)
	}
	return nil
}
