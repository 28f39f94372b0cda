// The parts of an MCP client's OAuth flow a test plays itself, shared by
// sdkflow.mjs and the end-to-end tests of the hub (e2e/test/oauth.test.mjs):
// an OAuthClientProvider for the official TypeScript SDK's auth(), which
// keeps what it is given in memory, and a "browser" that follows the
// authorization URL through the login and consent pages of server.mjs.
// And a way to run server.mjs itself, for the tests that start no Go. It
// imports node's own modules only, so that it loads from any package.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const DIR = path.dirname(fileURLToPath(import.meta.url));

/**
 * Provider is an OAuthClientProvider of a public client (PKCE, no secret)
 * whose redirect URI nothing listens on: browse reads the code from the
 * redirect. steps records what the SDK did, in order; client, when given,
 * is a client registered beforehand (by an administrator), which the SDK
 * then does not register itself.
 */
export class Provider {
  #client;
  #tokens;
  #verifier;
  authorizationUrl;

  constructor(steps = [], client = undefined) {
    this.steps = steps;
    this.#client = client;
  }

  get redirectUrl() { return 'http://127.0.0.1/callback'; }

  get clientMetadata() {
    return {
      client_name: 'sdk-oauth-test',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: 'native',
    };
  }

  clientInformation() { return this.#client; }

  saveClientInformation(info) { this.#client = info; this.steps.push('registered'); }

  tokens() { return this.#tokens; }

  saveTokens(tokens) { this.#tokens = tokens; this.steps.push('token'); }

  redirectToAuthorization(url) { this.authorizationUrl = url; this.steps.push('redirect'); }

  saveCodeVerifier(v) { this.#verifier = v; }

  codeVerifier() { return this.#verifier; }
}

// browse follows the authorization URL like a browser: redirects (with
// cookies), the login form (user name), the consent form, until the
// redirect to redirectUrl, and returns its code.
export async function browse(start, redirectUrl, user, steps = []) {
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

/**
 * startAuthorizationServer runs server.mjs on a free port, its issuer the
 * address it listens on, and resolves once it is ready, with its issuer,
 * register (a client registered by dynamic registration), machineClient
 * (one for client credentials), token (an
 * access token by client credentials), setResource (how the tokens of a
 * resource are issued: server.mjs's control API) and stop.
 */
export async function startAuthorizationServer() {
  if (!existsSync(path.join(DIR, 'node_modules', 'oidc-provider'))) {
    throw new Error(`oidc-provider is not installed in ${DIR}: run \`make deps\``);
  }
  const proc = spawn(process.execPath, [path.join(DIR, 'server.mjs'), '--issuer', 'auto'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  let resolveReady;
  let rejectReady;
  const ready = new Promise((res, rej) => { resolveReady = res; rejectReady = rej; });
  let out = '';
  let err = '';
  proc.stdout.setEncoding('utf8');
  proc.stdout.on('data', (chunk) => {
    out += chunk;
    const line = out.split('\n')[0];
    if (out.includes('\n') && line.includes('"ready":true')) {
      resolveReady(JSON.parse(line));
    }
  });
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk) => { err += chunk; });
  exited.then((code) => rejectReady(new Error(`the authorization server exited (${code}): ${err}`)));
  const timer = setTimeout(() => rejectReady(new Error('the authorization server did not start within 30 s')), 30_000);
  let issuer;
  let control;
  try {
    ({ issuer, control } = await ready);
  } catch (err) {
    proc.kill('SIGKILL');
    throw err;
  } finally {
    clearTimeout(timer);
  }
  return {
    issuer,
    async register(metadata) {
      const res = await fetch(`${issuer}/reg`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(metadata),
      });
      if (res.status !== 201) throw new Error(`registration: ${res.status} ${await res.text()}`);
      return res.json();
    },
    /** machineClient registers a confidential client for client credentials, allowed scope. */
    machineClient(scope) {
      return this.register({
        client_name: 'machine', grant_types: ['client_credentials'], response_types: [],
        token_endpoint_auth_method: 'client_secret_basic', scope,
      });
    },
    /** token gets an access token for resource by client credentials, as client (registered with its secret). */
    async token(client, resource, scope) {
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', resource, ...(scope ? { scope } : {}) }).toString(),
      });
      if (res.status !== 200) throw new Error(`token: ${res.status} ${await res.text()}`);
      return (await res.json()).access_token;
    },
    /** setResource says how tokens for r.resource are issued from now on: {resource, format, alg, ttl, notBefore}. */
    async setResource(r) {
      const res = await fetch(`http://127.0.0.1:${control}/resources`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(r),
      });
      if (res.status !== 200) throw new Error(`setResource: ${res.status} ${await res.text()}`);
    },
    async stop() {
      proc.stdin.end(); // it exits when its stdin closes
      await exited;
    },
  };
}
