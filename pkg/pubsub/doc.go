// Package pubsub carries messages between hub instances, gives them leases
// on names, and keeps small values for all of them. It knows topics, byte
// payloads and keys, nothing of WebSockets or MCP.
//
// The hub publishes on five topics: "registry" (each instance's heartbeats
// and snapshots of its servers, from which every instance derives the
// lists, and hence the list_changed notifications, of its clients),
// "inbox/<instance>" (requests routed to a server on another instance, and
// their answers, progress and cancellations), "updates" (resource
// updates), "logs" (servers' log messages) and "tasks" (the id of a task
// whose record changed). A topic is any string.
//
// # Brokers
//
// Broker is the interface; two implementations stand beside it:
//
//   - Memory delivers within one process. It is the default, for a hub that
//     runs as a single instance (no --redis flag), and needs no setup.
//   - Redis delivers through Redis pub/sub to every instance connected to the
//     same server (or Redis Cluster) with the same KeyPrefix. Use it as soon
//     as there are two hub instances. It survives Redis restarts: it
//     reconnects and resubscribes by itself, and Ready tells meanwhile that
//     it cannot deliver, for the hub's readiness probe.
//
// Both are checked by one shared contract test suite, which runs against
// Memory, a redis-server and a three-master Redis Cluster.
//
// # Redis Cluster
//
// When one Redis server is not enough, give NewRedis a cluster's URL:
// redis+cluster://host:port,host:port (any nodes of it; rediss+cluster://
// for TLS), or go-redis's form, redis://host:port?addr=host:port. The
// broker then uses sharded pub/sub (SPUBLISH, SSUBSCRIBE; Redis 7.0 or
// later): a message goes only to the nodes of the shard that serves its
// topic's hash slot, so pub/sub traffic spreads over the shards instead of
// reaching every node, and grows with them.
//
// The broker holds one subscriber connection per master that serves a
// subscribed topic, and a map of the slots. It follows the cluster's
// changes by itself: when a master fails and its replica takes over, when a
// slot moves to another master (Redis then drops its subscribers, or
// answers MOVED), it reloads the map and subscribes each topic where its
// slot now is. Meanwhile Ready fails and Watch reports the gap, as for a
// single server's outage; topics on the other shards are not disturbed.
// Publishing and leases go through go-redis's cluster client, which routes
// each command to its slot's master.
//
// A KeyPrefix with a hash tag ("{switchboard}:") would put every topic in
// one slot, hence on one shard: leave braces out of it.
//
// # Delivery guarantees
//
// Delivery is at most once, for both brokers: a message is delivered to the
// subscriptions that exist when it is published, to each at most once, and
// messages from one publisher on one topic arrive in the order they were
// published. Nothing is replayed.
//
// Memory loses a message only when a subscription's queue is full (its
// Handler is too slow): the message is dropped for that subscription only,
// and counted (see DropCounter). A Publish that returns nil has offered the
// message to every subscription.
//
// Redis loses messages in that case too, and also when:
//
//   - this instance's subscriber connection is down, or (cluster) a topic's
//     slot is moving to another master: what other instances publish
//     meanwhile never reaches it. Watch reports when that starts and when
//     it ends;
//   - the publisher cannot reach Redis, or the master of the topic's slot:
//     Publish fails (fast; see below).
//
// A message reaches the subscriptions that exist when Redis runs its
// PUBLISH; a Publish that returns nil means Redis ran it.
//
// # What an error from Publish means
//
// An error wrapping ErrNotSent says the message was certainly not sent, so
// that publishing it again cannot deliver it twice: the broker was closed,
// ctx was already done, the broker knew its backend unreachable and did
// not try, or (Redis) ctx ended while the message still waited for the
// goroutine that writes messages, or no connection could be made. Any other
// error leaves the outcome unknown: a Redis Publish whose ctx ended, or
// whose connection broke, after the PUBLISH was written may still be
// delivered. A caller that wants a definite answer gives Publish a context
// with a deadline but without the cancellation of a request that may be
// abandoned midway (context.WithoutCancel).
//
// A caller that needs more than at most once (the hub's registry, for
// instance) adds it itself: periodic refresh, a resynchronisation when Watch
// reports a recovery, requests with timeouts.
//
// # Watching the connection
//
// Watch tells when messages may have been lost: fn(false) when the broker
// loses its connection (for Redis: the subscriber connection broke, or the
// health check found it silent), fn(true) once it is back and every
// subscription is in place again, the moment Ready starts succeeding. A
// hub that hears "true" knows that what others published meanwhile never
// reached it, and asks for it again (the registry's snapshots, for
// instance). Memory never loses its connection and never calls fn.
//
// With a Redis Cluster the loss may be partial: while one shard is down,
// the topics of the others are still delivered. Between false and true, a
// message received on one topic does not mean that the answer to it, on
// another, will arrive: requests sent meanwhile may need sending again once
// Watch reports true.
//
//	resync := make(chan struct{}, 1)
//	stop := b.Watch(func(up bool) {
//		if up { // fn must not block: a resync already pending covers this one
//			select {
//			case resync <- struct{}{}:
//			default:
//			}
//		}
//	})
//	defer stop()
//
// # Leases
//
// Claim and Release give out leases: a named key held by one owner at a
// time, across every instance sharing the broker, until it expires. The
// hub uses them to register server names cluster-wide: of two instances
// that claim one name for different owners at the same moment, exactly
// one wins; the other learns who holds it.
//
//	holder, err := b.Claim(ctx, "server/echo", instanceID, 30*time.Second)
//	switch {
//	case err != nil: // unknown outcome: retry, or give up
//	case holder == instanceID: // ours for 30s; claim again to renew
//	default: // held by holder
//	}
//
// A claim by the holder renews the lease, resetting its expiry to ttl
// from now. Release ends a lease early, and does nothing when called by
// someone who does not hold it. For Memory a lease is an entry in a map;
// for Redis it is the key KeyPrefix+"lease:"+key, set and read by one Lua
// script, which Redis expires by itself.
//
// # Store
//
// Both brokers are also a Store (an optional capability, found by type
// assertion): small values under keys, shared by every instance, each with
// its expiry. The hub keeps its task records there, so that a task handle
// resolves on whichever instance a client's next request lands, as soon as
// it was given out. Get reads a value; Update replaces it atomically with
// what a function computes from the current one (nil: there is none), and
// calls the function again when another instance's Update won the race:
//
//	err := store.Update(ctx, "task/"+id, func(cur []byte) ([]byte, time.Duration, error) {
//		if cur != nil {
//			return nil, 0, errTaken // changes nothing
//		}
//		return record, time.Hour, nil
//	})
//
// For Memory a value is an entry in a map; for Redis it is the key
// KeyPrefix+"kv:"+key, which Redis expires by itself, updated by WATCH, GET
// and a MULTI that Redis runs only if nobody changed the key meanwhile. A
// Redis without persistence that restarts forgets every value: writers that
// must keep theirs write them again when Watch reports the broker back.
//
// # Concurrency
//
// Every method of a Broker may be called concurrently. Each Subscription
// owns a bounded queue and one goroutine that runs its Handler, one message
// at a time. Delivery only offers a message to that queue, dropping it if
// the queue is full, so a slow Handler never blocks a publisher or another
// subscription. Publish itself does wait: Memory's until the message is
// offered to every local subscription, Redis's until Redis has answered the
// PUBLISH (one round trip, shared by the messages published meanwhile, and
// bounded by CommandTimeout). PublishAsync (the AsyncPublisher capability of
// both) does not: the message joins the same queue, in order with the
// caller's other messages, and a callback learns the outcome, so that a
// router need not hold a goroutine per message in flight.
//
// The Handler's context is cancelled when its Subscription or Broker is
// closed; Close waits for a running Handler to return, so a Handler must
// watch its context if it may block, and must close neither its own
// Subscription nor its Broker. No goroutine of a broker outlives its Close.
//
// # Files
//
//	doc.go              this overview
//	broker.go           Broker, Handler, Subscription, AsyncPublisher,
//	                    DropCounter, Store: the contract of every backend
//	subscription.go     a subscription's bounded queue and the goroutine
//	                    that drains it into its Handler, shared by both
//	watch.go            Watch: connection-state changes to each watcher,
//	                    in order, never blocking the broker
//	memory.go           Memory: the broker of one process
//	redis.go            Redis: options, publishing, subscribing, leases,
//	                    readiness, close
//	redis_cluster.go    Redis Cluster: sharded pub/sub and the slot map
//	redis_shard.go      a shard: the subscriber connection to one node and
//	                    its channels, kept, checked and reconnected
//	redis_conn.go       the subscriber connections' own RESP2
//	redis_pub.go        a single server's publisher connection, batches
//	                    written on it directly
//	redis_pub_unix.go   whether the server closed it, found by a peek
//	redis_pub_other.go  elsewhere, found by the next batch
//	redis_store.go      the Store on Redis keys that expire by themselves
package pubsub
