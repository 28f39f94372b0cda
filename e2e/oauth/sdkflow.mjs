// The official MCP TypeScript SDK's OAuth client, end to end against a
// protected resource, as an MCP client meets one:
//
//   node sdkflow.mjs --url RESOURCE_URL --user NAME
//
// GET the resource -> 401 with WWW-Authenticate -> the SDK's auth():
// protected resource metadata -> authorization server metadata -> dynamic
// client registration -> authorization URL with PKCE and the resource
// indicator. Here a browser would open; this script logs in and consents
// on the server's pages (server.mjs) like one, then hands the code back to
// auth(), which exchanges it. Then GET the resource with the token.
//
// It prints one line of JSON: {"status": N, "body": "...", "steps": [...]}.
import { parseArgs } from 'node:util';

import { auth, extractWWWAuthenticateParams } from '@modelcontextprotocol/sdk/client/auth.js';

import { Provider, browse } from './flow.mjs';

const { values: args } = parseArgs({
  options: { url: { type: 'string' }, user: { type: 'string', default: 'alice' } },
});
const steps = [];

const first = await fetch(args.url);
steps.push(`${first.status}`);
const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(first);
const provider = new Provider(steps);
let result = await auth(provider, { serverUrl: args.url, resourceMetadataUrl, scope });
if (result !== 'REDIRECT') throw new Error(`auth: ${result}, expected REDIRECT`);
const code = await browse(provider.authorizationUrl, provider.redirectUrl, args.user, steps);
result = await auth(provider, { serverUrl: args.url, resourceMetadataUrl, authorizationCode: code });
if (result !== 'AUTHORIZED') throw new Error(`auth: ${result}, expected AUTHORIZED`);

const res = await fetch(args.url, { headers: { authorization: `Bearer ${provider.tokens().access_token}` } });
console.log(JSON.stringify({
  status: res.status,
  body: await res.text(),
  steps,
  resource: provider.authorizationUrl.searchParams.get('resource'),
  scope: provider.authorizationUrl.searchParams.get('scope'),
}));
