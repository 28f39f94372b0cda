// Package peer is a symmetric JSON-RPC 2.0 peer over a frame connection.
//
// Every connection of the hub is a [Peer]: it sends calls and notifications
// and answers the other side's, matching responses to calls by id. The
// package knows nothing of MCP or Redis; it moves messages.
//
// # Connections
//
// A [Conn] reads and writes whole frames. [Accept] and [Dial] give a
// [WebSocket] conn on github.com/coder/websocket (subprotocol "mcp", a read
// limit, keepalive pings, and close codes 1003, 1007, 1009 and 1008 with a
// reason); [Pipe] gives an in-memory pair for tests, which carries close codes
// the same way; [NewStdio] gives a conn over a byte stream in the stdio framing
// of MCP (one message per line), for a program launched by a client or a
// server launched as a child process.
//
// # Calls
//
// [Peer.Call] sends a request with an id from an atomic counter and waits for
// its answer. If the call's context ends first, the call leaves the pending
// map at once and Options.OnCancel fires, so that a protocol above can tell
// the other side (MCP sends notifications/cancelled). [Peer.CallID] with
// [Peer.NextID] lets a caller learn the id before the request goes out.
// [Peer.CallBorrowing] leaves the result undecoded in an [Answer], in the
// buffer the answer was read into, which [Answer.Release] gives back: on
// a WebSocket, a caller that releases each answer reads a stream of large
// results without a buffer allocated for each.
//
// # Handlers and concurrency
//
// Incoming calls go to a [Handler]. Up to Options.MaxConcurrent handlers run
// at once; further calls wait in a queue, up to Options.MaxPending, and calls
// beyond that are refused at once with Options.Overloaded. Answers go out as
// handlers finish, in any order; an incoming batch is answered with one array
// once every call in it is answered, by a handler or through an
// [AsyncHandler]'s Reply (which takes a batch's calls as any others). Notifications are handled on the read
// loop, one at a time and in order, which keeps a progress report ahead of the
// response that follows it. [Peer.Cancel] cancels an incoming call's context;
// its answer is then not sent. With Options.LendRequests a handler is lent
// its request: on a WebSocket the call is read into a pooled buffer, given
// back once the answer is written, and the handler copies what it keeps
// beyond that.
//
// # Writing and slow consumers
//
// One writer goroutine per peer drains a bounded queue, and exists only while
// there is something to write (to a [DirectConn], whose writes cost a lock,
// a call or an answer with nothing queued before it is written by its
// sender). A peer that stops reading until the queue
// overflows (Options.SendQueue frames or Options.SendQueueBytes bytes) is
// closed with 1008 "slow consumer": senders never block on it.
//
// # Closing
//
// [Peer.Close] and [Peer.CloseWith] fail every pending call at once with an
// error matching [ErrClosed] (-32000, "connection closed"), cancel handlers'
// contexts, send what is queued for up to Options.FlushTimeout and close the
// connection. [Peer.Wait] returns when every goroutine of the peer has ended.
//
// # Reading the source
//
// Each file holds one concern of the [Peer]:
//
//   - options.go: [Options], their defaults and withDefaults.
//   - peer.go: the Peer type and its state, [New], [Peer.Start], [FromContext]
//     and the accounting of the peer's goroutines (for [Peer.Wait] and OnDone).
//   - calls.go: outgoing messages: [Peer.Call], [Peer.CallID],
//     [Peer.CallBorrowing] and its [Answer], [Peer.Go], [Peer.GoRenamed],
//     [Peer.GoBorrowing], [Peer.Abort], [Peer.Notify], [Peer.SendEncoded],
//     and the pending map.
//   - write.go: the send queue, the slow consumer rule, inline writes and the
//     writer goroutine.
//   - frames.go: the buffers of the peer's own calls and answers, taken back
//     once written when the conn keeps nothing of a frame (a WebSocket,
//     stdio); and of the answers read for a done or a caller that borrows
//     them.
//   - read.go: the read loop, and what it does with each frame: responses to
//     the pending calls, notifications to the handler, calls to handlers.go;
//     a frame read into a pooled buffer is given back once nothing refers to
//     it (pooledReader).
//   - direct.go: [DirectConn] and its [Feed]: a conn whose own goroutines
//     hand the peer its frames (and say when it ends, and when it has gone
//     quiet), and whose writes take the queue's place.
//   - handlers.go: incoming calls: [Handler], [AsyncHandler] and [Reply]
//     (which holds the pooled buffer of the call it answers until
//     [Reply.Release]), the worker pool, batches, [Peer.Cancel] and
//     [Peer.Pending].
//   - close.go: [Peer.Close], [Peer.CloseWith], shutdown, [Peer.Done],
//     [Peer.Err] and [Peer.Wait].
//   - stdio.go: [Stdio], a Conn over a byte stream in MCP's stdio framing
//     (one message a line), for a program launched by a client and for
//     one that launches a server.
//   - conn.go, websocket.go, cork*.go, pipe.go: the connection under a peer
//     ([Conn], [WebSocket], [Pipe]).
//   - idle_linux.go (idle_other.go elsewhere): the reader of a quiet
//     accepted WebSocket leaves, and one is started again when the socket
//     is readable: an idle connection holds no goroutine.
//   - keepalive.go: the WebSocket conns' pings, sent by one sweeper of the
//     process as each comes due, the first of each conn spread over its
//     interval so that clients that connected together are not pinged
//     together.
//
// # Locks
//
// One mutex, the Peer's mu, guards all in-flight state (pending and incoming
// calls, the work queue and workers, the send queue and the writer): every
// change happens under it in one short critical section, and a function whose
// name ends in Locked expects it held. The lock order is Peer.mu, then a
// [Reply]'s mu (Cancel and shutdown end a Reply while holding the peer's);
// Reply.Send releases the Reply's before it takes the peer's, and
// Reply.OnCancel never takes the peer's.
// Nothing runs under Peer.mu that can block or call out: the conn is read,
// written and closed without it, and handlers, callbacks (done, OnCancel,
// OnClose, a Reply's OnCancel) and hooks run after it is released. The
// conns' own locks are therefore never taken under it, but for a
// [DirectConn]'s WriteDirect, which never blocks nor calls back: the sender
// of a call or an answer writes it under the lock when nothing is queued. Peer.feedMu, held while a DirectConn's goroutine
// handles a frame through its [Feed] (a DirectConn has no read loop), comes
// before Peer.mu.
package peer
