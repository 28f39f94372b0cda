// (c) Bad input through the hub from raw `ws` sockets, and the wire-level
// facts the SDK tests cannot see (exact ids, frame order, close codes).

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startHub, RawSocket, closeAll } from './helpers.mjs';

const INIT = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1.0.0' } };

describe('raw WebSocket clients and servers', () => {
    let hub;
    const sockets = [];

    before(async () => {
        hub = await startHub({ demo: true });
    });

    after(async () => {
        await closeAll(...sockets);
        await hub?.stop();
    });

    async function open(url, protocols) {
        const s = await RawSocket.open(url, protocols);
        sockets.push(s);
        return s;
    }

    /** initialized opens a client socket and initializes it. */
    async function initialized() {
        const c = await open(hub.clientURL);
        const res = await c.call('init', 'initialize', INIT);
        assert.ok(res.result, `initialize: ${JSON.stringify(res)}`);
        await c.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
        return c;
    }

    it('echoes the "mcp" subprotocol on both endpoints', async () => {
        const c = await open(hub.clientURL);
        assert.equal(c.ws.protocol, 'mcp');
        const s = await open(hub.serverURL('echo-check'), ['mcp']);
        assert.equal(s.ws.protocol, 'mcp');
        await s.close();
    });

    it('answers invalid JSON with -32700 and id null, and keeps the connection', async () => {
        const c = await open(hub.clientURL);
        const from = c.frames.mark();
        await c.sendText('{"jsonrpc": "2.0", "id": 1, "method": ');
        const [f] = await c.frames.waitFor(() => true, { from, what: 'the parse error' });
        assert.equal(f.json.jsonrpc, '2.0');
        assert.equal(f.json.id, null);
        assert.equal(f.json.error.code, -32700);
        assert.ok(!('result' in f.json));
        // Still usable: initialize succeeds.
        const res = await c.call(2, 'initialize', INIT);
        assert.equal(res.result.serverInfo.name, 'switchboard');
    });

    it('answers a request before initialize with -32600 and ignores notifications', async () => {
        const c = await open(hub.clientURL);
        let from = c.frames.mark();
        await c.send({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' });
        const res = await c.call(7, 'tools/list', {});
        assert.equal(res.error?.code, -32600, JSON.stringify(res));
        assert.equal(res.id, 7);
        assert.equal(c.frames.since(from).length, 1, 'the notification got no answer');
        from = c.frames.mark();
        const call = await c.call('s', 'tools/call', { name: 'demo__echo', arguments: { text: 'x' } });
        assert.equal(call.error?.code, -32600, JSON.stringify(call));
        // ping is allowed before initialize.
        const ping = await c.call('p', 'ping');
        assert.deepEqual(ping.result, {});
    });

    it('rejects other malformed messages with the JSON-RPC codes', async () => {
        const c = await initialized();
        let from = c.frames.mark();
        await c.sendText('[]');
        let [f] = await c.frames.waitFor(() => true, { from, what: 'the empty batch error' });
        assert.deepEqual([f.json.id, f.json.error?.code], [null, -32600]);
        from = c.frames.mark();
        await c.sendText('{"jsonrpc":"2.0","id":3}');
        [f] = await c.frames.waitFor(() => true, { from, what: 'the invalid request error' });
        assert.equal(f.json.error?.code, -32600);
        const unknown = await c.call('u', 'no/such/method', {});
        assert.equal(unknown.error?.code, -32601);
        const badParams = await c.call('b', 'tools/call', [1, 2]);
        assert.equal(badParams.error?.code, -32602);
        const again = await c.call('again', 'initialize', INIT);
        assert.equal(again.error?.code, -32600, 'a second initialize is refused');
    });

    it('negotiates the protocol version', async () => {
        const a = await open(hub.clientURL);
        assert.equal((await a.call(1, 'initialize', INIT)).result.protocolVersion, '2025-06-18');
        const b = await open(hub.clientURL);
        const res = await b.call(1, 'initialize', { ...INIT, protocolVersion: '1999-01-01' });
        assert.equal(res.result.protocolVersion, '2025-11-25', 'an unsupported version gets the latest');
    });

    it('answers ids exactly as sent, and batches with arrays', async () => {
        const c = await initialized();
        let from = c.frames.mark();
        await c.sendText('{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}');
        let [f] = await c.frames.waitFor(() => true, { from, what: 'the ping reply' });
        assert.match(f.text, /"id":9007199254740993[,}]/, 'a big integer id is echoed digit for digit');
        from = c.frames.mark();
        await c.sendText('[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"in a batch"}}}]');
        [f] = await c.frames.waitFor(() => true, { from, what: 'the batch reply' });
        assert.ok(Array.isArray(f.json), `a batch gets an array: ${f.text}`);
        const byId = Object.fromEntries(f.json.map((r) => [r.id, r]));
        assert.deepEqual(byId.a.result, {});
        assert.equal(byId.b.result.content[0].text, 'in a batch');
    });

    it('sends every progress report before the result on the wire', async () => {
        const c = await initialized();
        for (let i = 0; i < 5; i++) {
            const from = c.frames.mark();
            const id = `slow-${i}`;
            await c.send({ jsonrpc: '2.0', id, method: 'tools/call',
                params: { name: 'demo__slow', arguments: { steps: 4, delayMs: 5 }, _meta: { progressToken: 1000 + i } } });
            await c.reply(id);
            const seq = c.frames.since(from).map((f) => (f.json.method === 'notifications/progress'
                ? `p${f.json.params.progress}@${f.json.params.progressToken}` : `r@${f.json.id}`));
            const t = 1000 + i;
            assert.deepEqual(seq, [`p1@${t}`, `p2@${t}`, `p3@${t}`, `p4@${t}`, `r@${id}`]);
        }
    });

    it('closes on a binary frame (1003) and on invalid UTF-8 (1007)', async () => {
        const a = await open(hub.clientURL);
        await a.sendBinary(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}'));
        assert.equal((await a.closed).code, 1003);
        const b = await open(hub.clientURL);
        await b.sendText(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));
        assert.equal((await b.closed).code, 1007);
    });

    it('carries a 1 MB tool call both ways, and closes on an over-limit frame (1009)', async () => {
        const c = await initialized();
        const text = 'x'.repeat(1 << 20);
        const res = await c.call('big', 'tools/call', { name: 'demo__echo', arguments: { text } });
        assert.equal(res.result?.content?.[0]?.text?.length, text.length, 'the 1 MB echo came back whole');
        const huge = await open(hub.clientURL);
        await huge.send({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'y'.repeat(5 << 20) } });
        assert.equal((await huge.closed).code, 1009);
    });

    it('drops a dialing server without a name, or that sends invalid JSON', async () => {
        const s = await open(hub.serverURL());
        const [init] = await s.frames.waitFor((f) => f.json?.method === 'initialize', { what: 'the hub\'s initialize' });
        assert.ok(init.json.params.capabilities.sampling, 'the hub offers sampling');
        assert.ok(init.json.params.capabilities.elicitation, 'the hub offers elicitation');
        assert.equal(init.json.params.capabilities.roots?.listChanged, true);
        await s.send({ jsonrpc: '2.0', id: init.json.id, result: {
            protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: '!!!', version: '1' } } });
        const closed = await s.closed;
        assert.equal(closed.code, 1008);
        assert.match(closed.reason, /name/);

        const g = await open(hub.serverURL('garbage'));
        await g.frames.waitFor((f) => f.json?.method === 'initialize', { what: 'the hub\'s initialize' });
        await g.sendText('this is not JSON');
        assert.equal((await g.closed).code, 1008);
    });
});
