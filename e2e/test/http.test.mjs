// (c) The official TypeScript SDK's Client over Streamable HTTP
// (StreamableHTTPClientTransport), the transport its newest versions keep:
// against the hub's /mcp and a server's own /servers/<name>/mcp, and across
// two hub instances sharing one Redis behind a round-robin proxy without
// affinity.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    LoggingMessageNotificationSchema,
    ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { startHub, startRedis, roundRobin, closeAll, Inbox, withTimeout, DEADLINE_MS } from './helpers.mjs';
import { createTsServer } from './tsserver.mjs';

/** connectHTTP connects an SDK Client to url over Streamable HTTP. */
async function connectHTTP(url, { capabilities = {}, setup } = {}) {
    const client = new Client({ name: 'e2e-http-client', version: '1.0.0' }, { capabilities });
    setup?.(client);
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await withTimeout(client.connect(transport), DEADLINE_MS, `a client to connect to ${url}`);
    return client;
}

/** waitForTool re-lists until name is there. */
async function waitForTool(client, name) {
    const deadline = Date.now() + DEADLINE_MS;
    for (;;) {
        const { tools } = await client.listTools();
        if (tools.some((t) => t.name === name)) {
            return;
        }
        if (Date.now() > deadline) {
            throw new Error(`timed out waiting for tool ${name}`);
        }
        await new Promise((r) => setTimeout(r, 20)); // a re-list, not a synchronisation: the deadline bounds it
    }
}

function features(seen) {
    return {
        capabilities: { sampling: {}, elicitation: { form: {} } },
        setup(c) {
            c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
                seen.sampling.push(req.params);
                return { model: 'm', role: 'assistant', content: { type: 'text', text: `answer to ${req.params.messages[0].content.text}` } };
            });
            c.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada', age: 36 } }));
            c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => seen.updates.push(n.params));
            c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => seen.logs.push(n.params));
        },
    };
}

function newSeen() {
    return { sampling: new Inbox('sampling'), updates: new Inbox('resources/updated'), logs: new Inbox('logs') };
}

describe('TS SDK Client over Streamable HTTP, one hub', () => {
    let hub, ts, client;
    const seen = newSeen();

    before(async () => {
        hub = await startHub({ demo: false });
        ts = createTsServer({ name: 'tsserver' });
        await ts.connect(hub.serverURL('tsserver'));
        client = await connectHTTP(`http://${hub.addr}/mcp`, features(seen));
        await waitForTool(client, 'tsserver__greet');
    });

    after(async () => {
        await closeAll(client, ts);
        await hub?.stop();
    });

    it('lists and calls through the aggregate endpoint', async () => {
        assert.equal(client.getServerVersion().name, 'switchboard');
        const { tools } = await client.listTools();
        assert.ok(tools.some((t) => t.name === 'tsserver__greet'));
        const res = await client.callTool({ name: 'tsserver__greet', arguments: { name: 'Ada' } });
        assert.match(res.content[0].text, /Ada/);
    });

    it('relays progress on the call\'s stream, and cancels a call upstream', async () => {
        const progress = [];
        const res = await client.callTool({ name: 'tsserver__countdown', arguments: { steps: 3 } }, undefined, {
            onprogress: (p) => progress.push(p.progress),
        });
        assert.equal(res.content[0].text, 'counted 3');
        assert.ok(progress.length >= 2, `progress reports arrived (${progress})`);

        const abortMark = ts.seen.aborts.mark();
        const callMark = ts.seen.calls.mark();
        const ac = new AbortController();
        const call = client.callTool({ name: 'tsserver__wait', arguments: { key: 'http-cancel' } }, undefined, { signal: ac.signal });
        call.catch(() => {});
        await ts.seen.calls.waitFor((c) => c.key === 'http-cancel', { from: callMark, what: 'the wait to start' });
        ac.abort('changed my mind');
        await assert.rejects(call);
        await ts.seen.aborts.waitFor((a) => a.key === 'http-cancel', { from: abortMark, what: 'the cancellation upstream' });
    });

    it('routes the server\'s sampling and elicitation to this client and back', async () => {
        const res = await client.callTool({ name: 'tsserver__ask', arguments: { question: 'why?' } });
        assert.match(res.content[0].text, /answer to why\?/);
        const confirm = await client.callTool({ name: 'tsserver__confirm', arguments: {} });
        assert.match(JSON.stringify(confirm.content), /Ada/);
    });

    it('delivers resources/updated and log lines at the client\'s level', async () => {
        await client.subscribeResource({ uri: 'ts://status' });
        const mark = seen.updates.mark();
        await client.callTool({ name: 'tsserver__touch', arguments: { uri: 'ts://status' } });
        await seen.updates.waitFor((u) => u.uri === 'ts://status', { from: mark });

        await client.setLoggingLevel('warning');
        const logMark = seen.logs.mark();
        await client.callTool({ name: 'tsserver__log', arguments: { tag: 'http' } });
        const got = await seen.logs.waitFor((l) => l.data?.tag === 'http', { from: logMark, count: 2 });
        assert.deepEqual(got.map((l) => l.level), ['warning', 'error']);
    });

    it('serves one server at /servers/<name>/mcp under its own names', async () => {
        const own = await connectHTTP(`http://${hub.addr}/servers/tsserver/mcp`);
        try {
            assert.equal(own.getServerVersion().name, 'ts-sdk-server');
            assert.equal(own.getInstructions(), 'A TypeScript SDK server behind Switchboard.');
            const { tools } = await own.listTools();
            assert.ok(tools.some((t) => t.name === 'greet'), 'its own names');
            assert.ok(!tools.some((t) => t.name.includes('__')), 'no prefixes');
            const res = await own.callTool({ name: 'greet', arguments: { name: 'Bo' } });
            assert.match(res.content[0].text, /Bo/);
        } finally {
            await own.close();
        }
    });
});

describe('TS SDK Client over Streamable HTTP, two hubs behind a round-robin proxy', () => {
    let redis, a, b, ts, lb, client;
    const seen = newSeen();

    before(async () => {
        redis = await startRedis();
        a = await startHub({ demo: false, args: ['--redis', redis.url] });
        b = await startHub({ demo: false, args: ['--redis', redis.url] });
        ts = createTsServer({ name: 'tsserver' });
        await ts.connect(b.serverURL('tsserver'));
        lb = await roundRobin([a.addr, b.addr]);
        client = await connectHTTP(`${lb.url}/mcp`, features(seen));
        await waitForTool(client, 'tsserver__greet');
    });

    after(async () => {
        await closeAll(client, ts, lb);
        await a?.stop();
        await b?.stop();
        await redis?.stop();
    });

    it('keeps one session wherever its requests land: calls, progress, sampling, updates', async () => {
        for (const who of ['Ada', 'Bo', 'Cy', 'Di']) {
            const res = await client.callTool({ name: 'tsserver__greet', arguments: { name: who } });
            assert.match(res.content[0].text, new RegExp(who));
        }
        const progress = [];
        await client.callTool({ name: 'tsserver__countdown', arguments: { steps: 3 } }, undefined, {
            onprogress: (p) => progress.push(p.progress),
        });
        assert.ok(progress.length >= 2, `progress reports arrived (${progress})`);
        const res = await client.callTool({ name: 'tsserver__ask', arguments: { question: 'where?' } });
        assert.match(res.content[0].text, /answer to where\?/);
        await client.subscribeResource({ uri: 'ts://status' });
        const mark = seen.updates.mark();
        await client.callTool({ name: 'tsserver__touch', arguments: { uri: 'ts://status' } });
        await seen.updates.waitFor((u) => u.uri === 'ts://status', { from: mark });
    });
});
