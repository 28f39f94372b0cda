package peer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// stdioPair connects two Stdio conns through two OS pipes, as a parent and
// the child it launched are connected.
func stdioPair(t *testing.T, opts *peer.StdioOptions) (*peer.Stdio, *peer.Stdio) {
	t.Helper()
	ar, bw, err := os.Pipe()
	require.NoError(t, err)
	br, aw, err := os.Pipe()
	require.NoError(t, err)
	a, b := peer.NewStdio(ar, aw, opts), peer.NewStdio(br, bw, opts)
	t.Cleanup(func() { a.Close(peer.CloseNormal, ""); b.Close(peer.CloseNormal, "") })
	return a, b
}

func TestStdio_readFraming(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		err      error
	}{
		{"lines", `{"a":1}` + "\n" + `{"b":2}` + "\n", []string{`{"a":1}`, `{"b":2}`}, io.EOF},
		{"crlf", `{"a":1}` + "\r\n", []string{`{"a":1}`}, io.EOF},
		{"blank lines skipped", "\n\n  \n" + `{"a":1}` + "\n\r\n\n", []string{`{"a":1}`}, io.EOF},
		{"last line without newline", `{"a":1}` + "\n" + `{"b":2}`, []string{`{"a":1}`, `{"b":2}`}, io.EOF},
		{"garbage is a frame too", "hello\n", []string{"hello"}, io.EOF},
		{"empty", "", nil, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := peer.NewStdio(strings.NewReader(tc.in), io.Discard, nil)
			var got []string
			for {
				f, err := c.Read(context.Background())
				if err != nil {
					assert.ErrorIs(t, err, tc.err)
					break
				}
				got = append(got, string(f))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestStdio_lineOverLimit(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // longer than the reader's buffer too
	c := peer.NewStdio(strings.NewReader(`{"a":1}`+"\n"+long+"\n"+`{"b":2}`+"\n"), io.Discard, &peer.StdioOptions{ReadLimit: 1000})
	f, err := c.Read(context.Background())
	require.NoError(t, err)
	assert.Equal(t, `{"a":1}`, string(f))
	_, err = c.Read(context.Background())
	assert.Equal(t, peer.CloseMessageTooBig, peer.CloseStatus(err), "a line over the limit ends the conn with 1009")
	assert.ErrorContains(t, err, "longer than 1000 bytes")
	_, err2 := c.Read(context.Background())
	assert.Equal(t, err, err2, "the conn stays ended")

	exact := strings.Repeat("y", 1000)
	c = peer.NewStdio(strings.NewReader(exact+"\n"), io.Discard, &peer.StdioOptions{ReadLimit: 1000})
	f, err = c.Read(context.Background())
	require.NoError(t, err, "a line of exactly the limit is accepted")
	assert.Len(t, f, 1000)
}

func TestStdio_writeKeepsOneMessagePerLine(t *testing.T) {
	var out bytes.Buffer
	c := peer.NewStdio(strings.NewReader(""), &out, nil)
	pretty := "{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"m\",\n  \"params\": {\"s\": \"a\\nb\"}\n}"
	require.NoError(t, c.Write(context.Background(), []byte(pretty)))
	require.NoError(t, c.Write(context.Background(), []byte(`{"x":1}`)))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 2, "a frame with line breaks still takes one line")
	var v struct {
		Params struct{ S string }
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &v), "whitespace turned into spaces leaves valid JSON")
	assert.Equal(t, "a\nb", v.Params.S, "escaped newlines inside strings are untouched")
	assert.Equal(t, `{"x":1}`, lines[1])
}

func TestStdio_closeUnblocksRead(t *testing.T) {
	a, _ := stdioPair(t, nil)
	got := make(chan error, 1)
	go func() {
		_, err := a.Read(context.Background())
		got <- err
	}()
	require.NoError(t, a.Close(peer.CloseNormal, ""))
	select {
	case err := <-got:
		assert.ErrorIs(t, err, net.ErrClosed)
	case <-time.After(wait):
		t.Fatal("Close did not unblock Read")
	}
	assert.ErrorIs(t, a.Write(context.Background(), []byte("{}")), net.ErrClosed)
	assert.NoError(t, a.Close(peer.CloseNormal, ""), "Close twice is fine")
}

// TestStdio_peers runs two peers over OS pipes: a call each way, a
// notification, and the end of the stream when one side closes.
func TestStdio_peers(t *testing.T) {
	a, b := stdioPair(t, nil)
	notified := make(chan string, 1)
	pa := peer.New(a, &peer.Options{Handler: peer.HandlerFunc(echo)})
	pb := peer.New(b, &peer.Options{Handler: peer.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.IsNotification() {
			notified <- req.Method
			return nil, nil
		}
		return echo(ctx, req)
	})})
	pa.Start(context.Background())
	pb.Start(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	var out map[string]int
	require.NoError(t, pa.Call(ctx, "echo", map[string]int{"n": 1}, &out))
	assert.Equal(t, 1, out["n"])
	require.NoError(t, pb.Call(ctx, "echo", map[string]int{"n": 2}, &out))
	assert.Equal(t, 2, out["n"])
	require.NoError(t, pa.Notify(ctx, "hello", nil))
	assert.Equal(t, "hello", <-notified)

	require.NoError(t, pa.Close())
	err := pb.Wait()
	assert.True(t, errors.Is(err, io.EOF), "the other side sees the end of the stream: %v", err)
}

// FuzzStdio: whatever bytes come in, every frame Read returns is one line
// without its line break, and a frame written then read comes back the same
// up to line breaks turned into spaces.
func FuzzStdio(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"b\"\r\n:2}\r\n"), []byte("{\n}"))
	f.Add([]byte(strings.Repeat("z", 300)+"\nx"), []byte("\n\n"))
	f.Add([]byte(strings.Repeat("0", 257)), []byte("0")) // over the limit, at the end of the stream
	f.Fuzz(func(t *testing.T, in, frame []byte) {
		c := peer.NewStdio(bytes.NewReader(in), io.Discard, &peer.StdioOptions{ReadLimit: 256})
		for range len(in) + 1 {
			got, err := c.Read(context.Background())
			if err != nil {
				break
			}
			if bytes.IndexByte(got, '\n') >= 0 || len(got) > 256 || len(bytes.TrimSpace(got)) == 0 {
				t.Fatalf("bad frame %q", got)
			}
		}

		var buf bytes.Buffer
		w := peer.NewStdio(&buf, &buf, nil)
		require.NoError(t, w.Write(context.Background(), frame))
		want := bytes.TrimRight(bytes.ReplaceAll(frame, []byte("\n"), []byte(" ")), "\r")
		got, err := w.Read(context.Background())
		if len(bytes.TrimSpace(want)) == 0 {
			assert.ErrorIs(t, err, io.EOF)
			return
		}
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
}
