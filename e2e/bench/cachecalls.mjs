// cachecalls: the calls/s of a caching 2026-07-28 client, for cmd/hubbench.
//
// The official TypeScript SDK's client (@modelcontextprotocol/client, pinned
// in ../package.json) speaks 2026-07-28 to a hub's /mcp over Streamable
// HTTP, listens for tools/list_changed (its listChanged option opens the
// subscriptions/listen stream), and does what agents do before each use of
// a tool: list the tools, then call one. Its response cache answers
// listTools() without a round trip while the hub's ttlMs says the list is
// fresh. Each worker is one client with one call at a time.
//
// Usage: node cachecalls.mjs URL TOOL SECONDS WORKERS
// Prints one line of JSON: {"calls": N, "lists": N, "seconds": S}, counted
// once every client is connected: lists are the tools/list POSTs the
// clients' caches let through to the hub.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, tool, seconds, workers] = process.argv.slice(2);
if (!url || !tool) {
    console.error('usage: node cachecalls.mjs URL TOOL SECONDS WORKERS');
    process.exit(2);
}
const text = 'x'.repeat(100 - '{"text":""}'.length);

/** connect connects one client; it returns the client and its count of tools/list POSTs. */
async function connect() {
    const client = new Client(
        { name: 'hubbench-cache', version: '1.0.0' },
        {
            versionNegotiation: { mode: { pin: '2026-07-28' } },
            listChanged: { tools: { autoRefresh: false, onChanged: () => {} } },
        },
    );
    let lists = 0;
    const transport = new StreamableHTTPClientTransport(new URL(url), {
        fetch: (input, init) => {
            if (typeof init?.body === 'string' && init.body.includes('"tools/list"')) {
                lists++;
            }
            return fetch(input, init);
        },
    });
    await client.connect(transport);
    return { client, lists: () => lists };
}

async function worker({ client, lists }, until) {
    const before = lists();
    let calls = 0;
    while (Date.now() < until) {
        const { tools } = await client.listTools();
        if (!tools.some((t) => t.name === tool)) {
            throw new Error(`${tool} is not listed`);
        }
        const res = await client.callTool({ name: tool, arguments: { text } });
        if (res.isError) {
            throw new Error(`${tool} failed: ${JSON.stringify(res.content)}`);
        }
        calls++;
    }
    return { calls, lists: lists() - before };
}

const clients = await Promise.all(Array.from({ length: Number(workers || 4) }, () => connect()));
const started = Date.now();
const until = started + Number(seconds || 2) * 1000;
const results = await Promise.all(clients.map((c) => worker(c, until)));
const elapsed = (Date.now() - started) / 1000;
await Promise.all(clients.map(({ client }) => client.close()));
const total = results.reduce((a, r) => ({ calls: a.calls + r.calls, lists: a.lists + r.lists }), { calls: 0, lists: 0 });
console.log(JSON.stringify({ ...total, seconds: elapsed }));
