// Shared helpers of the end-to-end tests: start and stop the hub binary,
// connect SDK clients, dial TS servers out to the hub, and wait on events
// with deadlines (never fixed sleeps).

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import WebSocket from 'ws';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import { JSONRPCMessageSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

// Node 20 has no global WebSocket; the SDK's WebSocketClientTransport needs one.
if (typeof globalThis.WebSocket === 'undefined') {
    globalThis.WebSocket = WebSocket;
}

/** The hub binary: ../bin/hub from e2e/, or $E2E_HUB_BIN. */
export const HUB_BIN = process.env.E2E_HUB_BIN ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'hub');

/** Default deadline of one awaited event. */
export const DEADLINE_MS = 10_000;

/**
 * withTimeout races a promise against a deadline; on expiry it rejects with
 * an error naming what was awaited.
 */
export function withTimeout(promise, ms, what) {
    let timer;
    const deadline = new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    });
    return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** deferred returns a promise with its resolve and reject functions. */
export function deferred() {
    let resolve, reject;
    const promise = new Promise((res, rej) => {
        resolve = res;
        reject = rej;
    });
    return { promise, resolve, reject };
}

/**
 * Inbox collects events (notifications, requests seen by handlers) and lets
 * a test wait, with a deadline, until some that match a predicate arrived.
 */
export class Inbox {
    constructor(name = 'events') {
        this.name = name;
        this.items = [];
        this._waiters = [];
    }

    push(item) {
        this.items.push(item);
        for (const w of [...this._waiters]) {
            if (this._check(w)) {
                this._waiters.splice(this._waiters.indexOf(w), 1);
            }
        }
    }

    _check(w) {
        const matching = this.items.slice(w.from).filter(w.pred);
        if (matching.length >= w.count) {
            clearTimeout(w.timer);
            w.resolve(matching.slice(0, w.count));
            return true;
        }
        return false;
    }

    /** mark returns a position: waitFor(..., {from}) only looks at later items. */
    mark() {
        return this.items.length;
    }

    /**
     * waitFor resolves with the first `count` items (from `from` on) that
     * satisfy pred, or rejects after `timeoutMs`.
     */
    waitFor(pred = () => true, { count = 1, from = 0, timeoutMs = DEADLINE_MS, what } = {}) {
        return new Promise((resolve, reject) => {
            const w = { pred, count, from, resolve };
            if (this._check(w)) {
                return;
            }
            w.timer = setTimeout(() => {
                this._waiters.splice(this._waiters.indexOf(w), 1);
                const got = this.items.slice(from).filter(pred).length;
                reject(new Error(`timed out after ${timeoutMs} ms waiting for ${count} ${what ?? this.name} (got ${got})`));
            }, timeoutMs);
            this._waiters.push(w);
        });
    }

    /** after returns the items pushed since position `from`, matching pred. */
    since(from, pred = () => true) {
        return this.items.slice(from).filter(pred);
    }
}

/**
 * startHub runs ../bin/hub on a random loopback port and resolves once it
 * logged its listening line. Call stop() (or stopHub) to kill it and wait
 * for it to exit.
 */
export async function startHub({ demo = true, args = [], timeoutMs = 15_000 } = {}) {
    if (!existsSync(HUB_BIN)) {
        throw new Error(`${HUB_BIN} is missing: run \`make build\` in the repository root first`);
    }
    const argv = ['--addr', '127.0.0.1:0', ...(demo ? ['--demo'] : []), ...args];
    const proc = spawn(HUB_BIN, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    let stderr = '';
    const listening = deferred();
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
        stderr += chunk;
        const m = /msg="switchboard listening" addr=(\S+)/.exec(stderr);
        if (m) {
            listening.resolve(m[1]);
        }
    });
    proc.once('error', (err) => listening.reject(err));
    exited.then(({ code, signal }) =>
        listening.reject(new Error(`hub exited (code ${code}, signal ${signal}) before listening:\n${stderr}`)));
    let addr;
    try {
        addr = await withTimeout(listening.promise, timeoutMs, 'the hub to log "switchboard listening"');
    } catch (err) {
        proc.kill('SIGKILL');
        await exited;
        throw err;
    }
    const hub = {
        proc,
        addr,
        url: `ws://${addr}`,
        clientURL: `ws://${addr}/mcp`,
        serverURL: (name) => `ws://${addr}/mcp/server${name ? `?name=${encodeURIComponent(name)}` : ''}`,
        logs: () => stderr,
        exited,
        async stop() {
            if (process.env.E2E_HUB_LOGS) {
                exited.then(() => process.stderr.write(`--- hub ${addr} log ---\n${stderr}`));
            }
            if (proc.exitCode === null && proc.signalCode === null) {
                proc.kill('SIGTERM');
                try {
                    await withTimeout(exited, 15_000, 'the hub to exit after SIGTERM');
                } catch (err) {
                    proc.kill('SIGKILL');
                    await exited;
                    throw err;
                }
            }
            return exited;
        },
    };
    return hub;
}

/** The published MCP servers installed by npm ci (package.json pins them). */
export const NODE_MODULES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'node_modules');

/** publishedServer returns the path of a published server's entry point. */
export function publishedServer(pkg) {
    const entry = path.join(NODE_MODULES, '@modelcontextprotocol', pkg, 'dist', 'index.js');
    if (!existsSync(entry)) {
        throw new Error(`${entry} is missing: run \`npm ci\` in e2e/ (or \`make deps\`)`);
    }
    return entry;
}

/**
 * startConnector runs `bin/hub connect --hub <hub> --name <name> -- <command...>`
 * and resolves once it logged that the server answered the hub's initialize.
 * stop() sends SIGTERM and waits for it to exit.
 */
export async function startConnector(hub, name, command, { timeoutMs = 20_000 } = {}) {
    const proc = spawn(HUB_BIN, ['connect', '--hub', hub.url, '--name', name, '--', ...command], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    let stderr = '';
    const ready = deferred();
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (chunk) => {
        stderr += chunk;
        if (stderr.includes("answered the hub's initialize")) {
            ready.resolve();
        }
    });
    exited.then(({ code, signal }) => ready.reject(new Error(`hub connect exited (code ${code}, signal ${signal}):\n${stderr}`)));
    try {
        await withTimeout(ready.promise, timeoutMs, `the connector of ${name} to start its server`);
    } catch (err) {
        proc.kill('SIGKILL');
        await exited;
        throw err;
    }
    return {
        proc,
        logs: () => stderr,
        exited,
        async stop() {
            if (proc.exitCode === null && proc.signalCode === null) {
                proc.kill('SIGTERM');
                await withTimeout(exited, 15_000, 'hub connect to exit after SIGTERM');
            }
            return exited;
        },
    };
}

/**
 * connectClient connects an SDK Client to the hub's /mcp endpoint through
 * the SDK's own WebSocketClientTransport.
 */
export async function connectClient(hub, { name = 'e2e-client', capabilities = {}, setup } = {}) {
    const client = new Client({ name, version: '1.0.0' }, { capabilities });
    // Handlers go in before connecting, so that nothing the hub sends early is lost.
    setup?.(client);
    const transport = new WebSocketClientTransport(new URL(hub.clientURL));
    await withTimeout(client.connect(transport), DEADLINE_MS, 'the client to connect and initialize');
    return client;
}

/**
 * waitForTools resolves once the client's listTools shows every name; it
 * re-lists on each notifications/tools/list_changed (so it must be the
 * client's handler for that notification while it waits).
 */
export async function waitForTools(client, names, timeoutMs = DEADLINE_MS) {
    const changed = new Inbox('tools/list_changed');
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => changed.push(n));
    try {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
            const mark = changed.mark();
            const { tools } = await client.listTools();
            const have = new Set(tools.map((t) => t.name));
            if (names.every((n) => have.has(n))) {
                return tools;
            }
            const left = deadline - Date.now();
            if (left <= 0) {
                throw new Error(`timed out waiting for tools ${names.join(', ')}; have ${[...have].join(', ')}`);
            }
            await changed.waitFor(() => true, { from: mark, timeoutMs: left, what: `tools ${names.join(', ')}` });
        }
    } finally {
        client.removeNotificationHandler('notifications/tools/list_changed');
    }
}

/**
 * DialOutTransport is an SDK Transport for an MCP *server* that dials out
 * to the hub over a `ws` client socket (subprotocol "mcp"). The SDK has no
 * transport for this direction.
 */
export class DialOutTransport {
    constructor(url, { protocols = ['mcp'] } = {}) {
        this.url = url;
        this.protocols = protocols;
        this.socket = undefined;
        this.onclose = undefined;
        this.onerror = undefined;
        this.onmessage = undefined;
        this._closed = deferred();
    }

    start() {
        if (this.socket) {
            throw new Error('DialOutTransport already started');
        }
        return new Promise((resolve, reject) => {
            const ws = new WebSocket(this.url, this.protocols);
            this.socket = ws;
            ws.on('open', () => {
                if (ws.protocol !== 'mcp') {
                    reject(new Error(`hub did not echo subprotocol "mcp" (got ${JSON.stringify(ws.protocol)})`));
                    ws.terminate();
                    return;
                }
                resolve();
            });
            ws.on('error', (err) => {
                reject(err);
                this.onerror?.(err);
            });
            ws.on('close', (code, reason) => {
                this.closeCode = code;
                this.closeReason = reason.toString();
                this._closed.resolve({ code, reason: this.closeReason });
                this.onclose?.();
            });
            ws.on('message', (data, isBinary) => {
                if (isBinary) {
                    this.onerror?.(new Error('unexpected binary frame'));
                    return;
                }
                let parsed;
                try {
                    parsed = JSON.parse(data.toString('utf8'));
                } catch (err) {
                    this.onerror?.(err);
                    return;
                }
                // One frame holds one message or a batch.
                for (const m of Array.isArray(parsed) ? parsed : [parsed]) {
                    let message;
                    try {
                        message = JSONRPCMessageSchema.parse(m);
                    } catch (err) {
                        this.onerror?.(err);
                        continue;
                    }
                    this.onmessage?.(message);
                }
            });
        });
    }

    send(message) {
        return new Promise((resolve, reject) => {
            if (!this.socket || this.socket.readyState !== WebSocket.OPEN) {
                reject(new Error('not connected'));
                return;
            }
            this.socket.send(JSON.stringify(message), (err) => (err ? reject(err) : resolve()));
        });
    }

    /** closed resolves with the close code and reason once the socket closed. */
    get closed() {
        return this._closed.promise;
    }

    async close() {
        if (!this.socket || this.socket.readyState === WebSocket.CLOSED) {
            return;
        }
        this.socket.close(1000, 'bye');
        try {
            await withTimeout(this._closed.promise, 5_000, 'the server socket to close');
        } catch {
            this.socket.terminate();
            await this._closed.promise;
        }
    }
}

/**
 * RawSocket is a bare `ws` connection with a queue of received frames, for
 * speaking JSON-RPC by hand.
 */
export class RawSocket {
    static async open(url, protocols = ['mcp']) {
        const ws = new WebSocket(url, protocols);
        const raw = new RawSocket(ws);
        await withTimeout(new Promise((resolve, reject) => {
            ws.once('open', resolve);
            ws.once('error', reject);
        }), DEADLINE_MS, `a WebSocket to ${url}`);
        return raw;
    }

    constructor(ws) {
        this.ws = ws;
        this.frames = new Inbox('frames');
        this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
        ws.on('message', (data, isBinary) => {
            const text = data.toString('utf8');
            let json;
            try {
                json = JSON.parse(text);
            } catch {
                json = undefined;
            }
            this.frames.push({ isBinary, text, json });
        });
        ws.on('error', () => {}); // surfaced through closed
    }

    sendText(text) {
        return new Promise((resolve, reject) => this.ws.send(text, { binary: false }, (err) => (err ? reject(err) : resolve())));
    }

    sendBinary(buf) {
        return new Promise((resolve, reject) => this.ws.send(buf, { binary: true }, (err) => (err ? reject(err) : resolve())));
    }

    send(obj) {
        return this.sendText(JSON.stringify(obj));
    }

    /** reply waits for the response with the given id. */
    async reply(id, timeoutMs = DEADLINE_MS) {
        const [f] = await this.frames.waitFor((f) => f.json && !Array.isArray(f.json) && 'id' in f.json && f.json.id === id &&
            ('result' in f.json || 'error' in f.json), { timeoutMs, what: `the reply to id ${JSON.stringify(id)}` });
        return f.json;
    }

    /** call sends a request and waits for its reply. */
    async call(id, method, params) {
        const from = this.frames.mark();
        await this.send({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
        const [f] = await this.frames.waitFor((f) => f.json?.id === id && ('result' in f.json || 'error' in f.json),
            { from, what: `the reply to ${method}` });
        return f.json;
    }

    async close() {
        if (this.ws.readyState === WebSocket.CLOSED) {
            return;
        }
        this.ws.close(1000);
        try {
            await withTimeout(this.closed, 5_000, 'the raw socket to close');
        } catch {
            this.ws.terminate();
            await this.closed;
        }
    }
}

/** closeAll closes clients, transports and sockets, ignoring errors. */
export async function closeAll(...things) {
    await Promise.allSettled(things.filter(Boolean).map((t) => t.close()));
}

/** freePort finds a free loopback port. */
export async function freePort() {
    return new Promise((resolve, reject) => {
        const srv = net.createServer();
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', () => {
            const { port } = srv.address();
            srv.close(() => resolve(port));
        });
    });
}

/** startRedis runs redis-server on a free port until stop(). */
export async function startRedis() {
    const port = await freePort();
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    const ready = deferred();
    let out = '';
    proc.stdout.setEncoding('utf8');
    proc.stdout.on('data', (d) => {
        out += d;
        if (out.includes('Ready to accept connections')) {
            ready.resolve();
        }
    });
    proc.once('error', (err) => ready.reject(new Error(`redis-server could not start (${err.message}): run make deps`)));
    exited.then((code) => ready.reject(new Error(`redis-server exited (${code}):\n${out}`)));
    await withTimeout(ready.promise, DEADLINE_MS, 'redis-server to start');
    return {
        url: `redis://127.0.0.1:${port}/0`,
        async stop() {
            proc.kill('SIGKILL');
            await exited;
        },
    };
}

/**
 * roundRobin proxies each request to the next target, streaming both ways,
 * as a load balancer without affinity does. onRequest, when given, sees
 * each request as it arrives (a test counts them on the wire).
 */
export async function roundRobin(targets, { onRequest } = {}) {
    let next = 0;
    const server = http.createServer((req, res) => {
        onRequest?.(req);
        const [host, port] = targets[next++ % targets.length].split(':');
        const out = http.request({ host, port, path: req.url, method: req.method, headers: req.headers }, (up) => {
            res.writeHead(up.statusCode, up.headers);
            up.pipe(res);
        });
        out.on('error', () => res.destroy());
        res.on('close', () => out.destroy());
        req.pipe(out);
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
        url: `http://127.0.0.1:${server.address().port}`,
        close: () => new Promise((resolve) => {
            server.closeAllConnections();
            server.close(resolve);
        }),
    };
}
