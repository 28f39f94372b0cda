package pubsub

import (
	"context"
	"strconv"
	"time"
)

// The publisher's own connection to a single server. For a cluster,
// go-redis routes each SPUBLISH to the master of its slot; for one server
// the publisher writes its batches itself, on a connection it owns: go-redis
// would allocate a command, its argument slice and a box per argument for
// every message, which was most of what a message between instances cost.

// publishDirect publishes a batch on the publisher's connection to a single
// server: one write for every message, then their replies. A failure to
// connect fails every message as not sent; a failure after the write
// leaves their outcome unknown, and the next batch connects again.
func (r *Redis) publishDirect(batch []*pubReq) {
	taken := r.pubTaken[:0]
	for _, req := range batch {
		if err := req.expired(); err != nil && req.giveUp() {
			r.finish(req, notSent(err))
			continue
		}
		if req.state.CompareAndSwap(reqQueued, reqTaken) {
			taken = append(taken, req)
		}
	}
	r.pubTaken = taken
	defer clear(taken)
	if len(taken) == 0 {
		return
	}
	// A connection the server closed (it restarted) is found before a
	// batch is written to it, without waiting: the batch would fail with
	// an unknown outcome where a new connection succeeds.
	if c := r.pubConn; c != nil && r.pubPeek.closedByPeer() {
		r.dropPubConn()
	}
	if r.pubConn == nil {
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.CommandTimeout)
		c, err := dialConn(ctx, r.conn, r.addr)
		cancel()
		if err != nil {
			for _, req := range taken {
				r.finish(req, notSent(err))
			}
			return
		}
		r.pubConn, r.pubPeek = c, newPeeker(c.nc)
	}
	c := r.pubConn
	b := c.wbuf[:0]
	for _, req := range taken {
		b = appendPublish(b, req.channel, req.payload)
	}
	if cap(b) <= 64<<10 {
		c.wbuf = b[:0] // kept for the next batch unless a large one grew it
	} else {
		c.wbuf = nil
	}
	now := time.Now()
	deadline := now.Add(r.opts.CommandTimeout)
	_ = c.nc.SetWriteDeadline(earlier(deadline, now.Add(r.opts.WriteTimeout)))
	if r.beforeWrite != nil {
		r.beforeWrite()
	}
	if _, err := c.nc.Write(b); err != nil {
		r.dropPubConn()
		for _, req := range taken {
			r.finish(req, err)
		}
		return
	}
	c.in.extend = false
	_ = c.nc.SetReadDeadline(earlier(deadline, time.Now().Add(r.opts.ReadTimeout)))
	for i, req := range taken {
		rep, err := readReply(c.rd, 0)
		if err == nil && rep.kind != ':' && rep.kind != '-' {
			err = errProtocol
		}
		if err != nil {
			r.dropPubConn()
			for _, rest := range taken[i:] {
				r.finish(rest, err)
			}
			return
		}
		if rep.kind == '-' {
			r.finish(req, redisError(rep.str))
			continue
		}
		r.finish(req, nil)
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// dropPubConn closes the publisher's connection; the next batch dials.
func (r *Redis) dropPubConn() {
	if r.pubConn != nil {
		_ = r.pubConn.close()
		r.pubConn, r.pubPeek = nil, nil
	}
}

// appendPublish appends PUBLISH channel payload as a RESP array.
func appendPublish(b []byte, channel string, payload []byte) []byte {
	b = append(b, "*3\r\n$7\r\nPUBLISH\r\n$"...)
	b = strconv.AppendInt(b, int64(len(channel)), 10)
	b = append(b, '\r', '\n')
	b = append(b, channel...)
	b = append(b, "\r\n$"...)
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, '\r', '\n')
	b = append(b, payload...)
	return append(b, '\r', '\n')
}
