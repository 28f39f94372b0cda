// A TypeScript-SDK MCP server (McpServer) that dials out to the hub and
// offers one of each thing the hub routes. Tests observe what it saw through
// the Inboxes in `seen`.

import * as z from 'zod';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
    RootsListChangedNotificationSchema,
    SubscribeRequestSchema,
    UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { DialOutTransport, Inbox, deferred, withTimeout, DEADLINE_MS } from './helpers.mjs';

export const NOTES = { alpha: 'first note', alps: 'mountains', beta: 'second note' };
export const LANGUAGES = ['go', 'golang', 'typescript', 'python'];

/**
 * createTsServer builds the server; connect() dials it out to the hub at
 * `url` (ws://HOST/mcp/server?name=...).
 */
export function createTsServer({ name = 'tsserver', serverInfoName = 'ts-sdk-server' } = {}) {
    const mcp = new McpServer(
        { name: serverInfoName, version: '1.2.3' },
        {
            capabilities: {
                tools: { listChanged: true },
                resources: { subscribe: true, listChanged: true },
                prompts: { listChanged: true },
                completions: {},
                logging: {},
            },
            instructions: 'A TypeScript SDK server behind Switchboard.',
        },
    );
    const server = mcp.server;
    const seen = {
        calls: new Inbox('tool calls'),
        aborts: new Inbox('aborted tool calls'),
        subscribes: new Inbox('resources/subscribe'),
        unsubscribes: new Inbox('resources/unsubscribe'),
        rootsChanged: new Inbox('notifications/roots/list_changed'),
    };
    // Calls of the "wait" tool block until released (or aborted).
    const releases = new Map();

    mcp.registerTool('greet', {
        title: 'Greet',
        description: 'Greet someone, a number of times.',
        inputSchema: { name: z.string().min(1), times: z.number().int().min(1).max(3).optional() },
    }, async ({ name, times = 1 }) => {
        seen.calls.push({ tool: 'greet', name, times });
        return { content: [{ type: 'text', text: Array(times).fill(`Hello, ${name}!`).join(' ') }] };
    });

    mcp.registerTool('divide', {
        description: 'Divide a by b; structured output.',
        inputSchema: { a: z.number(), b: z.number() },
        outputSchema: { quotient: z.number(), remainder: z.number() },
    }, async ({ a, b }) => {
        if (b === 0) {
            return { content: [{ type: 'text', text: 'division by zero' }], isError: true };
        }
        const quotient = Math.trunc(a / b);
        const out = { quotient, remainder: a - quotient * b };
        return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
    });

    mcp.registerTool('fail', { description: 'Always fails (isError).' }, async () => ({
        content: [{ type: 'text', text: 'it failed on purpose' }],
        isError: true,
    }));

    mcp.registerTool('countdown', {
        description: 'Reports progress for each step.',
        inputSchema: { steps: z.number().int().min(1).max(20) },
    }, async ({ steps }, extra) => {
        const token = extra._meta?.progressToken;
        seen.calls.push({ tool: 'countdown', token });
        for (let i = 1; i <= steps; i++) {
            if (token !== undefined) {
                await extra.sendNotification({
                    method: 'notifications/progress',
                    params: { progressToken: token, progress: i, total: steps, message: `step ${i}` },
                });
            }
            await new Promise((r) => setTimeout(r, 10)); // the work, not synchronisation
        }
        return { content: [{ type: 'text', text: `counted ${steps}` }] };
    });

    mcp.registerTool('wait', {
        description: 'Blocks until released or cancelled.',
        inputSchema: { key: z.string() },
    }, async ({ key }, extra) => {
        const d = deferred();
        releases.set(key, d);
        seen.calls.push({ tool: 'wait', key, requestId: extra.requestId });
        const onAbort = () => {
            seen.aborts.push({ key, reason: extra.signal.reason });
            d.reject(new Error('aborted'));
        };
        if (extra.signal.aborted) {
            onAbort();
        } else {
            extra.signal.addEventListener('abort', onAbort, { once: true });
        }
        try {
            const text = await d.promise;
            return { content: [{ type: 'text', text }] };
        } finally {
            releases.delete(key);
        }
    });

    mcp.registerTool('ask', {
        description: 'Asks the calling client\'s model (sampling).',
        inputSchema: { question: z.string(), related: z.boolean().optional() },
    }, async ({ question, related }, extra) => {
        const params = {
            messages: [{ role: 'user', content: { type: 'text', text: question } }],
            maxTokens: 100,
        };
        if (related) {
            // The hub routes by the id of the call being served.
            params._meta = { 'switchboard/relatedRequest': extra.requestId };
        }
        const res = await server.createMessage(params);
        return { content: [{ type: 'text', text: `model ${res.model} said: ${res.content.text}` }] };
    });

    mcp.registerTool('askabort', {
        description: 'Starts sampling, then gives up on it when released.',
        inputSchema: { key: z.string() },
    }, async ({ key }) => {
        const ac = new AbortController();
        releases.set(key, { resolve: (why) => ac.abort(why) });
        try {
            await server.createMessage({
                messages: [{ role: 'user', content: { type: 'text', text: `hang ${key}` } }],
                maxTokens: 10,
            }, { signal: ac.signal });
            return { content: [{ type: 'text', text: 'sampling answered' }] };
        } catch (err) {
            return { content: [{ type: 'text', text: `sampling cancelled: ${ac.signal.aborted}` }] };
        } finally {
            releases.delete(key);
        }
    });

    mcp.registerTool('urlelicit', {
        description: 'Asks the user to visit a URL (URL-mode elicitation).',
    }, async () => {
        const res = await server.elicitInput({ mode: 'url', message: 'Please sign in', url: 'https://example.com/sign-in', elicitationId: 'e-1' });
        return { content: [{ type: 'text', text: res.action }] };
    });

    mcp.registerTool('confirm', {
        description: 'Asks the user for a name (elicitation).',
    }, async () => {
        const res = await server.elicitInput({
            message: 'What is your name?',
            requestedSchema: {
                type: 'object',
                properties: { name: { type: 'string', description: 'Your name' }, age: { type: 'number' } },
                required: ['name'],
            },
        });
        return {
            content: [{ type: 'text', text: res.action === 'accept' ? `hi ${res.content.name} (${res.content.age})` : res.action }],
        };
    });

    mcp.registerTool('roots', {
        description: 'Lists the caller\'s roots; with watch, waits for roots/list_changed and lists again.',
        inputSchema: { watch: z.boolean().optional() },
    }, async ({ watch }) => {
        const first = await server.listRoots();
        const out = { first: first.roots.map((r) => r.uri) };
        if (watch) {
            const mark = seen.rootsChanged.mark();
            seen.calls.push({ tool: 'roots', listed: out.first });
            await seen.rootsChanged.waitFor(() => true, { from: mark, what: 'roots/list_changed at the server' });
            out.second = (await server.listRoots()).roots.map((r) => r.uri);
        }
        return { content: [{ type: 'text', text: JSON.stringify(out) }], structuredContent: out };
    });

    mcp.registerTool('log', {
        description: 'Logs one message at each level.',
        inputSchema: { tag: z.string() },
    }, async ({ tag }) => {
        for (const level of ['debug', 'info', 'warning', 'error']) {
            await server.sendLoggingMessage({ level, logger: 'tslogger', data: { tag, level } });
        }
        return { content: [{ type: 'text', text: 'logged' }] };
    });

    mcp.registerTool('touch', {
        description: 'Sends notifications/resources/updated for a URI.',
        inputSchema: { uri: z.string() },
    }, async ({ uri }) => {
        await server.sendResourceUpdated({ uri });
        return { content: [{ type: 'text', text: `touched ${uri}` }] };
    });

    mcp.registerResource('status', 'ts://status', {
        title: 'Status',
        description: 'Static status text.',
        mimeType: 'text/plain',
    }, async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'all good' }] }));

    mcp.registerResource('note', new ResourceTemplate('ts://notes/{id}', {
        list: undefined,
        complete: { id: (value) => Object.keys(NOTES).filter((k) => k.startsWith(value)) },
    }), { title: 'Note', description: 'A note by id.', mimeType: 'text/plain' }, async (uri, { id }) => {
        if (!(id in NOTES)) {
            throw new Error(`no note ${id}`);
        }
        return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: NOTES[id] }] };
    });

    mcp.registerPrompt('review', {
        title: 'Review',
        description: 'Review code in a language.',
        argsSchema: {
            code: z.string(),
            language: completable(z.string(), (value) => LANGUAGES.filter((l) => l.startsWith(value))),
        },
    }, ({ code, language }) => ({
        description: `Review of ${language} code`,
        messages: [{ role: 'user', content: { type: 'text', text: `Please review this ${language} code:\n${code}` } }],
    }));

    server.setRequestHandler(SubscribeRequestSchema, async (req) => {
        seen.subscribes.push(req.params.uri);
        return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, async (req) => {
        seen.unsubscribes.push(req.params.uri);
        return {};
    });
    server.setNotificationHandler(RootsListChangedNotificationSchema, (n) => seen.rootsChanged.push(n));

    let transport;
    return {
        name,
        mcp,
        server,
        seen,
        release(key, text = `released ${key}`) {
            releases.get(key)?.resolve(text);
        },
        async connect(url) {
            transport = new DialOutTransport(url);
            await withTimeout(mcp.connect(transport), DEADLINE_MS, `${name} to dial the hub`);
            return transport;
        },
        get transport() {
            return transport;
        },
        async close() {
            await mcp.close();
            await transport?.close();
        },
    };
}
