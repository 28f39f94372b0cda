// switchboard.js: a small, dependency-free MCP client for browsers (and Node
// 20+ given a WebSocket implementation), speaking JSON-RPC 2.0 over a
// WebSocket to a Switchboard hub (or any MCP server reachable over WebSocket
// with the "mcp" subprotocol).
//
// Usage:
//
//   import { SwitchboardClient } from './switchboard.js';
//   const client = new SwitchboardClient('ws://127.0.0.1:8080/mcp');
//   await client.connect();
//   const { tools } = await client.listTools();
//   const res = await client.callTool('demo__add', { a: 1, b: 2 });
//
// Authentication: browsers cannot set headers (such as Authorization) on a
// WebSocket handshake, so a token is sent as the `?token=` query parameter
// of the URL. Use wss:// whenever a token is involved, since the URL (and so
// the token) may end up in proxy and server logs.

/** The MCP protocol version this client asks for. */
export const PROTOCOL_VERSION = '2025-11-25';

/** The WebSocket subprotocol MCP-over-WebSocket uses. */
export const SUBPROTOCOL = 'mcp';

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

/** Connection states, in the order a healthy connection goes through them. */
export const State = Object.freeze({
  IDLE: 'idle',
  CONNECTING: 'connecting',
  OPEN: 'open',
  RECONNECTING: 'reconnecting',
  CLOSED: 'closed',
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

/**
 * @typedef {object} ReconnectOptions
 * @property {number} [initialDelayMs=500] Delay before the first retry.
 * @property {number} [maxDelayMs=15000] Upper bound of the delay.
 * @property {number} [factor=2] Growth of the delay after each failed attempt.
 * @property {number} [jitter=0.5] Fraction of the delay that is random
 *   (0: none; 1: anywhere between 0 and the delay), so that many clients do
 *   not reconnect in step after a hub restart.
 * @property {number} [maxAttempts=Infinity] Attempts before giving up (state
 *   becomes "closed").
 */

/**
 * @typedef {object} RequestOptions
 * @property {AbortSignal} [signal] Aborting it cancels the request: the
 *   client sends notifications/cancelled and rejects with the signal's reason.
 * @property {number} [timeoutMs] Reject with -32001 (and cancel upstream)
 *   after this long; default the client's requestTimeoutMs (0: never).
 * @property {(progress: ProgressParams) => void} [onProgress] Ask for
 *   progress (a progressToken in _meta) and receive each report.
 * @property {Record<string, unknown>} [meta] Extra _meta members.
 */

/**
 * @typedef {object} ProgressParams
 * @property {string|number} progressToken
 * @property {number} progress
 * @property {number} [total]
 * @property {string} [message]
 */

/**
 * @typedef {object} HandlerContext
 * @property {AbortSignal} signal Aborted when the requester cancels (or the
 *   connection drops); the answer is then discarded.
 * @property {string|number} id The request's id.
 * @property {string} method The request's method.
 */

/**
 * @callback RequestHandler
 * @param {any} params The request's params.
 * @param {HandlerContext} ctx
 * @returns {unknown|Promise<unknown>} The result; throw an RpcError to
 *   answer with a specific error code.
 */

/**
 * @typedef {object} Root
 * @property {string} uri A file:// URI.
 * @property {string} [name]
 */

/**
 * @typedef {object} ClientOptions
 * @property {string} [token] Sent as the ?token= query parameter (browsers
 *   cannot set headers on WebSockets).
 * @property {{name: string, title?: string, version: string}} [clientInfo]
 * @property {string} [protocolVersion] Default PROTOCOL_VERSION.
 * @property {RequestHandler} [onSampling] Answers sampling/createMessage;
 *   its presence declares the "sampling" capability.
 * @property {RequestHandler} [onElicitation] Answers elicitation/create;
 *   its presence declares the "elicitation" capability.
 * @property {Root[]|(() => Root[]|Promise<Root[]>)} [roots] Answers
 *   roots/list; its presence declares the "roots" capability (with
 *   listChanged: call setRoots to change them).
 * @property {Record<string, RequestHandler>} [handlers] Handlers of other
 *   server-to-client methods.
 * @property {boolean|ReconnectOptions} [reconnect=true] Reconnect after the
 *   connection drops (not after close()), re-initializing and
 *   re-subscribing.
 * @property {number} [requestTimeoutMs=0] Default timeout of each request.
 * @property {number} [connectTimeoutMs=10000] Bound on opening the socket
 *   and initializing.
 * @property {typeof WebSocket} [WebSocket] The WebSocket constructor;
 *   default globalThis.WebSocket (pass the `ws` package's in Node 20).
 */

/**
 * withToken returns url with ?token= set (or unchanged when token is empty).
 * @param {string} url A ws:// or wss:// URL.
 * @param {string} [token]
 * @returns {string}
 */
export function withToken(url, token) {
  if (!token) return url;
  const u = new URL(url);
  u.searchParams.set('token', token);
  return u.toString();
}

/**
 * defaultHubURL returns the /mcp endpoint of the hub that served the current
 * page (ws:// for http pages, wss:// for https), or of origin when given.
 * @param {string} [origin] e.g. "http://127.0.0.1:8080"; default the page's.
 * @returns {string}
 */
export function defaultHubURL(origin) {
  const base = origin ?? globalThis.location?.origin ?? 'http://127.0.0.1:8080';
  const u = new URL('/mcp', base);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.toString();
}

/**
 * backoffDelay is the delay before reconnect attempt n (0-based):
 * initialDelayMs * factor^n capped at maxDelayMs, of which the fraction
 * jitter is random.
 * @param {number} attempt
 * @param {ReconnectOptions} opts
 * @param {() => number} [random] Default Math.random.
 * @returns {number} milliseconds
 */
export function backoffDelay(attempt, opts = {}, random = Math.random) {
  const { initialDelayMs = 500, maxDelayMs = 15000, factor = 2, jitter = 0.5 } = opts;
  const base = Math.min(maxDelayMs, initialDelayMs * factor ** attempt);
  const j = Math.min(1, Math.max(0, jitter));
  return Math.round(base * (1 - j) + base * j * random());
}

const abortError = (signal) =>
  signal?.reason ?? new DOMException('The operation was aborted.', 'AbortError');

/**
 * SwitchboardClient is an MCP client over one WebSocket that reconnects by
 * itself.
 *
 * Events (it is an EventTarget; every event is a CustomEvent):
 * - "state": detail {state, previous, attempt?, delayMs?, error?, closeCode?, reason?}
 *   on every change of connection state; also dispatched under the state's
 *   own name: "connecting", "open", "reconnecting", "closed". "open" has
 *   detail.reconnected true after a reconnection.
 * - "notification": detail {method, params} for every notification from
 *   the hub; also dispatched under the method's name, e.g.
 *   "notifications/resources/updated" with detail = params.
 * - "request": detail {method, params, id} for every server-to-client
 *   request, before its handler runs.
 * - "error": detail {error} for protocol problems that fail no request
 *   (an unparseable frame, a failed re-subscribe).
 */
export class SwitchboardClient extends EventTarget {
  /**
   * @param {string} url The hub's client endpoint, e.g. ws://host/mcp.
   * @param {ClientOptions} [options]
   */
  constructor(url, options = {}) {
    super();
    /** @readonly The endpoint, without the token. */
    this.url = url;
    this._opts = options;
    this._WebSocket = options.WebSocket ?? globalThis.WebSocket;
    if (typeof this._WebSocket !== 'function') {
      throw new TypeError('SwitchboardClient: no WebSocket implementation: pass options.WebSocket (in Node 20, the "ws" package)');
    }
    this._reconnect = options.reconnect === false ? null : { ...(typeof options.reconnect === 'object' ? options.reconnect : {}) };
    this._roots = options.roots;
    /** @type {string} */
    this._state = State.IDLE;
    this._ws = null;
    this._nextId = 1;
    this._session = 0; // bumped on every socket, so late callbacks of an old one are ignored
    /** @type {Map<number, {resolve: Function, reject: Function, cleanup: Function, method: string}>} */
    this._pending = new Map();
    /** @type {Map<string, (p: ProgressParams) => void>} */
    this._progress = new Map();
    /** @type {Map<string|number, AbortController>} requests from the hub being handled */
    this._incoming = new Map();
    /** @type {Set<string>} */
    this._subscriptions = new Set();
    this._closedByUser = false;
    this._retryTimer = null;
    this._attempt = 0;
    this._opened = false; // whether a session was ever open (since the last close())
    this._connecting = null;
    this._readyWaiters = [];
    /** The hub's initialize result, once connected. */
    this.serverInfo = null;
    this.serverCapabilities = null;
    this.instructions = undefined;
    this.protocolVersion = undefined;
  }

  /** The connection state: one of State's values. */
  get state() {
    return this._state;
  }

  /** The URIs this client is subscribed to (re-subscribed on reconnect). */
  get subscriptions() {
    return new Set(this._subscriptions);
  }

  /**
   * connect opens the WebSocket and initializes the session. It resolves
   * with the initialize result; it rejects when the first attempt fails
   * (later drops are retried by themselves when reconnect is on). Calling
   * it while connecting returns the same promise; while reconnecting, it
   * retries at once.
   * @returns {Promise<object>}
   */
  connect() {
    if (this._state === State.OPEN) return Promise.resolve(this._initResult);
    if (this._connecting) return this._connecting;
    this._closedByUser = false;
    this._attempt = 0;
    clearTimeout(this._retryTimer);
    if (this._state === State.RECONNECTING) {
      // Try now instead of waiting for the timer; keep the subscriptions.
      this._scheduleReconnect({}, 0);
      return this.ready().then(() => this._initResult);
    }
    this._setState(State.CONNECTING);
    this._connecting = this._open().then(
      (result) => {
        this._connecting = null;
        return result;
      },
      (err) => {
        this._connecting = null;
        this._setState(State.CLOSED, { error: err });
        throw err;
      },
    );
    return this._connecting;
  }

  /**
   * ready resolves when the client is (or next becomes) open, and rejects
   * when it closes for good first.
   * @returns {Promise<void>}
   */
  ready() {
    if (this._state === State.OPEN) return Promise.resolve();
    if (this._state === State.CLOSED || this._state === State.IDLE) {
      return Promise.reject(new ConnectionClosedError('not connected'));
    }
    return new Promise((resolve, reject) => this._readyWaiters.push({ resolve, reject }));
  }

  /**
   * close closes the connection for good (no reconnect), rejects every
   * pending request and forgets the subscriptions; connect() starts afresh.
   * @param {number} [code=1000]
   * @param {string} [reason='client closed']
   */
  close(code = 1000, reason = 'client closed') {
    this._closedByUser = true;
    clearTimeout(this._retryTimer);
    const ws = this._ws;
    this._ws = null;
    this._session++;
    if (ws) {
      try {
        ws.close(code, reason);
      } catch {
        /* already closing */
      }
    }
    this._subscriptions.clear();
    this._logLevel = undefined;
    this._opened = false;
    this._failAll(new ConnectionClosedError('connection closed by the client', { closeCode: code, reason }));
    if (this._state !== State.CLOSED) this._setState(State.CLOSED, { closeCode: code, reason });
  }

  /**
   * request sends a JSON-RPC request and resolves with its result.
   * @param {string} method
   * @param {object} [params]
   * @param {RequestOptions} [options]
   * @returns {Promise<any>}
   */
  request(method, params, options = {}) {
    if (this._state !== State.OPEN) {
      return Promise.reject(new ConnectionClosedError(`not connected (state ${this._state}): ${method} not sent`));
    }
    return this._send(method, params, options);
  }

  /**
   * notify sends a JSON-RPC notification (no answer).
   * @param {string} method
   * @param {object} [params]
   */
  notify(method, params) {
    if (this._state !== State.OPEN) throw new ConnectionClosedError(`not connected (state ${this._state}): ${method} not sent`);
    this._write(params === undefined ? { jsonrpc: '2.0', method } : { jsonrpc: '2.0', method, params });
  }

  /** ping checks the connection. @param {RequestOptions} [options] @returns {Promise<object>} */
  ping(options) {
    return this.request('ping', undefined, options);
  }

  /** listTools lists every tool (all pages). @param {RequestOptions} [options] @returns {Promise<{tools: object[]}>} */
  async listTools(options) {
    return { tools: await this._listAll('tools/list', 'tools', options) };
  }

  /** listResources lists every resource (all pages). @param {RequestOptions} [options] @returns {Promise<{resources: object[]}>} */
  async listResources(options) {
    return { resources: await this._listAll('resources/list', 'resources', options) };
  }

  /** listResourceTemplates lists every resource template (all pages). @param {RequestOptions} [options] @returns {Promise<{resourceTemplates: object[]}>} */
  async listResourceTemplates(options) {
    return { resourceTemplates: await this._listAll('resources/templates/list', 'resourceTemplates', options) };
  }

  /** listPrompts lists every prompt (all pages). @param {RequestOptions} [options] @returns {Promise<{prompts: object[]}>} */
  async listPrompts(options) {
    return { prompts: await this._listAll('prompts/list', 'prompts', options) };
  }

  /**
   * callTool calls a tool. A tool's own failure resolves with isError true;
   * a protocol failure (unknown tool, server gone) rejects with an RpcError.
   * @param {string} name The aggregated name, e.g. "demo__add".
   * @param {object} [args]
   * @param {RequestOptions} [options] signal cancels, onProgress asks for progress.
   * @returns {Promise<{content: object[], structuredContent?: unknown, isError?: boolean}>}
   */
  callTool(name, args = {}, options) {
    return this.request('tools/call', { name, arguments: args }, options);
  }

  /** readResource reads a resource. @param {string} uri @param {RequestOptions} [options] @returns {Promise<{contents: object[]}>} */
  readResource(uri, options) {
    return this.request('resources/read', { uri }, options);
  }

  /**
   * subscribe subscribes to a resource's updates ("notifications/resources/updated"
   * events); the subscription is renewed after every reconnection.
   * @param {string} uri
   * @param {RequestOptions} [options]
   * @returns {Promise<void>}
   */
  async subscribe(uri, options) {
    await this.request('resources/subscribe', { uri }, options);
    this._subscriptions.add(uri);
  }

  /** unsubscribe ends a subscription. @param {string} uri @param {RequestOptions} [options] @returns {Promise<void>} */
  async unsubscribe(uri, options) {
    this._subscriptions.delete(uri);
    await this.request('resources/unsubscribe', { uri }, options);
  }

  /**
   * getPrompt gets a prompt's messages.
   * @param {string} name The aggregated name, e.g. "demo__greet".
   * @param {Record<string, string>} [args]
   * @param {RequestOptions} [options]
   * @returns {Promise<{description?: string, messages: object[]}>}
   */
  getPrompt(name, args = {}, options) {
    return this.request('prompts/get', { name, arguments: args }, options);
  }

  /**
   * complete asks for completions of an argument.
   * @param {{type: 'ref/prompt', name: string}|{type: 'ref/resource', uri: string}} ref
   * @param {{name: string, value: string}} argument
   * @param {{arguments?: Record<string, string>}} [context]
   * @param {RequestOptions} [options]
   * @returns {Promise<{completion: {values: string[], total?: number, hasMore?: boolean}}>}
   */
  complete(ref, argument, context, options) {
    const params = { ref, argument };
    if (context) params.context = context;
    return this.request('completion/complete', params, options);
  }

  /**
   * setLoggingLevel sets the lowest level of notifications/message the hub
   * sends this client.
   * @param {'debug'|'info'|'notice'|'warning'|'error'|'critical'|'alert'|'emergency'} level
   * @param {RequestOptions} [options]
   * @returns {Promise<void>}
   */
  async setLoggingLevel(level, options) {
    this._logLevel = level;
    await this.request('logging/setLevel', { level }, options);
  }

  /**
   * setRoots replaces the roots answered to roots/list and, when connected,
   * sends notifications/roots/list_changed. The "roots" capability is
   * declared only when roots were given at construction (or before connect).
   * @param {Root[]|(() => Root[]|Promise<Root[]>)} roots
   */
  setRoots(roots) {
    this._roots = roots;
    if (this._state === State.OPEN) this.notify('notifications/roots/list_changed');
  }

  /**
   * setHandler sets (or, with null, removes) the handler of a
   * server-to-client request method. Capabilities follow on the next
   * (re)initialization.
   * @param {string} method e.g. "sampling/createMessage".
   * @param {RequestHandler|null} handler
   */
  setHandler(method, handler) {
    if (method === 'sampling/createMessage') this._opts.onSampling = handler ?? undefined;
    else if (method === 'elicitation/create') this._opts.onElicitation = handler ?? undefined;
    else {
      this._opts.handlers = { ...(this._opts.handlers ?? {}) };
      if (handler) this._opts.handlers[method] = handler;
      else delete this._opts.handlers[method];
    }
  }

  // ---- internals ----

  _capabilities() {
    const caps = {};
    if (this._opts.onSampling) caps.sampling = {};
    if (this._opts.onElicitation) caps.elicitation = { form: {} };
    if (this._roots !== undefined) caps.roots = { listChanged: true };
    return caps;
  }

  _setState(state, detail = {}) {
    const previous = this._state;
    this._state = state;
    const d = { state, previous, ...detail };
    this.dispatchEvent(new CustomEvent('state', { detail: d }));
    this.dispatchEvent(new CustomEvent(state, { detail: d }));
    if (state === State.OPEN) {
      for (const w of this._readyWaiters.splice(0)) w.resolve();
    } else if (state === State.CLOSED) {
      const err = new ConnectionClosedError('connection closed');
      for (const w of this._readyWaiters.splice(0)) w.reject(err);
    }
  }

  // _open opens one socket and initializes it; it rejects (and closes the
  // socket) when either fails.
  _open() {
    const session = ++this._session;
    const timeoutMs = this._opts.connectTimeoutMs ?? 10000;
    return new Promise((resolve, reject) => {
      let ws;
      let settled = false;
      const fail = (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (this._session === session) this._session++;
        try {
          ws?.close(1000, 'connect failed');
        } catch {
          /* not open yet */
        }
        if (this._ws === ws) this._ws = null;
        this._failAll(err);
        reject(err);
      };
      const timer = setTimeout(() => fail(new RpcError(ErrorCode.REQUEST_TIMEOUT, `connecting to ${this.url} timed out after ${timeoutMs} ms`)), timeoutMs);
      try {
        ws = new this._WebSocket(withToken(this.url, this._opts.token), [SUBPROTOCOL]);
      } catch (err) {
        fail(new ConnectionClosedError(`cannot open ${this.url}: ${err.message}`));
        return;
      }
      this._ws = ws;
      ws.onmessage = (ev) => {
        if (this._session === session) this._onMessage(ev.data);
      };
      ws.onerror = () => {
        /* a close event follows, with the code */
      };
      ws.onclose = (ev) => {
        if (this._session !== session) return;
        const detail = { closeCode: ev.code, reason: ev.reason };
        if (!settled) {
          fail(new ConnectionClosedError(`could not connect to ${this.url} (close code ${ev.code}${ev.reason ? `: ${ev.reason}` : ''})`, detail));
          return;
        }
        this._onDrop(detail);
      };
      ws.onopen = async () => {
        if (this._session !== session) return;
        if (ws.protocol && ws.protocol !== SUBPROTOCOL) {
          fail(new ConnectionClosedError(`the hub chose subprotocol "${ws.protocol}", not "${SUBPROTOCOL}"`));
          return;
        }
        try {
          const result = await this._send('initialize', {
            protocolVersion: this._opts.protocolVersion ?? PROTOCOL_VERSION,
            capabilities: this._capabilities(),
            clientInfo: this._opts.clientInfo ?? { name: 'switchboard.js', version: '1.0.0' },
          });
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          this._initResult = result;
          this.serverInfo = result.serverInfo;
          this.serverCapabilities = result.capabilities;
          this.instructions = result.instructions;
          this.protocolVersion = result.protocolVersion;
          this._write({ jsonrpc: '2.0', method: 'notifications/initialized' });
          // Synchronously with the initialize answer, so that a drop right
          // after it is seen as a drop of an open connection.
          const reconnected = this._opened;
          this._opened = true;
          this._attempt = 0;
          this._setState(State.OPEN, { reconnected });
          resolve(result);
          if (reconnected) this._restore();
        } catch (err) {
          fail(err);
        }
      };
    });
  }

  // _restore re-subscribes (and resets the log level) after a reconnection.
  async _restore() {
    if (this._logLevel) {
      this.request('logging/setLevel', { level: this._logLevel }).catch((error) => this._emitError(error));
    }
    await Promise.all(
      [...this._subscriptions].map((uri) =>
        this.request('resources/subscribe', { uri }).catch((error) => {
          this._emitError(new RpcError(error.code ?? ErrorCode.INTERNAL_ERROR, `re-subscribing to ${uri} failed: ${error.message}`, error.data));
        }),
      ),
    );
    this.dispatchEvent(new CustomEvent('resubscribed', { detail: { uris: [...this._subscriptions] } }));
  }

  _onDrop(detail) {
    this._ws = null;
    this._session++;
    this._failAll(new ConnectionClosedError(`connection closed (code ${detail.closeCode}${detail.reason ? `: ${detail.reason}` : ''})`, detail));
    if (this._closedByUser) return;
    if (!this._reconnect) {
      this._setState(State.CLOSED, detail);
      return;
    }
    this._scheduleReconnect(detail);
  }

  _scheduleReconnect(detail, delay) {
    clearTimeout(this._retryTimer);
    const max = this._reconnect?.maxAttempts ?? Infinity;
    if (this._attempt >= max) {
      this._setState(State.CLOSED, { ...detail, error: new ConnectionClosedError(`gave up after ${this._attempt} attempts`) });
      return;
    }
    const delayMs = delay ?? backoffDelay(this._attempt, this._reconnect ?? {});
    this._attempt++;
    this._setState(State.RECONNECTING, { ...detail, attempt: this._attempt, delayMs });
    this._retryTimer = setTimeout(() => {
      if (this._closedByUser) return;
      this._setState(State.CONNECTING, { attempt: this._attempt });
      this._open().catch((error) => {
        if (!this._closedByUser) this._scheduleReconnect({ error, closeCode: error.data?.closeCode, reason: error.message });
      });
    }, delayMs);
  }

  _failAll(err) {
    for (const [, p] of this._pending) {
      p.cleanup();
      p.reject(err);
    }
    this._pending.clear();
    for (const [, ac] of this._incoming) ac.abort(err);
    this._incoming.clear();
  }

  _write(msg) {
    const ws = this._ws;
    if (!ws || ws.readyState !== 1) throw new ConnectionClosedError('not connected');
    ws.send(JSON.stringify(msg));
  }

  _send(method, params, options = {}) {
    const { signal, onProgress, meta } = options;
    const timeoutMs = options.timeoutMs ?? this._opts.requestTimeoutMs ?? 0;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    const id = this._nextId++;
    let p = params;
    if (onProgress || meta) {
      p = { ...(params ?? {}) };
      p._meta = { ...(p._meta ?? {}), ...(meta ?? {}) };
    }
    let token;
    if (onProgress) {
      token = `p${this._session}-${id}`;
      p._meta.progressToken = token;
    }
    return new Promise((resolve, reject) => {
      let timer;
      const cancel = (reason, err) => {
        if (!this._pending.has(id)) return;
        this._pending.get(id).cleanup();
        this._pending.delete(id);
        try {
          this._write({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason } });
        } catch {
          /* the connection is gone; so is the request */
        }
        reject(err);
      };
      const onAbort = () => cancel(String(signal.reason?.message ?? 'cancelled by the client'), abortError(signal));
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (token) this._progress.delete(token);
      };
      this._pending.set(id, { resolve, reject, cleanup, method });
      if (token) this._progress.set(token, onProgress);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs > 0) {
        timer = setTimeout(
          () => cancel('request timed out', new RpcError(ErrorCode.REQUEST_TIMEOUT, `${method} timed out after ${timeoutMs} ms`, { timeoutMs })),
          timeoutMs,
        );
      }
      const msg = { jsonrpc: '2.0', id, method };
      if (p !== undefined) msg.params = p;
      try {
        this._write(msg);
      } catch (err) {
        cleanup();
        this._pending.delete(id);
        reject(err);
      }
    });
  }

  async _listAll(method, field, options) {
    const out = [];
    let cursor;
    const seen = new Set();
    for (;;) {
      const res = await this.request(method, cursor ? { cursor } : {}, options);
      out.push(...(res[field] ?? []));
      cursor = res.nextCursor;
      if (!cursor) return out;
      if (seen.has(cursor)) throw new RpcError(ErrorCode.INTERNAL_ERROR, `${method}: the hub repeated cursor ${cursor}`);
      seen.add(cursor);
    }
  }

  _emitError(error) {
    this.dispatchEvent(new CustomEvent('error', { detail: { error } }));
  }

  _onMessage(data) {
    if (typeof data !== 'string') {
      this._emitError(new RpcError(ErrorCode.PARSE_ERROR, 'binary frame ignored: MCP over WebSocket uses text frames'));
      return;
    }
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      this._emitError(new RpcError(ErrorCode.PARSE_ERROR, 'unparseable frame from the hub'));
      return;
    }
    for (const m of Array.isArray(msg) ? msg : [msg]) this._dispatch(m);
  }

  _dispatch(m) {
    if (m === null || typeof m !== 'object') return;
    if ('method' in m) {
      if ('id' in m && m.id !== null) this._onRequest(m);
      else this._onNotification(m);
      return;
    }
    const p = this._pending.get(m.id);
    if (!p) return; // a late answer to a cancelled or timed-out request
    this._pending.delete(m.id);
    p.cleanup();
    if (m.error) p.reject(new RpcError(m.error.code, m.error.message, m.error.data));
    else p.resolve(m.result);
  }

  _onNotification(m) {
    const params = m.params ?? {};
    if (m.method === 'notifications/progress') {
      const fn = this._progress.get(String(params.progressToken));
      if (fn) {
        try {
          fn(params);
        } catch (error) {
          this._emitError(error);
        }
      }
    } else if (m.method === 'notifications/cancelled') {
      this._incoming.get(params.requestId)?.abort(new DOMException(params.reason ?? 'cancelled by the hub', 'AbortError'));
    }
    this.dispatchEvent(new CustomEvent('notification', { detail: { method: m.method, params } }));
    this.dispatchEvent(new CustomEvent(m.method, { detail: params }));
  }

  async _onRequest(m) {
    const { id, method } = m;
    const params = m.params ?? {};
    this.dispatchEvent(new CustomEvent('request', { detail: { id, method, params } }));
    const ac = new AbortController();
    this._incoming.set(id, ac);
    const ws = this._ws;
    let reply;
    try {
      const result = await this._handle(method, params, { signal: ac.signal, id, method });
      reply = { jsonrpc: '2.0', id, result: result ?? {} };
    } catch (err) {
      const e = err instanceof RpcError ? err : new RpcError(ErrorCode.INTERNAL_ERROR, String(err?.message ?? err));
      reply = { jsonrpc: '2.0', id, error: e.toJSON() };
    } finally {
      this._incoming.delete(id);
    }
    if (ac.signal.aborted || this._ws !== ws) return; // cancelled, or the socket it came on is gone
    try {
      this._write(reply);
    } catch (error) {
      this._emitError(error);
    }
  }

  async _handle(method, params, ctx) {
    switch (method) {
      case 'ping':
        return {};
      case 'roots/list': {
        if (this._roots === undefined) break;
        const roots = typeof this._roots === 'function' ? await this._roots() : this._roots;
        return { roots };
      }
      case 'sampling/createMessage':
        if (!this._opts.onSampling) break;
        return this._opts.onSampling(params, ctx);
      case 'elicitation/create':
        if (!this._opts.onElicitation) break;
        return this._opts.onElicitation(params, ctx);
    }
    const h = this._opts.handlers?.[method];
    if (h) return h(params, ctx);
    throw new RpcError(ErrorCode.METHOD_NOT_FOUND, `method not found: ${method}`);
  }
}
