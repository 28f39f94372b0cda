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

const { values: args } = parseArgs({
  options: { url: { type: 'string' }, user: { type: 'string', default: 'alice' } },
});
const steps = [];

class Provider {
  #client;
  #tokens;
  #verifier;
  authorizationUrl;

  get redirectUrl() { return 'http://127.0.0.1/callback'; }

  get clientMetadata() {
    return {
      client_name: 'sdkflow',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    };
  }

  clientInformation() { return this.#client; }

  saveClientInformation(info) { this.#client = info; steps.push('registered'); }

  tokens() { return this.#tokens; }

  saveTokens(tokens) { this.#tokens = tokens; steps.push('token'); }

  redirectToAuthorization(url) { this.authorizationUrl = url; steps.push('redirect'); }

  saveCodeVerifier(v) { this.#verifier = v; }

  codeVerifier() { return this.#verifier; }
}

// browse follows the authorization URL like a browser: redirects (with
// cookies), the login form (user name), the consent form, until the
// redirect to redirectUrl, and returns its code.
async function browse(start, redirectUrl, user) {
  const cookies = new Map();
  let url = start.toString();
  let init = {};
  for (let i = 0; i < 20; i += 1) {
    const headers = { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '), ...init.headers };
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair.indexOf('=');
      cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    const location = res.headers.get('location');
    if (location) {
      const next = new URL(location, url);
      if (next.href.startsWith(redirectUrl)) {
        if (next.searchParams.get('error')) throw new Error(`refused: ${next.searchParams.get('error_description')}`);
        return next.searchParams.get('code');
      }
      url = next.href;
      init = {};
      continue;
    }
    const page = await res.text();
    const m = /<form method="post" action="([^"]+)" data-prompt="([^"]+)"/.exec(page);
    if (!m) throw new Error(`${res.status} at ${url}: ${page}`);
    steps.push(m[2]);
    url = new URL(m[1], url).href;
    init = {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ login: user }).toString(),
    };
  }
  throw new Error('no code after 20 pages');
}

const first = await fetch(args.url);
steps.push(`${first.status}`);
const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(first);
const provider = new Provider();
let result = await auth(provider, { serverUrl: args.url, resourceMetadataUrl, scope });
if (result !== 'REDIRECT') throw new Error(`auth: ${result}, expected REDIRECT`);
const code = await browse(provider.authorizationUrl, provider.redirectUrl, args.user);
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
