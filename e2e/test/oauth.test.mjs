// (d) The official TypeScript SDK's OAuth flow through the hub, over
// Streamable HTTP, against a real authorization server (oidc-provider, run
// from ../oauth/server.mjs): the first POST gets 401 with a challenge, the
// SDK reads the hub's Protected Resource Metadata, then the authorization
// server's metadata, registers itself, sends the user to log in (a
// "browser" here, ../oauth/flow.mjs) with PKCE and the resource indicator,
// exchanges the code, and its session lists and calls tools. A call that
// needs a scope the token lacks gets 403 insufficient_scope; the SDK asks
// for the scope, and the same session goes on with the new token.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

import { startHub, withTimeout, freePort, DEADLINE_MS } from './helpers.mjs';

const OAUTH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'oauth');
const { Provider, browse, startAuthorizationServer } = await import(path.join(OAUTH_DIR, 'flow.mjs'));

/** The hub's policy: mcp:client may call demo__echo only, crm:write every demo tool. */
const TOKENS = `
tokens: []
policy:
  - scope: mcp:client
    roles: [client]
    tools: ["demo__echo"]
  - scope: crm:write
    roles: [client]
    tools: ["demo__*"]
`;

describe('TS SDK OAuth flow through the hub (Streamable HTTP)', () => {
    let as, hub, url, client, transport;
    const steps = [];
    const provider = new Provider(steps);

    before(async () => {
        as = await startAuthorizationServer();
        const dir = mkdtempSync(path.join(os.tmpdir(), 'switchboard-oauth-'));
        const tokens = path.join(dir, 'tokens.yaml');
        writeFileSync(tokens, TOKENS, { mode: 0o600 });
        const port = await freePort();
        const base = `http://127.0.0.1:${port}`;
        hub = await startHub({
            args: ['--addr', `127.0.0.1:${port}`, '--public-url', base, '--oauth-issuer', as.issuer, '--tokens', tokens],
        });
        url = new URL(`${base}/mcp`);
    });

    after(async () => {
        await client?.close().catch(() => {});
        await hub?.stop();
        await as?.stop();
    });

    it('runs 401, resource metadata, server metadata, registration, code with PKCE, token, then lists and calls', async () => {
        // The first connection meets the 401 and leaves the SDK waiting for
        // the user's login.
        const first = new Client({ name: 'e2e-oauth', version: '1.0.0' });
        await assert.rejects(
            withTimeout(first.connect(new StreamableHTTPClientTransport(url, { authProvider: provider })), DEADLINE_MS, 'the 401'),
            UnauthorizedError);
        const asked = provider.authorizationUrl;
        assert.ok(asked, 'the SDK sent the user to log in');
        assert.equal(asked.origin, as.issuer, 'at the issuer the hub\'s metadata names');
        assert.equal(asked.searchParams.get('resource'), url.href, 'for the hub\'s resource (RFC 8707)');
        assert.equal(asked.searchParams.get('code_challenge_method'), 'S256');
        assert.equal(asked.searchParams.get('scope'), 'mcp:client', 'the scope of the hub\'s challenge');

        const code = await withTimeout(browse(asked, provider.redirectUrl, 'alice', steps), DEADLINE_MS, 'the login');
        transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
        await withTimeout(transport.finishAuth(code), DEADLINE_MS, 'the code exchange');
        assert.deepEqual(steps, ['registered', 'redirect', 'login', 'consent', 'token']);

        client = new Client({ name: 'e2e-oauth', version: '1.0.0' });
        await withTimeout(client.connect(transport), DEADLINE_MS, 'the session');
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((t) => t.name), ['demo__echo'], 'what mcp:client may call, it sees');
        const res = await client.callTool({ name: 'demo__echo', arguments: { text: 'through OAuth' } });
        assert.equal(res.content[0].text, 'through OAuth');
    });

    it('steps up: 403 insufficient_scope, a login for the scope, and the same session goes on', async () => {
        // A client an administrator registered for both scopes (the SDK
        // registers itself with the scope of the first challenge only,
        // and oidc-provider holds a client to its registered scope).
        const admin = new Provider([], await as.register({ ...provider.clientMetadata, scope: 'mcp:client crm:write' }));
        const login = async (what) => {
            const asked = admin.authorizationUrl;
            admin.authorizationUrl = undefined;
            const code = await withTimeout(browse(asked, admin.redirectUrl, 'alice'), DEADLINE_MS, what);
            await withTimeout(t.finishAuth(code), DEADLINE_MS, `the code exchange of ${what}`);
            return asked;
        };
        let t = new StreamableHTTPClientTransport(url, { authProvider: admin });
        await assert.rejects(new Client({ name: 'e2e-oauth', version: '1.0.0' }).connect(t), UnauthorizedError);
        await login('the first login');
        t = new StreamableHTTPClientTransport(url, { authProvider: admin });
        const c = new Client({ name: 'e2e-oauth-stepup', version: '1.0.0' });
        await withTimeout(c.connect(t), DEADLINE_MS, 'the session');
        const session = t.sessionId;
        try {
            await assert.rejects(c.callTool({ name: 'demo__add', arguments: { a: 2, b: 3 } }), UnauthorizedError);
            const asked = await login('the step-up login');
            assert.equal(asked.searchParams.get('scope'), 'mcp:client crm:write', 'the scopes of the hub\'s step-up challenge');

            const res = await c.callTool({ name: 'demo__add', arguments: { a: 2, b: 3 } });
            assert.equal(res.content[0].text, '5');
            assert.equal(t.sessionId, session, 'the same session');
        } finally {
            await c.close();
        }
    });
});
