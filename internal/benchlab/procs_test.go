package benchlab

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSupervisor_redis: the supervisor starts redis-server through
// internal/redistest, counts its CPU time with the children's, and stops
// it with them.
func TestSupervisor_redis(t *testing.T) {
	t.Parallel()
	sup := &Supervisor{}
	defer sup.StopAll()
	addr, err := sup.StartRedis(t.TempDir())
	require.NoError(t, err)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err, "redis-server listens")
	c.Close()
	assert.Contains(t, sup.CPUByProcess(), "redis-server")

	sup.StopAll()
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "stopped with the supervisor")
	_, err = sup.StartRedis(t.TempDir())
	assert.Error(t, err, "a stopped supervisor starts nothing")
}
