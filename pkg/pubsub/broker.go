package pubsub

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Broker carries messages between hub instances.
//
// Delivery is at most once: a message published while a subscriber is
// disconnected (Redis down, a queue full) is lost, never delivered twice or
// out of order. Messages from one publisher on one topic arrive in the order
// they were published. A Handler runs on a goroutine owned by its
// Subscription, one message at a time; a Handler that blocks delays only its
// own subscription.
//
// Every method may be called concurrently.
type Broker interface {
	// Publish sends payload to every current subscriber of topic, on every
	// instance. It fails fast, never hanging, when the broker cannot take
	// the message (for Redis: the server is unreachable). It does not
	// retain payload: the caller may reuse it once Publish returns.
	//
	// An error wrapping ErrNotSent means the message was certainly not
	// sent, and may be published again without risk of a duplicate. Any
	// other error leaves the outcome unknown: the message may have been
	// delivered (for Redis: ctx ended, or the connection broke, after the
	// PUBLISH was written). A caller that wants to know should not cancel
	// ctx early: give it a deadline, not the cancellation of a request that
	// may be abandoned.
	Publish(ctx context.Context, topic string, payload []byte) error
	// Subscribe calls h for every message later published on topic, until
	// the Subscription is closed. A broker that loses its connection
	// resubscribes by itself when the connection comes back.
	Subscribe(ctx context.Context, topic string, h Handler) (Subscription, error)
	// Ready returns nil when the broker can deliver messages now.
	Ready(ctx context.Context) error

	// Claim takes the lease on key for owner, if it is free, expired or
	// already owner's, and (re)sets its expiry to ttl from now; it then
	// returns owner. Otherwise it returns the current holder and changes
	// nothing. Claims are atomic across every instance sharing the broker:
	// of two owners claiming a free key at the same moment, exactly one
	// gets it. An owner renews its lease by claiming again before ttl
	// elapses. ttl must be at least a millisecond, key and owner non-empty.
	//
	// While the broker cannot reach its backing service, Claim fails fast
	// with an error wrapping ErrUnavailable, as Publish does. An error
	// leaves the outcome unknown (the claim may have been applied): claim
	// again, which is safe since a claim by the holder only renews.
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (holder string, err error)
	// Release ends owner's lease on key at once. It does nothing if owner
	// does not hold it (it expired, or someone else holds it).
	Release(ctx context.Context, key, owner string) error

	// Watch calls fn(false) when the broker loses its connection to its
	// backing service, from which moment messages published to this
	// instance are lost, and fn(true) once the connection is back and every
	// subscription is in place again: the moment Ready starts succeeding.
	// It reports changes only, from the state at the time of the call; to
	// miss none, call Watch before checking Ready. A broker that cannot
	// lose messages this way (Memory) never calls fn.
	//
	// Calls of fn are serialised and in order, never concurrent, on a
	// goroutine of the broker's; fn must not block (hand the news to a
	// goroutine of your own if acting on it takes time). When changes come
	// faster than fn returns, a loss and a recovery that it has not been
	// told of yet are folded into the one pair "false, true"; fn never misses
	// that messages may have been lost. stop stops the calls: once it
	// returns, fn is not running and is not called again. It is idempotent
	// and must not be called from fn. Close stops every watch.
	Watch(fn func(up bool)) (stop func())
	// Close closes every subscription and releases the broker's resources.
	Close() error
}

// Handler receives one message of a subscription.
//
// ctx is cancelled when the Subscription or its Broker is closed; a Handler
// that blocks should watch it. payload may be shared with the other
// subscribers of the topic and must not be modified.
type Handler func(ctx context.Context, topic string, payload []byte)

// Subscription is a live subscription to one topic.
type Subscription interface {
	// Close stops deliveries; once it returns, the Handler is not running
	// and will not be called again. Since it waits for the Handler, it must
	// not be called from that Handler.
	Close() error
}

// AsyncPublisher is implemented by brokers that can publish without making
// the caller wait for the outcome (both Memory and Redis do): a router that
// sends a message per request need not hold a goroutine per message in
// flight. It is an optional capability: find it with a type assertion.
type AsyncPublisher interface {
	// PublishAsync publishes payload on topic as Publish does, bounded by
	// the broker's own time limit (for Redis, CommandTimeout) instead of a
	// ctx, and returns without waiting for the outcome. done, if not nil,
	// is called exactly once with the error Publish would have returned:
	// before PublishAsync returns when the message is refused at once (the
	// broker is closed, or knows its backend unreachable), else later on a
	// goroutine of the broker's, which done must not block. The broker
	// keeps payload until then: the caller must not modify it meanwhile.
	//
	// Messages published by one goroutine, with Publish or PublishAsync,
	// are sent in the order of the calls. PublishAsync may wait briefly
	// while the broker's queue is full.
	PublishAsync(topic string, payload []byte, done func(error))
}

// DropCounter is implemented by brokers that count the messages they drop
// because a subscriber's queue was full (both Memory and Redis do). It is
// an optional capability: find it with a type assertion.
type DropCounter interface {
	// Dropped returns the number of messages dropped so far.
	Dropped() uint64
}

// Store is implemented by brokers that keep small values under keys, for
// every instance sharing the broker, each until its expiry (both Memory and
// Redis do): state that must be readable wherever a client's next request
// lands, as soon as it was written (the hub's task records). It is an
// optional capability: find it with a type assertion.
//
// Values are bytes, read and replaced whole; keys are any non-empty
// string, in a namespace of their own (not the topics', nor the leases').
// A value written is read by every instance at once: a Get that follows an
// Update that returned, on any instance, sees it or a later value.
//
// While the broker cannot reach its backing service, its methods fail fast
// with an error wrapping ErrUnavailable, as Publish does; an Update that
// fails so may or may not have been applied. A Redis that restarts without
// persistence forgets every value: whoever wrote them writes them again
// (Watch reports the gap).
type Store interface {
	// Get returns the value of key, or an error wrapping ErrNotFound when
	// it has none (never set, deleted, or expired).
	Get(ctx context.Context, key string) ([]byte, error)
	// Update changes the value of key atomically with respect to every
	// other Update of it, on every instance sharing the broker. fn gets the
	// current value (nil when there is none, which it must not modify) and
	// returns the new one and how long it is to live from now (at least a
	// millisecond); a nil value deletes the key. When another Update
	// changes the key between fn's reading and the write, fn is called
	// again with the newer value, so it must do nothing but compute. An
	// error from fn ends Update with that error, changing nothing.
	Update(ctx context.Context, key string, fn func(cur []byte) (next []byte, ttl time.Duration, err error)) error
}

// ErrNotFound is wrapped by the error of a Store's Get for a key that has
// no value.
var ErrNotFound = errors.New("pubsub: no such key")

// maxUpdateTries bounds the times an Update's fn is called while other
// Updates of its key keep winning the race.
const maxUpdateTries = 64

// errContended ends an Update that lost the race to other Updates of its
// key maxUpdateTries times in a row.
var errContended = errors.New("pubsub: update: the key changed under every try")

// checkStore validates the arguments of a Store's methods.
func checkStore(key string) error {
	if key == "" {
		return errors.New("pubsub: store key is empty")
	}
	return nil
}

// checkTTL validates the ttl an Update's fn returned with a value.
func checkTTL(next []byte, ttl time.Duration) error {
	if next != nil && ttl < time.Millisecond {
		return fmt.Errorf("pubsub: store ttl %v is below 1ms", ttl)
	}
	return nil
}

// checkLease validates the arguments of Claim and Release.
func checkLease(key, owner string, ttl time.Duration) error {
	switch {
	case key == "":
		return errors.New("pubsub: lease key is empty")
	case owner == "":
		return errors.New("pubsub: lease owner is empty")
	case ttl < time.Millisecond:
		return fmt.Errorf("pubsub: lease ttl %v is below 1ms", ttl)
	}
	return nil
}

// ErrNotSent is wrapped, beside the cause, by the errors of a Publish whose
// message was certainly not sent: the broker was closed or knew its
// backing service down, or ctx ended before the message left the broker.
var ErrNotSent = errors.New("pubsub: message not sent")

// notSent marks err as certainly not sent.
func notSent(err error) error {
	return fmt.Errorf("%w: %w", ErrNotSent, err)
}

// ErrClosed is returned by a Broker that was closed.
var ErrClosed = errors.New("pubsub: broker closed")

// ErrUnavailable is wrapped by errors of a broker that cannot reach its
// backing service.
var ErrUnavailable = errors.New("pubsub: broker unavailable")
