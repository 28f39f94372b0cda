package pubsub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryOptions configures a Memory broker. The zero value is ready to use.
type MemoryOptions struct {
	// QueueSize is how many messages each subscription buffers while its
	// Handler is busy; further messages are dropped and counted. Zero means
	// DefaultQueueSize.
	QueueSize int
}

// Memory is a Broker that delivers within one process. It is the default
// broker of a hub that runs as a single instance.
//
// Publish copies the payload, offers it to the queue of every current
// subscriber of the topic and returns; it never waits for a Handler.
type Memory struct {
	queueSize int
	dropped   atomic.Uint64

	// mu guards closed and topics. Publish holds it for reading while it
	// offers, so a subscription that detach removed (under the write lock)
	// is never offered a message afterwards.
	mu     sync.RWMutex
	closed bool
	topics map[string]map[*subscription]struct{}

	closeDone chan struct{} // closed when the first Close has finished

	// leases are checked for expiry when they are claimed: no goroutine
	// runs a clock. sweepAt bounds the expired leases nobody claims again:
	// when the map grows past it, they are removed.
	leaseMu sync.Mutex
	leases  map[string]memLease
	sweepAt int

	// values are the Store's, checked for expiry when read, and swept as
	// leases are when the map grows.
	valueMu      sync.Mutex
	values       map[string]memValue
	valueSweepAt int
}

// memValue is a value kept in a Memory broker's Store.
type memValue struct {
	val     []byte
	expires time.Time
}

// memLease is a lease held in a Memory broker.
type memLease struct {
	owner   string
	expires time.Time
}

var (
	_ Broker      = (*Memory)(nil)
	_ DropCounter = (*Memory)(nil)
	_ Store       = (*Memory)(nil)
)

// NewMemory returns a Memory broker with default options.
func NewMemory() *Memory {
	return NewMemoryWithOptions(MemoryOptions{})
}

// NewMemoryWithOptions returns a Memory broker configured by opts.
func NewMemoryWithOptions(opts MemoryOptions) *Memory {
	return &Memory{
		queueSize: opts.QueueSize,
		topics:    make(map[string]map[*subscription]struct{}),
		closeDone: make(chan struct{}),
		leases:    make(map[string]memLease),
		sweepAt:   64,
		values:    make(map[string]memValue),

		valueSweepAt: 64,
	}
}

// Publish offers a copy of payload to every current subscriber of topic. It
// returns ErrClosed once the broker is closed, and ctx's error if ctx is
// already done, both wrapping ErrNotSent; otherwise it succeeds, even when
// a full queue made a subscriber drop the message.
func (m *Memory) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := ctx.Err(); err != nil {
		return notSent(err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return notSent(ErrClosed)
	}
	subs := m.topics[topic]
	if len(subs) == 0 {
		return nil
	}
	// One copy shared by all subscribers: the caller may reuse its buffer
	// as soon as Publish returns.
	p := append([]byte{}, payload...)
	for s := range subs {
		s.offer(p)
	}
	return nil
}

// PublishAsync publishes as Publish does, which never waits for anything
// but the offering to local subscriptions: done is called before it
// returns.
func (m *Memory) PublishAsync(topic string, payload []byte, done func(error)) {
	err := m.Publish(context.Background(), topic, payload)
	if done != nil {
		done(err)
	}
}

// Subscribe calls h for every message published on topic from now on,
// until the Subscription or the broker is closed.
func (m *Memory) Subscribe(ctx context.Context, topic string, h Handler) (Subscription, error) {
	if h == nil {
		return nil, errors.New("pubsub: nil Handler")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := newSubscription(ctx, topic, h, m.queueSize, &m.dropped, m.detach)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		s.Close()
		return nil, ErrClosed
	}
	subs := m.topics[topic]
	if subs == nil {
		subs = make(map[*subscription]struct{})
		m.topics[topic] = subs
	}
	subs[s] = struct{}{}
	m.mu.Unlock()
	return s, nil
}

func (m *Memory) detach(s *subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	subs := m.topics[s.topic]
	delete(subs, s)
	if len(subs) == 0 {
		delete(m.topics, s.topic)
	}
}

// Ready returns nil until the broker is closed, then ErrClosed.
func (m *Memory) Ready(ctx context.Context) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Claim takes the lease on key for owner if it is free, expired or
// already owner's, until ttl from now, and returns owner; otherwise it
// returns the current holder. It fails only on bad arguments, a done ctx or
// a closed broker.
func (m *Memory) Claim(ctx context.Context, key, owner string, ttl time.Duration) (string, error) {
	if err := checkLease(key, owner, ttl); err != nil {
		return "", err
	}
	if err := m.usable(ctx); err != nil {
		return "", err
	}
	now := time.Now()
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	if l, ok := m.leases[key]; ok && l.owner != owner && now.Before(l.expires) {
		return l.owner, nil
	}
	m.leases[key] = memLease{owner: owner, expires: now.Add(ttl)}
	if len(m.leases) >= m.sweepAt {
		for k, l := range m.leases {
			if !now.Before(l.expires) {
				delete(m.leases, k)
			}
		}
		m.sweepAt = max(64, 2*len(m.leases))
	}
	return owner, nil
}

// Release ends owner's lease on key, if owner holds it.
func (m *Memory) Release(ctx context.Context, key, owner string) error {
	if err := checkLease(key, owner, time.Millisecond); err != nil {
		return err
	}
	if err := m.usable(ctx); err != nil {
		return err
	}
	m.leaseMu.Lock()
	defer m.leaseMu.Unlock()
	if l, ok := m.leases[key]; ok && l.owner == owner {
		delete(m.leases, key)
	}
	return nil
}

// Get returns the value of key, or ErrNotFound. It fails only on a bad
// key, a done ctx or a closed broker.
func (m *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkStore(key); err != nil {
		return nil, err
	}
	if err := m.usable(ctx); err != nil {
		return nil, err
	}
	m.valueMu.Lock()
	defer m.valueMu.Unlock()
	v, ok := m.values[key]
	if !ok || !time.Now().Before(v.expires) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return bytes.Clone(v.val), nil
}

// Update changes the value of key with fn, under the store's lock: fn is
// called once.
func (m *Memory) Update(ctx context.Context, key string, fn func(cur []byte) ([]byte, time.Duration, error)) error {
	if err := checkStore(key); err != nil {
		return err
	}
	if err := m.usable(ctx); err != nil {
		return err
	}
	now := time.Now()
	m.valueMu.Lock()
	defer m.valueMu.Unlock()
	var cur []byte
	if v, ok := m.values[key]; ok && now.Before(v.expires) {
		cur = v.val
	}
	next, ttl, err := fn(cur)
	if err != nil {
		return err
	}
	if err := checkTTL(next, ttl); err != nil {
		return err
	}
	if next == nil {
		delete(m.values, key)
		return nil
	}
	m.values[key] = memValue{val: bytes.Clone(next), expires: now.Add(ttl)}
	if len(m.values) >= m.valueSweepAt {
		for k, v := range m.values {
			if !now.Before(v.expires) {
				delete(m.values, k)
			}
		}
		m.valueSweepAt = max(64, 2*len(m.values))
	}
	return nil
}

// usable returns ctx's error, or ErrClosed once the broker is closed.
func (m *Memory) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Watch returns at once: a Memory broker has no connection to lose, so fn
// is never called.
func (m *Memory) Watch(fn func(up bool)) (stop func()) {
	return func() {}
}

// Dropped returns how many messages were dropped, summed over all
// subscriptions, because a subscription's queue was full.
func (m *Memory) Dropped() uint64 {
	return m.dropped.Load()
}

// Close closes every subscription, waiting for running Handlers to return
// (their contexts are cancelled first), after which Publish and Subscribe
// return ErrClosed. A second Close waits for the first and returns nil.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		<-m.closeDone
		return nil
	}
	m.closed = true
	var all []*subscription
	for _, subs := range m.topics {
		for s := range subs {
			all = append(all, s)
		}
	}
	m.mu.Unlock()
	for _, s := range all {
		s.Close()
	}
	close(m.closeDone)
	return nil
}
