package proctest_test

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/proctest"
)

func TestStart_ready(t *testing.T) {
	polls := 0
	p, err := proctest.Start(exec.Command("sh", "-c", "echo up; exec sleep 60"), "sleeper", func() error {
		if polls++; polls < 3 {
			return errors.New("not yet")
		}
		return nil
	}, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, polls)
	assert.Positive(t, p.Pid())
	require.NoError(t, p.Signal(syscall.Signal(0)), "running")
	p.Kill()
	assert.Error(t, p.Signal(syscall.Signal(0)), "killed and waited for")
	assert.Equal(t, "up\n", p.Output())
}

// A process that exits before it is ready fails the start with what it
// said; one that never gets ready is killed after the timeout.
func TestStart_fails(t *testing.T) {
	notReady := func() error { return errors.New("not listening") }
	_, err := proctest.Start(exec.Command("sh", "-c", "echo bad config >&2; exit 3"), "broken", notReady, 10*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "broken exited: bad config")

	_, err = proctest.Start(exec.Command("sleep", "60"), "slow", notReady, 50*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "slow was not ready within 50ms: not listening")

	_, err = proctest.Start(exec.Command("/nonexistent/binary"), "missing", notReady, time.Second)
	assert.ErrorContains(t, err, "start missing")
}

func TestFreePort(t *testing.T) {
	p, err := proctest.FreePort()
	require.NoError(t, err)
	assert.Positive(t, p)
}
