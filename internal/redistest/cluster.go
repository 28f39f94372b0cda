package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterNodeTimeout is the cluster-node-timeout of test clusters: how long
// a node may stay silent before the others count it as failed. Short, so
// that a replica takes over a killed master within about two seconds.
const clusterNodeTimeout = 500 * time.Millisecond

// healthyTimeout bounds the wait for a cluster to be formed, or to recover.
const healthyTimeout = 30 * time.Second

// Cluster is a Redis Cluster of redis-server processes owned by one test,
// each on free loopback ports, without persistence (but with its cluster
// configuration, so that a restarted node rejoins with its identity).
// Stop and Restart of a node (Node) simulate a crash and a recovery; Stop
// and Restart of the Cluster, an outage of all of it.
//
// Sharded pub/sub needs Redis 7.0 or later; StartCluster fails the test
// with an older redis-server, or without redis-cli (which creates the
// cluster).
type Cluster struct {
	tb       testing.TB
	nodes    []*Server
	password string
}

// ClusterConfig describes a cluster to start.
type ClusterConfig struct {
	// Masters is the number of masters, each serving an equal share of
	// the slots; at least 3.
	Masters int
	// Replicas is the number of replicas of each master. With one, the
	// cluster survives the loss of a master: its replica takes over.
	Replicas int
	// Password, if set, is required of clients (and used between nodes).
	Password string
}

// StartCluster starts a cluster of masters masters without replicas and
// waits until it serves every slot. The cluster stops when tb ends.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	return StartClusterConfig(tb, ClusterConfig{Masters: masters})
}

// StartClusterConfig starts the cluster cfg describes and waits until it
// serves every slot, with every replica in sync. It stops when tb ends.
func StartClusterConfig(tb testing.TB, cfg ClusterConfig) *Cluster {
	tb.Helper()
	if cfg.Masters < 3 {
		tb.Fatalf("redistest: a cluster needs at least 3 masters, not %d", cfg.Masters)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatal("redis-cli not found: run `make deps` (apt-get install redis-tools)")
	}
	checkVersion(tb)
	var args []string
	if cfg.Password != "" {
		args = []string{"--requirepass", cfg.Password, "--masterauth", cfg.Password}
	}
	c := &Cluster{tb: tb, password: cfg.Password}
	for range cfg.Masters * (1 + cfg.Replicas) {
		c.nodes = append(c.nodes, start(tb, true, args))
	}
	create := []string{"--cluster", "create"}
	for _, n := range c.nodes {
		create = append(create, n.Addr())
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(cfg.Replicas), "--cluster-yes")
	if cfg.Password != "" {
		create = append([]string{"--no-auth-warning", "-a", cfg.Password}, create...)
	}
	if out, err := exec.Command(cli, create...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy()
	return c
}

// checkVersion fails tb if redis-server is older than 7.0.
func checkVersion(tb testing.TB) {
	tb.Helper()
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		tb.Fatalf("redistest: redis-server --version: %v", err)
	}
	m := regexp.MustCompile(`v=(\d+)\.(\d+)`).FindSubmatch(out)
	if m == nil {
		tb.Fatalf("redistest: cannot read the version of redis-server from %q", out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 7 {
		tb.Fatalf("redistest: redis-server %s.%s is too old for sharded pub/sub: a cluster needs Redis 7.0 or later", m[1], m[2])
	}
}

// URL returns the cluster's URL for pubsub.NewRedis,
// redis+cluster://[:password@]host:port,host:port,..., naming every node.
func (c *Cluster) URL() string {
	var auth string
	if c.password != "" {
		auth = ":" + c.password + "@"
	}
	return "redis+cluster://" + auth + strings.Join(c.Addrs(), ",")
}

// Addrs returns the addresses of every node.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the cluster's nodes, masters and replicas alike: which is
// which changes with failovers (see MasterFor).
func (c *Cluster) Nodes() []*Server {
	return slices.Clone(c.nodes)
}

// Stop kills every node, as an outage of the whole cluster would.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.Stop()
	}
}

// Restart restarts every node that is not running and waits until the
// cluster is healthy again.
func (c *Cluster) Restart() {
	c.tb.Helper()
	for _, n := range c.nodes {
		if !n.running() {
			if err := n.start(); err != nil {
				c.tb.Fatalf("redistest: restart %s: %v", n.Addr(), err)
			}
		}
	}
	c.WaitHealthy()
}

// Slot returns the hash slot of key, as the cluster computes it.
func (c *Cluster) Slot(key string) int {
	c.tb.Helper()
	slot, err := c.anyRunning().command(c.password, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		c.tb.Fatalf("redistest: CLUSTER KEYSLOT: %v", err)
	}
	s, _ := strconv.Atoi(slot)
	return s
}

// MasterFor returns the node that is now the master serving key's slot
// (for a pub/sub channel, the node that holds its sharded subscribers).
func (c *Cluster) MasterFor(key string) *Server {
	c.tb.Helper()
	s := c.Slot(key)
	nodes, err := c.clusterNodes(c.anyRunning())
	if err != nil {
		c.tb.Fatalf("redistest: %v", err)
	}
	for _, cn := range nodes {
		if cn.master && cn.serves(s) {
			if srv := c.byAddr(cn.addr); srv != nil {
				return srv
			}
		}
	}
	c.tb.Fatalf("redistest: no master serves slot %d of %q", s, key)
	return nil
}

// MoveSlot moves the slot of key, with its keys, to the master to, as a
// resharding does, and waits until every node knows.
func (c *Cluster) MoveSlot(key string, to *Server) {
	c.tb.Helper()
	from := c.MasterFor(key)
	if from == to {
		return
	}
	slotStr, err := from.command(c.password, "CLUSTER", "KEYSLOT", key)
	c.must(err)
	fromID, err := from.command(c.password, "CLUSTER", "MYID")
	c.must(err)
	toID, err := to.command(c.password, "CLUSTER", "MYID")
	c.must(err)
	_, err = to.command(c.password, "CLUSTER", "SETSLOT", slotStr, "IMPORTING", fromID)
	c.must(err)
	_, err = from.command(c.password, "CLUSTER", "SETSLOT", slotStr, "MIGRATING", toID)
	c.must(err)
	for {
		keys, err := from.commandList(c.password, "CLUSTER", "GETKEYSINSLOT", slotStr, "100")
		c.must(err)
		if len(keys) == 0 {
			break
		}
		args := []string{"MIGRATE", "127.0.0.1", strconv.Itoa(to.port), "", "0", "5000"}
		if c.password != "" {
			args = append(args, "AUTH", c.password)
		}
		_, err = from.command(c.password, append(append(args, "KEYS"), keys...)...)
		c.must(err)
	}
	// The new owner first, then the old, then everyone else; once each,
	// since a node told again drops the slot's sharded subscribers.
	order := []*Server{to, from}
	for _, n := range c.nodes {
		if n != to && n != from {
			order = append(order, n)
		}
	}
	for _, n := range order {
		if n.running() {
			if _, err := n.command(c.password, "CLUSTER", "SETSLOT", slotStr, "NODE", toID); err != nil && n.isMaster(c.password) {
				c.tb.Fatalf("redistest: CLUSTER SETSLOT on %s: %v", n.Addr(), err)
			}
		}
	}
	c.WaitHealthy()
	c.waitFor(fmt.Sprintf("every node to see slot %s on %s", slotStr, to.Addr()), func() error {
		if got := c.MasterFor(key); got != to {
			return fmt.Errorf("slot served by %s", got.Addr())
		}
		return nil
	})
}

// WaitHealthy waits until every running node says the cluster is ok, knows
// every node, sees every slot served by a running master, and every
// replica of a running master is in sync. It fails the test after 30s.
func (c *Cluster) WaitHealthy() {
	c.tb.Helper()
	c.waitFor("the cluster to be healthy", c.healthy)
}

func (c *Cluster) healthy() error {
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		info, err := n.command(c.password, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr(), err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster state not ok", n.Addr())
		}
		if !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r\n", len(c.nodes))) {
			return fmt.Errorf("%s: does not know every node", n.Addr())
		}
		nodes, err := c.clusterNodes(n)
		if err != nil {
			return err
		}
		served := 0
		for _, cn := range nodes {
			srv := c.byAddr(cn.addr)
			if srv == nil {
				return fmt.Errorf("%s: unknown node %s", n.Addr(), cn.addr)
			}
			if cn.failed != !srv.running() {
				return fmt.Errorf("%s: sees %s failed=%v", n.Addr(), cn.addr, cn.failed)
			}
			if cn.master && srv.running() {
				served += cn.slotCount()
			}
		}
		if served != 16384 {
			return fmt.Errorf("%s: sees %d slots served", n.Addr(), served)
		}
		repl, err := n.command(c.password, "INFO", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			// A replica of a stopped master never syncs: that is fine.
			if m := regexp.MustCompile(`master_port:(\d+)`).FindStringSubmatch(repl); m != nil {
				if master := c.byAddr("127.0.0.1:" + m[1]); master != nil && master.running() {
					return fmt.Errorf("%s: replica not in sync", n.Addr())
				}
			}
		}
	}
	return nil
}

func (c *Cluster) waitFor(what string, cond func() error) {
	c.tb.Helper()
	deadline := time.Now().Add(healthyTimeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("redistest: waiting for %s: %v", what, err)
		}
		<-time.After(20 * time.Millisecond)
	}
}

func (c *Cluster) must(err error) {
	c.tb.Helper()
	if err != nil {
		c.tb.Fatalf("redistest: %v", err)
	}
}

func (c *Cluster) anyRunning() *Server {
	c.tb.Helper()
	for _, n := range c.nodes {
		if n.running() {
			return n
		}
	}
	c.tb.Fatal("redistest: no node of the cluster is running")
	return nil
}

func (c *Cluster) byAddr(addr string) *Server {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	addr   string
	master bool
	failed bool
	slots  [][2]int
}

func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

func (n clusterNode) slotCount() int {
	total := 0
	for _, r := range n.slots {
		total += r[1] - r[0] + 1
	}
	return total
}

// clusterNodes asks n for CLUSTER NODES: "id ip:port@bus flags master
// ping pong epoch link slot slot-range ...".
func (c *Cluster) clusterNodes(n *Server) ([]clusterNode, error) {
	text, err := n.command(c.password, "CLUSTER", "NODES")
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr(), err)
	}
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := strings.Split(f[2], ",")
		cn := clusterNode{
			addr:   addr,
			master: slices.Contains(flags, "master"),
			failed: slices.Contains(flags, "fail") || slices.Contains(flags, "fail?"),
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // a slot being migrated
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if isRange {
				b, _ = strconv.Atoi(hi)
			}
			cn.slots = append(cn.slots, [2]int{a, b})
		}
		nodes = append(nodes, cn)
	}
	return nodes, nil
}

// running reports whether the server's process runs.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// isMaster reports whether the server says it is a master.
func (s *Server) isMaster(password string) bool {
	role, err := s.commandList(password, "ROLE")
	return err == nil && len(role) > 0 && role[0] == "master"
}

// command sends one command (after AUTH if password is set) and returns a
// status, integer or bulk string reply as text.
func (s *Server) command(password string, args ...string) (string, error) {
	rep, err := s.do(password, args)
	if err != nil {
		return "", err
	}
	if list, ok := rep.([]string); ok {
		return strings.Join(list, " "), nil
	}
	return rep.(string), nil
}

// commandList is command for a reply that is an array; nested arrays are
// left out.
func (s *Server) commandList(password string, args ...string) ([]string, error) {
	rep, err := s.do(password, args)
	if err != nil {
		return nil, err
	}
	if list, ok := rep.([]string); ok {
		return list, nil
	}
	return nil, fmt.Errorf("%s: not an array: %q", args[0], rep)
}

func (s *Server) do(password string, args []string) (any, error) {
	c, err := net.DialTimeout("tcp", s.Addr(), 500*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	rd := bufio.NewReader(c)
	if password != "" {
		if _, err := roundTrip(c, rd, []string{"AUTH", password}); err != nil {
			return nil, fmt.Errorf("AUTH: %w", err)
		}
	}
	return roundTrip(c, rd, args)
}

func roundTrip(w io.Writer, rd *bufio.Reader, args []string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return nil, err
	}
	return readValue(rd)
}

// readValue reads a RESP2 reply: a string for a status, integer or bulk
// string, a []string for an array (whose nested arrays are left out).
func readValue(rd *bufio.Reader) (any, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, err
		}
		var list []string
		for range max(n, 0) {
			v, err := readValue(rd)
			if err != nil {
				return nil, err
			}
			if s, ok := v.(string); ok {
				list = append(list, s)
			}
		}
		return list, nil
	default:
		return nil, fmt.Errorf("unexpected reply %q", line)
	}
}
