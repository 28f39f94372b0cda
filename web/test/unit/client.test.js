// Unit tests of web/switchboard.js against a real hub (bin/hub --demo),
// with the `ws` package as the WebSocket (Node 20 has no global one).
import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';

import {
  SwitchboardClient,
  RpcError,
  ConnectionClosedError,
  State,
  ErrorCode,
  backoffDelay,
  withToken,
  tokenSubprotocol,
  defaultHubURL,
} from '../../switchboard.js';
import path from 'node:path';
import { startHub, startDemo, nextEvent, withDeadline, tokensFile, ROOT } from '../helpers/hub.js';
import { startFakeServer, FORM_SCHEMA } from '../helpers/fake-server.js';
import { freePort } from '../helpers/redis.js';

const { startAuthorizationServer } = await import(path.join(ROOT, 'e2e', 'oauth', 'flow.mjs'));

const clients = [];
/** newClient returns a client of hub that the test's afterEach closes. */
function newClient(url, opts = {}) {
  const c = new SwitchboardClient(url, { WebSocket, clientInfo: { name: 'unit-test', version: '0' }, ...opts });
  clients.push(c);
  return c;
}
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

/**
 * settle attaches handlers at once (so that an early rejection is not
 * "unhandled") and resolves with {res} or {err}.
 */
const settle = (promise) => promise.then((res) => ({ res }), (err) => ({ err }));

/** serversDoc reads and parses switchboard://servers. */
async function serversDoc(client) {
  const res = await client.readResource('switchboard://servers');
  return JSON.parse(res.contents[0].text);
}

describe('helpers', () => {
  it('backoffDelay grows by factor, is capped, and jitters within bounds', () => {
    const o = { initialDelayMs: 100, maxDelayMs: 1000, factor: 2, jitter: 0.5 };
    assert.equal(backoffDelay(0, o, () => 1), 100);
    assert.equal(backoffDelay(0, o, () => 0), 50);
    assert.equal(backoffDelay(2, o, () => 1), 400);
    assert.equal(backoffDelay(10, o, () => 1), 1000, 'capped at maxDelayMs');
    assert.equal(backoffDelay(10, o, () => 0), 500);
    assert.equal(backoffDelay(3, { ...o, jitter: 0 }, Math.random), 800, 'no jitter: exact');
    for (let i = 0; i < 100; i++) {
      const d = backoffDelay(1, o);
      assert.ok(d >= 100 && d <= 200, `delay ${d} out of [100, 200]`);
    }
  });

  it('withToken sets ?token= and keeps other parameters', () => {
    assert.equal(withToken('ws://h:1/mcp', ''), 'ws://h:1/mcp');
    assert.equal(withToken('ws://h:1/mcp', 'a b&c'), 'ws://h:1/mcp?token=a+b%26c');
    assert.equal(withToken('wss://h/mcp?x=1', 't'), 'wss://h/mcp?x=1&token=t');
  });

  it('tokenSubprotocol carries the token\u2019s UTF-8 in base64url, without padding', () => {
    assert.equal(tokenSubprotocol('abc'), 'bearer.YWJj');
    assert.equal(tokenSubprotocol('\u00fc?>>'), `bearer.${Buffer.from('\u00fc?>>').toString('base64url')}`);
    assert.match(tokenSubprotocol('eyJhbGciOiJSUzI1NiJ9.e30.c2ln'), /^bearer\.[A-Za-z0-9_-]+$/, 'only characters a subprotocol may hold');
  });

  it('refuses an unknown tokenVia', () => {
    assert.throws(() => new SwitchboardClient('ws://x/mcp', { WebSocket, tokenVia: 'header' }), /tokenVia must be "query" or "subprotocol"/);
  });

  it('defaultHubURL derives ws(s)://host/mcp from the page origin', () => {
    assert.equal(defaultHubURL('http://127.0.0.1:8080'), 'ws://127.0.0.1:8080/mcp');
    assert.equal(defaultHubURL('https://hub.example'), 'wss://hub.example/mcp');
  });

  it('a client without a WebSocket implementation fails clearly', () => {
    assert.throws(() => new SwitchboardClient('ws://x/mcp', { WebSocket: undefined }), /no WebSocket implementation/);
  });
});

describe('switchboard.js against a hub with the demo server', () => {
  let hub;
  before(async () => {
    hub = await startHub();
  });
  after(async () => {
    await hub?.stop();
  });

  it('connects and initializes, with state events in order', async () => {
    const c = newClient(hub.wsURL);
    const states = [];
    c.addEventListener('state', (e) => states.push(e.detail.state));
    assert.equal(c.state, State.IDLE);
    const init = await c.connect();
    assert.equal(init.serverInfo.name, 'switchboard');
    assert.ok(init.capabilities.resources.subscribe, 'the hub declares resource subscriptions');
    assert.equal(c.protocolVersion, '2025-11-25');
    assert.equal(c.state, State.OPEN);
    assert.deepEqual(await c.ping(), {});
    c.close();
    assert.deepEqual(states, ['connecting', 'open', 'closed']);
  });

  it('connects with a token in the query (the hub without --tokens ignores it)', async () => {
    const c = newClient(hub.wsURL, { token: 's3cret' });
    await c.connect();
    assert.equal(c.state, State.OPEN);
  });

  it('rejects connect() clearly when nothing listens', async () => {
    const c = newClient('ws://127.0.0.1:1/mcp');
    await assert.rejects(c.connect(), (err) => err instanceof ConnectionClosedError && /could not connect/.test(err.message));
    assert.equal(c.state, State.CLOSED);
  });

  it('rejects requests made while not connected, without sending them', async () => {
    const c = newClient(hub.wsURL);
    await assert.rejects(c.listTools(), (err) => err instanceof ConnectionClosedError && err.code === ErrorCode.CONNECTION_CLOSED);
  });

  it('lists tools, resources, templates and prompts with the server in _meta', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const { tools } = await c.listTools();
    const names = tools.map((t) => t.name);
    for (const n of ['demo__add', 'demo__ask', 'demo__echo', 'demo__increment', 'demo__slow']) assert.ok(names.includes(n), `${n} in ${names}`);
    const add = tools.find((t) => t.name === 'demo__add');
    assert.equal(add._meta['switchboard/server'], 'demo');
    assert.deepEqual(add.inputSchema.required, ['a', 'b']);
    const { resources } = await c.listResources();
    const uris = resources.map((r) => r.uri);
    for (const u of ['demo://clock', 'demo://counter', 'switchboard://servers', 'switchboard://instances']) assert.ok(uris.includes(u), `${u} in ${uris}`);
    const { resourceTemplates } = await c.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate), ['demo://greeting/{name}']);
    const { prompts } = await c.listPrompts();
    assert.deepEqual(prompts.map((p) => p.name), ['demo__greet']);
  });

  it('calls a tool and gets structuredContent', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const res = await c.callTool('demo__add', { a: 2, b: 40 });
    assert.deepEqual(res.structuredContent, { sum: 42 });
    assert.deepEqual(res.content, [{ type: 'text', text: '42' }]);
  });

  it('rejects a protocol error as an RpcError with the code and message', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    await assert.rejects(c.callTool('demo__nope', {}), (err) => {
      assert.ok(err instanceof RpcError);
      assert.equal(err.code, ErrorCode.INVALID_PARAMS);
      assert.match(err.message, /unknown tool "demo__nope"/);
      return true;
    });
    await assert.rejects(c.readResource('demo://missing'), (err) => err.code === ErrorCode.RESOURCE_NOT_FOUND);
    await assert.rejects(c.setLoggingLevel('loud'), (err) => err.code === ErrorCode.INVALID_PARAMS);
  });

  it('reports progress through onProgress, in order', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const seen = [];
    const res = await c.callTool('demo__slow', { steps: 5, delayMs: 20 }, { onProgress: (p) => seen.push(p) });
    assert.equal(res.content[0].text, 'done after 5 steps');
    assert.deepEqual(seen.map((p) => p.progress), [1, 2, 3, 4, 5]);
    assert.ok(seen.every((p) => p.total === 5));
    assert.equal(seen[4].message, 'step 5 of 5');
  });

  it('keeps the progress of two concurrent calls apart', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const a = [];
    const b = [];
    await Promise.all([
      c.callTool('demo__slow', { steps: 3, delayMs: 20 }, { onProgress: (p) => a.push(p.total) }),
      c.callTool('demo__slow', { steps: 4, delayMs: 15 }, { onProgress: (p) => b.push(p.total) }),
    ]);
    assert.deepEqual(a, [3, 3, 3]);
    assert.deepEqual(b, [4, 4, 4, 4]);
  });

  it('cancels a call through an AbortSignal, and the server stops working on it', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const ac = new AbortController();
    let progressed;
    const first = new Promise((resolve) => (progressed = resolve));
    const started = Date.now();
    const call = c.callTool('demo__slow', { steps: 100, delayMs: 50 }, { signal: ac.signal, onProgress: progressed });
    await withDeadline(first, 5000, 'the first progress report');
    ac.abort();
    await assert.rejects(call, (err) => err.name === 'AbortError');
    assert.ok(Date.now() - started < 4000, 'rejected at once, not when the 5 s call ends');
    // The hub forwarded notifications/cancelled: the demo replica has no call
    // in flight long before the 5 s the call would have taken.
    await withDeadline(
      (async () => {
        for (;;) {
          const doc = await serversDoc(c);
          if (doc.servers.find((s) => s.name === 'demo').replicas[0].inFlight === 0) return;
          await new Promise((r) => setTimeout(r, 50));
        }
      })(),
      3000,
      'the demo replica to have no call in flight after the cancel',
    );
    // The connection is still usable.
    assert.deepEqual((await c.callTool('demo__add', { a: 1, b: 1 })).structuredContent, { sum: 2 });
  });

  it('rejects an already-aborted signal without sending', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    await assert.rejects(c.callTool('demo__add', { a: 1, b: 2 }, { signal: AbortSignal.abort() }), (err) => err.name === 'AbortError');
  });

  it('times out a request with -32001 and cancels it', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    await assert.rejects(c.callTool('demo__slow', { steps: 50, delayMs: 100 }, { timeoutMs: 150 }), (err) => {
      assert.equal(err.code, ErrorCode.REQUEST_TIMEOUT);
      return true;
    });
  });

  it('reads resources and templated resources', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const clock = await c.readResource('demo://clock');
    assert.ok(!Number.isNaN(Date.parse(clock.contents[0].text)), clock.contents[0].text);
    const greeting = await c.readResource('demo://greeting/Ada');
    assert.equal(greeting.contents[0].text, 'Hello, Ada!');
  });

  it('subscribes to demo://clock and receives updates, until it unsubscribes', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const updates = [];
    let two;
    const gotTwo = new Promise((resolve) => (two = resolve));
    c.addEventListener('notifications/resources/updated', (e) => {
      if (e.detail.uri === 'demo://clock') updates.push(e.detail) === 2 && two();
    });
    await c.subscribe('demo://clock');
    assert.deepEqual([...c.subscriptions], ['demo://clock']);
    await withDeadline(gotTwo, 5000, 'two demo://clock updates');
    await c.unsubscribe('demo://clock');
    assert.deepEqual([...c.subscriptions], []);
  });

  it('emits every notification as "notification" and under its method', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    await c.subscribe('demo://counter');
    const generic = nextEvent(c, 'notification', (d) => d.method === 'notifications/resources/updated' && d.params.uri === 'demo://counter');
    const specific = nextEvent(c, 'notifications/resources/updated', (d) => d.uri === 'demo://counter');
    await c.callTool('demo__increment', { by: 2 });
    await Promise.all([generic, specific]);
  });

  it('sees servers come and go in switchboard://servers, live', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    await c.subscribe('switchboard://servers');
    const names = async () => (await serversDoc(c)).servers.map((s) => s.name);
    const listChanged = nextEvent(c, 'notifications/tools/list_changed');
    const updated = nextEvent(c, 'notifications/resources/updated', (d) => d.uri === 'switchboard://servers');
    const demo2 = await startDemo(hub, 'unit-demo2');
    try {
      await Promise.all([listChanged, updated]);
      assert.ok((await names()).includes('unit-demo2'));
      assert.ok((await c.listTools()).tools.some((t) => t.name === 'unit-demo2__add'));
      // A call in flight to a server that leaves fails at once with -32000.
      const inFlight = settle(c.callTool('unit-demo2__slow', { steps: 100, delayMs: 100 }));
      await withDeadline(
        (async () => {
          for (;;) {
            const s = (await serversDoc(c)).servers.find((x) => x.name === 'unit-demo2');
            if (s?.replicas[0].inFlight > 0) return;
            await new Promise((r) => setTimeout(r, 20));
          }
        })(),
        3000,
        'the call to reach unit-demo2',
      );
      const gone = nextEvent(c, 'notifications/resources/updated', (d) => d.uri === 'switchboard://servers');
      await demo2.stop('SIGKILL');
      const { err } = await withDeadline(inFlight, 5000, 'the in-flight call to fail');
      assert.ok(err, 'the call to a server that left fails');
      assert.equal(err.code, ErrorCode.CONNECTION_CLOSED);
      assert.equal(err.data?.server, 'unit-demo2');
      await gone;
      assert.ok(!(await names()).includes('unit-demo2'));
    } finally {
      await demo2.stop('SIGKILL');
    }
  });

  it('answers sampling requests (demo__ask) with its handler', async () => {
    const asked = [];
    const c = newClient(hub.wsURL, {
      onSampling: async (params, ctx) => {
        asked.push(params);
        assert.ok(ctx.signal instanceof AbortSignal);
        return { role: 'assistant', content: { type: 'text', text: `echo: ${params.messages[0].content.text}` }, model: 'unit', stopReason: 'endTurn' };
      },
    });
    await c.connect();
    const res = await c.callTool('demo__ask', { question: 'What is 6 x 7?' });
    assert.equal(res.content[0].text, 'echo: What is 6 x 7?');
    assert.equal(asked.length, 1);
    assert.equal(asked[0].maxTokens, 200);
  });

  it('passes a sampling handler\u2019s error to the server, and the call fails with it', async () => {
    const c = newClient(hub.wsURL, {
      onSampling: async () => {
        throw new RpcError(-1, 'the user declined');
      },
    });
    await c.connect();
    const outcome = await settle(c.callTool('demo__ask', { question: 'q' }));
    const text = outcome.err ? outcome.err.message : JSON.stringify(outcome.res);
    assert.match(text, /the user declined/, 'the error reaches the caller');
  });

  it('without a sampling handler, demo__ask fails clearly (no capability declared)', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const outcome = await settle(c.callTool('demo__ask', { question: 'q' }));
    const text = outcome.err ? outcome.err.message : JSON.stringify(outcome.res);
    assert.ok(outcome.err || outcome.res.isError, `demo__ask should fail, got ${text}`);
    assert.match(text, /sampling/i);
  });

  it('gets a prompt and completes its arguments', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const p = await c.getPrompt('demo__greet', { name: 'Ada', style: 'formal' });
    assert.equal(p.description, 'A formal greeting');
    assert.equal(p.messages[0].content.text, 'Write a formal greeting for Ada.');
    const done = await c.complete({ type: 'ref/prompt', name: 'demo__greet' }, { name: 'style', value: 'f' });
    assert.deepEqual(done.completion.values, ['formal']);
  });

  it('sets the logging level', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    await c.setLoggingLevel('warning');
  });

  it('rejects pending calls when it closes, with ConnectionClosedError', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const call = c.callTool('demo__slow', { steps: 100, delayMs: 50 });
    c.close();
    await assert.rejects(call, (err) => err instanceof ConnectionClosedError && err.code === -32000);
    assert.equal(c.state, State.CLOSED);
  });
});

describe('switchboard.js with a scripted server', () => {
  let hub;
  let fake;
  before(async () => {
    hub = await startHub({ demo: false });
    fake = await startFakeServer(hub, { fillerTools: 120 });
  });
  after(async () => {
    await fake?.close();
    await hub?.stop();
  });

  it('follows nextCursor through every page of tools', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const first = await c.request('tools/list', {});
    assert.ok(first.nextCursor, 'the hub paginates 126 tools');
    const { tools } = await c.listTools();
    assert.equal(tools.length, 126);
    assert.equal(new Set(tools.map((t) => t.name)).size, 126, 'no duplicates across pages');
    assert.ok(tools.some((t) => t.name === 'fake__filler119'));
    assert.deepEqual(tools.find((t) => t.name === 'fake__form').inputSchema, FORM_SCHEMA);
  });

  it('answers elicitation requests with its handler', async () => {
    const c = newClient(hub.wsURL, {
      onElicitation: async (params) => {
        assert.equal(params.message, 'Who are you?');
        assert.deepEqual(params.requestedSchema.required, ['nickname']);
        return { action: 'accept', content: { nickname: 'zed', age: 7 } };
      },
    });
    await c.connect();
    const res = await c.callTool('fake__elicit', { message: 'Who are you?' });
    assert.deepEqual(res.structuredContent, { action: 'accept', content: { nickname: 'zed', age: 7 } });
  });

  it('answers roots/list, and setRoots notifies the server', async () => {
    const c = newClient(hub.wsURL, { roots: [{ uri: 'file:///srv/a', name: 'a' }] });
    await c.connect();
    assert.deepEqual((await c.callTool('fake__roots')).structuredContent, { roots: [{ uri: 'file:///srv/a', name: 'a' }] });
    const call = c.callTool('fake__rootsChange');
    // The hub tells the servers serving this client's calls: wait until the
    // call is in flight before changing the roots.
    await withDeadline(
      (async () => {
        while (!fake.received.some((m) => m.method === 'tools/call' && m.params.name === 'rootsChange')) {
          await new Promise((r) => setTimeout(r, 10));
        }
      })(),
      3000,
      'fake__rootsChange to reach the server',
    );
    c.setRoots(() => [{ uri: 'file:///srv/b', name: 'b' }]);
    assert.deepEqual((await withDeadline(call, 5000, 'fake__rootsChange')).structuredContent, { roots: [{ uri: 'file:///srv/b', name: 'b' }] });
  });

  it('without handlers declares no capabilities, so the hub never routes elicitation or roots to it', async () => {
    const c = newClient(hub.wsURL);
    await c.connect();
    const { err } = await settle(c.callTool('fake__elicit', {}));
    assert.ok(err, 'fake__elicit fails without a handler');
    assert.match(err.message, /did not declare/);
    assert.match(err.message, /elicitation\/create/);
    // roots/list gets the server's own roots (none) from the hub instead.
    const roots = await c.callTool('fake__roots', {});
    assert.deepEqual(roots.structuredContent, { roots: [] });
  });
});

describe('reconnection', () => {
  let hub;
  after(async () => {
    await hub?.stop('SIGKILL');
  });

  for (const [how, signal] of [
    ['the hub shuts down (it drains, then closes with 1001)', 'SIGTERM'],
    ['the hub dies (no close frame: 1006)', 'SIGKILL'],
  ]) {
    it(`after ${how}: settles pending calls, re-initializes and re-subscribes`, async () => {
      hub = await startHub();
      const port = hub.port;
      const c = newClient(hub.wsURL, { reconnect: { initialDelayMs: 50, maxDelayMs: 300 } });
      await c.connect();
      await c.subscribe('demo://clock');
      await c.setLoggingLevel('info');
      // A shutting-down hub lets calls in flight finish (up to its drain
      // timeout) before it closes; a dead one cannot.
      let progressed;
      const firstProgress = new Promise((resolve) => (progressed = resolve));
      const args = signal === 'SIGTERM' ? { steps: 5, delayMs: 100 } : { steps: 100, delayMs: 100 };
      const pending = settle(c.callTool('demo__slow', args, { onProgress: progressed }));
      await withDeadline(firstProgress, 5000, 'the call to be under way');
      const reconnecting = nextEvent(c, 'reconnecting', () => true, 15000);

      const stopped = hub.stop(signal);
      const { res, err } = await withDeadline(pending, 5000, 'the pending call to settle');
      if (signal === 'SIGTERM') {
        assert.equal(err, undefined, `the call in flight finishes during the drain, got ${err}`);
        assert.equal(res.content[0].text, 'done after 5 steps');
      } else {
        assert.ok(err instanceof ConnectionClosedError, `the pending call fails with ConnectionClosedError, got ${err}`);
        assert.equal(err.code, -32000);
        assert.match(err.message, /connection closed \(code 1006/);
      }
      await stopped;
      const r = await reconnecting;
      assert.equal(r.attempt, 1);
      assert.equal(r.closeCode, signal === 'SIGTERM' ? 1001 : 1006);
      assert.ok(c.state === State.RECONNECTING || c.state === State.CONNECTING, c.state);
      await assert.rejects(c.ping(), ConnectionClosedError, 'requests while reconnecting fail at once');

      const reopened = nextEvent(c, 'open', (d) => d.reconnected === true, 20000);
      const resubscribed = nextEvent(c, 'resubscribed', () => true, 20000);
      hub = await startHub({ port });
      await reopened;
      assert.deepEqual((await resubscribed).uris, ['demo://clock']);
      assert.equal(c.state, State.OPEN);
      // The new hub knows nothing of the old session: updates arrive only
      // because the client subscribed again.
      await nextEvent(c, 'notifications/resources/updated', (d) => d.uri === 'demo://clock', 5000);
      assert.deepEqual((await c.callTool('demo__add', { a: 1, b: 2 })).structuredContent, { sum: 3 });
      await hub.stop();
      hub = null;
    });
  }

  it('goes on retrying with growing delays while the hub is down, and close() stops it', async () => {
    hub = await startHub();
    const c = newClient(hub.wsURL, { reconnect: { initialDelayMs: 20, maxDelayMs: 80, jitter: 0 } });
    await c.connect();
    const delays = [];
    let third;
    const gotThree = new Promise((resolve) => (third = resolve));
    c.addEventListener('reconnecting', (e) => delays.push(e.detail.delayMs) === 3 && third());
    await hub.stop('SIGKILL');
    hub = null;
    await withDeadline(gotThree, 5000, 'three reconnect attempts');
    assert.deepEqual(delays.slice(0, 3), [20, 40, 80]);
    c.close();
    assert.equal(c.state, State.CLOSED);
  });

  it('stops after maxAttempts with state "closed"', async () => {
    hub = await startHub();
    const c = newClient(hub.wsURL, { reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: 2 } });
    await c.connect();
    const closed = nextEvent(c, 'closed', () => true, 5000);
    await hub.stop('SIGKILL');
    hub = null;
    const d = await closed;
    assert.match(d.error.message, /gave up after 2 attempts/);
  });
});

describe('token passing (?token=) to a hub started with --tokens', () => {
  let hub;
  let demo;
  before(async () => {
    const file = tokensFile([
      { name: 'admin', token: 'admin-secret', roles: ['admin'] },
      { name: 'viewer', token: 'viewer-secret', roles: ['dashboard'] },
    ]);
    hub = await startHub({ demo: false, args: ['--tokens', file] });
    demo = await startDemo(hub, 'demo', { token: 'admin-secret' });
  });
  after(async () => {
    await demo?.stop();
    await hub?.stop();
  });

  it('cannot connect without a token, or with an unknown one', async () => {
    for (const token of [undefined, 'wrong']) {
      const c = newClient(hub.wsURL, { token });
      await assert.rejects(c.connect(), (err) => err instanceof ConnectionClosedError && /could not connect/.test(err.message));
    }
  });

  it('connects with a known token in the query, and the token\u2019s role applies', async () => {
    const admin = newClient(hub.wsURL, { token: 'admin-secret' });
    await admin.connect();
    assert.deepEqual((await admin.callTool('demo__add', { a: 1, b: 2 })).structuredContent, { sum: 3 });

    const viewer = newClient(hub.wsURL, { token: 'viewer-secret' });
    await viewer.connect();
    assert.ok((await viewer.listTools()).tools.some((t) => t.name === 'demo__add'), 'a dashboard token may list');
    await assert.rejects(viewer.callTool('demo__add', { a: 1, b: 2 }), (err) => err.code === ErrorCode.FORBIDDEN);
  });
});

describe('access tokens (tokenVia: "subprotocol") to a hub behind an identity provider', () => {
  let as;
  let hub;
  let machine;
  let resource;
  before(async () => {
    as = await startAuthorizationServer(); // the real one: oidc-provider
    machine = await as.machineClient('mcp:client');
    const port = await freePort();
    resource = `http://127.0.0.1:${port}/mcp`;
    hub = await startHub({ port, args: ['--public-url', `http://127.0.0.1:${port}`, '--oauth-issuer', as.issuer] });
  });
  after(async () => {
    await hub?.stop();
    await as?.stop();
  });

  it('connects with an access token as a subprotocol, and calls', async () => {
    const token = await as.token(machine, resource, 'mcp:client');
    const c = newClient(hub.wsURL, { token, tokenVia: 'subprotocol' });
    await c.connect();
    assert.deepEqual((await c.callTool('demo__add', { a: 2, b: 40 })).structuredContent, { sum: 42 });
  });

  it('is refused with the access token in the query, where the hub never takes one', async () => {
    const token = await as.token(machine, resource, 'mcp:client');
    const c = newClient(hub.wsURL, { token, reconnect: false });
    await assert.rejects(c.connect(), (err) => err instanceof ConnectionClosedError && /could not connect/.test(err.message));
    const d = newClient(hub.wsURL, { reconnect: false, tokenVia: 'subprotocol' });
    await assert.rejects(d.connect(), ConnectionClosedError, 'no token at all');
  });

  it('asks its token function again for every connection: after the hub closes the session at the token\u2019s expiry, it comes back with a fresh one', async () => {
    await as.setResource({ resource, ttl: 2 });
    let asked = 0;
    const c = newClient(hub.wsURL, {
      tokenVia: 'subprotocol',
      token: async () => {
        asked += 1;
        return as.token(machine, resource, 'mcp:client');
      },
      reconnect: { initialDelayMs: 50, jitter: 0 },
    });
    // Listening first: the token may expire before connect() resolves on
    // a busy machine.
    const dropped = nextEvent(c, 'reconnecting', () => true, 15000);
    const back = nextEvent(c, 'open', (d) => d.reconnected, 20000);
    try {
      await c.connect();
      const d = await dropped;
      assert.equal(d.closeCode, 1008);
      assert.equal(d.reason, 'access token expired: connect again with a new one');
      await back;
      assert.equal(asked, 2, 'a fresh token for the new connection');
      assert.deepEqual((await c.callTool('demo__add', { a: 1, b: 1 })).structuredContent, { sum: 2 });
    } finally {
      c.close();
      await as.setResource({ resource, ttl: 3600 });
    }
  });

  it('fails connect() clearly when its token function fails', async () => {
    const c = newClient(hub.wsURL, { tokenVia: 'subprotocol', token: () => Promise.reject(new Error('no refresh token')) });
    await assert.rejects(c.connect(), (err) => err instanceof ConnectionClosedError && /could not get a token for .*: no refresh token/.test(err.message));
    assert.equal(c.state, State.CLOSED);
  });
});
