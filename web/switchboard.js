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
// WebSocket handshake. A static token is sent as the `?token=` query
// parameter of the URL by default (use wss://: the URL, and so the token,
// may end up in proxy and server logs). An OAuth access token, which the
// hub refuses in a URL, is sent with `tokenVia: 'subprotocol'`: as the
// WebSocket subprotocol "bearer.<base64url of the token>" offered beside
// "mcp", which the hub reads and never echoes, and which no access log or
// history keeps. `token` may be a function, called before every connection
// attempt, so that a reconnection (after the hub closed the session at the
// token's expiry, for example) presents a fresh one.
//
// The JSON-RPC layer under it (the WebSocket, framing, ids, pending calls,
// cancellation) is jsonrpc.js, which this module imports: serve or copy the
// two files side by side.

import { ErrorCode, RpcError, ConnectionClosedError, JsonRpcSocket, abortError } from './jsonrpc.js';

export { ErrorCode, RpcError, ConnectionClosedError };

/** The MCP protocol version this client asks for. */
export const PROTOCOL_VERSION = '2025-11-25';

/** The WebSocket subprotocol MCP-over-WebSocket uses. */
export const SUBPROTOCOL = 'mcp';

/** The prefix of the subprotocol that carries a token (tokenVia 'subprotocol'). */
export const TOKEN_SUBPROTOCOL_PREFIX = 'bearer.';

/** Connection states, in the order a healthy connection goes through them. */
export const State = Object.freeze({
  IDLE: 'idle',
  CONNECTING: 'connecting',
  OPEN: 'open',
  RECONNECTING: 'reconnecting',
  CLOSED: 'closed',
});


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
 * @property {string|(() => string|Promise<string>)} [token] The token, or a
 *   function that returns one (or a promise of one), called before every
 *   connection attempt: reconnections then present a fresh access token.
 * @property {'query'|'subprotocol'} [tokenVia='query'] How the token reaches
 *   the hub (browsers cannot set headers on WebSockets): "query" as the
 *   ?token= query parameter (static tokens only: the hub refuses an access
 *   token there), "subprotocol" as the subprotocol "bearer.<base64url>"
 *   offered beside "mcp" (any token; never in a URL).
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
 * tokenSubprotocol returns the WebSocket subprotocol that carries token:
 * "bearer." and the token's UTF-8 bytes in base64url without padding.
 * @param {string} token
 * @returns {string}
 */
export function tokenSubprotocol(token) {
  let bin = '';
  for (const b of new TextEncoder().encode(token)) bin += String.fromCharCode(b);
  return TOKEN_SUBPROTOCOL_PREFIX + btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
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
  #opts;
  #reconnect;
  #roots;
  /** @type {JsonRpcSocket} the JSON-RPC layer: the socket, ids, pending calls, incoming requests */
  #rpc;
  /** @type {string} */
  #state = State.IDLE;
  /** @type {Map<string, (p: ProgressParams) => void>} */
  #progress = new Map();
  /** @type {Set<string>} */
  #subscriptions = new Set();
  #closedByUser = false;
  #retryTimer = null;
  #attempt = 0;
  #opened = false; // whether a session was ever open (since the last close())
  #connecting = null;
  #readyWaiters = [];
  #initResult;
  #logLevel;

  /**
   * @param {string} url The hub's client endpoint, e.g. ws://host/mcp.
   * @param {ClientOptions} [options]
   */
  constructor(url, options = {}) {
    super();
    /** @readonly The endpoint, without the token. */
    this.url = url;
    this.#opts = options;
    const WebSocket = options.WebSocket ?? globalThis.WebSocket;
    if (typeof WebSocket !== 'function') {
      throw new TypeError('SwitchboardClient: no WebSocket implementation: pass options.WebSocket (in Node 20, the "ws" package)');
    }
    if (options.tokenVia !== undefined && options.tokenVia !== 'query' && options.tokenVia !== 'subprotocol') {
      throw new TypeError(`SwitchboardClient: tokenVia must be "query" or "subprotocol", not ${JSON.stringify(options.tokenVia)}`);
    }
    this.#reconnect = options.reconnect === false ? null : { ...(typeof options.reconnect === 'object' ? options.reconnect : {}) };
    this.#roots = options.roots;
    this.#rpc = new JsonRpcSocket(WebSocket, {
      handle: (method, params, ctx) => this.#handle(method, params, ctx),
      onRequest: (id, method, params) => this.dispatchEvent(new CustomEvent('request', { detail: { id, method, params } })),
      onNotification: (method, params) => this.#onNotification(method, params),
      onCancel: (id, reason) => {
        try {
          this.#rpc.notify('notifications/cancelled', { requestId: id, reason });
        } catch {
          /* the connection is gone; so is the request */
        }
      },
      onError: (error) => this.#emitError(error),
    });
    /** The hub's initialize result, once connected. */
    this.serverInfo = null;
    this.serverCapabilities = null;
    this.instructions = undefined;
    this.protocolVersion = undefined;
  }

  /** The connection state: one of State's values. */
  get state() {
    return this.#state;
  }

  /** The URIs this client is subscribed to (re-subscribed on reconnect). */
  get subscriptions() {
    return new Set(this.#subscriptions);
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
    if (this.#state === State.OPEN) return Promise.resolve(this.#initResult);
    if (this.#connecting) return this.#connecting;
    this.#closedByUser = false;
    this.#attempt = 0;
    clearTimeout(this.#retryTimer);
    if (this.#state === State.RECONNECTING) {
      // Try now instead of waiting for the timer; keep the subscriptions.
      this.#scheduleReconnect({}, 0);
      return this.ready().then(() => this.#initResult);
    }
    this.#setState(State.CONNECTING);
    this.#connecting = this.#open().then(
      (result) => {
        this.#connecting = null;
        return result;
      },
      (err) => {
        this.#connecting = null;
        this.#setState(State.CLOSED, { error: err });
        throw err;
      },
    );
    return this.#connecting;
  }

  /**
   * ready resolves when the client is (or next becomes) open, and rejects
   * when it closes for good first.
   * @returns {Promise<void>}
   */
  ready() {
    if (this.#state === State.OPEN) return Promise.resolve();
    if (this.#state === State.CLOSED || this.#state === State.IDLE) {
      return Promise.reject(new ConnectionClosedError('not connected'));
    }
    return new Promise((resolve, reject) => this.#readyWaiters.push({ resolve, reject }));
  }

  /**
   * close closes the connection for good (no reconnect), rejects every
   * pending request and forgets the subscriptions; connect() starts afresh.
   * @param {number} [code=1000]
   * @param {string} [reason='client closed']
   */
  close(code = 1000, reason = 'client closed') {
    this.#closedByUser = true;
    clearTimeout(this.#retryTimer);
    this.#rpc.close(code, reason);
    this.#subscriptions.clear();
    this.#logLevel = undefined;
    this.#opened = false;
    this.#rpc.failAll(new ConnectionClosedError('connection closed by the client', { closeCode: code, reason }));
    if (this.#state !== State.CLOSED) this.#setState(State.CLOSED, { closeCode: code, reason });
  }

  /**
   * request sends a JSON-RPC request and resolves with its result.
   * @param {string} method
   * @param {object} [params]
   * @param {RequestOptions} [options]
   * @returns {Promise<any>}
   */
  request(method, params, options = {}) {
    if (this.#state !== State.OPEN) {
      return Promise.reject(new ConnectionClosedError(`not connected (state ${this.#state}): ${method} not sent`));
    }
    return this.#send(method, params, options);
  }

  /**
   * notify sends a JSON-RPC notification (no answer).
   * @param {string} method
   * @param {object} [params]
   */
  notify(method, params) {
    if (this.#state !== State.OPEN) throw new ConnectionClosedError(`not connected (state ${this.#state}): ${method} not sent`);
    this.#rpc.notify(method, params);
  }

  /** ping checks the connection. @param {RequestOptions} [options] @returns {Promise<object>} */
  ping(options) {
    return this.request('ping', undefined, options);
  }

  /** listTools lists every tool (all pages). @param {RequestOptions} [options] @returns {Promise<{tools: object[]}>} */
  async listTools(options) {
    return { tools: await this.#listAll('tools/list', 'tools', options) };
  }

  /** listResources lists every resource (all pages). @param {RequestOptions} [options] @returns {Promise<{resources: object[]}>} */
  async listResources(options) {
    return { resources: await this.#listAll('resources/list', 'resources', options) };
  }

  /** listResourceTemplates lists every resource template (all pages). @param {RequestOptions} [options] @returns {Promise<{resourceTemplates: object[]}>} */
  async listResourceTemplates(options) {
    return { resourceTemplates: await this.#listAll('resources/templates/list', 'resourceTemplates', options) };
  }

  /** listPrompts lists every prompt (all pages). @param {RequestOptions} [options] @returns {Promise<{prompts: object[]}>} */
  async listPrompts(options) {
    return { prompts: await this.#listAll('prompts/list', 'prompts', options) };
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
    this.#subscriptions.add(uri);
  }

  /** unsubscribe ends a subscription. @param {string} uri @param {RequestOptions} [options] @returns {Promise<void>} */
  async unsubscribe(uri, options) {
    this.#subscriptions.delete(uri);
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
    this.#logLevel = level;
    await this.request('logging/setLevel', { level }, options);
  }

  /**
   * setRoots replaces the roots answered to roots/list and, when connected,
   * sends notifications/roots/list_changed. The "roots" capability is
   * declared only when roots were given at construction (or before connect).
   * @param {Root[]|(() => Root[]|Promise<Root[]>)} roots
   */
  setRoots(roots) {
    this.#roots = roots;
    if (this.#state === State.OPEN) this.notify('notifications/roots/list_changed');
  }

  /**
   * setHandler sets (or, with null, removes) the handler of a
   * server-to-client request method. Capabilities follow on the next
   * (re)initialization.
   * @param {string} method e.g. "sampling/createMessage".
   * @param {RequestHandler|null} handler
   */
  setHandler(method, handler) {
    if (method === 'sampling/createMessage') this.#opts.onSampling = handler ?? undefined;
    else if (method === 'elicitation/create') this.#opts.onElicitation = handler ?? undefined;
    else {
      this.#opts.handlers = { ...(this.#opts.handlers ?? {}) };
      if (handler) this.#opts.handlers[method] = handler;
      else delete this.#opts.handlers[method];
    }
  }

  // ---- internals: the MCP session over the JSON-RPC layer ----

  #capabilities() {
    const caps = {};
    if (this.#opts.onSampling) caps.sampling = {};
    if (this.#opts.onElicitation) caps.elicitation = { form: {} };
    if (this.#roots !== undefined) caps.roots = { listChanged: true };
    return caps;
  }

  #setState(state, detail = {}) {
    const previous = this.#state;
    this.#state = state;
    const d = { state, previous, ...detail };
    this.dispatchEvent(new CustomEvent('state', { detail: d }));
    this.dispatchEvent(new CustomEvent(state, { detail: d }));
    if (state === State.OPEN) {
      for (const w of this.#readyWaiters.splice(0)) w.resolve();
    } else if (state === State.CLOSED) {
      const err = new ConnectionClosedError('connection closed');
      for (const w of this.#readyWaiters.splice(0)) w.reject(err);
    }
  }

  // #open gets the token, opens one socket and initializes it; it rejects
  // (and closes the socket) when any of them fails.
  async #open() {
    let token = this.#opts.token;
    if (typeof token === 'function') {
      try {
        token = await token();
      } catch (error) {
        throw new ConnectionClosedError(`could not get a token for ${this.url}: ${error?.message ?? error}`);
      }
      if (this.#closedByUser) throw new ConnectionClosedError('connection closed by the client');
    }
    return this.#openWith(token);
  }

  // #target returns the URL and subprotocols that present token as the
  // options say.
  #target(token) {
    if (!token) return [this.url, [SUBPROTOCOL]];
    if (this.#opts.tokenVia === 'subprotocol') return [this.url, [SUBPROTOCOL, tokenSubprotocol(token)]];
    return [withToken(this.url, token), [SUBPROTOCOL]];
  }

  #openWith(token) {
    const timeoutMs = this.#opts.connectTimeoutMs ?? 10000;
    return new Promise((resolve, reject) => {
      let attempt;
      let settled = false;
      const fail = (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        attempt.abandon(1000, 'connect failed');
        this.#rpc.failAll(err);
        reject(err);
      };
      const timer = setTimeout(() => fail(new RpcError(ErrorCode.REQUEST_TIMEOUT, `connecting to ${this.url} timed out after ${timeoutMs} ms`)), timeoutMs);
      const [url, protocols] = this.#target(token);
      attempt = this.#rpc.open(url, protocols, {
        onClose: (detail) => {
          if (!settled) {
            fail(new ConnectionClosedError(`could not connect to ${this.url} (close code ${detail.closeCode}${detail.reason ? `: ${detail.reason}` : ''})`, detail));
            return;
          }
          this.#onDrop(detail);
        },
        onOpen: async (protocol) => {
          if (protocol && protocol !== SUBPROTOCOL) {
            fail(new ConnectionClosedError(`the hub chose subprotocol "${protocol}", not "${SUBPROTOCOL}"`));
            return;
          }
          try {
            const result = await this.#send('initialize', {
              protocolVersion: this.#opts.protocolVersion ?? PROTOCOL_VERSION,
              capabilities: this.#capabilities(),
              clientInfo: this.#opts.clientInfo ?? { name: 'switchboard.js', version: '1.0.0' },
            });
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            this.#initResult = result;
            this.serverInfo = result.serverInfo;
            this.serverCapabilities = result.capabilities;
            this.instructions = result.instructions;
            this.protocolVersion = result.protocolVersion;
            this.#rpc.notify('notifications/initialized');
            // Synchronously with the initialize answer, so that a drop right
            // after it is seen as a drop of an open connection.
            const reconnected = this.#opened;
            this.#opened = true;
            this.#attempt = 0;
            this.#setState(State.OPEN, { reconnected });
            resolve(result);
            if (reconnected) this.#restore();
          } catch (err) {
            fail(err);
          }
        },
      });
      if (attempt.error) fail(new ConnectionClosedError(`cannot open ${this.url}: ${attempt.error.message}`));
    });
  }

  // #restore re-subscribes (and resets the log level) after a reconnection.
  async #restore() {
    if (this.#logLevel) {
      this.request('logging/setLevel', { level: this.#logLevel }).catch((error) => this.#emitError(error));
    }
    await Promise.all(
      [...this.#subscriptions].map((uri) =>
        this.request('resources/subscribe', { uri }).catch((error) => {
          this.#emitError(new RpcError(error.code ?? ErrorCode.INTERNAL_ERROR, `re-subscribing to ${uri} failed: ${error.message}`, error.data));
        }),
      ),
    );
    this.dispatchEvent(new CustomEvent('resubscribed', { detail: { uris: [...this.#subscriptions] } }));
  }

  #onDrop(detail) {
    this.#rpc.drop(new ConnectionClosedError(`connection closed (code ${detail.closeCode}${detail.reason ? `: ${detail.reason}` : ''})`, detail));
    if (this.#closedByUser) return;
    if (!this.#reconnect) {
      this.#setState(State.CLOSED, detail);
      return;
    }
    this.#scheduleReconnect(detail);
  }

  #scheduleReconnect(detail, delay) {
    clearTimeout(this.#retryTimer);
    const max = this.#reconnect?.maxAttempts ?? Infinity;
    if (this.#attempt >= max) {
      this.#setState(State.CLOSED, { ...detail, error: new ConnectionClosedError(`gave up after ${this.#attempt} attempts`) });
      return;
    }
    const delayMs = delay ?? backoffDelay(this.#attempt, this.#reconnect ?? {});
    this.#attempt++;
    this.#setState(State.RECONNECTING, { ...detail, attempt: this.#attempt, delayMs });
    this.#retryTimer = setTimeout(() => {
      if (this.#closedByUser) return;
      this.#setState(State.CONNECTING, { attempt: this.#attempt });
      this.#open().catch((error) => {
        if (!this.#closedByUser) this.#scheduleReconnect({ error, closeCode: error.data?.closeCode, reason: error.message });
      });
    }, delayMs);
  }

  // #send adds MCP's _meta (progress token, extra members) to a call and
  // hands it to the JSON-RPC layer.
  #send(method, params, options = {}) {
    const { signal, onProgress, meta } = options;
    const timeoutMs = options.timeoutMs ?? this.#opts.requestTimeoutMs ?? 0;
    if (signal?.aborted) return Promise.reject(abortError(signal)); // before an id is taken
    const id = this.#rpc.nextId();
    let p = params;
    if (onProgress || meta) {
      p = { ...(params ?? {}) };
      p._meta = { ...(p._meta ?? {}), ...(meta ?? {}) };
    }
    let token;
    if (onProgress) {
      token = `p${this.#rpc.session}-${id}`;
      p._meta.progressToken = token;
      this.#progress.set(token, onProgress);
    }
    return this.#rpc.call(id, method, p, { signal, timeoutMs, onSettle: token ? () => this.#progress.delete(token) : undefined });
  }

  async #listAll(method, field, options) {
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

  #emitError(error) {
    this.dispatchEvent(new CustomEvent('error', { detail: { error } }));
  }

  #onNotification(method, params) {
    if (method === 'notifications/progress') {
      const fn = this.#progress.get(String(params.progressToken));
      if (fn) {
        try {
          fn(params);
        } catch (error) {
          this.#emitError(error);
        }
      }
    } else if (method === 'notifications/cancelled') {
      this.#rpc.cancelIncoming(params.requestId, new DOMException(params.reason ?? 'cancelled by the hub', 'AbortError'));
    }
    this.dispatchEvent(new CustomEvent('notification', { detail: { method, params } }));
    this.dispatchEvent(new CustomEvent(method, { detail: params }));
  }

  async #handle(method, params, ctx) {
    switch (method) {
      case 'ping':
        return {};
      case 'roots/list': {
        if (this.#roots === undefined) break;
        const roots = typeof this.#roots === 'function' ? await this.#roots() : this.#roots;
        return { roots };
      }
      case 'sampling/createMessage':
        if (!this.#opts.onSampling) break;
        return this.#opts.onSampling(params, ctx);
      case 'elicitation/create':
        if (!this.#opts.onElicitation) break;
        return this.#opts.onElicitation(params, ctx);
    }
    const h = this.#opts.handlers?.[method];
    if (h) return h(params, ctx);
    throw new RpcError(ErrorCode.METHOD_NOT_FOUND, `method not found: ${method}`);
  }
}
