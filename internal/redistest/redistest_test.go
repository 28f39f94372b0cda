package redistest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServer_lifecycle(t *testing.T) {
	t.Parallel()
	s := Start(t)
	require.NoError(t, ping(s.Addr()))
	assert.Equal(t, "redis://"+s.Addr()+"/0", s.URL())

	s.Stop()
	assert.Error(t, ping(s.Addr()), "a stopped server answers")
	s.Stop() // idempotent

	s.Restart()
	require.NoError(t, ping(s.Addr()))

	s.Pause()
	assert.Error(t, ping(s.Addr()), "a paused server answers")
	s.Resume()
	require.NoError(t, ping(s.Addr()))
}

func TestStart_extraArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, "--requirepass", "pw")
	require.NoError(t, ping(s.Addr()), "NOAUTH counts as up")
	s.Restart()
	require.NoError(t, ping(s.Addr()))
}

func TestPrefix_unique(t *testing.T) {
	t.Parallel()
	a, b := Prefix(t), Prefix(t)
	assert.NotEqual(t, a, b)
	assert.True(t, strings.HasSuffix(a, ":"))
	assert.NotContains(t, a, " ")
}

// fatalRecorder is a testing.TB whose Fatal records the message and ends
// the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestStart_failsWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	f := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f)
		t.Error("Start returned without redis-server")
	}()
	<-done
	assert.Equal(t, "redistest: redis-server not found: run `make deps` (apt-get install redis-server)", f.msg)

	_, err := Launch(t.TempDir())
	assert.EqualError(t, err, "redis-server not found: run `make deps` (apt-get install redis-server)", "Launch says so instead")
}

// Launch starts a server for a program: nothing is tied to a test, and the
// caller stops it.
func TestLaunch_forPrograms(t *testing.T) {
	t.Parallel()
	s, err := Launch(t.TempDir())
	require.NoError(t, err)
	defer s.Stop()
	require.NoError(t, ping(s.Addr()))
	assert.Positive(t, s.PID())
	s.Stop()
	assert.Error(t, ping(s.Addr()), "a stopped server answers")
	assert.Zero(t, s.PID())
}

func TestCluster_failoverAndResharding(t *testing.T) {
	t.Parallel()
	c := StartClusterConfig(t, ClusterConfig{Masters: 3, Replicas: 1, Password: "pw"})
	require.Len(t, c.Nodes(), 6)
	assert.True(t, strings.HasPrefix(c.URL(), "redis+cluster://:pw@127.0.0.1:"))
	assert.Equal(t, 6, strings.Count(c.URL(), "127.0.0.1:"))

	// A master killed: its replica takes over its slots.
	old := c.MasterFor("key")
	old.Stop()
	c.WaitHealthy()
	promoted := c.MasterFor("key")
	assert.NotEqual(t, old, promoted)

	// Back, it rejoins as a replica.
	old.Restart()
	c.WaitHealthy()
	assert.Equal(t, promoted, c.MasterFor("key"))
	assert.False(t, old.isMaster("pw"))

	// A slot moved to another master, with its keys.
	_, err := promoted.command("pw", "SET", "key", "v")
	require.NoError(t, err)
	var other *Server
	for _, n := range c.Nodes() {
		if n != promoted && n.isMaster("pw") {
			other = n
			break
		}
	}
	require.NotNil(t, other)
	c.MoveSlot("key", other)
	assert.Equal(t, other, c.MasterFor("key"))
	v, err := other.command("pw", "GET", "key")
	require.NoError(t, err)
	assert.Equal(t, "v", v)

	// The whole cluster down and back.
	c.Stop()
	c.Restart()
	assert.NotNil(t, c.MasterFor("key"))
}
