package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-mcp/switchboard/internal/demo"
	"github.com/switchboard-mcp/switchboard/internal/redistest"
	"github.com/switchboard-mcp/switchboard/pkg/jsonrpc"
	"github.com/switchboard-mcp/switchboard/pkg/mcp"
	"github.com/switchboard-mcp/switchboard/pkg/peer"
	"github.com/switchboard-mcp/switchboard/pkg/pubsub"
)

// Regression tests for faults found under load and around outages. Each
// drives the interleaving that once lost a message, with hooks instead of
// sleeps, so that it fails every time the fault is back.

// hookBroker lets a test hold or lose the messages of one instance.
type hookBroker struct {
	pubsub.Broker
	// beforePublish, when set, runs before each publish and may block; it
	// returns the error Publish should report once the message went out
	// (one wrapping pubsub.ErrNotSent: the message does not go out).
	beforePublish atomic.Pointer[func(ctx context.Context, topic string, payload []byte) error]
	// deaf drops everything that arrives for the instance, as when its
	// subscriber connection is down.
	deaf atomic.Bool
	// notReady makes Ready fail, as while the subscriptions are not back.
	notReady atomic.Bool
	// aroundDeliver, when set, delivers each message that arrives for the
	// instance: it calls handle when it will (each topic's messages are
	// delivered in order, apart from other topics').
	aroundDeliver atomic.Pointer[func(topic string, payload []byte, handle func())]
}

func (b *hookBroker) Ready(ctx context.Context) error {
	if b.notReady.Load() {
		return fmt.Errorf("%w: resubscribing", pubsub.ErrUnavailable)
	}
	return b.Broker.Ready(ctx)
}

func (b *hookBroker) Publish(ctx context.Context, topic string, payload []byte) error {
	if fn := b.beforePublish.Load(); fn != nil {
		if err := (*fn)(ctx, topic, payload); err != nil {
			if !errors.Is(err, pubsub.ErrNotSent) {
				b.Broker.Publish(context.Background(), topic, payload)
			}
			return err
		}
	}
	return b.Broker.Publish(ctx, topic, payload)
}

func (b *hookBroker) Subscribe(ctx context.Context, topic string, h pubsub.Handler) (pubsub.Subscription, error) {
	return b.Broker.Subscribe(ctx, topic, func(ctx context.Context, topic string, payload []byte) {
		if b.deaf.Load() {
			return
		}
		if fn := b.aroundDeliver.Load(); fn != nil {
			(*fn)(topic, payload, func() { h(ctx, topic, payload) })
			return
		}
		h(ctx, topic, payload)
	})
}

// startPair starts two instances on one in-memory broker, each behind a
// hookBroker of its own. Heartbeats are an hour apart unless cfg says
// otherwise: a test moves the cluster itself.
func startPair(t *testing.T, cfg Config) (a, b *testHub, ha, hb *hookBroker) {
	t.Helper()
	shared := pubsub.NewMemory()
	t.Cleanup(func() { shared.Close() })
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = time.Hour
	}
	ha, hb = &hookBroker{Broker: shared}, &hookBroker{Broker: shared}
	cfgA, cfgB := cfg, cfg
	cfgA.Broker, cfgB.Broker = ha, hb
	a = startHub(t, cfgA)
	b = startHub(t, cfgB)
	for _, th := range []*testHub{a, b} {
		require.Eventually(t, func() bool { return len(th.remoteInstances()) == 1 }, wait, time.Millisecond,
			"instance %s never heard the other", shortID(th.ID()))
	}
	return a, b, ha, hb
}

// isKind reports whether an envelope on the wire is of kind.
func isKind(payload []byte, kind string) bool {
	return bytes.HasPrefix(payload, []byte(`{"k":"`+kind+`"`))
}

// The caller's cancellation used to cancel the publish of its call too: a
// publish that Redis had carried out but reported as cancelled counted as
// "not sent", and no cancellation followed, so the server worked on for no
// one (10 of 25 runs under CPU load). hookBroker plays Redis: the call goes
// out, and Publish reports the caller's cancellation.
func TestCluster_cancelDuringPublishReachesTheServer(t *testing.T) {
	t.Parallel()
	a, b, ha, _ := startPair(t, Config{})
	working := make(chan struct{})
	defer close(working)
	srv := startRawServer(b, "b", `{"tools":{}}`, func(method string, _ json.RawMessage) string {
		switch method {
		case mcp.MethodToolsList:
			return `{"tools":[{"name":"block","inputSchema":{"type":"object"}}]}`
		case mcp.MethodToolsCall:
			<-working // until the test ends: only a cancellation frees the caller
		}
		return ""
	})
	a.waitServer("b", 1)

	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(ctx context.Context, topic string, payload []byte) error {
		if !isKind(payload, envCall) {
			return nil
		}
		once.Do(func() { close(held) })
		<-release
		return ctx.Err() // Redis wrote it; the caller's context ended meanwhile
	}
	ha.beforePublish.Store(&hook)

	c := a.client(nil)
	ctx, cancel := context.WithCancel(ctxFor(t))
	errc := make(chan error, 1)
	go func() { _, err := c.CallTool(ctx, "b__block", nil, nil); errc <- err }()
	<-held
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	require.Eventually(t, func() bool {
		a.cluster.mu.Lock()
		defer a.cluster.mu.Unlock()
		return len(a.cluster.calls) == 0
	}, wait, time.Millisecond, "A took the client's cancellation")
	close(release)

	id := <-srv.calls
	select {
	case got := <-srv.cancels:
		assert.Equal(t, id, got, "the server was told to stop that call")
	case <-time.After(wait):
		t.Fatal("the cancellation never crossed to the server's instance")
	}
}

// Any failure to publish a call used to count as "not sent": the caller
// got -32000 and no cancellation followed, although the broker may have
// delivered the call (a publish that timed out after its write), and the
// server worked on for no one. Only pubsub.ErrNotSent means not sent now;
// any other failure fails the call and cancels it at the other instance.
func TestCluster_unconfirmedCallIsCancelled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		publish error // what the broker reports for the call
		sent    bool  // whether the call went out all the same
		message string
	}{
		{"delivered, then failed", errors.New("pubsub: publish: connection reset after the write"), true, "did not confirm delivery"},
		{"certainly not sent", fmt.Errorf("%w: redis is down", pubsub.ErrNotSent), false, "broker is unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b, ha, _ := startPair(t, Config{})
			working := make(chan struct{})
			defer close(working)
			srv := startRawServer(b, "b", `{"tools":{}}`, func(method string, _ json.RawMessage) string {
				switch method {
				case mcp.MethodToolsList:
					return `{"tools":[{"name":"block","inputSchema":{"type":"object"}}]}`
				case mcp.MethodToolsCall:
					<-working // only a cancellation ends the call
				}
				return ""
			})
			a.waitServer("b", 1)
			hook := func(ctx context.Context, topic string, payload []byte) error {
				if isKind(payload, envCall) {
					return tc.publish
				}
				return nil
			}
			ha.beforePublish.Store(&hook)

			_, err := a.client(nil).CallTool(ctxFor(t), "b__block", nil, nil)
			assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "%v", err)
			assert.ErrorContains(t, err, tc.message)
			if !tc.sent {
				select {
				case id := <-srv.calls:
					t.Fatalf("the server got call %v that was never sent", id)
				default:
				}
				return
			}
			id := <-srv.calls
			select {
			case got := <-srv.cancels:
				assert.Equal(t, id, got, "the server was told to stop that call")
			case <-time.After(wait):
				t.Fatal("the call may have been delivered, but no cancellation followed it")
			}
		})
	}
}

// farEcho runs the demo server "far" on b and returns a call of its echo
// tool by a client of a, which has answered once.
func farEcho(t *testing.T, a, b *testHub) (echo func() error) {
	t.Helper()
	b.runServer(demo.New(&demo.Options{Name: "far", ClockInterval: time.Hour}).Server, "far")
	a.waitServer("far", 1)
	c := a.client(nil)
	echo = func() error {
		_, err := c.CallTool(ctxFor(t), "far__echo", map[string]string{"text": "x"}, nil)
		return err
	}
	require.NoError(t, echo())
	return echo
}

// callAfterReconnection plays a broker outage after which A's connection
// is back and B's subscriptions are not, starts echo from A and returns its
// outcome once A holds the call.
func callAfterReconnection(t *testing.T, a, b *testHub, hb *hookBroker, echo func() error) <-chan error {
	t.Helper()
	hb.deaf.Store(true)
	b.cluster.brokerState(false)
	a.cluster.brokerState(false)
	a.cluster.brokerState(true)
	errc := make(chan error, 1)
	go func() { errc <- echo() }()
	require.Eventually(t, func() bool {
		a.cluster.mu.Lock()
		defer a.cluster.mu.Unlock()
		return len(a.cluster.calls) == 1
	}, wait, time.Millisecond, "the call is held")
	return errc
}

// After a broker outage an instance used to publish to another's inbox as
// soon as its own connection was back, before the other had resubscribed,
// and the message vanished: the call got no answer for the call timeout. A
// call now waits until the other instance is heard again.
func TestCluster_callAfterReconnectionWaitsForTheOtherInstance(t *testing.T) {
	t.Parallel()
	a, b, _, hb := startPair(t, Config{CallTimeout: 5 * time.Minute})
	echo := farEcho(t, a, b)

	// Redis restarts: B's subscription is not back yet, A's connection is.
	errc := callAfterReconnection(t, a, b, hb, echo)

	// B resubscribes, and says so.
	hb.deaf.Store(false)
	b.cluster.brokerState(true)
	select {
	case err := <-errc:
		require.NoError(t, err, "the call reached B once B listened again")
	case <-time.After(wait):
		t.Fatal("the call vanished: it was sent before B listened again")
	}
}

// A call held after a reconnection, until the other instance is heard,
// used to wait for as long as that instance stayed deaf: a Redis Cluster
// failover of 12 s under load held one for longer than the test waited
// (TestRedisCluster_shardMasterKilled, once in 20 runs of make stress),
// where every other call failed fast. An instance that says it is deaf now
// gets nothing: what was held for it fails at once, clearly, and so do new
// calls, until it listens again.
func TestCluster_callsToADeafInstanceFailFast(t *testing.T) {
	t.Parallel()
	a, b, _, hb := startPair(t, Config{CallTimeout: time.Minute})
	echo := farEcho(t, a, b)
	notListening := func(err error) {
		t.Helper()
		var rpcErr *jsonrpc.Error
		require.ErrorAs(t, err, &rpcErr)
		assert.Equal(t, mcp.CodeConnectionClosed, rpcErr.Code)
		assert.JSONEq(t, `{"reason":"instance not listening"}`, string(rpcErr.Data), "%s", rpcErr.Message)
	}

	// A reconnects and holds a call until it hears B; B's subscriptions
	// are down.
	errc := callAfterReconnection(t, a, b, hb, echo)

	// B says it is alive but deaf: the held call fails now.
	b.cluster.heartbeat()
	select {
	case err := <-errc:
		notListening(err)
	case <-time.After(wait):
		t.Fatal("the held call waits on for an instance that said it cannot hear")
	}
	start := time.Now()
	notListening(echo())
	assert.Less(t, time.Since(start), wait, "a new call fails at once")

	// B listens again, and says so: calls go through.
	hb.deaf.Store(false)
	b.cluster.brokerState(true)
	require.Eventually(t, func() bool { return echo() == nil }, wait, 10*time.Millisecond, "calls reach B again")
}

// An answer that the broker did not take was lost, and its caller waited
// for the call timeout: under load, a Redis Cluster failover left an
// instance routing its publishes to the dead master for seconds after its
// subscriptions had moved (TestRedisCluster_shardMasterKilled, once in 30
// runs under load, with one call waiting its 10 s). An answer is posted
// again until the broker takes it.
func TestCluster_answerPostedAgainUntilTheBrokerTakesIt(t *testing.T) {
	t.Parallel()
	a, b, _, hb := startPair(t, Config{CallTimeout: 5 * time.Second})
	b.runServer(demo.New(&demo.Options{Name: "far", ClockInterval: time.Hour}).Server, "far")
	a.waitServer("far", 1)
	c := a.client(nil)
	var tries atomic.Int32
	hook := func(ctx context.Context, topic string, payload []byte) error {
		if isKind(payload, envResult) && tries.Add(1) <= 3 {
			return fmt.Errorf("%w: the route to the caller's inbox is down", pubsub.ErrNotSent)
		}
		return nil
	}
	hb.beforePublish.Store(&hook)
	res, err := c.CallTool(ctxFor(t), "far__echo", map[string]string{"text": "x"}, nil)
	require.NoError(t, err, "the answer reached the caller")
	assert.Equal(t, "x", res.Content[0].Text)
	assert.Equal(t, int32(4), tries.Load(), "three tries refused, the fourth taken")
}

// Others take any message of an instance on the registry for proof that it
// listens, and send it calls. After a reconnection, an instance used to
// publish its heartbeat, or a snapshot, while its subscriptions were not
// back, or before its hello: calls sent on that word were lost, or failed
// when the hello came. Before the hello it only says, deaf, that it is
// alive now.
func TestCluster_helloComesFirstAfterAReconnection(t *testing.T) {
	t.Parallel()
	_, b, _, hb := startPair(t, Config{})
	var mu sync.Mutex
	var kinds []string
	hook := func(ctx context.Context, topic string, payload []byte) error {
		if env, ok := decodeEnvelope(payload); ok && topic == topicRegistry {
			kind := env.Kind
			if env.Deaf {
				kind += " (deaf)"
			}
			mu.Lock()
			kinds = append(kinds, kind)
			mu.Unlock()
		}
		return nil
	}
	hb.beforePublish.Store(&hook)
	published := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(kinds)
	}

	// The broker connection drops: the publishing side is back before the
	// subscriptions are.
	b.cluster.brokerState(false)
	hb.notReady.Store(true)
	b.cluster.heartbeat()
	b.cluster.localChanged()
	require.Eventually(t, func() bool { return len(b.cluster.dirty) == 0 }, wait, time.Millisecond, "the loop took the change")
	// The subscriptions are back, and the broker says so.
	hb.notReady.Store(false)
	b.cluster.state <- true
	require.Eventually(t, func() bool { return slices.Contains(published(), envSnapshot) }, wait, time.Millisecond)
	assert.Equal(t, []string{envHeartbeat + " (deaf)", envHello, envSnapshot}, published(),
		"alive but deaf, then the hello, then the snapshot")

	// A deaf heartbeat keeps an instance alive for the others, but is no
	// proof that it listens: what is held for it stays held.
	c := b.cluster // reconnected above
	for _, hb := range []struct {
		from  string
		deaf  bool
		heard bool
	}{{"deaf-instance", true, false}, {"listening-instance", false, true}} {
		payload, err := (&envelope{Kind: envHeartbeat, From: hb.from, Deaf: hb.deaf}).encode()
		require.NoError(t, err)
		c.onRegistry(context.Background(), topicRegistry, payload)
		c.mu.Lock()
		heard := c.remotes[hb.from].heard == c.epoch
		c.mu.Unlock()
		assert.Equal(t, hb.heard, heard, "a heartbeat from %s", hb.from)
	}
}

// An instance that rejoins fails the calls it had sent, and says hello; the
// other gives up what it served for it. A call sent after the hello could
// reach the other first, and was then given up without an answer: its
// caller waited for the call timeout. It is answered -32000 now.
func TestCluster_aCallServedForARejoinedInstanceIsAnswered(t *testing.T) {
	t.Parallel()
	a, b, _, _ := startPair(t, Config{CallTimeout: 5 * time.Minute})
	blk := newBlocker("b")
	b.runServer(blk.Server, "b")
	a.waitServer("b", 1)
	c := a.client(nil)
	errc := make(chan error, 1)
	go func() { _, err := c.CallTool(ctxFor(t), "b__block", nil, nil); errc <- err }()
	<-blk.started

	hello, err := (&envelope{Kind: envHello, From: a.ID()}).encode()
	require.NoError(t, err)
	b.cluster.onRegistry(context.Background(), topicRegistry, hello) // A's hello, after its call
	select {
	case err := <-errc:
		assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "%v", err)
		assert.ErrorContains(t, err, "interrupted")
	case <-time.After(wait):
		t.Fatal("the call was given up without an answer")
	}
	select {
	case <-blk.cancelled:
	case <-time.After(wait):
		t.Fatal("the server was not told to stop")
	}
}

// An interruption ends the exchanges in flight on both sides at once, with
// a clear error, instead of leaving them to the call timeout.
func TestCluster_interruptionFailsCallsInFlight(t *testing.T) {
	t.Parallel()
	a, b, _, _ := startPair(t, Config{CallTimeout: 5 * time.Minute})
	blk := newBlocker("b")
	b.runServer(blk.Server, "b")
	a.waitServer("b", 1)
	c := a.client(nil)
	errc := make(chan error, 1)
	go func() { _, err := c.CallTool(ctxFor(t), "b__block", nil, nil); errc <- err }()
	<-blk.started

	a.cluster.brokerState(false) // A's connection drops: B's answer could be lost
	err := <-errc
	assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "%v", err)
	assert.ErrorContains(t, err, "interrupted")

	a.cluster.brokerState(true) // A is back and says hello: B gives up on A's call
	select {
	case <-blk.cancelled:
	case <-time.After(wait):
		t.Fatal("B kept serving a call whose caller had failed it")
	}
}

// callsServedByB makes n calls from a client of a to a server on b, whose
// tool "work" holds each until release is closed, and returns once all n
// run; results receives each call's outcome.
func callsServedByB(t *testing.T, a, b *testHub, n int) (release chan struct{}, results chan error) {
	t.Helper()
	started := make(chan struct{}, n)
	release, results = make(chan struct{}), make(chan error, n)
	s := mcp.NewServer(mcp.Implementation{Name: "w", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("finished")}}, nil
	})
	b.runServer(s, "w")
	a.waitServer("w", 1)
	c := a.client(nil)
	for range n {
		go func() {
			res, err := c.CallTool(ctxFor(t), "w__work", nil, nil)
			if err == nil && res.Content[0].Text != "finished" {
				err = fmt.Errorf("unexpected result %v", res.Content)
			}
			results <- err
		}()
	}
	for range n {
		<-started
	}
	return release, results
}

// Drain used to close the server connections as soon as this instance's
// own clients were idle, failing the calls it served for other instances.
func TestHub_drainWaitsForCallsOfOtherInstances(t *testing.T) {
	t.Parallel()
	a, b, _, _ := startPair(t, Config{})
	release, results := callsServedByB(t, a, b, 3)
	drained := make(chan error, 1)
	go func() { drained <- b.Drain(ctxFor(t)) }()
	require.Eventually(t, func() bool { return readyz(t, b) == http.StatusServiceUnavailable }, wait, time.Millisecond)
	select {
	case err := <-drained:
		t.Fatalf("the drain did not wait for the calls it serves for A: %v", err)
	case err := <-results:
		t.Fatalf("a call served for A ended during the drain: %v", err)
	default:
	}
	close(release)
	for range 3 {
		require.NoError(t, <-results)
	}
	require.NoError(t, <-drained)
}

// An instance's goodbye used to overtake the answers it had sent: its
// goodbye on the registry and its answers in another's inbox are delivered
// apart, and the instance that heard the goodbye first failed the calls
// whose answers were on their way ("instance gone"), after a drain had
// waited for them to be answered. Its servers still go at once.
func TestCluster_goodbyeWaitsForTheAnswersBeforeIt(t *testing.T) {
	t.Parallel()
	a, b, ha, _ := startPair(t, Config{})
	release, result := callsServedByB(t, a, b, 1)

	byeHeard := make(chan struct{})
	var once sync.Once
	hold := func(topic string, payload []byte, handle func()) {
		switch {
		case topic == topicRegistry && isKind(payload, envBye):
			handle()
			once.Do(func() { close(byeHeard) })
		case strings.HasPrefix(topic, topicInboxPrefix) && isKind(payload, envResult):
			<-byeHeard // B's answer arrives after its goodbye
			handle()
		default:
			handle()
		}
	}
	ha.aroundDeliver.Store(&hold)
	drained := make(chan error, 1)
	go func() { drained <- b.Drain(ctxFor(t)) }()
	close(release)
	require.NoError(t, <-result, "the answer B sent before it left")
	require.NoError(t, <-drained)
	a.waitServer("w", 0)
	require.Eventually(t, func() bool { return len(a.remoteInstances()) == 0 }, wait, time.Millisecond,
		"B's goodbye in A's inbox, behind its answer, ends it")
}

// An instance whose goodbye in this one's inbox is lost is forgotten when
// its heartbeats are missed, as a silent one: its servers at once, on its
// goodbye on the registry.
func TestCluster_goodbyeLostInTheInbox(t *testing.T) {
	t.Parallel()
	a, b, ha, _ := startPair(t, Config{HeartbeatInterval: 20 * time.Millisecond})
	b.runServer(demo.New(&demo.Options{Name: "far", ClockInterval: time.Hour}).Server, "far")
	a.waitServer("far", 1)
	lose := func(topic string, payload []byte, handle func()) {
		if strings.HasPrefix(topic, topicInboxPrefix) && isKind(payload, envBye) {
			return
		}
		handle()
	}
	ha.aroundDeliver.Store(&lose)
	require.NoError(t, b.Close())
	a.waitServer("far", 0)
	require.Eventually(t, func() bool { return len(a.remoteInstances()) == 0 }, wait, time.Millisecond,
		"forgotten once its heartbeats are missed")
}

// A call served for another instance used to stop counting as served as
// soon as the server answered, before its answer was published: a drain
// that looked then found the instance idle and closed it, the answer was
// lost, and the caller heard "instance left". It counts until the answer
// is out.
func TestHub_drainWaitsUntilTheAnswerIsPublished(t *testing.T) {
	t.Parallel()
	a, b, _, hb := startPair(t, Config{})
	started, release := make(chan struct{}), make(chan struct{})
	s := mcp.NewServer(mcp.Implementation{Name: "w", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "work"}, func(ctx context.Context, req *mcp.ToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent("finished")}}, nil
	})
	b.runServer(s, "w")
	a.waitServer("w", 1)
	held, publish := make(chan struct{}), make(chan struct{})
	hook := func(ctx context.Context, topic string, payload []byte) error {
		if isKind(payload, envResult) {
			close(held)
			<-publish
		}
		return nil
	}
	hb.beforePublish.Store(&hook)

	c := a.client(nil)
	result := make(chan error, 1)
	go func() {
		res, err := c.CallTool(ctxFor(t), "w__work", nil, nil)
		if err == nil && res.Content[0].Text != "finished" {
			err = fmt.Errorf("unexpected result %v", res.Content)
		}
		result <- err
	}()
	<-started
	drained := make(chan error, 1)
	go func() { drained <- b.Drain(ctxFor(t)) }()
	require.Eventually(t, func() bool { return readyz(t, b) == http.StatusServiceUnavailable }, wait, time.Millisecond)
	close(release)
	<-held // the server answered; its answer is on its way to A
	assert.False(t, b.idle(), "an answer not yet published counts as work in flight")
	select {
	case err := <-drained:
		t.Fatalf("the drain ended before the answer was published: %v", err)
	default:
	}
	close(publish)
	require.NoError(t, <-result, "the caller got the answer")
	require.NoError(t, <-drained)
}

// rawServer is a server connection scripted by a test: it answers the
// hub's requests from a function, each on a goroutine of its own (so that
// an answer may wait), and can send notifications.
type rawServer struct {
	t       *testing.T
	conn    *peer.WebSocket
	writeMu sync.Mutex
	seen    chan string     // "method uri" of each resources/(un)subscribe
	calls   chan jsonrpc.ID // the id of each tools/call
	cancels chan jsonrpc.ID // the requestId of each notifications/cancelled
}

// startRawServer connects a raw server named name. answer returns a
// request's result (JSON); nil answers {} (and, for list methods, an empty
// list).
func startRawServer(th *testHub, name, caps string, answer func(method string, params json.RawMessage) string) *rawServer {
	th.t.Helper()
	return startRawServerWith(th, name, "", caps, answer)
}

// startRawServerWith is startRawServer with a token.
func startRawServerWith(th *testHub, name, token, caps string, answer func(method string, params json.RawMessage) string) *rawServer {
	t := th.t
	t.Helper()
	before := len(th.reg.view().servers[name])
	var opts *peer.DialOptions
	if token != "" {
		opts = &peer.DialOptions{Header: bearer(token)}
	}
	conn, err := peer.Dial(ctxFor(t), th.wsURL("/mcp/server?name="+name), opts)
	require.NoError(t, err)
	rs := &rawServer{t: t, conn: conn, seen: make(chan string, 64), calls: make(chan jsonrpc.ID, 64), cancels: make(chan jsonrpc.ID, 64)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		conn.Close(peer.CloseNormal, "")
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			b, err := conn.Read(context.Background())
			if err != nil {
				return
			}
			m, err := jsonrpc.DecodeMessage(b)
			if err != nil {
				return
			}
			req, ok := m.(*jsonrpc.Request)
			if ok && req.Method == mcp.NotificationCancelled {
				var p mcp.CancelledParams
				json.Unmarshal(req.Params, &p)
				rs.cancels <- p.RequestID
			}
			if !ok || req.IsNotification() {
				continue
			}
			if req.Method == mcp.MethodToolsCall {
				rs.calls <- req.ID
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := ""
				switch req.Method {
				case mcp.MethodInitialize:
					res = `{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"serverInfo":{"name":"` + name + `","version":"1"}}`
				case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
					uri, _ := jsonrpc.StringMember(req.Params, "uri")
					rs.seen <- req.Method + " " + uri
				}
				if res == "" && answer != nil {
					res = answer(req.Method, req.Params)
				}
				if res == "" {
					res = `{}`
				}
				rs.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, res))
			}()
		}
	}()
	th.waitFor(name+" registered", func(v *view) bool { return len(v.servers[name]) > before })
	return rs
}

func (rs *rawServer) write(frame string) {
	rs.writeMu.Lock()
	defer rs.writeMu.Unlock()
	rs.conn.Write(context.Background(), []byte(frame))
}

// expect waits for the next subscription change the server saw.
func (rs *rawServer) expect(what string) {
	rs.t.Helper()
	select {
	case got := <-rs.seen:
		assert.Equal(rs.t, what, got)
	case <-time.After(wait):
		rs.t.Fatalf("the server never saw %s", what)
	}
}

// expectSet waits for the next len(whats) subscription changes the server
// saw, in any order.
func (rs *rawServer) expectSet(whats ...string) {
	rs.t.Helper()
	var got []string
	for range whats {
		select {
		case g := <-rs.seen:
			got = append(got, g)
		case <-time.After(wait):
			rs.t.Fatalf("the server saw %v of %v", got, whats)
		}
	}
	assert.ElementsMatch(rs.t, whats, got)
}

// expectNothing checks that the server saw no subscription change so far.
func (rs *rawServer) expectNothing() {
	rs.t.Helper()
	select {
	case got := <-rs.seen:
		rs.t.Errorf("unexpected %s", got)
	default:
	}
}

const subscribableCaps = `{"resources":{"subscribe":true,"listChanged":true}}`

func listing(uris ...string) func(string, json.RawMessage) string {
	return func(method string, _ json.RawMessage) string {
		if method != mcp.MethodResourcesList {
			return ""
		}
		var items []string
		for _, u := range uris {
			items = append(items, fmt.Sprintf(`{"uri":%q,"name":"r"}`, u))
		}
		return `{"resources":[` + strings.Join(items, ",") + `]}`
	}
}

// A replica joining later used to take over a subscribed resource when its
// ID sorted first as a string (".../12" before ".../4"): the new one was
// subscribed and the old one never unsubscribed, so the resource stayed
// subscribed upstream after the last client left.
func TestSubscriptions_aJoiningReplicaTakesNothingOver(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.seq.Add(5) // the first replica's number has one digit, above 1
	x := startRawServer(th, "rc", subscribableCaps, listing("rc://x"))
	c := th.client(nil)
	require.NoError(t, c.Subscribe(ctxFor(t), "rc://x"))
	x.expect("resources/subscribe rc://x")

	first := th.reg.view().servers["rc"][0]
	th.seq.Add(100) // the next replica's ID sorts before the first's as a string
	y := startRawServer(th, "rc", subscribableCaps, listing("rc://x"))
	v := th.reg.view()
	require.Len(t, v.servers["rc"], 2)
	require.Less(t, v.servers["rc"][0].ID, first.ID, "the newcomer's ID sorts first")
	assert.Same(t, first, coordinator(v, "rc", "rc://x"), "the first replica keeps coordinating")
	_, replicas := th.subs.coordOf("rc://x")
	assert.Equal(t, 1, replicas)

	require.NoError(t, c.Unsubscribe(ctxFor(t), "rc://x"))
	x.expect("resources/unsubscribe rc://x")
	y.expectNothing()
	_, replicas = th.subs.coordOf("rc://x")
	assert.Zero(t, replicas, "nothing stays subscribed upstream")
}

// When the coordinator does change while the previous one is still there
// (an older replica starts listing the resource), the previous one is
// released: a resource is never subscribed twice, and subscribers never
// get each update twice.
func TestSubscriptions_aMovedCoordinatorIsReleased(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	var ylists atomic.Bool
	y := startRawServer(th, "mv", subscribableCaps, func(method string, p json.RawMessage) string {
		if ylists.Load() {
			return listing("mv://r")(method, p)
		}
		return ""
	})
	x := startRawServer(th, "mv", subscribableCaps, listing("mv://r"))
	c := th.client(nil)
	require.NoError(t, c.Subscribe(ctxFor(t), "mv://r"))
	x.expect("resources/subscribe mv://r") // the only one that lists it

	ylists.Store(true)
	y.write(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
	y.expect("resources/subscribe mv://r") // the oldest that lists it now
	x.expect("resources/unsubscribe mv://r")
	_, replicas := th.subs.coordOf("mv://r")
	assert.Equal(t, 1, replicas)

	require.NoError(t, c.Unsubscribe(ctxFor(t), "mv://r"))
	y.expect("resources/unsubscribe mv://r")
	x.expectNothing()
}

// A replica used to be told to subscribe while the unsubscribe of its last
// subscriber was still under way, and a server that carried out the two in
// the other order was left unsubscribed: the resource's subscribers never
// got another update, and nothing said so (make stress,
// TestSubscriptions_renewedWhenTheCoordinatorRejoins: B dropped A's
// subscription and took A's new ask a moment later). Here a client
// subscribes again while the server still works on the unsubscribe, which
// it carries out after it has taken the subscribe: the subscribe now goes
// out after the unsubscribe's answer.
func TestSubscriptions_subscribeAgainWhileTheUnsubscribeIsUnderWay(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	var subscribed atomic.Bool
	release, unsubscribed := make(chan struct{}), make(chan struct{}, 1)
	x := startRawServer(th, "rc", subscribableCaps, func(method string, p json.RawMessage) string {
		switch method {
		case mcp.MethodResourcesSubscribe:
			subscribed.Store(true)
		case mcp.MethodResourcesUnsubscribe:
			<-release
			subscribed.Store(false)
			select {
			case unsubscribed <- struct{}{}:
			default:
			}
		}
		return listing("rc://x")(method, p)
	})
	notes := newNotes()
	c := th.client(&mcp.ClientOptions{OnNotification: notes.add})
	require.NoError(t, c.Subscribe(ctxFor(t), "rc://x"))
	x.expect("resources/subscribe rc://x")
	require.NoError(t, c.Unsubscribe(ctxFor(t), "rc://x"))
	x.expect("resources/unsubscribe rc://x")

	require.NoError(t, c.Subscribe(ctxFor(t), "rc://x"))
	close(release)
	within(t, unsubscribed, "the server never carried out the unsubscribe")
	x.expect("resources/subscribe rc://x")
	require.Eventually(t, subscribed.Load, wait, time.Millisecond, "the server is left unsubscribed")
	x.write(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"rc://x"}}`)
	notes.wait(t, mcp.NotificationResourceUpdated, 1, nil)
	_, replicas := th.subs.coordOf("rc://x")
	assert.Equal(t, 1, replicas)
}

// A subscribe that raced with its session's end used to stay registered for
// ever, and its upstream subscription was never released.
func TestSubscriptions_subscribeAfterTheSessionEnded(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	x := startRawServer(th, "rc", subscribableCaps, listing("rc://x"))
	c := th.client(nil)
	ss := th.sessionList()[0]
	require.NoError(t, c.Close())
	require.Eventually(t, ss.closed.Load, wait, time.Millisecond)

	err := th.subs.subscribe(ctxFor(t), ss, "rc://x")
	assert.Equal(t, mcp.CodeConnectionClosed, rpcCode(err), "%v", err)
	th.subs.mu.Lock()
	assert.Empty(t, th.subs.bySession[ss])
	assert.Empty(t, th.subs.local)
	th.subs.mu.Unlock()
	x.expectNothing()
}

// A client's close used to wait, up to the call timeout, for a re-ask of
// its subscription still in flight at a slow server.
func TestSubscriptions_closeDoesNotWaitForASlowServer(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CallTimeout: 5 * time.Minute})
	var ylists atomic.Bool
	slow := make(chan struct{})
	y := startRawServer(th, "mv", subscribableCaps, func(method string, p json.RawMessage) string {
		if method == mcp.MethodResourcesSubscribe {
			<-slow
		}
		if ylists.Load() {
			return listing("mv://r")(method, p)
		}
		return ""
	})
	defer close(slow)
	x := startRawServer(th, "mv", subscribableCaps, listing("mv://r"))
	c := th.client(nil)
	require.NoError(t, c.Subscribe(ctxFor(t), "mv://r"))
	x.expect("resources/subscribe mv://r")
	ylists.Store(true)
	y.write(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`)
	y.expect("resources/subscribe mv://r") // and it does not answer

	require.NoError(t, c.Close())
	require.Eventually(t, func() bool {
		th.mu.Lock()
		defer th.mu.Unlock()
		return len(th.sessions) == 0
	}, wait, time.Millisecond, "the session ended without waiting for the server")
}

func TestErrors_sayWhatWentWrong(t *testing.T) {
	t.Parallel()
	e := jsonrpc.ErrorOf(errServerGone(""))
	assert.Equal(t, mcp.CodeConnectionClosed, e.Code)
	assert.NotContains(t, e.Message, `""`, "no empty server name")
	assert.Empty(t, e.Data, "nor an empty server in data")
	e = jsonrpc.ErrorOf(errServerGone("weather"))
	assert.Contains(t, e.Message, `"weather"`)
	e = jsonrpc.ErrorOf(errBrokerDown(fmt.Errorf("%w: redis publish at 10.0.0.1:6379: connection refused", pubsub.ErrUnavailable)))
	assert.Contains(t, string(e.Data), "connection refused", "the cause is kept")
}

// registerRaw dials instance th as a server named name with token, answers
// the hub's initialize, and reports whether the hub registered it (true)
// or closed it (false, with the close error).
func registerRaw(th *testHub, name, token string) (bool, error) {
	t := th.t
	conn, err := peer.Dial(ctxFor(t), th.wsURL("/mcp/server?name="+name), &peer.DialOptions{Header: bearer(token)})
	if err != nil {
		return false, err
	}
	t.Cleanup(func() { conn.Close(peer.CloseNormal, "") })
	for {
		b, err := conn.Read(ctxFor(t))
		if err != nil {
			return false, err
		}
		m, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return false, err
		}
		req, ok := m.(*jsonrpc.Request)
		if !ok || req.IsNotification() {
			continue
		}
		answer := `"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}`
		switch req.Method {
		case mcp.MethodServerDiscover: // a server of the session revisions
			answer = `"error":{"code":-32601,"message":"Method not found"}`
		case mcp.MethodInitialize:
		default:
			// The hub lists only after the name is its: registered.
			return true, nil
		}
		if err := conn.Write(ctxFor(t), []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,%s}`, req.ID, answer))); err != nil {
			return false, err
		}
	}
}

// Two tokens both allowed a name used to register it at the same moment on
// two instances, both accepted in 2 to 4 trials of 5, and calls split
// between them. The name's lease in the broker lets exactly one win.
func TestCluster_aNameIsClaimedOnce(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	tokens := writeTokens(t, `
tokens:
  - {name: first, token: first-secret, roles: [server], servers: ["acme*"]}
  - {name: second, token: second-secret, roles: [server], servers: ["acme*"]}
`)
	a := startHubOn(t, rs, prefix, Config{Tokens: tokens})
	b := startHubOn(t, rs, prefix, Config{Tokens: tokens})
	for trial := range 5 {
		name := fmt.Sprintf("acme-%d", trial)
		type outcome struct {
			ok  bool
			err error
		}
		results := make(chan outcome, 2)
		var start sync.WaitGroup
		start.Add(1)
		for _, d := range []struct {
			th    *testHub
			token string
		}{{a, "first-secret"}, {b, "second-secret"}} {
			go func() {
				start.Wait()
				ok, err := registerRaw(d.th, name, d.token)
				results <- outcome{ok, err}
			}()
		}
		start.Done()
		won := 0
		for range 2 {
			o := <-results
			if o.ok {
				won++
				continue
			}
			assert.Equal(t, peer.ClosePolicyViolation, peer.CloseStatus(o.err), "trial %d: %v", trial, o.err)
			assert.ErrorContains(t, o.err, "held by another token")
		}
		assert.Equal(t, 1, won, "trial %d: exactly one owner of %s", trial, name)
	}
}

// Calls sent just after Redis restarts used to vanish (6 to 12 per run of
// five restarts got no answer for the call timeout): an instance published
// to another's inbox before that one had resubscribed. Every call now gets
// an answer within seconds while the cluster re-forms: success, or a clear
// refusal (-32000, or -32602 once the other instance went silent for long
// enough to be dropped, and its tools with it); and once both instances are
// back and have heard each other, every call succeeds.
func TestCluster_callsAroundRedisRestarts(t *testing.T) {
	t.Parallel()
	// The instances beat at the command's pace: at the tests' 100 ms, a
	// scheduler starved for 300 ms (make stress) rightly drops the other
	// instance, and the calls after the cluster re-formed would not all
	// succeed for that reason, which is not the one under test.
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	a := startHubOn(t, rs, prefix, Config{HeartbeatInterval: DefaultHeartbeatInterval})
	b := startHubOn(t, rs, prefix, Config{HeartbeatInterval: DefaultHeartbeatInterval})
	b.runServer(demo.New(&demo.Options{Name: "far", ClockInterval: time.Hour}).Server, "far")
	a.waitServer("far", 1)
	c := a.client(nil)
	const answerWithin = 5 * time.Second
	// burst makes 10 calls at once and returns how many were refused.
	refusal := func(err error) bool {
		code := rpcCode(err)
		return code == mcp.CodeConnectionClosed || code == jsonrpc.CodeInvalidParams
	}
	burst := func(round int, when string) int {
		var wg sync.WaitGroup
		var ok, refused atomic.Int64
		var why atomic.Value
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
				defer cancel()
				_, err := c.CallTool(ctx, "far__echo", map[string]string{"text": fmt.Sprint(round, i)}, nil)
				switch {
				case err == nil:
					ok.Add(1)
				case refusal(err):
					refused.Add(1)
					why.Store(err.Error())
				default:
					t.Errorf("round %d, %s: a call got no answer within %v: %v", round, when, answerWithin, err)
				}
			}()
		}
		wg.Wait()
		t.Logf("round %d, %s: %d answered, %d refused (%v)", round, when, ok.Load(), refused.Load(), why.Load())
		return int(refused.Load())
	}
	for round := range 3 {
		epochs := [2]uint64{a.cluster.brokerEpoch(), b.cluster.brokerEpoch()}
		rs.Stop()
		require.Eventually(t, func() bool { return readyz(t, a) == http.StatusServiceUnavailable }, wait, 5*time.Millisecond)
		rs.Restart()
		burst(round, "while the instances reconnect")
		require.Eventually(t, func() bool { return readyz(t, a) == http.StatusOK }, wait, time.Millisecond)
		burst(round, "as soon as A is back, perhaps before B")
		// The cluster has re-formed once each instance has taken its
		// reconnection in (and said hello) and heard the other since.
		require.Eventually(t, func() bool {
			return a.cluster.rejoined(epochs[0], b.ID()) && b.cluster.rejoined(epochs[1], a.ID())
		}, wait, time.Millisecond, "round %d: the cluster never re-formed", round)
		a.waitServer("far", 1)
		assert.Zero(t, burst(round, "once both are back"), "round %d: calls refused after the cluster re-formed", round)
	}
}

// brokerEpoch returns how many times the instance has (re)connected to the
// broker.
func (c *cluster) brokerEpoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// rejoined reports whether the instance has taken in a reconnection since
// epoch, is connected, and has heard instance since.
func (c *cluster) rejoined(epoch uint64, instance string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.remotes[instance]
	return c.brokerUp && c.epoch > epoch && r != nil && r.heard == c.epoch
}
