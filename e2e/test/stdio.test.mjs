// `hub stdio` launched by the official TypeScript SDK's StdioClientTransport,
// as a desktop client launches its servers, with the published
// server-everything behind the hub through `hub connect`.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
    CreateMessageRequestSchema,
    ResourceUpdatedNotificationSchema,
    ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { HUB_BIN, startHub, startConnector, publishedServer, waitForTools, Inbox, withTimeout, DEADLINE_MS } from './helpers.mjs';

/** exitedOf resolves with the exit code of a pid's process, polling with a deadline. */
async function exitedOf(pid, timeoutMs = DEADLINE_MS) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
        try {
            process.kill(pid, 0);
        } catch {
            return true;
        }
        if (Date.now() > deadline) {
            return false;
        }
        await new Promise((r) => setTimeout(r, 20));
    }
}

describe('hub stdio under the SDK StdioClientTransport, server-everything behind the hub', () => {
    let hub, connector, client, transport;
    let stderr = '';
    const updates = new Inbox('notifications/resources/updated');
    const listChanged = new Inbox('notifications/tools/list_changed');
    const samples = new Inbox('sampling/createMessage');

    before(async () => {
        hub = await startHub({ demo: false });
        connector = await startConnector(hub, 'everything', [process.execPath, publishedServer('server-everything'), 'stdio']);
        transport = new StdioClientTransport({ command: HUB_BIN, args: ['stdio', '--hub', hub.url], stderr: 'pipe' });
        transport.stderr.setEncoding('utf8');
        transport.stderr.on('data', (chunk) => { stderr += chunk; });
        client = new Client({ name: 'e2e-stdio-client', version: '1.0.0' }, { capabilities: { sampling: {} } });
        client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updates.push(n.params));
        client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
            samples.push(req.params);
            return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: 'sampled through stdio' } };
        });
        await withTimeout(client.connect(transport), DEADLINE_MS, 'the client to initialize through hub stdio');
        await waitForTools(client, ['everything__echo', 'everything__trigger-sampling-request', 'everything__trigger-long-running-operation']);
        client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => listChanged.push(n));
    });

    after(async () => {
        await client?.close();
        await connector?.stop();
        await hub?.stop();
        if (process.env.E2E_HUB_LOGS) {
            process.stderr.write(`--- hub stdio stderr ---\n${stderr}\n--- hub connect ---\n${connector?.logs()}`);
        }
    });

    it('initializes as the hub and lists the servers behind it', async () => {
        assert.equal(client.getServerVersion().name, 'switchboard');
        const { tools } = await client.listTools();
        assert.ok(tools.length >= 15, `${tools.length} tools`);
        const { resources } = await client.listResources();
        assert.ok(resources.some((r) => r.uri.startsWith('demo://resource/static/document/')));
        const { prompts } = await client.listPrompts();
        assert.ok(prompts.some((p) => p.name === 'everything__simple-prompt'));
        const res = await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } });
        assert.equal(res.content[0].text, 'Echo: hi');
        assert.match(stderr, /connected to the hub at ws:\/\/127\.0\.0\.1:\d+\/mcp/);
    });

    it('passes progress through', async () => {
        const progress = [];
        const res = await client.callTool({ name: 'everything__trigger-long-running-operation', arguments: { duration: 0.4, steps: 4 } },
            undefined, { onprogress: (p) => progress.push(p.progress) });
        assert.match(res.content[0].text, /Long running operation completed/);
        // The SDK may drop the last report when it arrives in the same read as the
        // result (see README.md); the Go tests check that every report passes.
        assert.ok(progress.length >= 3, `at least 3 progress reports: ${progress}`);
        assert.deepEqual(progress, [1, 2, 3, 4].slice(0, progress.length), 'progress reports in order');
    });

    it('passes a subscription and its updates through', async () => {
        const { resources } = await client.listResources();
        const uri = resources.find((r) => r.uri.startsWith('demo://resource/static/document/')).uri;
        await client.subscribeResource({ uri });
        const mark = updates.mark();
        // server-everything sends updates for subscribed resources once told to.
        await client.callTool({ name: 'everything__toggle-subscriber-updates', arguments: {} });
        const [u] = await updates.waitFor((p) => p.uri === uri, { from: mark });
        assert.equal(u.uri, uri);
    });

    it('lets the server sample through the client that launched hub stdio', async () => {
        const res = await client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'hello?', maxTokens: 5 } });
        assert.match(res.content[0].text, /sampled through stdio/);
        const [req] = await samples.waitFor();
        assert.match(req.messages[0].content.text, /hello\?/);
    });

    it('reconnects by itself when the hub restarts, says so on stderr, and keeps the session', async () => {
        const addr = hub.addr;
        await hub.stop();
        hub = await startHub({ demo: false, args: ['--addr', addr] });
        // The connector dials the new hub by itself too; the client is told to list again.
        await listChanged.waitFor(() => true, { timeoutMs: 30_000, what: 'list_changed after the reconnection' });
        await waitForTools(client, ['everything__echo'], 30_000);
        const res = await client.callTool({ name: 'everything__echo', arguments: { message: 'after' } });
        assert.equal(res.content[0].text, 'Echo: after');
        assert.match(stderr, /lost the hub/);
        assert.match(stderr, /the client's session was restored on the hub/);
    });

    it('exits when the client closes it', async () => {
        const pid = transport.pid;
        assert.ok(pid);
        await client.close();
        assert.ok(await exitedOf(pid), 'hub stdio exited after its stdin closed');
        client = undefined;
    });
});
