// Package pubsub carries messages between the parts of a hub, and between
// hub instances: resource updates, list_changed notifications, and the
// requests and answers that one instance routes to a server connected to
// another. It knows topics and byte payloads, nothing of WebSockets or MCP.
//
// # Brokers
//
// Broker is the interface; two implementations stand beside it:
//
//   - Memory delivers within one process. It is the default, for a hub that
//     runs as a single instance (no --redis flag), and needs no setup.
//   - Redis delivers through Redis pub/sub to every instance connected to the
//     same server with the same KeyPrefix. Use it as soon as there are two
//     hub instances. It survives Redis restarts: it reconnects and
//     resubscribes by itself, and Ready tells meanwhile that it cannot
//     deliver, for the hub's readiness probe.
//
// Both are checked by one shared contract test suite.
//
// # Delivery guarantees
//
// Delivery is at most once. A message is delivered to the subscriptions
// that exist when it is published (for Redis: when Redis runs the PUBLISH),
// to each at most once; messages from one publisher on one topic arrive in
// the order they were published. Messages are lost, and not replayed, when:
//
//   - a subscription's queue is full: the Handler is too slow. The message is
//     dropped for that subscription only, and counted (see DropCounter);
//   - Redis is unreachable: Publish returns an error wrapping ErrUnavailable,
//     and messages that other instances published meanwhile are not
//     received. An error from Publish does not prove the message was lost:
//     Redis may have run it before the connection failed.
//
// A caller that needs more (the hub's registry, for instance) must add it
// itself: state kept in Redis keys, periodic refresh, requests with
// timeouts.
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
// # Concurrency
//
// Every method of a Broker may be called concurrently. Each Subscription
// owns a bounded queue and one goroutine that runs its Handler, one message
// at a time; Publish only queues, so a slow Handler never blocks a
// publisher or another subscription. The Handler's context is cancelled
// when its Subscription or Broker is closed; Close waits for a running
// Handler to return, so a Handler must watch its context if it may block,
// and must close neither its own Subscription nor its Broker. No goroutine of a broker
// outlives its Close.
package pubsub
