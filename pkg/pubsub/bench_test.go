package pubsub_test

import (
	"context"
	"encoding/binary"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// BenchmarkBroker measures the backends side by side (Memory, Redis, and
// Redis on a three-master cluster):
//
//   - latency: one message at a time, from Publish to the Handler; reports
//     the median and 99th percentile as p50-µs and p99-µs.
//   - throughput: 4 publishers per P publish 256-byte messages as fast as
//     they can to one subscriber; reports delivered msgs/s and the fraction
//     dropped because the queue was full, which Memory shows since its
//     publishers outrun the one goroutine that runs the Handler.
func BenchmarkBroker(b *testing.B) {
	backends := []struct {
		name string
		new  func(b *testing.B) pubsub.Broker
	}{
		{"memory", func(b *testing.B) pubsub.Broker { return pubsub.NewMemory() }},
		{"redis", func(b *testing.B) pubsub.Broker { return benchRedis(b, redistest.Start(b)) }},
		{"redis-cluster", func(b *testing.B) pubsub.Broker { return benchRedis(b, redistest.StartCluster(b, 3)) }},
	}
	for _, be := range backends {
		b.Run(be.name+"/latency", func(b *testing.B) {
			br := be.new(b)
			defer br.Close()
			benchLatency(b, br)
		})
		b.Run(be.name+"/throughput", func(b *testing.B) {
			br := be.new(b)
			defer br.Close()
			benchThroughput(b, br)
		})
	}
}

func benchRedis(b *testing.B, rs redistest.Redis) pubsub.Broker {
	br, err := pubsub.NewRedis(context.Background(), pubsub.RedisOptions{URL: rs.URL(), KeyPrefix: redistest.Prefix(b)})
	if err != nil {
		b.Fatal(err)
	}
	return br
}

func benchLatency(b *testing.B, br pubsub.Broker) {
	ctx := context.Background()
	got := make(chan time.Time, 1)
	sub, err := br.Subscribe(ctx, "lat", func(_ context.Context, _ string, p []byte) {
		got <- time.Unix(0, int64(binary.BigEndian.Uint64(p)))
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	lat := make([]time.Duration, 0, 1024)
	buf := make([]byte, 8)
	for b.Loop() {
		binary.BigEndian.PutUint64(buf, uint64(time.Now().UnixNano()))
		if err := br.Publish(ctx, "lat", buf); err != nil {
			b.Fatal(err)
		}
		select {
		case sent := <-got:
			lat = append(lat, time.Since(sent))
		case <-time.After(waitTimeout):
			b.Fatal("message not delivered")
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
}

func benchThroughput(b *testing.B, br pubsub.Broker) {
	ctx := context.Background()
	var delivered atomic.Int64
	sub, err := br.Subscribe(ctx, "tput", func(context.Context, string, []byte) { delivered.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	var dropped0 uint64
	dc, _ := br.(pubsub.DropCounter)
	if dc != nil {
		dropped0 = dc.Dropped()
	}
	payload := make([]byte, 256)
	var published atomic.Int64
	start := time.Now()
	b.SetParallelism(4) // 4 publishers per P
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := br.Publish(ctx, "tput", payload); err != nil {
				b.Error(err)
				return
			}
			published.Add(1)
		}
	})
	// Wait until every message is delivered or dropped.
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Microsecond)
	defer tick.Stop()
	var dropped uint64
	for {
		if dc != nil {
			dropped = dc.Dropped() - dropped0
		}
		if delivered.Load()+int64(dropped) >= published.Load() {
			break
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			b.Fatalf("%d of %d messages neither delivered nor dropped",
				published.Load()-delivered.Load()-int64(dropped), published.Load())
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(delivered.Load())/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(float64(dropped)/float64(max(published.Load(), 1)), "dropped/op")
}
