//go:build unix

package connect

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/deathsig"
)

// The keeper. A child in a process group of its own is stopped with
// whatever it started when the connector stops it, and on Linux it dies
// with a connector that is killed (Pdeathsig); but what the child started
// would outlive a killed connector, since a killed process does nothing on
// its way out. So the connector does not start the command itself: it
// starts itself as the command's keeper (this same executable, marked by
// keeperEnv), the leader of the group, which starts the command in it and
// watches a pipe from the connector. When that pipe ends without the
// connector closing it, the connector is gone: the keeper kills every
// process it has under it (on Linux it is a subreaper, so that what
// detached itself from the group and lost its parent is under it too) and
// the group, itself last. Otherwise it exits as the command did.
//
// The keeper is the program's own executable, so that nothing has to be
// installed beside it; the package's init hands the process to it before
// anything else runs, as re-exec helpers do.

// keeperEnv marks the process as a keeper; it is not passed on to the
// command.
const keeperEnv = "SWITCHBOARD_CONNECT_KEEPER"

// Descriptors the keeper inherits besides the standard ones.
const (
	keeperWatchFD  = 3 // read: ends when the connector is gone
	keeperReportFD = 4 // write: "pid N" once the command started, or "error ..."
)

// keeperStartTimeout bounds the wait for the keeper to report.
const keeperStartTimeout = 10 * time.Second

func init() {
	if os.Getenv(keeperEnv) == "1" {
		keep() // never returns
	}
}

// keeper is the connector's end of a keeper: the pipe it watches and the
// one it reports on.
type keeper struct {
	watch  *os.File // the write end: closed by stop, or by the connector's end
	report *os.File // the read end
}

// keepCommand turns cmd, the server's command (its Path resolved), into
// the keeper of that command, with the pipes it needs.
func keepCommand(cmd *exec.Cmd) (*keeper, error) {
	self, err := executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find the connector's own executable to keep the server: %w", err)
	}
	watchR, watchW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		watchR.Close()
		watchW.Close()
		return nil, err
	}
	cmd.Args = append([]string{"switchboard-keeper", cmd.Path}, cmd.Args...)
	cmd.Path = self
	cmd.Env = append(cmd.Env, keeperEnv+"=1")
	cmd.ExtraFiles = []*os.File{watchR, reportW}
	return &keeper{watch: watchW, report: reportR}, nil
}

// started closes the keeper's ends, which the keeper has now, and reads
// its report: the command's pid, or why it could not start.
func (k *keeper) started(cmd *exec.Cmd) (int, error) {
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
	defer k.report.Close()
	_ = k.report.SetReadDeadline(time.Now().Add(keeperStartTimeout))
	line, err := bufio.NewReader(io.LimitReader(k.report, 4096)).ReadString('\n')
	line = strings.TrimSpace(line)
	if what, ok := strings.CutPrefix(line, "pid "); ok {
		if pid, err := strconv.Atoi(what); err == nil {
			return pid, nil
		}
	}
	if why, ok := strings.CutPrefix(line, "error "); ok {
		return 0, errors.New(why)
	}
	return 0, fmt.Errorf("the keeper of the server's command did not start it: %v", err)
}

// close tells the keeper the connector no longer needs it: it kills what is
// left under it, if anything.
func (k *keeper) close() { k.watch.Close() }

// keep is the keeper's main: it starts the command, reports its pid,
// and exits as the command does, or kills everything when the connector
// is gone.
func keep() {
	watch, report := os.NewFile(keeperWatchFD, "watch"), os.NewFile(keeperReportFD, "report")
	os.Unsetenv(keeperEnv)
	becomeSubreaper()
	// The connector signals the whole group: the keeper outlives its
	// command, to exit as it did. (Handled, not ignored: the command must
	// not inherit an ignored signal.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if len(os.Args) < 3 {
		fmt.Fprintln(report, "error the keeper was given no command")
		syscall.Exit(2)
	}
	cmd := &exec.Cmd{Path: os.Args[1], Args: os.Args[2:], Env: os.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, SysProcAttr: deathsig.Attr()}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(report, "error %v\n", err)
		syscall.Exit(127)
	}
	fmt.Fprintf(report, "pid %d\n", cmd.Process.Pid)
	report.Close()
	// The command has the standard streams: the keeper's copies would keep
	// them open after the command closed them.
	os.Stdin.Close()
	os.Stdout.Close()
	os.Stderr.Close()
	go func() {
		_, _ = io.Copy(io.Discard, watch)
		killAll() // the connector closed the pipe, or died
	}()
	_ = cmd.Wait()
	// What the command started goes with it. A command that ends when the
	// connector dies (its stdin ends) may end before the keeper hears of the
	// connector's death: were the keeper to leave at once, what detached
	// from the command would be left to init, alive, with no one to kill it.
	killDescendants()
	exitAs(cmd.ProcessState)
}

// killAll kills every process under the keeper, then its group, itself
// included.
func killAll() {
	killDescendants()
	_ = syscall.Kill(0, syscall.SIGKILL)
	syscall.Exit(137)
}

// killDescendants kills every process under the keeper (on Linux, where it
// is a subreaper, those that detached too), again while new ones appear.
func killDescendants() {
	for range 10 {
		pids := descendants(os.Getpid())
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// exitAs ends the keeper as the command ended: with its status, or killed
// by its signal. (syscall.Exit: nothing of the keeper's is left to run,
// and a program built with the race detector would wait a second in
// os.Exit.)
func exitAs(st *os.ProcessState) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		time.Sleep(time.Second) // the signal is on its way; should it not end the keeper:
		syscall.Exit(128 + int(ws.Signal()))
	}
	syscall.Exit(st.ExitCode())
}
