// (a) The official TypeScript SDK Client, over its own WebSocketClientTransport,
// against the hub's /mcp endpoint with the built-in demo server (and a small
// TS server, "helper", for isError and logging).

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { McpError } from '@modelcontextprotocol/sdk/types.js';
import {
    CreateMessageRequestSchema,
    LoggingMessageNotificationSchema,
    ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { startHub, connectClient, waitForTools, closeAll, Inbox, withTimeout, DEADLINE_MS } from './helpers.mjs';
import { createTsServer } from './tsserver.mjs';

const SERVER_META = 'switchboard/server';

/** rejectsWithCode asserts that a promise rejects with an McpError of the code. */
async function rejectsWithCode(promise, code, what) {
    await assert.rejects(promise, (err) => {
        assert.ok(err instanceof McpError, `${what}: expected an McpError, got ${err}`);
        assert.equal(err.code, code, `${what}: error code (message: ${err.message})`);
        return true;
    });
}

describe('SDK client against the hub with the demo server', () => {
    let hub, client, helper;
    const updates = new Inbox('notifications/resources/updated');
    const logs = new Inbox('notifications/message');
    const samplingRequests = new Inbox('sampling/createMessage');

    before(async () => {
        hub = await startHub({ demo: true });
        helper = createTsServer({ name: 'helper' });
        await helper.connect(hub.serverURL('helper'));
        client = await connectClient(hub, {
            name: 'e2e-demo-client',
            capabilities: { sampling: {} },
            setup(c) {
                c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params));
                c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
                c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
                    samplingRequests.push(req.params);
                    const q = req.params.messages[0].content.text;
                    return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: `answer to: ${q}` } };
                });
            },
        });
        await waitForTools(client, ['demo__echo', 'demo__add', 'demo__slow', 'demo__ask', 'demo__increment', 'helper__fail']);
    });

    after(async () => {
        await closeAll(client, helper);
        await hub?.stop();
    });

    it('initializes: serverInfo "switchboard" and the declared capabilities', () => {
        const info = client.getServerVersion();
        assert.equal(info.name, 'switchboard');
        assert.ok(info.version, 'serverInfo.version is set');
        const caps = client.getServerCapabilities();
        assert.ok(caps.tools, 'tools capability');
        assert.equal(caps.tools.listChanged, true, 'tools.listChanged');
        assert.equal(caps.resources?.subscribe, true, 'resources.subscribe');
        assert.equal(caps.resources?.listChanged, true, 'resources.listChanged');
        assert.ok(caps.prompts, 'prompts capability');
        assert.ok(caps.completions, 'completions capability');
        assert.ok(caps.logging, 'logging capability');
        assert.match(client.getInstructions() ?? '', /__/, 'instructions explain the naming');
    });

    it('lists the demo tools, renamed and tagged with their server', async () => {
        const { tools } = await client.listTools();
        const byName = new Map(tools.map((t) => [t.name, t]));
        for (const n of ['echo', 'add', 'slow', 'ask', 'increment']) {
            const t = byName.get(`demo__${n}`);
            assert.ok(t, `demo__${n} is listed`);
            assert.equal(t._meta?.[SERVER_META], 'demo', `demo__${n} _meta[${SERVER_META}]`);
            assert.equal(t.inputSchema.type, 'object');
        }
        assert.ok(!byName.has('echo'), 'no un-prefixed names');
        assert.deepEqual(byName.get('demo__add').outputSchema?.required, ['sum']);
        assert.equal(byName.get('helper__fail')._meta?.[SERVER_META], 'helper');
    });

    it('calls demo__add: text content and structuredContent', async () => {
        const res = await client.callTool({ name: 'demo__add', arguments: { a: 2, b: 3.5 } });
        assert.notEqual(res.isError, true);
        assert.deepEqual(res.content, [{ type: 'text', text: '5.5' }]);
        assert.deepEqual(res.structuredContent, { sum: 5.5 });
        const echo = await client.callTool({ name: 'demo__echo', arguments: { text: 'héllo ✓' } });
        assert.equal(echo.content[0].text, 'héllo ✓');
    });

    it('answers an unknown tool with -32602', async () => {
        await rejectsWithCode(client.callTool({ name: 'demo__nope', arguments: {} }), -32602, 'unknown tool of a known server');
        await rejectsWithCode(client.callTool({ name: 'ghost__echo', arguments: {} }), -32602, 'tool of an unknown server');
        await rejectsWithCode(client.callTool({ name: 'echo', arguments: {} }), -32602, 'name without a server');
    });

    it('passes through a tool result with isError: true', async () => {
        const res = await client.callTool({ name: 'helper__fail', arguments: {} });
        assert.equal(res.isError, true);
        assert.deepEqual(res.content, [{ type: 'text', text: 'it failed on purpose' }]);
    });

    it('relays progress of demo__slow to onprogress, in order', async () => {
        const progress = [];
        const res = await client.callTool({ name: 'demo__slow', arguments: { steps: 5, delayMs: 30 } }, undefined, {
            onprogress: (p) => progress.push(p),
        });
        assert.equal(res.content[0].text, 'done after 5 steps');
        // The SDK runs notification handlers a microtask later but matches
        // responses at once, so a report that reaches it in the same socket
        // read as the result is dropped ("unknown token"); the hub's own wire
        // order is checked in raw.test.mjs. Earlier reports, 30 ms apart, arrive.
        const seq = progress.map((p) => p.progress);
        assert.ok(seq.length >= 3, `at least 3 progress reports: ${seq}`);
        assert.deepEqual(seq, [1, 2, 3, 4, 5].slice(0, seq.length), 'progress reports in order');
        assert.ok(progress.every((p) => p.total === 5), 'total is relayed');
        assert.equal(progress[0].message, 'step 1 of 5');
    });

    it('cancels demo__slow through an AbortSignal and keeps serving the client', async () => {
        const ac = new AbortController();
        const progress = new Inbox('progress');
        const call = client.callTool({ name: 'demo__slow', arguments: { steps: 100, delayMs: 50 } }, undefined, {
            signal: ac.signal,
            onprogress: (p) => progress.push(p),
        });
        call.catch(() => {}); // observed below
        await progress.waitFor(() => true, { what: 'the first progress report of demo__slow' });
        ac.abort('changed my mind');
        await assert.rejects(withTimeout(call, DEADLINE_MS, 'the cancelled call to reject'));
        // The session is intact: other calls, including another slow one, succeed.
        const echo = await client.callTool({ name: 'demo__echo', arguments: { text: 'still here' } });
        assert.equal(echo.content[0].text, 'still here');
        const slow = await client.callTool({ name: 'demo__slow', arguments: { steps: 2, delayMs: 10 } });
        assert.equal(slow.content[0].text, 'done after 2 steps');
    });

    it('routes sampling from demo__ask to this client and returns the handler\'s text', async () => {
        const mark = samplingRequests.mark();
        const res = await client.callTool({ name: 'demo__ask', arguments: { question: 'What is 6 x 7?' } });
        assert.equal(res.content[0].text, 'answer to: What is 6 x 7?');
        const [req] = samplingRequests.since(mark);
        assert.equal(req.maxTokens, 200);
        assert.equal(req.messages[0].role, 'user');
        assert.equal(req.messages[0].content.text, 'What is 6 x 7?');
        assert.equal(typeof req._meta?.['switchboard/relatedRequest'], 'number',
            'the hub names the client\'s own call (the SDK\'s numeric id) that the request serves');
    });

    it('lists and reads resources and templates', async () => {
        const { resources } = await client.listResources();
        const byURI = new Map(resources.map((r) => [r.uri, r]));
        for (const uri of ['demo://clock', 'demo://counter']) {
            assert.ok(byURI.has(uri), `${uri} is listed`);
            assert.equal(byURI.get(uri)._meta?.[SERVER_META], 'demo');
        }
        const before = await client.readResource({ uri: 'demo://counter' });
        assert.equal(before.contents[0].uri, 'demo://counter');
        const n0 = Number(before.contents[0].text);
        assert.ok(Number.isInteger(n0), `counter is an integer: ${before.contents[0].text}`);
        const inc = await client.callTool({ name: 'demo__increment', arguments: { by: 3 } });
        assert.equal(inc.content[0].text, String(n0 + 3));
        const after = await client.readResource({ uri: 'demo://counter' });
        assert.equal(after.contents[0].text, String(n0 + 3));

        const { resourceTemplates } = await client.listResourceTemplates();
        const tmpl = resourceTemplates.find((t) => t.uriTemplate === 'demo://greeting/{name}');
        assert.ok(tmpl, 'demo://greeting/{name} is listed');
        assert.equal(tmpl._meta?.[SERVER_META], 'demo');
        const greeting = await client.readResource({ uri: 'demo://greeting/ada' });
        assert.deepEqual(greeting.contents.map((c) => c.text), ['Hello, ada!']);

        await rejectsWithCode(client.readResource({ uri: 'nowhere://x' }), -32002, 'unknown resource');
    });

    it('delivers resources/updated for demo://clock while subscribed, and stops after unsubscribe', async () => {
        const mark = updates.mark();
        await client.subscribeResource({ uri: 'demo://clock' });
        const got = await updates.waitFor((u) => u.uri === 'demo://clock', { from: mark, count: 2, timeoutMs: 6_000 });
        assert.equal(got.length, 2);
        await client.unsubscribeResource({ uri: 'demo://clock' });
        const after = updates.mark();
        // An absence can only be observed over a window: the clock ticks every
        // second, so a subscription that survived would deliver 3 in 3.2 s.
        // One update already on the wire when unsubscribing is tolerated.
        await new Promise((r) => setTimeout(r, 3_200));
        const late = updates.since(after, (u) => u.uri === 'demo://clock');
        assert.ok(late.length <= 1, `updates after unsubscribe: ${late.length}`);
    });

    it('lists and gets the demo prompt', async () => {
        const { prompts } = await client.listPrompts();
        const greet = prompts.find((p) => p.name === 'demo__greet');
        assert.ok(greet, 'demo__greet is listed');
        assert.equal(greet._meta?.[SERVER_META], 'demo');
        assert.deepEqual(greet.arguments.map((a) => [a.name, !!a.required]), [['name', true], ['style', false]]);
        const res = await client.getPrompt({ name: 'demo__greet', arguments: { name: 'Ada', style: 'formal' } });
        assert.equal(res.description, 'A formal greeting');
        assert.equal(res.messages[0].content.text, 'Write a formal greeting for Ada.');
        await rejectsWithCode(client.getPrompt({ name: 'demo__nope', arguments: {} }), -32602, 'unknown prompt');
    });

    it('completes the style argument of demo__greet', async () => {
        const res = await client.complete({ ref: { type: 'ref/prompt', name: 'demo__greet' }, argument: { name: 'style', value: 'f' } });
        assert.deepEqual(res.completion.values, ['formal']);
        const all = await client.complete({ ref: { type: 'ref/prompt', name: 'demo__greet' }, argument: { name: 'style', value: '' } });
        assert.deepEqual(all.completion.values, ['casual', 'formal']);
    });

    it('filters server log messages by the client\'s logging level', async () => {
        await client.setLoggingLevel('warning');
        let mark = logs.mark();
        await client.callTool({ name: 'helper__log', arguments: { tag: 't1' } });
        const got = await logs.waitFor((l) => l.data?.tag === 't1', { from: mark, count: 2, what: 'warning and error logs' });
        assert.deepEqual(got.map((l) => l.level), ['warning', 'error']);
        assert.equal(got[0].logger, 'tslogger');
        assert.equal(got[0]._meta?.[SERVER_META], 'helper');
        // "error" was sent last: had debug or info passed the filter, they
        // would have arrived before it.
        assert.deepEqual(logs.since(mark, (l) => l.data?.tag === 't1').map((l) => l.level), ['warning', 'error']);

        await client.setLoggingLevel('debug');
        mark = logs.mark();
        await client.callTool({ name: 'helper__log', arguments: { tag: 't2' } });
        const all = await logs.waitFor((l) => l.data?.tag === 't2', { from: mark, count: 4, what: 'all four logs' });
        assert.deepEqual(all.map((l) => l.level), ['debug', 'info', 'warning', 'error']);
    });
});
