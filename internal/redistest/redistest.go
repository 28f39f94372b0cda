// Package redistest runs a real redis-server for tests: one process per
// Start, on a free loopback port, without persistence, stopped when the test
// ends. Stop and Restart simulate an outage and a recovery on the same
// address; Pause and Resume freeze the server so that it keeps its
// connections open but answers nothing, as a hung or partitioned server
// would.
//
// StartCluster runs a Redis Cluster the same way: a process per node,
// formed by redis-cli --cluster create. Its nodes are Servers, so that a
// test can kill a master (and see its replica take over, if it has one),
// restart it, or move a slot (MoveSlot).
//
// Both *Server and *Cluster are a Redis: code that takes one runs against
// either.
//
//	func startHubs(t *testing.T, rs redistest.Redis) { ... rs.URL() ... rs.Stop() ... }
//	startHubs(t, redistest.Start(t))
//	startHubs(t, redistest.StartCluster(t, 3))
//
// redis-server (and for a cluster redis-cli, and Redis 7.0 or later) must
// be on PATH. When it is not, Start fails the test: tests that need Redis
// are never skipped silently.
//
// Launch starts a server the same way for a program rather than a test (the
// benchmark harness, cmd/hubbench), returning errors instead of failing a
// test; the program stops it.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/proctest"
)

// Redis is a Redis deployment started for a test: a Server or a Cluster.
type Redis interface {
	// URL returns the URL to give pubsub.NewRedis.
	URL() string
	// Stop kills every process, as an outage would.
	Stop()
	// Restart starts again what Stop killed and waits until it serves.
	Restart()
}

var (
	_ Redis = (*Server)(nil)
	_ Redis = (*Cluster)(nil)
)

// readyTimeout bounds the wait for a started server to answer PING.
const readyTimeout = 10 * time.Second

// Server is a redis-server process owned by one test.
type Server struct {
	tb      testing.TB
	bin     string
	args    []string // extra arguments, kept for Restart
	dir     string
	port    int
	busPort int // the cluster bus port of a cluster node; 0 otherwise

	mu   sync.Mutex
	proc *proctest.Proc // nil while stopped
}

// Start starts redis-server on a free port of 127.0.0.1, waits until it
// answers PING and registers its Stop with tb.Cleanup. It fails tb if
// redis-server is not installed or does not start. args are passed to
// redis-server after the defaults, e.g. "--requirepass", "secret"; the
// readiness check tolerates a server that requires a password.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	return start(tb, false, args)
}

// start starts a server, a cluster node if cluster is set.
func start(tb testing.TB, cluster bool, args []string) *Server {
	tb.Helper()
	s, err := launch(tb.TempDir(), cluster, args)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.tb = tb
	tb.Cleanup(s.Stop)
	return s
}

// Launch starts redis-server as Start does, with dir as its directory, for
// a program: it returns an error where Start fails the test, and registers
// nothing; the caller must Stop the server. (Restart, Pause and Resume,
// which fail the test they belong to, are for servers from Start.) The
// process is killed if the program dies without stopping it.
func Launch(dir string, args ...string) (*Server, error) {
	return launch(dir, false, args)
}

func launch(dir string, cluster bool, args []string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found: run `make deps` (apt-get install redis-server)")
	}
	s := &Server{bin: bin, args: args, dir: dir}
	// The port is free when freePort returns, but another process may take
	// it before redis-server binds it: try a few.
	var lastErr error
	for range 3 {
		if s.port, err = proctest.FreePort(); err != nil {
			return nil, err
		}
		if cluster {
			if s.busPort, err = proctest.FreePort(); err != nil {
				return nil, err
			}
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// PID returns the process ID of the running server, 0 when it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// URL returns the server's URL, redis://127.0.0.1:PORT/0.
func (s *Server) URL() string {
	return "redis://" + s.Addr() + "/0"
}

// Addr returns the server's address, 127.0.0.1:PORT.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Stop kills the server (SIGKILL, as in a crash) and waits for it to exit.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	s.proc = nil
}

// Restart starts the server again on the same port, stopping it first if
// it is running, and waits until it answers PING. It fails the test if the
// server does not come back. The data is not kept.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.tb.Fatalf("redistest: restart: %v", err)
	}
}

// Pause freezes the server (SIGSTOP): connections stay open and new ones
// are accepted by the kernel, but no command is answered until Resume.
func (s *Server) Pause() {
	s.tb.Helper()
	s.signal(syscall.SIGSTOP)
}

// Resume undoes Pause (SIGCONT).
func (s *Server) Resume() {
	s.tb.Helper()
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.tb.Fatalf("redistest: %v: server is not running", sig)
	}
	if err := s.proc.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: %v: %v", sig, err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	}, s.args...)
	if s.busPort != 0 {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(s.busPort),
			"--cluster-config-file", "nodes.conf", // in dir: a restarted node keeps its identity and slots
			"--cluster-announce-ip", "127.0.0.1",
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout/time.Millisecond)),
			// Fail over even to a replica that lost its master a while ago.
			"--cluster-replica-validity-factor", "0",
			// Sync a replica at once, not after 5s waiting for others.
			"--repl-diskless-sync-delay", "0",
		)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	p, err := proctest.Start(cmd, fmt.Sprintf("redis-server on port %d", s.port), func() error { return ping(s.Addr()) }, readyTimeout)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// ping sends an inline PING and expects +PONG, without a Redis client. A
// NOAUTH error also shows the server is up and serving.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

func freePort(tb testing.TB) int {
	tb.Helper()
	port, err := proctest.FreePort()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return port
}

var prefixSeq atomic.Uint64

// Prefix returns a key prefix unique to this test run and test, ending in
// ":", for tests that share a server.
func Prefix(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' {
			return '_'
		}
		return r
	}, tb.Name())
	return fmt.Sprintf("sbtest:%d:%d:%s:", syscall.Getpid(), prefixSeq.Add(1), name)
}
