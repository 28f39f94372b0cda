package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisDialer: the floor of a hop between instances, measured against the
// redis-server the hubs share. Each connection is a go-redis client
// PUBLISHing on a channel of its own and a subscriber connection watching
// that channel; a round trip is a PUBLISH and the delivery of its message
// to the subscriber, as a cross-instance call does twice. With more than
// one in flight the PUBLISHes waiting at the time go out as one pipeline,
// as the hub's broker sends them.
type redisDialer struct {
	addr    string
	payload []byte
	seq     *atomic.Int64 // numbers the channels
}

// redisConn is one publisher and its subscriber.
type redisConn struct {
	pub     *redis.Client
	sub     *redis.PubSub
	channel string
	payload []byte
}

func (d redisDialer) dial(ctx context.Context) (loadConn, error) {
	pub := redis.NewClient(&redis.Options{Addr: d.addr, Protocol: 2, DisableIdentity: true, PoolSize: 2})
	channel := "hubbench:floor:" + strconv.FormatInt(d.seq.Add(1), 10)
	sub := pub.Subscribe(ctx, channel)
	if _, err := sub.Receive(ctx); err != nil { // the confirmation
		sub.Close()
		pub.Close()
		return nil, fmt.Errorf("redis SUBSCRIBE: %w", err)
	}
	return &redisConn{pub: pub, sub: sub, channel: channel, payload: d.payload}, nil
}

// drive publishes up to inflight messages at a time, as one pipeline,
// and reads their deliveries on another goroutine: a round trip ends when
// the subscriber has the message.
func (c *redisConn) drive(ctx context.Context, inflight int, lr *loadRun, rec *recorder) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, inflight)
	sent := make(chan time.Time, inflight)
	rd := tally{run: lr}
	wr := tally{run: lr}
	var wg sync.WaitGroup
	wg.Go(func() {
		readInOrder(sent, slots, inflight, lr, &rd, cancel, func() error {
			_, err := c.sub.ReceiveMessage(ctx)
			return err
		})
	})
	for !lr.stop.Load() && ctx.Err() == nil {
		// Wait for one free slot, then take every other one free now.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		k := 1
	more:
		for k < inflight {
			select {
			case slots <- struct{}{}:
				k++
			default:
				break more
			}
		}
		now := time.Now()
		var err error
		if k == 1 {
			sent <- now
			err = c.pub.Publish(ctx, c.channel, c.payload).Err()
		} else {
			pipe := c.pub.Pipeline()
			for range k {
				sent <- now
				pipe.Publish(ctx, c.channel, c.payload)
			}
			_, err = pipe.Exec(ctx)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			wr.fail(err)
			cancel()
		}
	}
	close(sent)
	wg.Wait()
	rec.add(&rd)
	rec.add(&wr)
}

func (c *redisConn) close() {
	_ = c.sub.Close()
	_ = c.pub.Close()
}
