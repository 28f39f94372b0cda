package peer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// TestPeer_noticesGiveWayToAnswers: while the other side reads nothing,
// notices fill half the queue at most: a keyed one replaces its queued
// predecessor, the rest are dropped and counted; a call still goes out, and
// nobody is closed as a slow consumer. Once the other side reads, it gets
// the call, the latest version of each keyed notice, and no more than half
// a queue of the others.
func TestPeer_noticesGiveWayToAnswers(t *testing.T) {
	t.Parallel()
	a, b := peer.Pipe(0) // a write waits until the other side reads
	t.Cleanup(func() { a.Close(peer.CloseNormal, ""); b.Close(peer.CloseNormal, "") })
	gate := &writeGate{Conn: a, writing: make(chan struct{})}
	p := start(t, gate, &peer.Options{SendQueue: 8})
	frame := func(method, v string) []byte {
		return (&jsonrpc.Request{Method: method, Params: []byte(`{"v":"` + v + `"}`)}).Encode()
	}
	require.True(t, p.SendNotice(frame("first", "0"), ""), "the first notice goes to the writer")
	<-gate.writing // the writer took the queue and waits on the other side: what follows queues
	queued := 0
	for i := range 100 {
		if p.SendNotice(frame("log", fmt.Sprint(i)), "") {
			queued++
		}
		p.SendNotice(frame("updated", fmt.Sprint(i)), "uri")
	}
	assert.LessOrEqual(t, queued, 4, "logs fill half the queue at most")
	assert.Positive(t, p.Dropped())
	call := make(chan error, 1)
	go func() { call <- p.Call(context.Background(), "answer-me", nil, nil) }()

	sc := script{t, b}
	var got []string
	for {
		req := sc.recvRequest()
		got = append(got, req.Method+" "+string(req.Params))
		if req.IsCall() {
			sc.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID))
			break
		}
	}
	require.NoError(t, <-call, "the call went out and was answered")
	assert.Equal(t, `updated {"v":"99"}`, lastWith(got, "updated"), "the latest update, not an older one")
	assert.LessOrEqual(t, countWith(got, "updated"), 1, "one update, replaced in place")
	assert.NoError(t, p.Err(), "not closed as a slow consumer")
}

func lastWith(lines []string, prefix string) string {
	last := ""
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			last = l
		}
	}
	return last
}

func countWith(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// writeGate tells when the first write starts.
type writeGate struct {
	peer.Conn
	once    sync.Once
	writing chan struct{}
}

func (g *writeGate) Write(ctx context.Context, frame []byte) error {
	g.once.Do(func() { close(g.writing) })
	return g.Conn.Write(ctx, frame)
}
