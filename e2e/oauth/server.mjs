// A real OAuth 2.1 / OpenID Connect authorization server for the tests:
// oidc-provider (pinned in package.json), configured as an identity provider
// in front of MCP servers would be. internal/oauthtest starts it; nothing here
// is a mock of the protocol, only the login page is simplified (any user name
// logs in, without a password).
//
//   node server.mjs --issuer http://127.0.0.1:PORT
//   node server.mjs --issuer auto      (the address it listens on)
//
// It serves the authorization server on a free loopback port and a control
// API for the tests on another, then prints one line of JSON on stdout:
// {"ready":true,"issuer":"...","port":N,"control":M}. The issuer is usually the address of
// a proxy in front of port N (the tests' way to make it unreachable), hence
// given on the command line.
//
// What it supports: discovery (OpenID and RFC 8414), dynamic client
// registration (open), authorization code with PKCE (S256, required),
// refresh tokens, client credentials, resource indicators (RFC 8707: the
// access token's aud is the resource asked for), JWT access tokens (RFC
// 9068, typ at+jwt) or opaque ones per resource, introspection (RFC 7662)
// and revocation.
//
// Control API (POST, JSON bodies, on the control port only):
//   /resources  {resource, format: "jwt"|"opaque", alg, ttl, notBefore, scope}
//               how tokens for that resource are issued; resources not
//               configured get RS256 JWTs valid for an hour.
//   /rotate     {retire: bool} a new key per algorithm signs from now on; the
//               old ones stay in the JWKS unless retire is true.
//   /users      {user, claims} extra claims of a user's access tokens
//               (groups, for example).
import crypto from 'node:crypto';
import http from 'node:http';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';
import { createMemoryAdapter } from 'oidc-provider/lib/adapters/memory_adapter.js';

const { values: args } = parseArgs({
  options: {
    issuer: { type: 'string' },
    host: { type: 'string', default: '127.0.0.1' },
    port: { type: 'string', default: '0' },
  },
});
if (!args.issuer) {
  console.error('server.mjs: --issuer URL (or auto) is required');
  process.exit(2);
}

// The hub's default scopes, and two more for the tests of a policy that
// maps scopes of its own (step-up authorization).
const scopes = ['openid', 'offline_access', 'mcp:client', 'mcp:dashboard', 'mcp:server', 'mcp:admin', 'crm:read', 'crm:write'];
const resourceScope = scopes.filter((s) => s.includes(':')).join(' ');

// How tokens are issued per resource (set through /resources).
const resources = new Map();
// Extra claims of users' tokens (set through /users).
const users = new Map();

// keys returns a fresh private JWK per algorithm family: RSA (RS256, PS256),
// P-256 (ES256) and Ed25519 (EdDSA). The first one of a type signs.
let generation = 0;
function newKeys() {
  generation += 1;
  const jwk = (type, opts, name) => {
    const { privateKey } = crypto.generateKeyPairSync(type, opts);
    return { ...privateKey.export({ format: 'jwk' }), kid: `${name}-${generation}-${crypto.randomBytes(4).toString('hex')}`, use: 'sig' };
  };
  return [
    jwk('rsa', { modulusLength: 2048 }, 'rsa'),
    jwk('ec', { namedCurve: 'P-256' }, 'ec'),
    jwk('ed25519', {}, 'ed'),
  ];
}

let keys = newKeys();
// One store for every provider built here (see /rotate): clients, grants,
// sessions and opaque tokens outlive a rotation of the keys.
const adapter = createMemoryAdapter();
const cookieKeys = [crypto.randomBytes(32).toString('hex')];

function resourceInfo(resource) {
  const r = resources.get(resource) ?? {};
  const info = {
    scope: r.scope ?? resourceScope,
    audience: resource,
    accessTokenTTL: r.ttl ?? 3600,
    accessTokenFormat: r.format ?? 'jwt',
  };
  if (info.accessTokenFormat === 'jwt') {
    info.jwt = { sign: { alg: r.alg ?? 'RS256' } };
  }
  return info;
}

function newProvider() {
  const provider = new Provider(args.issuer, {
    adapter,
    jwks: { keys },
    cookies: { keys: cookieKeys },
    scopes,
    claims: { openid: ['sub'], profile: ['name'] },
    pkce: { required: () => true },
    clientBasedCORS: () => true,
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (ctx, client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (ctx, resource) => resourceInfo(resource),
      },
    },
    findAccount: async (ctx, id) => ({
      accountId: id,
      claims: async () => ({ sub: id, name: id }),
    }),
    extraTokenClaims: async (ctx, token) => (token.accountId ? users.get(token.accountId) : undefined),
    formats: {
      customizers: {
        jwt: async (ctx, token, jwt) => {
          const r = resources.get(jwt.payload.aud);
          if (r?.notBefore) {
            jwt.payload.nbf = jwt.payload.iat + r.notBefore;
          }
        },
      },
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    // The tests' login and consent pages: one form each, completed by the
    // tests like a browser would (internal/oauthtest, sdkflow.mjs).
    renderError: async (ctx, out) => {
      ctx.type = 'json';
      ctx.body = out;
    },
  });
  provider.on('server_error', (ctx, err) => console.error('server_error', err));
  return provider;
}

// Made once the issuer is known: with --issuer auto, once listening.
let provider;
let handle;

const html = (body) => `<!doctype html><html><body>${body}</body></html>`;

async function readForm(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

// interaction serves the login and consent pages and their forms.
async function interaction(req, res, url) {
  const [, , uid, step] = url.pathname.split('/');
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.uid !== uid) throw new Error('interaction mismatch');
    const { prompt, params } = details;
    if (req.method === 'GET') {
      const action = prompt.name === 'login' ? 'login' : 'confirm';
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(html(`<form method="post" action="/interaction/${uid}/${action}" data-prompt="${prompt.name}">`
        + (action === 'login' ? '<input name="login">' : '') + '<button>Continue</button></form>'));
      return;
    }
    const form = await readForm(req);
    let result;
    if (step === 'login') {
      const login = form.get('login');
      if (!login) throw new Error('login is required');
      result = { login: { accountId: login } };
    } else if (step === 'confirm') {
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
      const missing = prompt.details;
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
      if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
      for (const [indicator, s] of Object.entries(missing.missingResourceScopes ?? {})) {
        grant.addResourceScope(indicator, s.join(' '));
      }
      result = { consent: { grantId: await grant.save() } };
    } else {
      throw new Error('unknown interaction step');
    }
    await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  } catch (err) {
    res.writeHead(400, { 'content-type': 'text/plain' });
    res.end(`interaction failed: ${err.message}`);
  }
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  if (url.pathname.startsWith('/interaction/')) {
    interaction(req, res, url);
    return;
  }
  handle(req, res);
});

async function readJSON(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return body ? JSON.parse(body) : {};
}

const control = http.createServer(async (req, res) => {
  try {
    const body = await readJSON(req);
    switch (req.method === 'POST' && req.url) {
      case '/resources':
        if (!body.resource) throw new Error('resource is required');
        resources.set(body.resource, body);
        break;
      case '/rotate':
        keys = body.retire ? newKeys() : [...newKeys(), ...keys];
        // The provider reads its keys once: a new one, sharing the store,
        // takes over from the next request.
        provider = newProvider();
        handle = provider.callback();
        break;
      case '/users':
        users.set(body.user, body.claims ?? {});
        break;
      default:
        res.writeHead(404).end();
        return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true, kids: keys.map((k) => k.kid) }));
  } catch (err) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: err.message }));
  }
});

await new Promise((resolve) => server.listen(Number(args.port), args.host, resolve));
await new Promise((resolve) => control.listen(0, args.host, resolve));
if (args.issuer === 'auto') {
  args.issuer = `http://${args.host}:${server.address().port}`;
}
provider = newProvider();
handle = provider.callback();
console.log(JSON.stringify({ ready: true, issuer: args.issuer, port: server.address().port, control: control.address().port }));

// The tests stop it with SIGTERM, or by closing its stdin when they die.
const stop = () => process.exit(0);
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
