// jsonrpc.js: the JSON-RPC 2.0 layer under switchboard.js. It knows the
// WebSocket, text frames and batches, request ids, pending calls with their
// timeouts and cancellation, and requests from the other side; it knows
// nothing of MCP's methods, which switchboard.js adds on top.
//
// switchboard.js re-exports the errors below; pages import that module, not
// this one.

/** JSON-RPC and MCP error codes this module produces or interprets. */
export const ErrorCode = Object.freeze({
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  CONNECTION_CLOSED: -32000,
  REQUEST_TIMEOUT: -32001,
  RESOURCE_NOT_FOUND: -32002,
  FORBIDDEN: -32003,
  RATE_LIMITED: -32004,
});

/**
 * RpcError is a JSON-RPC error: one the peer answered with, or one this
 * client raises itself (connection closed, timeout), with the same shape.
 */
export class RpcError extends Error {
  /**
   * @param {number} code JSON-RPC error code.
   * @param {string} message Human-readable message.
   * @param {unknown} [data] Structured detail, as the peer sent it.
   */
  constructor(code, message, data) {
    super(message);
    this.name = 'RpcError';
    /** @type {number} */
    this.code = code;
    /** @type {unknown} */
    this.data = data;
  }

  /** @returns {{code: number, message: string, data?: unknown}} the wire form. */
  toJSON() {
    const o = { code: this.code, message: this.message };
    if (this.data !== undefined) o.data = this.data;
    return o;
  }
}

/**
 * ConnectionClosedError rejects every request pending when the WebSocket
 * closes, and every request made while the client is not connected. Its code
 * is -32000 and its data carries the WebSocket close code and reason.
 */
export class ConnectionClosedError extends RpcError {
  /**
   * @param {string} message What happened.
   * @param {{closeCode?: number, reason?: string}} [data] The close frame.
   */
  constructor(message, data) {
    super(ErrorCode.CONNECTION_CLOSED, message, data);
    this.name = 'ConnectionClosedError';
  }
}

/** abortError is what a request aborted by signal rejects with. */
export const abortError = (signal) =>
  signal?.reason ?? new DOMException('The operation was aborted.', 'AbortError');

/**
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] Aborting it cancels the call.
 * @property {number} [timeoutMs] Cancel the call and reject with -32001 after
 *   this long (0: never).
 * @property {() => void} [onSettle] Runs once, synchronously, when the call
 *   leaves the pending calls (answered, cancelled, timed out, or failed).
 */

/**
 * @typedef {object} Hooks
 * @property {(method: string, params: any, ctx: {signal: AbortSignal, id: string|number, method: string}) => unknown} handle
 *   Answers a request from the other side: its result (or a promise of it)
 *   is sent back; what it throws is sent as the error (an RpcError keeps its
 *   code, anything else is -32603). ctx.signal is aborted when the request is
 *   cancelled (cancelIncoming) or the socket goes; the answer is then dropped.
 * @property {(id: string|number, method: string, params: any) => void} [onRequest]
 *   Sees each request from the other side before handle runs.
 * @property {(method: string, params: any) => void} [onNotification]
 *   Receives each notification.
 * @property {(id: number, reason: string) => void} [onCancel] Runs when a
 *   call is cancelled (aborted or timed out) before its answer came: the
 *   place to tell the other side. It must not throw.
 * @property {(error: Error) => void} [onError] Receives protocol trouble that
 *   fails no call (an unparseable frame, an answer that could not be sent).
 */

/**
 * JsonRpcSocket is a JSON-RPC 2.0 endpoint over one WebSocket at a time:
 * it sends calls and notifications, matches answers to calls by id, and
 * hands the other side's requests and notifications to its hooks.
 *
 * Ids come from one counter for the object's lifetime, so that they stay
 * unique across sockets. session counts sockets: it changes whenever a socket
 * is opened, abandoned, dropped or closed, and events of an older socket are
 * ignored.
 */
export class JsonRpcSocket {
  #WebSocket;
  #hooks;
  #ws = null;
  #nextId = 1;
  #session = 0; // bumped on every socket, so late callbacks of an old one are ignored
  /** @type {Map<number, {resolve: Function, reject: Function, cleanup: Function, method: string}>} */
  #pending = new Map();
  /** @type {Map<string|number, AbortController>} requests from the hub being handled */
  #incoming = new Map();

  /**
   * @param {typeof WebSocket} WebSocket The WebSocket constructor.
   * @param {Hooks} hooks
   */
  constructor(WebSocket, hooks) {
    this.#WebSocket = WebSocket;
    this.#hooks = hooks;
  }

  /** The number of the current socket (see the class comment). */
  get session() {
    return this.#session;
  }

  /** nextId returns the id of the next call, for callers that must know it first. */
  nextId() {
    return this.#nextId++;
  }

  /**
   * open opens a WebSocket and makes it the current one. onOpen(protocol)
   * runs when it opens and onClose({closeCode, reason}) when it closes,
   * unless another socket became current meanwhile. It returns the attempt:
   * abandon(code, reason) closes its socket and ignores it from then on;
   * error is what the WebSocket constructor threw, if it did.
   * @param {string} url
   * @param {string[]} protocols
   * @param {{onOpen: (protocol: string) => void, onClose: (detail: {closeCode: number, reason: string}) => void}} on
   * @returns {{error?: Error, abandon: (code: number, reason: string) => void}}
   */
  open(url, protocols, { onOpen, onClose }) {
    const session = ++this.#session;
    let ws;
    const abandon = (code, reason) => {
      if (this.#session === session) this.#session++;
      try {
        ws?.close(code, reason);
      } catch {
        /* not open yet */
      }
      if (this.#ws === ws) this.#ws = null;
    };
    try {
      ws = new this.#WebSocket(url, protocols);
    } catch (error) {
      return { error, abandon };
    }
    this.#ws = ws;
    ws.onmessage = (ev) => {
      if (this.#session === session) this.#onMessage(ev.data);
    };
    ws.onerror = () => {
      /* a close event follows, with the code */
    };
    ws.onclose = (ev) => {
      if (this.#session !== session) return;
      onClose({ closeCode: ev.code, reason: ev.reason });
    };
    ws.onopen = () => {
      if (this.#session !== session) return;
      onOpen(ws.protocol);
    };
    return { abandon };
  }

  /**
   * drop forgets a socket that closed by itself, and fails every call and
   * incoming request with err.
   * @param {Error} err
   */
  drop(err) {
    this.#ws = null;
    this.#session++;
    this.failAll(err);
  }

  /**
   * close closes the current socket with code and reason and forgets it.
   * Pending calls are left to failAll.
   * @param {number} code
   * @param {string} reason
   */
  close(code, reason) {
    const ws = this.#ws;
    this.#ws = null;
    this.#session++;
    if (ws) {
      try {
        ws.close(code, reason);
      } catch {
        /* already closing */
      }
    }
  }

  /**
   * failAll rejects every pending call with err and aborts every incoming
   * request being handled.
   * @param {Error} err
   */
  failAll(err) {
    for (const [, p] of this.#pending) {
      p.cleanup();
      p.reject(err);
    }
    this.#pending.clear();
    for (const [, ac] of this.#incoming) ac.abort(err);
    this.#incoming.clear();
  }

  /**
   * notify sends a notification; it throws a ConnectionClosedError when no
   * socket is open.
   * @param {string} method
   * @param {object} [params]
   */
  notify(method, params) {
    this.#write(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
  }

  /**
   * cancelIncoming aborts the signal of the incoming request id, if it is
   * being handled: its answer is then not sent.
   * @param {string|number} id
   * @param {unknown} reason
   */
  cancelIncoming(id, reason) {
    this.#incoming.get(id)?.abort(reason);
  }

  #write(msg) {
    const ws = this.#ws;
    if (!ws || ws.readyState !== 1) throw new ConnectionClosedError('not connected');
    ws.send(JSON.stringify(msg));
  }

  /**
   * call sends the request id (from nextId) and resolves with its result, or
   * rejects with the RpcError it was answered with, the signal's reason, a
   * timeout, or the ConnectionClosedError of failAll.
   * @param {number} id
   * @param {string} method
   * @param {object} [params]
   * @param {CallOptions} [options]
   * @returns {Promise<any>}
   */
  call(id, method, params, { signal, timeoutMs = 0, onSettle } = {}) {
    if (signal?.aborted) {
      onSettle?.();
      return Promise.reject(abortError(signal));
    }
    return new Promise((resolve, reject) => {
      let timer;
      const cancel = (reason, err) => {
        if (!this.#pending.has(id)) return;
        this.#pending.get(id).cleanup();
        this.#pending.delete(id);
        this.#hooks.onCancel?.(id, reason);
        reject(err);
      };
      const onAbort = () => cancel(String(signal.reason?.message ?? 'cancelled by the client'), abortError(signal));
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        onSettle?.();
      };
      this.#pending.set(id, { resolve, reject, cleanup, method });
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs > 0) {
        timer = setTimeout(
          () => cancel('request timed out', new RpcError(ErrorCode.REQUEST_TIMEOUT, `${method} timed out after ${timeoutMs} ms`, { timeoutMs })),
          timeoutMs,
        );
      }
      const msg = { jsonrpc: '2.0', id, method };
      if (params !== undefined) msg.params = params;
      try {
        this.#write(msg);
      } catch (err) {
        cleanup();
        this.#pending.delete(id);
        reject(err);
      }
    });
  }

  #emitError(error) {
    this.#hooks.onError?.(error);
  }

  #onMessage(data) {
    if (typeof data !== 'string') {
      this.#emitError(new RpcError(ErrorCode.PARSE_ERROR, 'binary frame ignored: MCP over WebSocket uses text frames'));
      return;
    }
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      this.#emitError(new RpcError(ErrorCode.PARSE_ERROR, 'unparseable frame from the hub'));
      return;
    }
    for (const m of Array.isArray(msg) ? msg : [msg]) this.#dispatch(m);
  }

  #dispatch(m) {
    if (m === null || typeof m !== 'object') return;
    if ('method' in m) {
      if ('id' in m && m.id !== null) this.#onRequest(m);
      else this.#hooks.onNotification?.(m.method, m.params ?? {});
      return;
    }
    const p = this.#pending.get(m.id);
    if (!p) return; // a late answer to a cancelled or timed-out request
    this.#pending.delete(m.id);
    p.cleanup();
    if (m.error) p.reject(new RpcError(m.error.code, m.error.message, m.error.data));
    else p.resolve(m.result);
  }

  async #onRequest(m) {
    const { id, method } = m;
    const params = m.params ?? {};
    this.#hooks.onRequest?.(id, method, params);
    const ac = new AbortController();
    this.#incoming.set(id, ac);
    const ws = this.#ws;
    let reply;
    try {
      const result = await this.#hooks.handle(method, params, { signal: ac.signal, id, method });
      reply = { jsonrpc: '2.0', id, result: result ?? {} };
    } catch (err) {
      const e = err instanceof RpcError ? err : new RpcError(ErrorCode.INTERNAL_ERROR, String(err?.message ?? err));
      reply = { jsonrpc: '2.0', id, error: e.toJSON() };
    } finally {
      this.#incoming.delete(id);
    }
    if (ac.signal.aborted || this.#ws !== ws) return; // cancelled, or the socket it came on is gone
    try {
      this.#write(reply);
    } catch (error) {
      this.#emitError(error);
    }
  }
}
