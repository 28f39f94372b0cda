package peer

import (
	"bytes"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	b := <-accepted
	require.NotNil(t, b)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestCorkConnRead: small reads are served from one read-ahead, large ones
// straight from the socket, the bytes that came with the upgrade first, and
// the read-ahead buffer is given back as soon as it is drained.
func TestCorkConnRead(t *testing.T) {
	t.Parallel()
	a, b := tcpPair(t)
	c := newCorkConn(b, time.Second)
	require.NotNil(t, c.raw, "a TCP socket offers a RawConn")
	c.pre = []byte("pre|")

	want := bytes.Repeat([]byte("0123456789abcdef"), 1000) // 16,000 bytes
	go func() {
		for chunk := range slices.Chunk(want, 1500) {
			a.Write(chunk)
		}
	}()
	var got []byte
	for _, size := range []int{3, 2, 10, 100, 7, 128, readAheadSize, 1, 50000} {
		p := make([]byte, size)
		n, err := c.Read(p)
		require.NoError(t, err)
		require.Positive(t, n)
		got = append(got, p[:n]...)
		if c.ahead != nil {
			assert.NotEmpty(t, c.unread, "a held read-ahead buffer has something left in it")
		}
	}
	for len(got) < len("pre|")+len(want) {
		p := make([]byte, 64)
		n, err := c.Read(p)
		require.NoError(t, err)
		got = append(got, p[:n]...)
	}
	assert.Equal(t, "pre|"+string(want), string(got))
	assert.Nil(t, c.ahead, "everything read: no buffer held")

	// End of stream, and a read deadline, come through.
	a.Close()
	_, err := c.Read(make([]byte, 16))
	assert.ErrorIs(t, err, io.EOF)
}

func TestCorkConnReadDeadline(t *testing.T) {
	t.Parallel()
	_, b := tcpPair(t)
	c := newCorkConn(b, time.Second)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := c.Read(make([]byte, 16))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Nil(t, c.ahead)
}

// TestCorkConnWrite: corked writes leave together when uncorked, and the
// buffer that gathered them goes back to the pool.
func TestCorkConnWrite(t *testing.T) {
	t.Parallel()
	a, b := tcpPair(t)
	c := newCorkConn(b, time.Second)
	c.cork()
	for _, s := range []string{"one ", "two ", "three"} {
		n, err := c.Write([]byte(s))
		require.NoError(t, err)
		require.Equal(t, len(s), n)
	}
	require.NotNil(t, c.buf)
	require.NoError(t, c.SetReadDeadline(time.Time{}))
	require.NoError(t, a.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
	_, err := a.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "nothing leaves while corked")

	require.NoError(t, c.uncork())
	assert.Nil(t, c.buf)
	_, err = c.Write([]byte(" four")) // uncorked: straight out
	require.NoError(t, err)
	require.NoError(t, a.SetReadDeadline(time.Now().Add(5*time.Second)))
	got := make([]byte, len("one two three four"))
	_, err = io.ReadFull(a, got)
	require.NoError(t, err)
	assert.Equal(t, "one two three four", string(got))
}

// TestCorkConnWriteLarge: corked bytes leave before the buffer would grow
// past what the pool keeps, and in order with what is written straight out.
func TestCorkConnWriteLarge(t *testing.T) {
	t.Parallel()
	a, b := tcpPair(t)
	c := newCorkConn(b, 5*time.Second)
	var want []byte
	arrived := receives(t, a)
	c.cork()
	for i, size := range []int{20 << 10, 20 << 10, 20 << 10, 20 << 10, 100 << 10, 10, 30 << 10} {
		p := bytes.Repeat([]byte{byte('a' + i)}, size)
		want = append(want, p...)
		_, err := c.Write(p)
		require.NoError(t, err)
		if c.buf != nil {
			assert.LessOrEqual(t, cap(*c.buf), maxPooledCork)
		}
	}
	require.NoError(t, c.uncork())
	require.NoError(t, c.Close())
	arrived(want)
}

// TestCorkConnWriteKeeps: on an accepted connection, corked writes larger
// than coder/websocket's buffer are kept, not copied, and leave in order
// with the bytes copied around them, in one vectored write; the buffer
// that gathered the small ones may grow meanwhile, and is given back.
func TestCorkConnWriteKeeps(t *testing.T) {
	t.Parallel()
	a, b := tcpPair(t)
	c := newCorkConn(b, 5*time.Second)
	c.keepAbove = connWriteBuffer
	arrived := receives(t, a)
	var want []byte
	write := func(p []byte) {
		t.Helper()
		want = append(want, p...)
		n, err := c.Write(p)
		require.NoError(t, err)
		require.Equal(t, len(p), n)
	}
	c.cork()
	big := bytes.Repeat([]byte("k"), 16<<10)
	write([]byte("header-1"))
	write(big)
	require.Len(t, c.vec, 2, "the header's piece of the buffer, then the payload kept")
	assert.Same(t, &big[0], &c.vec[1][0], "the payload is kept, not copied")
	for i := range 40 { // 5,000 bytes: the 4 KiB buffer grows under the pieces in vec
		write(bytes.Repeat([]byte{byte('a' + i%26)}, 125))
	}
	write(bytes.Repeat([]byte("m"), 100<<10))
	write([]byte("tail"))
	require.NoError(t, c.uncork())
	assert.Nil(t, c.buf)
	assert.Empty(t, c.vec)
	assert.Zero(t, c.gathered)
	require.NoError(t, c.Close())
	arrived(want)
}

// receives reads what reaches a until it closes, in the background; the
// function it returns waits for that and checks it is want, in order.
func receives(t *testing.T, a net.Conn) (arrived func(want []byte)) {
	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(a)
		got <- all
	}()
	return func(want []byte) {
		t.Helper()
		select {
		case all := <-got:
			assert.True(t, bytes.Equal(want, all), "the bytes arrive in order")
		case <-time.After(10 * time.Second):
			t.Fatal("nothing arrived")
		}
	}
}
