package pubsub

import (
	"context"
	"sync"
	"sync/atomic"
)

// DefaultQueueSize is the number of messages a subscription buffers for a
// Handler that is still busy with an earlier one, when the options leave
// QueueSize zero. Messages beyond it are dropped and counted.
const DefaultQueueSize = 1024

// subscription is what both backends hand out from Subscribe: a bounded
// queue and the one goroutine that drains it into the Handler, in order.
//
// The queue is filled by the broker's delivery path (Publish for Memory, the
// receive loop for Redis) with offer, which never blocks: that is what keeps
// a slow Handler from stalling its publishers or its sibling subscriptions.
type subscription struct {
	topic   string
	h       Handler
	queue   chan []byte
	dropped *atomic.Uint64 // the broker's counter, shared by its subscriptions

	// ctx is given to the Handler; Close cancels it so that a Handler
	// blocked on it returns and Close can finish.
	ctx    context.Context
	cancel context.CancelFunc

	// detach removes the subscription from its broker so that no further
	// message is offered to it. It runs once, from the first Close.
	detach func(*subscription)

	once sync.Once
	stop chan struct{} // closed by Close: the goroutine returns
	done chan struct{} // closed by the goroutine as it returns
}

var _ Subscription = (*subscription)(nil)

// newSubscription returns a subscription whose goroutine is already running,
// so that a Close racing with the Subscribe that created it always has a
// goroutine to wait for. ctx only lends its values to the Handler's context;
// its cancellation is not inherited, since it belongs to the Subscribe call.
func newSubscription(ctx context.Context, topic string, h Handler, size int, dropped *atomic.Uint64, detach func(*subscription)) *subscription {
	if size <= 0 {
		size = DefaultQueueSize
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &subscription{
		topic:   topic,
		h:       h,
		queue:   make(chan []byte, size),
		dropped: dropped,
		ctx:     hctx,
		cancel:  cancel,
		detach:  detach,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.run()
	return s
}

// offer queues payload for delivery, or drops and counts it when the queue
// is full. It never blocks. It must not be called after detach returned,
// which the brokers ensure by offering only under the lock detach takes.
func (s *subscription) offer(payload []byte) {
	select {
	case s.queue <- payload:
	default:
		s.dropped.Add(1)
	}
}

func (s *subscription) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case p := <-s.queue:
			// select picks at random among ready cases: without this check a
			// full queue could keep the Handler running after Close began.
			select {
			case <-s.stop:
				return
			default:
			}
			s.h(s.ctx, s.topic, p)
		}
	}
}

// Close detaches the subscription from its broker, cancels the Handler's
// context, and waits for the Handler to return. Messages still queued are
// discarded. It is idempotent and must not be called from the subscription's
// own Handler, since it waits for that Handler to return.
func (s *subscription) Close() error {
	s.once.Do(func() {
		s.detach(s)
		// stop before cancel: the Handler that the cancellation wakes must
		// find stop closed, not be called again for a queued message.
		close(s.stop)
		s.cancel()
	})
	<-s.done
	return nil
}
