// (b) A TypeScript SDK McpServer that dials OUT to the hub's /mcp/server
// endpoint (over DialOutTransport), used through the hub by SDK Clients on
// /mcp. The hub runs without the demo server.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as z from 'zod';

import {
    McpError,
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema,
    LoggingMessageNotificationSchema,
    ResourceUpdatedNotificationSchema,
    ToolListChangedNotificationSchema,
    PromptListChangedNotificationSchema,
    ResourceListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { startHub, connectClient, waitForTools, closeAll, Inbox, RawSocket, withTimeout, DEADLINE_MS } from './helpers.mjs';
import { createTsServer } from './tsserver.mjs';

const SERVER_META = 'switchboard/server';
const TOOLS = ['greet', 'divide', 'fail', 'countdown', 'wait', 'ask', 'askabort', 'urlelicit', 'confirm', 'roots', 'log', 'touch'];

async function rejectsWithCode(promise, code, what) {
    await assert.rejects(promise, (err) => {
        assert.ok(err instanceof McpError, `${what}: expected an McpError, got ${err}`);
        assert.equal(err.code, code, `${what}: error code (message: ${err.message})`);
        return true;
    });
}

/** samplingHandler answers sampling/createMessage, naming the client. */
function samplingHandler(label, inbox) {
    return async (req) => {
        inbox?.push(req.params);
        const q = req.params.messages[0].content.text;
        return { model: `model-${label}`, role: 'assistant', content: { type: 'text', text: `${label} answers ${q}` } };
    };
}

describe('TS SDK McpServer dialing out to the hub', () => {
    let hub, ts, client;
    let roots = [{ uri: 'file:///work/project', name: 'project' }];
    const seen = {
        sampling: new Inbox('sampling requests'),
        elicit: new Inbox('elicitation requests'),
        rootsRequests: new Inbox('roots/list requests'),
        updates: new Inbox('resources/updated'),
        logs: new Inbox('notifications/message'),
        toolsChanged: new Inbox('tools/list_changed'),
        promptsChanged: new Inbox('prompts/list_changed'),
        resourcesChanged: new Inbox('resources/list_changed'),
    };
    let elicitAnswer = { action: 'accept', content: { name: 'Ada', age: 36 } };

    const others = []; // more clients and servers, closed after the suite

    before(async () => {
        hub = await startHub({ demo: false });
        ts = createTsServer({ name: 'tsserver' });
        await ts.connect(hub.serverURL('tsserver'));
        client = await connectClient(hub, {
            name: 'e2e-ts-client',
            capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } },
            setup(c) {
                c.setRequestHandler(CreateMessageRequestSchema, samplingHandler('main', seen.sampling));
                c.setRequestHandler(ElicitRequestSchema, async (req) => {
                    seen.elicit.push(req.params);
                    return elicitAnswer;
                });
                c.setRequestHandler(ListRootsRequestSchema, async () => {
                    seen.rootsRequests.push(roots);
                    return { roots };
                });
                c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => seen.updates.push(n.params));
                c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => seen.logs.push(n.params));
                c.setNotificationHandler(PromptListChangedNotificationSchema, (n) => seen.promptsChanged.push(n));
                c.setNotificationHandler(ResourceListChangedNotificationSchema, (n) => seen.resourcesChanged.push(n));
            },
        });
        await waitForTools(client, TOOLS.map((t) => `tsserver__${t}`));
        // From now on the suite keeps its own tools/list_changed handler.
        client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => seen.toolsChanged.push(n));
    });

    after(async () => {
        await closeAll(client, ts, ...others);
        await hub?.stop();
    });

    async function newClient(name, capabilities = {}, setup) {
        const c = await connectClient(hub, { name, capabilities, setup });
        others.push(c);
        return c;
    }

    it('registers under its ?name= with every tool, resource, template and prompt tagged', async () => {
        const { tools } = await client.listTools();
        const names = tools.map((t) => t.name).sort();
        assert.deepEqual(names, TOOLS.map((t) => `tsserver__${t}`).sort());
        assert.ok(tools.every((t) => t._meta?.[SERVER_META] === 'tsserver'), 'every tool is tagged');
        const greet = tools.find((t) => t.name === 'tsserver__greet');
        assert.equal(greet.title, 'Greet');
        assert.deepEqual(Object.keys(greet.inputSchema.properties).sort(), ['name', 'times']);
        assert.deepEqual(greet.inputSchema.required, ['name']);

        const { resources } = await client.listResources();
        assert.equal(resources.find((r) => r.uri === 'ts://status')?._meta?.[SERVER_META], 'tsserver');
        const { resourceTemplates } = await client.listResourceTemplates();
        assert.equal(resourceTemplates.find((t) => t.uriTemplate === 'ts://notes/{id}')?._meta?.[SERVER_META], 'tsserver');
        const { prompts } = await client.listPrompts();
        assert.equal(prompts.find((p) => p.name === 'tsserver__review')?._meta?.[SERVER_META], 'tsserver');

        const doc = JSON.parse((await client.readResource({ uri: 'switchboard://servers' })).contents[0].text);
        const entry = doc.servers.find((s) => s.name === 'tsserver');
        assert.ok(entry, 'switchboard://servers lists tsserver');
        assert.equal(entry.replicas[0].serverInfo.name, 'ts-sdk-server');
        assert.equal(entry.tools, TOOLS.length);
    });

    it('names a server without ?name= after its normalised serverInfo.name', async () => {
        const anon = createTsServer({ name: 'anon', serverInfoName: 'My TS Server!' });
        others.push(anon);
        await anon.connect(hub.serverURL());
        await waitForTools(client, ['my-ts-server__greet']);
        client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => seen.toolsChanged.push(n));
        const res = await client.callTool({ name: 'my-ts-server__greet', arguments: { name: 'Bo' } });
        assert.equal(res.content[0].text, 'Hello, Bo!');
        const mark = seen.toolsChanged.mark();
        await anon.close();
        await seen.toolsChanged.waitFor(() => true, { from: mark, what: 'tools/list_changed after the server left' });
        const { tools } = await client.listTools();
        assert.ok(!tools.some((t) => t.name.startsWith('my-ts-server__')), 'its tools are gone');
    });

    it('validates input with the zod schema (errors come back as isError)', async () => {
        const ok = await client.callTool({ name: 'tsserver__greet', arguments: { name: 'Ada', times: 2 } });
        assert.notEqual(ok.isError, true);
        assert.equal(ok.content[0].text, 'Hello, Ada! Hello, Ada!');
        const bad = await client.callTool({ name: 'tsserver__greet', arguments: { name: 'Ada', times: 7 } });
        assert.equal(bad.isError, true);
        assert.match(bad.content[0].text, /Input validation error/);
    });

    it('returns structuredContent that matches the outputSchema, and isError results', async () => {
        const { tools } = await client.listTools();
        const divide = tools.find((t) => t.name === 'tsserver__divide');
        assert.deepEqual(Object.keys(divide.outputSchema.properties).sort(), ['quotient', 'remainder']);
        const res = await client.callTool({ name: 'tsserver__divide', arguments: { a: 7, b: 2 } });
        assert.deepEqual(res.structuredContent, { quotient: 3, remainder: 1 });
        const byZero = await client.callTool({ name: 'tsserver__divide', arguments: { a: 1, b: 0 } });
        assert.equal(byZero.isError, true);
        assert.equal(byZero.content[0].text, 'division by zero');
        const fail = await client.callTool({ name: 'tsserver__fail', arguments: {} });
        assert.equal(fail.isError, true);
        assert.equal(fail.content[0].text, 'it failed on purpose');
        await rejectsWithCode(client.callTool({ name: 'tsserver__nope', arguments: {} }), -32602, 'unknown tool');
    });

    it('relays progress, with tokens rewritten so that two clients\' equal tokens do not collide', async () => {
        // Two fresh clients send the same requests, so the SDK gives their
        // calls the same ids and progress tokens.
        const a = await newClient('progress-a');
        const b = await newClient('progress-b');
        const progA = [], progB = [];
        const mark = ts.seen.calls.mark();
        const [ra, rb] = await Promise.all([
            a.callTool({ name: 'tsserver__countdown', arguments: { steps: 4 } }, undefined, { onprogress: (p) => progA.push(p) }),
            b.callTool({ name: 'tsserver__countdown', arguments: { steps: 6 } }, undefined, { onprogress: (p) => progB.push(p) }),
        ]);
        assert.equal(ra.content[0].text, 'counted 4');
        assert.equal(rb.content[0].text, 'counted 6');
        const tokens = ts.seen.calls.since(mark, (c) => c.tool === 'countdown').map((c) => c.token);
        assert.equal(tokens.length, 2);
        assert.ok(tokens.every((t) => t !== undefined), 'the server got progress tokens');
        assert.notEqual(tokens[0], tokens[1], 'the server sees distinct tokens');
        // Each client sees only its own reports, in order (the last may be
        // lost to the SDK's microtask race, see client-demo.test.mjs).
        assert.ok(progA.length >= 3 && progB.length >= 5, `reports: a=${progA.length} b=${progB.length}`);
        assert.ok(progA.every((p, i) => p.total === 4 && p.progress === i + 1), `a: ${JSON.stringify(progA)}`);
        assert.ok(progB.every((p, i) => p.total === 6 && p.progress === i + 1), `b: ${JSON.stringify(progB)}`);
    });

    it('cancels: the server\'s tool sees its AbortSignal fire, and keeps working', async () => {
        const ac = new AbortController();
        const callMark = ts.seen.calls.mark();
        const abortMark = ts.seen.aborts.mark();
        const call = client.callTool({ name: 'tsserver__wait', arguments: { key: 'c1' } }, undefined, { signal: ac.signal });
        call.catch(() => {});
        await ts.seen.calls.waitFor((c) => c.key === 'c1', { from: callMark, what: 'the wait tool to start' });
        ac.abort('user pressed stop');
        await assert.rejects(withTimeout(call, DEADLINE_MS, 'the cancelled call'));
        const [aborted] = await ts.seen.aborts.waitFor((a) => a.key === 'c1', { from: abortMark, what: 'the server to see the cancellation' });
        assert.equal(aborted.key, 'c1');

        // The same tool, released this time, answers.
        const mark2 = ts.seen.calls.mark();
        const call2 = client.callTool({ name: 'tsserver__wait', arguments: { key: 'c2' } });
        await ts.seen.calls.waitFor((c) => c.key === 'c2', { from: mark2, what: 'the second wait' });
        ts.release('c2');
        const res = await withTimeout(call2, DEADLINE_MS, 'the released call');
        assert.equal(res.content[0].text, 'released c2');
    });

    it('cancels the server\'s call when its client disconnects', async () => {
        const c = await newClient('leaver');
        const mark = ts.seen.calls.mark();
        const abortMark = ts.seen.aborts.mark();
        c.callTool({ name: 'tsserver__wait', arguments: { key: 'leave' } }).catch(() => {});
        await ts.seen.calls.waitFor((x) => x.key === 'leave', { from: mark, what: 'the wait tool to start' });
        await c.close();
        await ts.seen.aborts.waitFor((a) => a.key === 'leave', { from: abortMark, what: 'the call to be cancelled upstream' });
    });

    it('routes sampling (server.createMessage) to the calling client', async () => {
        const mark = seen.sampling.mark();
        const res = await client.callTool({ name: 'tsserver__ask', arguments: { question: 'why?' } });
        assert.equal(res.content[0].text, 'model model-main said: main answers why?');
        const [req] = seen.sampling.since(mark);
        assert.equal(req.maxTokens, 100);
        const rel = await client.callTool({ name: 'tsserver__ask', arguments: { question: 'how?', related: true } });
        assert.equal(rel.content[0].text, 'model model-main said: main answers how?');
        const calls = seen.sampling.since(mark).map((r) => r._meta?.['switchboard/relatedRequest']);
        assert.equal(calls.length, 2);
        assert.ok(calls.every((id) => typeof id === 'number'), 'each names the client\'s own call');
        assert.notEqual(calls[0], calls[1], 'two calls, two ids');
    });

    it('routes sampling by _meta["switchboard/relatedRequest"] between two concurrent clients, and never guesses without it', async () => {
        const inA = new Inbox('a sampling'), inB = new Inbox('b sampling');
        const a = await newClient('sampler-a', { sampling: {} }, (c) => c.setRequestHandler(CreateMessageRequestSchema, samplingHandler('A', inA)));
        const b = await newClient('sampler-b', { sampling: {} }, (c) => c.setRequestHandler(CreateMessageRequestSchema, samplingHandler('B', inB)));
        // Keep a call of B's in flight, so that two clients have calls at the server.
        const mark = ts.seen.calls.mark();
        const hold = b.callTool({ name: 'tsserver__wait', arguments: { key: 'hold-b' } });
        await ts.seen.calls.waitFor((c) => c.key === 'hold-b', { from: mark, what: 'B\'s call to be in flight' });
        try {
            const [ra, rb] = await Promise.all([
                a.callTool({ name: 'tsserver__ask', arguments: { question: 'qa', related: true } }),
                b.callTool({ name: 'tsserver__ask', arguments: { question: 'qb', related: true } }),
            ]);
            assert.equal(ra.content[0].text, 'model model-A said: A answers qa');
            assert.equal(rb.content[0].text, 'model model-B said: B answers qb');
            assert.deepEqual(inA.items.map((p) => p.messages[0].content.text), ['qa']);
            assert.deepEqual(inB.items.map((p) => p.messages[0].content.text), ['qb']);

            // Without the _meta, two clients with calls in flight: the server gets an error.
            const guess = await a.callTool({ name: 'tsserver__ask', arguments: { question: 'which?' } });
            assert.equal(guess.isError, true, `expected an error, got ${JSON.stringify(guess)}`);
            assert.match(guess.content[0].text, /several clients/);
            assert.equal(inA.items.length + inB.items.length, 2, 'nobody was asked');
        } finally {
            ts.release('hold-b');
            await hold;
        }
    });

    it('forwards the server\'s cancellation of its sampling request to the client', async () => {
        const asked = new Inbox('hanging sampling'), aborted = new Inbox('aborted sampling');
        const c = await newClient('hang-client', { sampling: {} }, (x) => x.setRequestHandler(CreateMessageRequestSchema, async (req, extra) => {
            asked.push(req.params);
            await new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true }));
            aborted.push(extra.signal.reason);
            throw new Error('aborted');
        }));
        const call = c.callTool({ name: 'tsserver__askabort', arguments: { key: 'h1' } });
        await asked.waitFor(() => true, { what: 'the sampling request at the client' });
        ts.release('h1', 'server gave up');
        await aborted.waitFor(() => true, { what: 'the client\'s handler to see notifications/cancelled' });
        const res = await withTimeout(call, DEADLINE_MS, 'the tool');
        assert.equal(res.content[0].text, 'sampling cancelled: true');
    });

    it('answers a server\'s request outside any call: ping and roots succeed, sampling fails clearly', async () => {
        await withTimeout(ts.server.ping(), DEADLINE_MS, 'ping from the server');
        await assert.rejects(ts.server.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'x' } }], maxTokens: 1 }),
            (err) => {
                assert.equal(err.code, -32601);
                assert.match(err.message, /outside a client's call: no client can answer it/);
                return true;
            });
        // roots/list there gets the server's own roots from the hub: none given on its URL.
        const { roots } = await withTimeout(ts.server.listRoots(), DEADLINE_MS, 'roots/list from the server');
        assert.deepEqual(roots, []);
    });

    it('routes elicitation (server.elicitInput) to the calling client', async () => {
        const mark = seen.elicit.mark();
        elicitAnswer = { action: 'accept', content: { name: 'Ada', age: 36 } };
        const res = await client.callTool({ name: 'tsserver__confirm', arguments: {} });
        assert.equal(res.content[0].text, 'hi Ada (36)');
        const [req] = seen.elicit.since(mark);
        assert.equal(req.message, 'What is your name?');
        assert.deepEqual(req.requestedSchema.required, ['name']);
        elicitAnswer = { action: 'decline' };
        const declined = await client.callTool({ name: 'tsserver__confirm', arguments: {} });
        assert.equal(declined.content[0].text, 'decline');
    });

    it('refuses a server request the calling client has no capability for', async () => {
        const plain = await newClient('no-capabilities');
        const res = await plain.callTool({ name: 'tsserver__confirm', arguments: {} });
        assert.equal(res.isError, true, `expected an error, got ${JSON.stringify(res)}`);
        assert.match(res.content[0].text, /capabilit/i);
        const sampling = await plain.callTool({ name: 'tsserver__ask', arguments: { question: 'x' } });
        assert.equal(sampling.isError, true);
    });

    it('sends URL-mode elicitation only to a client that declared elicitation.url', async () => {
        // The SDK Client guards itself, so a raw client shows what the hub sends.
        const raw = await RawSocket.open(hub.clientURL);
        others.push(raw);
        const init = await raw.call(0, 'initialize', {
            protocolVersion: '2025-11-25', capabilities: { elicitation: { form: {} } }, clientInfo: { name: 'form-only', version: '1' },
        });
        assert.ok(init.result, JSON.stringify(init));
        await raw.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        const from = raw.frames.mark();
        // Answer whatever the hub forwards, so the tool ends either way.
        raw.frames.waitFor((f) => f.json?.method === 'elicitation/create', { from, timeoutMs: DEADLINE_MS })
            .then(([f]) => raw.send({ jsonrpc: '2.0', id: f.json.id, result: { action: 'accept' } }), () => {});
        const res = await raw.call('u', 'tools/call', { name: 'tsserver__urlelicit', arguments: {} });
        const forwarded = raw.frames.since(from, (f) => f.json?.method === 'elicitation/create');
        // DESIGN.md: "A server request whose capability the chosen client did
        // not declare gets a clear error instead of being sent."
        assert.equal(forwarded.length, 0,
            `HUB BUG: URL-mode elicitation/create was sent to a client that declared only elicitation.form: ${forwarded[0]?.text}`);
        assert.equal(res.result?.isError, true, `the server's elicitInput should fail: ${JSON.stringify(res)}`);
    });

    it('routes roots/list to the client and forwards its roots/list_changed', async () => {
        roots = [{ uri: 'file:///work/project', name: 'project' }];
        const res = await client.callTool({ name: 'tsserver__roots', arguments: {} });
        assert.deepEqual(res.structuredContent, { first: ['file:///work/project'] });

        const mark = ts.seen.calls.mark();
        const watch = client.callTool({ name: 'tsserver__roots', arguments: { watch: true } });
        await ts.seen.calls.waitFor((c) => c.tool === 'roots', { from: mark, what: 'the first roots/list' });
        roots = [...roots, { uri: 'file:///work/other', name: 'other' }];
        await client.sendRootsListChanged();
        const res2 = await withTimeout(watch, DEADLINE_MS, 'the roots watch');
        assert.deepEqual(res2.structuredContent, {
            first: ['file:///work/project'],
            second: ['file:///work/project', 'file:///work/other'],
        });
    });

    it('reads resources and template resources', async () => {
        const status = await client.readResource({ uri: 'ts://status' });
        assert.deepEqual(status.contents, [{ uri: 'ts://status', mimeType: 'text/plain', text: 'all good' }]);
        const note = await client.readResource({ uri: 'ts://notes/alpha' });
        assert.equal(note.contents[0].text, 'first note');
        await assert.rejects(client.readResource({ uri: 'ts://notes/zzz' }), (err) => {
            assert.ok(err instanceof McpError);
            assert.match(err.message, /no note zzz/, 'the server\'s error passes through');
            return true;
        });
        await rejectsWithCode(client.readResource({ uri: 'other://x' }), -32002, 'unknown resource');
    });

    it('subscribes once upstream for two clients, delivers updates to subscribers only, unsubscribes after the last', async () => {
        const uri = 'ts://notes/alpha';
        const b = new Inbox('b updates');
        const other = await newClient('subscriber-b', {}, (c) => c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => b.push(n.params)));
        const subMark = ts.seen.subscribes.mark(), unsubMark = ts.seen.unsubscribes.mark();

        await client.subscribeResource({ uri });
        assert.deepEqual(ts.seen.subscribes.since(subMark), [uri], 'the first subscriber subscribes upstream');
        await other.subscribeResource({ uri });
        assert.deepEqual(ts.seen.subscribes.since(subMark), [uri], 'the second does not');

        let mark = seen.updates.mark(), bMark = b.mark();
        await ts.server.sendResourceUpdated({ uri });
        await seen.updates.waitFor((u) => u.uri === uri, { from: mark, what: 'the update at the first client' });
        await b.waitFor((u) => u.uri === uri, { from: bMark, what: 'the update at the second client' });

        await client.unsubscribeResource({ uri });
        mark = seen.updates.mark();
        bMark = b.mark();
        // A tool call sends the update, so it also works from inside a request.
        await client.callTool({ name: 'tsserver__touch', arguments: { uri } });
        await b.waitFor((u) => u.uri === uri, { from: bMark, what: 'the update at the remaining subscriber' });
        await client.ping(); // a round trip after the fan-out
        assert.equal(seen.updates.since(mark).length, 0, 'the unsubscribed client gets no update');
        assert.deepEqual(ts.seen.unsubscribes.since(unsubMark), [], 'no upstream unsubscribe while one subscriber is left');

        await other.unsubscribeResource({ uri });
        await ts.seen.unsubscribes.waitFor((u) => u === uri, { from: unsubMark, what: 'the upstream unsubscribe' });
        assert.equal(ts.seen.subscribes.since(subMark).length, 1);

        await rejectsWithCode(client.subscribeResource({ uri: 'nowhere://x' }), -32002, 'subscribing to an unknown resource');
    });

    it('announces list changes when the server adds and removes tools, prompts and resources at runtime', async () => {
        let mark = seen.toolsChanged.mark();
        const late = ts.mcp.registerTool('late', { description: 'added at runtime', inputSchema: { x: z.number() } },
            async ({ x }) => ({ content: [{ type: 'text', text: `late ${x * 2}` }] }));
        await seen.toolsChanged.waitFor(() => true, { from: mark, what: 'tools/list_changed after registerTool' });
        let { tools } = await client.listTools();
        const t = tools.find((x) => x.name === 'tsserver__late');
        assert.ok(t, 'tsserver__late is listed');
        assert.equal(t._meta?.[SERVER_META], 'tsserver');
        const res = await client.callTool({ name: 'tsserver__late', arguments: { x: 21 } });
        assert.equal(res.content[0].text, 'late 42');

        mark = seen.toolsChanged.mark();
        late.remove();
        await seen.toolsChanged.waitFor(() => true, { from: mark, what: 'tools/list_changed after remove' });
        ({ tools } = await client.listTools());
        assert.ok(!tools.some((x) => x.name === 'tsserver__late'), 'tsserver__late is gone');
        await rejectsWithCode(client.callTool({ name: 'tsserver__late', arguments: { x: 1 } }), -32602, 'removed tool');

        mark = seen.promptsChanged.mark();
        ts.mcp.registerPrompt('later', { description: 'added at runtime' }, () => ({
            messages: [{ role: 'user', content: { type: 'text', text: 'later!' } }],
        }));
        await seen.promptsChanged.waitFor(() => true, { from: mark, what: 'prompts/list_changed' });
        const { prompts } = await client.listPrompts();
        assert.ok(prompts.some((p) => p.name === 'tsserver__later'), 'tsserver__later is listed');
        const got = await client.getPrompt({ name: 'tsserver__later' });
        assert.equal(got.messages[0].content.text, 'later!');

        mark = seen.resourcesChanged.mark();
        ts.mcp.registerResource('extra', 'ts://extra', { mimeType: 'text/plain' }, async (uri) => ({
            contents: [{ uri: uri.href, text: 'extra' }],
        }));
        await seen.resourcesChanged.waitFor(() => true, { from: mark, what: 'resources/list_changed' });
        const { resources } = await client.listResources();
        assert.ok(resources.some((r) => r.uri === 'ts://extra'), 'ts://extra is listed');
        assert.equal((await client.readResource({ uri: 'ts://extra' })).contents[0].text, 'extra');
    });

    it('lists and gets prompts', async () => {
        const { prompts } = await client.listPrompts();
        const review = prompts.find((p) => p.name === 'tsserver__review');
        assert.equal(review.title, 'Review');
        assert.deepEqual(review.arguments.map((a) => a.name).sort(), ['code', 'language']);
        const res = await client.getPrompt({ name: 'tsserver__review', arguments: { code: 'x := 1', language: 'go' } });
        assert.equal(res.description, 'Review of go code');
        assert.equal(res.messages[0].content.text, 'Please review this go code:\nx := 1');
        await rejectsWithCode(client.getPrompt({ name: 'tsserver__nope', arguments: {} }), -32602, 'unknown prompt');
    });

    it('completes prompt arguments and template variables', async () => {
        const p = await client.complete({ ref: { type: 'ref/prompt', name: 'tsserver__review' }, argument: { name: 'language', value: 'go' } });
        assert.deepEqual(p.completion.values, ['go', 'golang']);
        const r = await client.complete({ ref: { type: 'ref/resource', uri: 'ts://notes/{id}' }, argument: { name: 'id', value: 'al' } });
        assert.deepEqual(r.completion.values, ['alpha', 'alps']);
        await rejectsWithCode(client.complete({ ref: { type: 'ref/prompt', name: 'tsserver__nope' }, argument: { name: 'x', value: '' } }),
            -32602, 'completion of an unknown prompt');
    });

    it('delivers the server\'s log messages that the client\'s level admits', async () => {
        await client.setLoggingLevel('info');
        let mark = seen.logs.mark();
        await client.callTool({ name: 'tsserver__log', arguments: { tag: 'call' } });
        const got = await seen.logs.waitFor((l) => l.data?.tag === 'call', { from: mark, count: 3, what: 'info, warning and error' });
        assert.deepEqual(got.map((l) => l.level), ['info', 'warning', 'error']);
        assert.equal(got[0].logger, 'tslogger');
        assert.equal(got[0]._meta?.[SERVER_META], 'tsserver');
        assert.deepEqual(seen.logs.since(mark, (l) => l.data?.tag === 'call').map((l) => l.level), ['info', 'warning', 'error'],
            'no debug message');

        // Outside any call too.
        mark = seen.logs.mark();
        await ts.server.sendLoggingMessage({ level: 'notice', data: 'spontaneous' });
        const [n] = await seen.logs.waitFor((l) => l.data === 'spontaneous', { from: mark, what: 'the spontaneous log' });
        assert.equal(n.level, 'notice');
        assert.equal(n.logger, 'tsserver', 'the hub names the server when the message has no logger');
    });

    it('fails a call in flight with -32000 when its server disconnects', async () => {
        const gone = createTsServer({ name: 'tsgone' });
        others.push(gone);
        await gone.connect(hub.serverURL('tsgone'));
        await waitForTools(client, ['tsgone__wait']);
        client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => seen.toolsChanged.push(n));
        const mark = gone.seen.calls.mark();
        const call = client.callTool({ name: 'tsgone__wait', arguments: { key: 'g' } });
        call.catch(() => {});
        await gone.seen.calls.waitFor((c) => c.key === 'g', { from: mark, what: 'the call to reach tsgone' });
        const changed = seen.toolsChanged.mark();
        await gone.transport.close(); // the socket only: the tool is still waiting
        await rejectsWithCode(withTimeout(call, DEADLINE_MS, 'the call to fail'), -32000, 'server gone');
        await seen.toolsChanged.waitFor(() => true, { from: changed, what: 'tools/list_changed' });
        const { tools } = await client.listTools();
        assert.ok(!tools.some((t) => t.name.startsWith('tsgone__')), 'tsgone\'s tools are gone');
        await rejectsWithCode(client.callTool({ name: 'tsgone__wait', arguments: { key: 'x' } }), -32602, 'tool of a gone server');
    });
});
