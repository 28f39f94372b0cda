// (c) The official TypeScript SDK clients, 1.32 (@modelcontextprotocol/sdk)
// and 2.x (@modelcontextprotocol/client), cancelling a call over a Streamable
// HTTP session. Their transports resume every POST stream that ends without
// an answer once they hold an event id of it (GET with Last-Event-ID, after
// the server's retry delay), and resume again each time such a GET ends
// without one. A hub that ended a cancelled call's stream after its priming
// event had every such session GET about once a second for ever. Here the
// GETs are counted on the wire, in a proxy in front of the hub: after the
// cancellations, none may come beyond each session's one long-lived GET
// stream. On one hub, and on two sharing a Redis behind a round-robin
// balancer.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';

import { startHub, startRedis, roundRobin, closeAll, withTimeout, DEADLINE_MS } from './helpers.mjs';

const SDKS = [
    { sdk: 'sdk 1.32', Client: Client1, Transport: Transport1 },
    { sdk: 'client 2.x', Client: Client2, Transport: Transport2 },
];

/** How long after the cancellations the GETs are counted. */
const WINDOW_MS = 5_000;

/** When each call is aborted. */
const ABORT_AFTER_MS = 500;

/** wire counts the requests a proxy saw, by session. */
class Wire {
    constructor() {
        this.requests = [];
    }

    see(req) {
        this.requests.push({ method: req.method, session: req.headers['mcp-session-id'], lastEventId: req.headers['last-event-id'] });
    }

    gets(session) {
        return this.requests.filter((r) => r.method === 'GET' && r.session === session);
    }

    /** waitForGET resolves once the session's first GET went by. */
    async waitForGET(session) {
        const deadline = Date.now() + DEADLINE_MS;
        while (this.gets(session).length === 0) {
            if (Date.now() > deadline) {
                throw new Error(`session ${session} opened no GET stream within ${DEADLINE_MS} ms`);
            }
            await new Promise((r) => setTimeout(r, 10)); // a poll bounded by the deadline, not a synchronisation
        }
    }
}

/** connect connects one SDK's client to url over Streamable HTTP, in a session. */
async function connect({ Client, Transport }, url) {
    const client = new Client({ name: 'e2e-cancel', version: '1.0.0' }, { capabilities: {} });
    const transport = new Transport(new URL(url));
    await withTimeout(client.connect(transport), DEADLINE_MS, `a client to connect to ${url}`);
    assert.ok(transport.sessionId, 'a session-based client');
    return { client, transport };
}

/** callTool calls a tool the way each SDK's Client takes its options. */
function callTool(sdk, client, params, options) {
    return sdk.Client === Client1 ? client.callTool(params, undefined, options) : client.callTool(params, options);
}

/**
 * cancelAndCount connects every SDK's client (each twice: a call without
 * progress, whose stream the client has no event id of when it cancels,
 * and one with, whose stream it has), waits for each session's GET stream,
 * aborts a demo__slow call of each after ABORT_AFTER_MS, and counts the
 * GETs of each session on the wire for WINDOW_MS.
 */
async function cancelAndCount(url, wire) {
    const sessions = [];
    try {
        for (const sdk of SDKS) {
            for (const progress of [false, true]) {
                const { client, transport } = await connect(sdk, url);
                sessions.push({ sdk, progress, client, id: transport.sessionId });
            }
        }
        await Promise.all(sessions.map((s) => wire.waitForGET(s.id)));
        await Promise.all(sessions.map(async (s) => {
            const ac = new AbortController();
            const reports = [];
            const options = { signal: ac.signal, ...(s.progress ? { onprogress: (p) => reports.push(p) } : {}) };
            const call = callTool(s.sdk, s.client, { name: 'demo__slow', arguments: { steps: 30 } }, options);
            const timer = setTimeout(() => ac.abort('changed my mind'), ABORT_AFTER_MS);
            await assert.rejects(call, `${s.sdk}: the aborted call fails`);
            clearTimeout(timer);
            if (s.progress) {
                assert.ok(reports.length > 0, `${s.sdk}: progress came before the abort, so the stream had event ids`);
            }
        }));
        await new Promise((r) => setTimeout(r, WINDOW_MS)); // the window the GETs are counted in
        for (const s of sessions) {
            const gets = s.sdk.sdk + (s.progress ? ' with progress' : '');
            assert.deepEqual(wire.gets(s.id).map((g) => g.lastEventId ?? 'none'), ['none'],
                `${gets}: the session's own GET stream, and no resumption`);
            const res = await callTool(s.sdk, s.client, { name: 'demo__echo', arguments: { text: 'still here' } });
            assert.equal(res.content[0].text, 'still here', `${gets}: the session goes on`);
        }
    } finally {
        await closeAll(...sessions.map((s) => s.client));
    }
}

describe('TS SDK clients cancelling over Streamable HTTP, one hub', () => {
    let hub, lb;
    const wire = new Wire();

    before(async () => {
        hub = await startHub();
        lb = await roundRobin([hub.addr], { onRequest: (req) => wire.see(req) });
    });

    after(async () => {
        await closeAll(lb);
        await hub?.stop();
    });

    it('sends no GET after a cancelled call beyond the session\'s own GET stream', async () => {
        await cancelAndCount(`${lb.url}/mcp`, wire);
    });
});

describe('TS SDK clients cancelling over Streamable HTTP, two hubs behind a round-robin balancer', () => {
    let redis, a, b, lb;
    const wire = new Wire();

    before(async () => {
        redis = await startRedis();
        a = await startHub({ args: ['--redis', redis.url] });
        b = await startHub({ args: ['--redis', redis.url] });
        lb = await roundRobin([a.addr, b.addr], { onRequest: (req) => wire.see(req) });
    });

    after(async () => {
        await closeAll(lb);
        await a?.stop();
        await b?.stop();
        await redis?.stop();
    });

    it('sends no GET after a cancelled call beyond the session\'s own GET stream', async () => {
        await cancelAndCount(`${lb.url}/mcp`, wire);
    });
});
