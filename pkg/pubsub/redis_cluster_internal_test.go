package pubsub

import (
	"bufio"
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeySlot(t *testing.T) {
	t.Parallel()
	// Slots as CLUSTER KEYSLOT of redis-server 7.0 gives them.
	for key, want := range map[string]int{
		"":                       0,
		"a":                      15495,
		"foo":                    12182,
		"bar":                    5061,
		"123456789":              12739, // CRC16/XMODEM check value 0x31C3
		"{user1000}.following":   3443,
		"{user1000}.followers":   3443,
		"foo{}{bar}":             8363, // an empty tag: the whole key
		"foo{{bar}}zap":          4015, // the tag is "{bar"
		"foo{bar}{zap}":          5061, // the first tag only
		"{}":                     15257,
		"{a":                     10276,
		"a}":                     5921,
		"switchboard:registry":   15911,
		"switchboard:inbox/6f1c": 9936,
		"é":                      10180,
	} {
		assert.Equal(t, want, keySlot(key), "%q", key)
	}
}

func TestParseClusterURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url      string
		cluster  bool
		addrs    []string
		password string
		tls      bool
		wantErr  string
	}{
		{url: "redis://127.0.0.1:6379/0"},
		{url: "rediss://h:6379"},
		{url: "unix:///run/redis.sock"},
		{url: "redis+cluster://127.0.0.1:7000", cluster: true, addrs: []string{"127.0.0.1:7000"}},
		{url: "redis+cluster://:pw@a:7000,b:7001,c:7002/", cluster: true, addrs: []string{"a:7000", "b:7001", "c:7002"}, password: "pw"},
		{url: "redis+cluster://user:p%40ss@a:7000, b:7001?dial_timeout=3s", cluster: true, addrs: []string{"a:7000", "b:7001"}, password: "p@ss"},
		{url: "rediss+cluster://[::1]:7000,[::1]:7001", cluster: true, addrs: []string{"[::1]:7000", "[::1]:7001"}, tls: true},
		{url: "redis://:pw@a:7000?addr=b:7001&addr=c:7002", cluster: true, addrs: []string{"a:7000", "b:7001", "c:7002"}, password: "pw"},
		{url: "redis+cluster://a:7000/1", cluster: true, wantErr: "no database number"},
		{url: "redis+cluster://", cluster: true, wantErr: "at least one host:port"},
		{url: "redis+cluster://a:7000?dial_timeout=soon", cluster: true, wantErr: "dial_timeout"},
	} {
		o, cluster, err := parseClusterURL(tc.url)
		assert.Equal(t, tc.cluster, cluster, tc.url)
		if tc.wantErr != "" {
			if assert.Error(t, err, tc.url) {
				assert.Contains(t, err.Error(), tc.wantErr)
			}
			continue
		}
		require.NoError(t, err, tc.url)
		if !tc.cluster {
			assert.Nil(t, o)
			continue
		}
		assert.Equal(t, tc.addrs, o.Addrs, tc.url)
		assert.Equal(t, tc.password, o.Password, tc.url)
		assert.Equal(t, tc.tls, o.TLSConfig != nil, tc.url)
	}
}

func TestParseClusterSlots(t *testing.T) {
	t.Parallel()
	// Two ranges, one master with a replica, one whose master has no host
	// (the node asked).
	raw := "*2\r\n" +
		"*4\r\n:0\r\n:8191\r\n*3\r\n$8\r\n10.0.0.1\r\n:7000\r\n$2\r\nid\r\n*3\r\n$8\r\n10.0.0.2\r\n:7001\r\n$3\r\nid2\r\n" +
		"*3\r\n:8192\r\n:16383\r\n*3\r\n$0\r\n\r\n:7002\r\n$3\r\nid3\r\n"
	rep, err := readReply(bufio.NewReader(strings.NewReader(raw)), 0)
	require.NoError(t, err)
	m, err := parseClusterSlots(rep, "10.0.0.9")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1:7000", m.master(0))
	assert.Equal(t, "10.0.0.1:7000", m.master(8191))
	assert.Equal(t, "10.0.0.9:7002", m.master(8192))
	assert.Equal(t, "10.0.0.9:7002", m.master(16383))
	assert.ElementsMatch(t, []string{"10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.9:7002"}, m.nodes)

	// A slot no range covers has no master.
	rep, err = readReply(bufio.NewReader(strings.NewReader("*1\r\n*3\r\n:10\r\n:20\r\n*2\r\n$1\r\nh\r\n:1\r\n")), 0)
	require.NoError(t, err)
	m, err = parseClusterSlots(rep, "x")
	require.NoError(t, err)
	assert.Equal(t, "", m.master(9))
	assert.Equal(t, "h:1", m.master(15))
	assert.Equal(t, "", m.master(21))

	for _, bad := range []string{"+OK\r\n", "*1\r\n:1\r\n", "*1\r\n*3\r\n:5\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n", "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n"} {
		rep, err := readReply(bufio.NewReader(strings.NewReader(bad)), 0)
		require.NoError(t, err)
		_, err = parseClusterSlots(rep, "x")
		assert.Error(t, err, "%q", bad)
	}
}

func TestReadReply(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want reply
	}{
		{"+OK\r\n", reply{kind: '+', str: []byte("OK")}},
		{"-ERR no\r\n", reply{kind: '-', str: []byte("ERR no")}},
		{":-42\r\n", reply{kind: ':', num: -42}},
		{"$5\r\nhe\r\no\r\n", reply{kind: '$', str: []byte("he\r\no")}},
		{"$0\r\n\r\n", reply{kind: '$', str: []byte{}}},
		{"$-1\r\n", reply{kind: '$'}},
		{"*-1\r\n", reply{kind: '*'}},
		{"*3\r\n$8\r\nsmessage\r\n$2\r\nch\r\n$1\r\nx\r\n", reply{kind: '*', elems: []reply{
			{kind: '$', str: []byte("smessage")}, {kind: '$', str: []byte("ch")}, {kind: '$', str: []byte("x")}}}},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(tc.in)), 0)
		require.NoError(t, err, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
	for _, bad := range []string{
		"", "\r\n", "?x\r\n", "+OK\n", ":x\r\n", "$3\r\nabcd\r\n", "$-2\r\n", "$999999999999\r\n",
		"*2\r\n:1\r\n", "*-2\r\n", "$3\r\nab", strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n",
	} {
		_, err := readReply(bufio.NewReader(strings.NewReader(bad)), 0)
		assert.Error(t, err, "%q", bad)
	}
}

// FuzzReadReply: any byte stream from the server yields replies or an
// error, never a panic, and each reply read survives a round trip through
// its encoding.
func FuzzReadReply(f *testing.F) {
	for _, seed := range []string{
		"+OK\r\n", "-MOVED 3999 127.0.0.1:6381\r\n", ":1\r\n", "$-1\r\n", "*-1\r\n",
		"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n",
		"*2\r\n$4\r\npong\r\n$3\r\ntok\r\n",
		"*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rd := bufio.NewReader(bytes.NewReader(data))
		for {
			rep, err := readReply(rd, 0)
			if err != nil {
				return
			}
			enc := appendReply(nil, rep)
			again, err := readReply(bufio.NewReader(bytes.NewReader(enc)), 0)
			if err != nil {
				t.Fatalf("%q, read from %q, does not read back: %v", enc, data, err)
			}
			if !reflect.DeepEqual(rep, again) {
				t.Fatalf("%q read back as %+v, not %+v", enc, again, rep)
			}
		}
	})
}

// FuzzMessage: a reply read as a message is what readReply reads from the
// same bytes, and a message is never taken for anything else.
func FuzzMessage(f *testing.F) {
	for _, seed := range []string{
		"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n",
		"*3\r\n$7\r\nmessage\r\n$0\r\n\r\n$0\r\n\r\n*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$3\r\nabc\r\n",
		"*3\r\n$8\r\nsmessage\r\n$2\r\nch\r\n$1\r\nx\r\n",
		"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$9\r\nshort\r\n",
		"*2\r\n$4\r\npong\r\n$3\r\ntok\r\n",
		"+PONG\r\n",
	} {
		f.Add([]byte(seed))
	}
	head := messageHead("message")
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &subConn{rd: bufio.NewReader(bytes.NewReader(data))}
		other := bufio.NewReader(bytes.NewReader(data))
		for {
			if _, err := c.rd.Peek(1); err != nil {
				return
			}
			channel, payload, ok, err := c.message(head)
			rep, rerr := readReply(other, 0)
			if !ok {
				if rerr != nil {
					return
				}
				if rep.kind == '*' && len(rep.elems) == 3 && rep.elems[0].is("message") && rep.elems[1].kind == '$' && rep.elems[2].kind == '$' &&
					len(data) >= len(head) && bytes.HasPrefix(data, head) {
					t.Fatalf("a message fully buffered was not read as one: %q", data)
				}
				if _, err := readReply(c.rd, 0); err != nil {
					t.Fatalf("readReply read %+v on one reader and failed on the other: %v", rep, err)
				}
				continue
			}
			if err != nil {
				if rerr == nil && rep.elems != nil && len(rep.elems) == 3 && rep.elems[1].str != nil && rep.elems[2].str != nil {
					t.Fatalf("message failed (%v) where readReply read %+v", err, rep)
				}
				return
			}
			if rerr != nil {
				t.Fatalf("message read %q %q where readReply failed: %v", channel, payload, rerr)
			}
			if len(rep.elems) != 3 || !bytes.Equal(rep.elems[1].str, channel) || !bytes.Equal(rep.elems[2].str, payload) {
				t.Fatalf("message read %q %q, readReply %+v", channel, payload, rep)
			}
		}
	})
}

// appendReply encodes rep as RESP2.
func appendReply(b []byte, rep reply) []byte {
	b = append(b, rep.kind)
	switch rep.kind {
	case '+', '-':
		b = append(b, rep.str...)
	case ':':
		b = strconv.AppendInt(b, rep.num, 10)
	case '$':
		if rep.str == nil {
			return append(b, "-1\r\n"...)
		}
		b = strconv.AppendInt(b, int64(len(rep.str)), 10)
		b = append(append(b, '\r', '\n'), rep.str...)
	case '*':
		if rep.elems == nil {
			return append(b, "-1\r\n"...)
		}
		b = append(strconv.AppendInt(b, int64(len(rep.elems)), 10), '\r', '\n')
		for _, e := range rep.elems {
			b = appendReply(b, e)
		}
		return b
	}
	return append(b, '\r', '\n')
}
