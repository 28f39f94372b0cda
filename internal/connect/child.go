package connect

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/pkg/peer"
)

// child is one run of a stdio server: the process, its standard input and
// output as a peer.Conn, and its standard error going to the log. On unix
// the process is the command's keeper (keeper.go), in whose group the
// command runs.
type child struct {
	cmd       *exec.Cmd
	keeper    *keeper // nil where there is none
	serverPid int     // the command's own pid (the keeper's is cmd's)
	conn      *peer.Stdio
	exited    chan struct{} // closed once the process has been reaped
	state     *os.ProcessState
	stderr    *os.File
	logged    chan struct{} // closed once stderr has been read to its end
}

// startChild starts srv's command, through its keeper, in a process group
// of its own, with pipes for its standard streams (no goroutine of os/exec
// copies them, so the process's exit and the end of its output are
// separate events: a grandchild may keep a pipe open).
func startChild(srv *Server, readLimit int, log *slog.Logger) (*child, error) {
	cmd := exec.Command(srv.Command, srv.Args...)
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	cmd.Dir = srv.Dir
	cmd.Env = childEnv(os.Environ(), srv.Env)
	cmd.SysProcAttr = sysProcAttr()
	k, err := keepCommand(cmd)
	if err != nil {
		return nil, err
	}

	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			if k != nil {
				closeAll(cmd.ExtraFiles)
				k.close()
			}
			return nil, err
		}
		if len(childEnds) == 0 { // stdin: the child reads
			childEnds, parentEnds = append(childEnds, r), append(parentEnds, w)
		} else {
			childEnds, parentEnds = append(childEnds, w), append(parentEnds, r)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = childEnds[0], childEnds[1], childEnds[2]
	err = cmd.Start()
	closeAll(childEnds) // the child has its copies
	if err != nil {
		closeAll(parentEnds)
		if k != nil {
			closeAll(cmd.ExtraFiles)
			k.close()
		}
		return nil, err
	}
	c := &child{
		cmd:    cmd,
		keeper: k,
		conn:   peer.NewStdio(parentEnds[1], parentEnds[0], &peer.StdioOptions{ReadLimit: readLimit}),
		exited: make(chan struct{}),
		stderr: parentEnds[2],
		logged: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	go c.logStderr(log)
	c.serverPid = cmd.Process.Pid
	if k != nil {
		if c.serverPid, err = k.started(cmd); err != nil {
			c.stop(0)
			return nil, err
		}
	}
	return c, nil
}

// The environment variables that may hold the connector's secrets, which
// a child never sees: the hub's token, the OAuth client secrets of the
// connector for the hub and for an upstream server.
const (
	TokenEnv                = "SWITCHBOARD_TOKEN"
	ClientSecretEnv         = "SWITCHBOARD_OAUTH_CLIENT_SECRET"
	UpstreamClientSecretEnv = "SWITCHBOARD_UPSTREAM_OAUTH_CLIENT_SECRET"
)

// childEnv is the connector's environment, without its secrets (the child
// has no use for them), plus the server's own variables.
func childEnv(base []string, extra map[string]string) []string {
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		switch k, _, _ := strings.Cut(kv, "="); {
		case k == TokenEnv, k == ClientSecretEnv, k == UpstreamClientSecretEnv, extra[k] != "":
			continue
		}
		env = append(env, kv)
	}
	for k, v := range extra {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// maxStderrLine bounds one logged line of the child's standard error.
const maxStderrLine = 4 << 10

// logStderr logs the child's standard error line by line until it ends.
func (c *child) logStderr(log *slog.Logger) {
	defer close(c.logged)
	defer c.stderr.Close()
	r := bufio.NewReaderSize(c.stderr, maxStderrLine)
	for {
		line, err := r.ReadSlice('\n')
		if s := strings.TrimRight(string(line), "\r\n"); strings.TrimSpace(s) != "" {
			if errors.Is(err, bufio.ErrBufferFull) {
				s += " [...]"
			}
			log.Info("server stderr", "line", s)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of the long line
				_, err = r.ReadSlice('\n')
			}
		}
		if err != nil {
			return
		}
	}
}

// ended is closed once the child has exited.
func (c *child) ended() <-chan struct{} { return c.exited }

// how says how the child ended.
func (c *child) how() string { return exitText(c.state) }

// pid is the server's process id.
func (c *child) pid() int { return c.serverPid }

// stop ends the child and everything it started: SIGTERM to its process
// group, then SIGKILL to what is left after grace. It returns once the child
// has been reaped and its standard error read to its end, and closes its
// pipes.
func (c *child) stop(grace time.Duration) {
	p := c.cmd.Process
	_ = signalGroup(p, syscall.SIGTERM)
	end := time.Now().Add(grace)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	select {
	case <-c.exited:
	case <-deadline.C:
	}
	// The child is gone, or late; what it started may still run. Give the
	// group what is left of grace, then kill whatever remains.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for groupAlive(p) && time.Now().Before(end) {
		<-tick.C
	}
	_ = signalGroup(p, syscall.SIGKILL)
	<-c.exited
	if c.keeper != nil {
		c.keeper.close()
	}
	c.conn.Close(peer.CloseNormal, "")
	// A process that left the group may still hold standard error open:
	// stop reading it rather than wait for it.
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-c.logged:
	case <-t.C:
		c.stderr.Close()
		<-c.logged
	}
}

// exitText says how the child ended, for logs and close reasons: "exited
// with status 1", "was killed by signal 9 (killed)".
func exitText(st *os.ProcessState) string {
	if st == nil {
		return "ended"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}
