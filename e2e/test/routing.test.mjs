// Routing through the hub with TS SDK servers: replicas of one server name,
// the hub's live switchboard://servers resource, call timeouts, pagination.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
    McpError,
    CallToolRequestSchema,
    ListToolsRequestSchema,
    ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { startHub, connectClient, waitForTools, closeAll, DialOutTransport, Inbox, withTimeout, DEADLINE_MS } from './helpers.mjs';
import { createTsServer } from './tsserver.mjs';

/** replica builds a TS server named "rep" whose "who" tool names the replica. */
function replica(label, extra) {
    const s = createTsServer({ name: 'rep', serverInfoName: `rep-${label}` });
    s.mcp.registerTool('who', { description: 'Which replica answers.' }, async () => {
        s.seen.calls.push({ tool: 'who' });
        return { content: [{ type: 'text', text: label }] };
    });
    extra?.(s);
    return s;
}

describe('replicas of one server name', () => {
    let hub, client, r1, r2;
    const updates = new Inbox('resources/updated');

    before(async () => {
        hub = await startHub({ demo: false });
        client = await connectClient(hub, {
            name: 'routing-client',
            setup: (c) => c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params)),
        });
        await client.subscribeResource({ uri: 'switchboard://servers' });
    });

    after(async () => {
        await closeAll(client, r1, r2);
        await hub?.stop();
    });

    /** servers reads switchboard://servers until pred holds, waiting on its updates. */
    async function serversUntil(pred, what) {
        const deadline = Date.now() + DEADLINE_MS;
        for (;;) {
            const mark = updates.mark();
            const doc = JSON.parse((await client.readResource({ uri: 'switchboard://servers' })).contents[0].text);
            if (pred(doc)) {
                return doc;
            }
            const left = deadline - Date.now();
            if (left <= 0) {
                throw new Error(`timed out waiting for switchboard://servers to show ${what}: ${JSON.stringify(doc)}`);
            }
            await updates.waitFor((u) => u.uri === 'switchboard://servers', { from: mark, timeoutMs: left, what });
        }
    }

    it('merges the lists of two replicas and shows both in switchboard://servers (updated live)', async () => {
        r1 = replica('one');
        r2 = replica('two', (s) => s.mcp.registerTool('only2', { description: 'Only on replica two.' }, async () => ({
            content: [{ type: 'text', text: 'two only' }],
        })));
        await r1.connect(hub.serverURL('rep'));
        await r2.connect(hub.serverURL('rep'));
        const doc = await serversUntil((d) => d.servers.find((s) => s.name === 'rep')?.replicas?.length === 2, 'two replicas of rep');
        const rep = doc.servers.find((s) => s.name === 'rep');
        assert.deepEqual(rep.replicas.map((r) => r.serverInfo.name).sort(), ['rep-one', 'rep-two']);
        const tools = await waitForTools(client, ['rep__who', 'rep__only2']);
        assert.equal(tools.filter((t) => t.name === 'rep__who').length, 1, 'a tool both replicas offer is listed once');
    });

    it('routes a tool only one replica offers to that replica', async () => {
        for (let i = 0; i < 4; i++) {
            const res = await client.callTool({ name: 'rep__only2', arguments: {} });
            assert.equal(res.content[0].text, 'two only');
        }
    });

    it('spreads concurrent calls over the replicas (fewest in flight first)', async () => {
        const m1 = r1.seen.calls.mark(), m2 = r2.seen.calls.mark();
        const calls = ['k1', 'k2'].map((key) => client.callTool({ name: 'rep__wait', arguments: { key } }));
        const started = (s, m) => s.seen.calls.since(m, (c) => c.tool === 'wait').length;
        // Each replica gets one call: wait until both are in flight.
        await Promise.all([
            r1.seen.calls.waitFor((c) => c.tool === 'wait', { from: m1, what: 'a call at replica one' }),
            r2.seen.calls.waitFor((c) => c.tool === 'wait', { from: m2, what: 'a call at replica two' }),
        ]);
        assert.equal(started(r1, m1) + started(r2, m2), 2);
        for (const key of ['k1', 'k2']) {
            r1.release(key);
            r2.release(key);
        }
        const res = await withTimeout(Promise.all(calls), DEADLINE_MS, 'the released calls');
        assert.deepEqual(res.map((r) => r.content[0].text).sort(), ['released k1', 'released k2']);
    });

    it('keeps serving through the remaining replica when one leaves', async () => {
        const mark = updates.mark();
        await r2.close();
        await updates.waitFor((u) => u.uri === 'switchboard://servers', { from: mark, what: 'switchboard://servers to change' });
        await serversUntil((d) => d.servers.find((s) => s.name === 'rep')?.replicas?.length === 1, 'one replica left');
        for (let i = 0; i < 3; i++) {
            const res = await client.callTool({ name: 'rep__who', arguments: {} });
            assert.equal(res.content[0].text, 'one');
        }
        const { tools } = await client.listTools();
        assert.ok(!tools.some((t) => t.name === 'rep__only2'), 'the leaver\'s own tool is gone');
    });
});

describe('call timeout (--call-timeout 500ms)', () => {
    let hub, client, ts;

    before(async () => {
        hub = await startHub({ demo: false, args: ['--call-timeout', '500ms'] });
        ts = createTsServer({ name: 'slowpoke' });
        await ts.connect(hub.serverURL('slowpoke'));
        client = await connectClient(hub, { name: 'timeout-client' });
        await waitForTools(client, ['slowpoke__wait']);
    });

    after(async () => {
        await closeAll(client, ts);
        await hub?.stop();
    });

    it('fails a call that outlives the timeout with -32001 and cancels it at the server', async () => {
        const mark = ts.seen.aborts.mark();
        const started = Date.now();
        await assert.rejects(client.callTool({ name: 'slowpoke__wait', arguments: { key: 't' } }), (err) => {
            assert.ok(err instanceof McpError, `expected an McpError, got ${err}`);
            assert.equal(err.code, -32001, err.message);
            return true;
        });
        const took = Date.now() - started;
        assert.ok(took >= 400 && took < 5_000, `timed out after ${took} ms`);
        await ts.seen.aborts.waitFor((a) => a.key === 't', { from: mark, what: 'the server to see the cancellation' });
        const ok = await client.callTool({ name: 'slowpoke__greet', arguments: { name: 'Cy' } });
        assert.equal(ok.content[0].text, 'Hello, Cy!');
    });
});

describe('pagination', () => {
    let hub, client, low, lowTransport;
    const TOTAL = 150, SERVER_PAGE = 40;
    const names = Array.from({ length: TOTAL }, (_, i) => `t${String(i).padStart(3, '0')}`);
    const listCalls = new Inbox('tools/list at the server');

    before(async () => {
        hub = await startHub({ demo: false });
        // A low-level SDK Server that pages its own tools/list.
        low = new Server({ name: 'pager', version: '1.0.0' }, { capabilities: { tools: {} } });
        low.setRequestHandler(ListToolsRequestSchema, async (req) => {
            const start = req.params?.cursor ? Number(req.params.cursor) : 0;
            listCalls.push(req.params?.cursor ?? null);
            const page = names.slice(start, start + SERVER_PAGE)
                .map((name) => ({ name, inputSchema: { type: 'object', properties: {} } }));
            const next = start + SERVER_PAGE;
            return next < TOTAL ? { tools: page, nextCursor: String(next) } : { tools: page };
        });
        low.setRequestHandler(CallToolRequestSchema, async (req) => ({ content: [{ type: 'text', text: `called ${req.params.name}` }] }));
        lowTransport = new DialOutTransport(hub.serverURL('pager'));
        await low.connect(lowTransport);
        client = await connectClient(hub, { name: 'pager-client' });
        await waitForTools(client, ['pager__t000']);
    });

    after(async () => {
        await closeAll(client, low);
        await hub?.stop();
    });

    it('fetches every page of a server\'s list and serves them in pages of the hub\'s size', async () => {
        assert.deepEqual(listCalls.items, [null, '40', '80', '120'], 'the hub followed the server\'s cursors');
        const got = [];
        let cursor, pages = 0;
        do {
            const res = await client.listTools(cursor ? { cursor } : {});
            got.push(...res.tools.map((t) => t.name));
            cursor = res.nextCursor;
            pages++;
            assert.ok(pages < 10, 'the pages end');
        } while (cursor);
        assert.equal(pages, 2, 'a page holds 100 tools');
        assert.deepEqual(got, names.map((n) => `pager__${n}`));
        const res = await client.callTool({ name: 'pager__t149', arguments: {} });
        assert.equal(res.content[0].text, 'called t149');
    });

    it('answers an invalid cursor with -32602', async () => {
        await assert.rejects(client.listTools({ cursor: '!!not a cursor!!' }), (err) => {
            assert.ok(err instanceof McpError);
            assert.equal(err.code, -32602, err.message);
            return true;
        });
    });
});
