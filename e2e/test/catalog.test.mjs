// The official TypeScript SDK's Client, unchanged, on the catalog's
// endpoints: a virtual server (an alias, a fixed argument, the catalog's
// serverInfo) over Streamable HTTP and over the SDK's WebSocket transport,
// and the search mode of /mcp (--discovery search): search_tools, call_tool
// and a found tool called by its name.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';

import { startHub, closeAll, withTimeout, DEADLINE_MS } from './helpers.mjs';

const CATALOG = `
virtualServers:
  - name: support
    title: Support desk
    instructions: Answer politely.
    tools:
      - {server: demo, tool: add, as: plus, fixed: {b: 2}}
      - {server: demo, include: ["echo"]}
`;

async function connect(transport) {
    const client = new Client({ name: 'e2e-catalog-client', version: '1.0.0' }, { capabilities: {} });
    await withTimeout(client.connect(transport), DEADLINE_MS, 'a client to connect');
    return client;
}

/** listed re-lists until the endpoint lists what want says (the demo server may still be registering). */
async function listed(client, want) {
    const deadline = Date.now() + DEADLINE_MS;
    for (;;) {
        const { tools } = await client.listTools();
        if (want(tools)) return tools;
        if (Date.now() > deadline) throw new Error(`timed out: the tools were ${tools.map((t) => t.name)}`);
        await new Promise((r) => setTimeout(r, 20)); // a re-list, not a synchronisation: the deadline bounds it
    }
}

describe('the catalog with the TypeScript SDK', () => {
    let hub;
    const clients = [];

    before(async () => {
        const file = path.join(mkdtempSync(path.join(tmpdir(), 'e2e-catalog-')), 'catalog.yaml');
        writeFileSync(file, CATALOG);
        hub = await startHub({ args: ['--catalog', file, '--discovery', 'search'] });
    });
    after(async () => {
        await closeAll(...clients);
        await hub?.stop();
    });

    for (const [transport, make] of [
        ['Streamable HTTP', () => new StreamableHTTPClientTransport(new URL(`http://${hub.addr}/servers/support/mcp`))],
        ['WebSocket', () => new WebSocketClientTransport(new URL(`ws://${hub.addr}/servers/support/mcp`))],
    ]) {
        it(`uses a virtual server over ${transport}`, async () => {
            const client = await connect(make());
            clients.push(client);
            assert.equal(client.getServerVersion().name, 'support');
            assert.equal(client.getServerVersion().title, 'Support desk');
            assert.equal(client.getInstructions(), 'Answer politely.');
            const tools = await listed(client, (ts) => ts.length === 2);
            assert.deepEqual(tools.map((t) => t.name), ['echo', 'plus']);
            assert.equal(tools[1].inputSchema.properties.b, undefined, 'the fixed argument is out of the schema');
            const res = await client.callTool({ name: 'plus', arguments: { a: 40 } });
            assert.deepEqual(res.structuredContent, { sum: 42 });
            await assert.rejects(client.callTool({ name: 'plus', arguments: { a: 1, b: 1 } }), /fixed by the virtual server/);
        });
    }

    it('searches and calls on /mcp in search mode', async () => {
        const client = await connect(new StreamableHTTPClientTransport(new URL(`http://${hub.addr}/mcp`)));
        clients.push(client);
        const tools = await listed(client, (ts) => ts.length === 2);
        assert.deepEqual(tools.map((t) => t.name), ['search_tools', 'call_tool']);
        const deadline = Date.now() + DEADLINE_MS;
        let found;
        for (;;) {
            const res = await client.callTool({ name: 'search_tools', arguments: { query: 'add two numbers', limit: 3 } });
            found = res.structuredContent.tools;
            if (found.length || Date.now() > deadline) break;
            await new Promise((r) => setTimeout(r, 20)); // until the demo server is indexed; the deadline bounds it
        }
        assert.equal(found[0].name, 'demo__add');
        assert.equal(found[0].inputSchema.type, 'object');
        const viaMeta = await client.callTool({ name: 'call_tool', arguments: { name: 'demo__add', arguments: { a: 1, b: 2 } } });
        assert.deepEqual(viaMeta.structuredContent, { sum: 3 });
        const direct = await client.callTool({ name: 'demo__add', arguments: { a: 2, b: 2 } });
        assert.deepEqual(direct.structuredContent, { sum: 4 });
    });
});
