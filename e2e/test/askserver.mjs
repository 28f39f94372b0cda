// A TypeScript-SDK MCP server (McpServer) on standard input and output, as
// published servers are, and nothing else: its tool "ask" asks the client
// for sampling, elicitation and its roots with the SDK's own Server
// methods, which on stdio cannot say which call they belong to. The Go
// tests of e2e/gosdk run it behind `hub connect` (node test/askserver.mjs).

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';

const mcp = new McpServer({ name: 'ts-ask-server', version: '1.0.0' });
const server = mcp.server;

mcp.registerTool(
    'ask',
    { description: 'Asks the calling client for a sample, a form and its roots, and says what each answered.' },
    async () => {
        const sampled = await server.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'who are you?' } }],
            maxTokens: 10,
        });
        const form = await server.elicitInput({
            message: 'Your name?',
            requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
        });
        const roots = await server.listRoots();
        const text = `sampling=${sampled.content.text} elicitation=${form.content?.name} roots=${roots.roots.map((r) => r.uri).join(',')}`;
        return { content: [{ type: 'text', text }] };
    },
);

await mcp.connect(new StdioServerTransport());
