package pubsub

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis Cluster: sharded pub/sub (SPUBLISH, SSUBSCRIBE; Redis 7) sends a
// message only to the nodes of the shard that serves its channel's slot,
// so that traffic spreads over the shards instead of reaching every node.
// A subscriber must therefore subscribe each channel on the master of its
// slot: the broker keeps one shard (one connection) per master that serves
// a subscribed channel, and a map of the slots, which the resolver reloads
// when something says it changed: a connection lost, a MOVED answer, or
// Redis unsubscribing a channel because its slot left the node.

// clusterState is the part of a Redis broker that only a cluster has.
type clusterState struct {
	seeds []string // the addresses of the URL

	// view is what Publish and Claim read, without locks, to find the
	// shard of a key: replaced whole, under Redis.subMu.
	view atomic.Pointer[clusterView]

	wake chan struct{} // capacity 1: the resolver should reload the slots
}

// clusterView is the slot map and the shards at one moment.
type clusterView struct {
	slots  *slotMap
	shards map[string]*shard
}

// shardFor returns the shard of the master serving key's slot, or nil if
// there is none.
func (v *clusterView) shardFor(key string) *shard {
	if v == nil || v.slots == nil {
		return nil
	}
	return v.shards[v.slots.master(keySlot(key))]
}

// parseClusterURL reads the cluster forms of a URL; ok is false for a
// single server's URL. The forms are
//
//	redis+cluster://[user:password@]host:port,host:port[?options]
//	rediss+cluster://...                                      (TLS)
//	redis://[user:password@]host:port?addr=host:port&addr=... (go-redis's)
//
// The options are go-redis's (dial_timeout, ...). A cluster has only
// database 0, so the URL has no path.
func parseClusterURL(raw string) (opts *redis.ClusterOptions, ok bool, err error) {
	scheme, rest, found := strings.Cut(raw, "://")
	if !found {
		return nil, false, nil
	}
	switch scheme {
	case "redis+cluster", "rediss+cluster":
		scheme = strings.TrimSuffix(scheme, "+cluster")
	case "redis", "rediss":
		u, err := url.Parse(raw)
		if err != nil || !u.Query().Has("addr") {
			return nil, false, nil // a single server, or an error ParseURL reports
		}
		o, err := redis.ParseClusterURL(raw)
		return o, true, err
	default:
		return nil, false, nil
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	path, query, _ := strings.Cut(tail, "?")
	if path != "" && path != "/" {
		return nil, true, errors.New("a Redis Cluster URL has no database number (path)")
	}
	var userinfo string
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, authority = authority[:i+1], authority[i+1:]
	}
	var addrs []string
	for a := range strings.SplitSeq(authority, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, true, errors.New("a Redis Cluster URL needs at least one host:port")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, true, err
	}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	o, err := redis.ParseClusterURL(scheme + "://" + userinfo + addrs[0] + "?" + q.Encode())
	return o, true, err
}

// resolveSoon asks the resolver to reload the slot map; it never blocks,
// and does nothing for a single server.
func (r *Redis) resolveSoon() {
	if r.cluster == nil {
		return
	}
	select {
	case r.cluster.wake <- struct{}{}:
	default:
	}
}

// resolver reloads the slot map when asked, and moves the channels whose
// slot changed master; while something is amiss (a shard down, a channel
// without a master) it keeps trying, with backoff.
func (r *Redis) resolver() {
	backoff := r.opts.MinBackoff
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.cluster.wake:
		}
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.CommandTimeout)
		m, err := r.loadSlots(ctx)
		cancel()
		if err == nil {
			r.applySlots(m)
		} else if r.ctx.Err() == nil {
			r.log.Debug("pubsub: cannot load the Redis Cluster slots", "err", r.redact(err))
		}
		// At most one reload per MinBackoff; more, with backoff, while
		// something is still amiss.
		wait := r.opts.MinBackoff
		if err != nil || !r.isUp() {
			wait = jitter(backoff)
			backoff = min(2*backoff, r.opts.MaxBackoff)
			r.resolveSoon()
		} else {
			backoff = r.opts.MinBackoff
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return
		}
	}
}

// loadSlots asks the nodes it knows, in random order, for CLUSTER SLOTS,
// and returns the first answer.
func (r *Redis) loadSlots(ctx context.Context) (*slotMap, error) {
	known := append([]string(nil), r.cluster.seeds...)
	if v := r.cluster.view.Load(); v != nil && v.slots != nil {
		known = append(known, v.slots.nodes...)
	}
	rand.Shuffle(len(known), func(i, j int) { known[i], known[j] = known[j], known[i] })
	seen := make(map[string]bool)
	var firstErr error
	for _, addr := range known {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		m, err := r.slotsFrom(ctx, addr)
		if err == nil {
			return m, nil
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", addr, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no node to ask")
	}
	return nil, firstErr
}

// slotsFrom asks one node for CLUSTER SLOTS.
func (r *Redis) slotsFrom(ctx context.Context, addr string) (*slotMap, error) {
	c, err := dialConn(ctx, r.conn, addr)
	if err != nil {
		return nil, err
	}
	defer c.close()
	stop := context.AfterFunc(ctx, func() { _ = c.close() })
	defer stop()
	rep, err := c.do("CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	return parseClusterSlots(rep, host)
}

// slotMap says which master serves each slot.
type slotMap struct {
	ranges []slotRange // sorted by start
	nodes  []string    // every node named, masters and replicas
}

type slotRange struct {
	start, end int
	master     string
}

// master returns the address of the master serving slot, or "".
func (m *slotMap) master(slot int) string {
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].end >= slot })
	if i < len(m.ranges) && m.ranges[i].start <= slot {
		return m.ranges[i].master
	}
	return ""
}

// parseClusterSlots reads a CLUSTER SLOTS reply: an array of [start, end,
// master, replicas...], each node [host, port, id, ...]. An empty host
// means the node asked (whose host is given).
func parseClusterSlots(rep reply, askedHost string) (*slotMap, error) {
	if rep.kind != '*' {
		return nil, errProtocol
	}
	m := &slotMap{}
	seen := make(map[string]bool)
	for _, e := range rep.elems {
		if e.kind != '*' || len(e.elems) < 3 || e.elems[0].kind != ':' || e.elems[1].kind != ':' {
			return nil, errProtocol
		}
		start, end := int(e.elems[0].num), int(e.elems[1].num)
		if start < 0 || end < start || end >= numSlots {
			return nil, errProtocol
		}
		for i, n := range e.elems[2:] {
			if n.kind != '*' || len(n.elems) < 2 || n.elems[1].kind != ':' {
				return nil, errProtocol
			}
			host := string(n.elems[0].str)
			if host == "" || host == "?" {
				host = askedHost
			}
			addr := net.JoinHostPort(host, strconv.FormatInt(n.elems[1].num, 10))
			if i == 0 {
				m.ranges = append(m.ranges, slotRange{start: start, end: end, master: addr})
			}
			if !seen[addr] {
				seen[addr] = true
				m.nodes = append(m.nodes, addr)
			}
		}
	}
	sort.Slice(m.ranges, func(i, j int) bool { return m.ranges[i].start < m.ranges[j].start })
	return m, nil
}

// applySlots moves every subscribed channel to the shard of its slot's
// master in m, subscribes the channels Redis dropped again, and stops the
// shards left without channels.
func (r *Redis) applySlots(m *slotMap) {
	r.subMu.Lock()
	if r.isClosed() {
		r.subMu.Unlock()
		return
	}
	touched := make(map[*shard][]string) // shard -> channels to (re)subscribe there
	for ch, sh := range r.where {
		target := m.master(keySlot(ch))
		if sh != nil && sh.addr == target {
			if _, dirty := sh.dirty[ch]; dirty {
				touched[sh] = append(touched[sh], ch)
			}
			continue
		}
		if sh == nil && target == "" {
			continue // still no master
		}
		if sh != nil {
			r.dropChannel(sh, ch)
			if _, ok := touched[sh]; !ok {
				touched[sh] = nil
			}
		} else {
			r.adjust(0, -1, nil)
		}
		if target == "" {
			r.where[ch] = nil
			r.adjust(0, 1, errors.New("a subscribed channel's slot has no master"))
			continue
		}
		to := r.shards[target]
		if to == nil {
			to = r.newShard(target) // resync counts it down until it has the channels
			r.shards[target] = to
			to.start()
		}
		to.channels[ch] = struct{}{}
		r.where[ch] = to
		touched[to] = append(touched[to], ch)
		r.log.Info("pubsub: channel moved to another Redis Cluster master", "channel", ch, "node", target)
	}
	for sh, chs := range touched {
		clear(sh.dirty)
		r.resync(sh, chs)
	}
	var idle []*shard
	for addr, sh := range r.shards {
		if len(sh.channels) == 0 {
			delete(r.shards, addr)
			sh.remove()
			idle = append(idle, sh)
		}
	}
	r.publishView(m)
	r.subMu.Unlock()
	for _, sh := range idle {
		sh.stop()
	}
}

// resync subscribes channels on sh, which takes them over or had them
// dropped, and makes sh count as down until Redis has processed that. If
// sh has no connection, its next one subscribes everything.
func (r *Redis) resync(sh *shard, channels []string) {
	c := sh.conn
	if c == nil {
		if len(channels) > 0 {
			sh.update(func() { sh.owed, sh.owedBy = true, "" })
		}
		return
	}
	sort.Strings(channels)
	token := r.newToken()
	cmds := append(r.subscribeCommands(r.subCmd, channels), []string{"PING", token})
	if err := c.send(cmds...); err != nil {
		return // the connection is closed: the next one subscribes everything
	}
	sh.update(func() {
		sh.probe, sh.probeBy = token, time.Now().Add(r.opts.ReadTimeout)
		if sh.owed || len(channels) > 0 {
			sh.owed, sh.owedBy = true, token
		}
	})
}

// publishView publishes the slot map m (or the current one, if nil) and
// the shards for Publish and Claim. Called under subMu.
func (r *Redis) publishView(m *slotMap) {
	if r.cluster == nil {
		return
	}
	if m == nil {
		if old := r.cluster.view.Load(); old != nil {
			m = old.slots
		}
	}
	shards := make(map[string]*shard, len(r.shards))
	for addr, sh := range r.shards {
		shards[addr] = sh
	}
	r.cluster.view.Store(&clusterView{slots: m, shards: shards})
}

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = 16384

// keySlot returns the hash slot of key, as Redis Cluster computes it: the
// CRC16 of the key, or of its hash tag (the part between the first { and
// the next }, if not empty), modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % numSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster uses for slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
