// A scripted MCP server, written in JavaScript, that dials out to the hub's
// /mcp/server endpoint like any MCP server would. It offers what the demo
// server does not: rich result content, a tool whose inputSchema uses every
// JSON Schema shape the dashboard's form generator handles, elicitation,
// roots, and as many filler tools as a pagination test needs.
import WebSocket from 'ws';
import { withDeadline } from './hub.js';

// An 8x8 gradient PNG and an empty (silent) WAV, base64.
export const PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAbElEQVR4nA3JQQEAMAgDMaRUClIqpVKQwvNkIGXLN1WFii5cpJhiiyuqhEQLi4gRK04/GjXduEkzzTbXP4xMG5uYMWvOP4JCB4eECRsuPwYNPXjIMMMONz8WLb14yTLLLrc/Dh19+Mgxxx53PLzkagFHPAwGAAAAAElFTkSuQmCC';
export const WAV_BASE64 = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';

/** The schema of fake__form: every shape the form generator supports. */
export const FORM_SCHEMA = {
  type: 'object',
  properties: {
    title: { type: 'string', description: 'A title', default: 'untitled' },
    count: { type: 'integer', minimum: 0, default: 3 },
    ratio: { type: 'number' },
    enabled: { type: 'boolean', default: true },
    color: { type: 'string', enum: ['red', 'green', 'blue'], default: 'green' },
    owner: {
      type: 'object',
      description: 'Who owns it',
      properties: { name: { type: 'string' }, age: { type: 'integer' } },
      required: ['name'],
    },
    tags: { type: 'array', items: { type: 'string' } },
  },
  required: ['title', 'color'],
};

const text = (t) => ({ type: 'text', text: t });

/**
 * startFakeServer connects a scripted server named name to the hub and
 * resolves once the hub registered it.
 * @param {{serverURL: string, process: {waitLine: Function, lines: string[]}}} hub
 * @param {{name?: string, fillerTools?: number}} [opts]
 */
export async function startFakeServer(hub, opts = {}) {
  const { name = 'fake', fillerTools = 0 } = opts;
  const from = hub.process.lines.length;
  const ws = new WebSocket(`${hub.serverURL}?name=${encodeURIComponent(name)}`, ['mcp']);
  let nextId = 1;
  const pending = new Map();
  const notificationWaiters = [];
  const received = [];

  const send = (msg) => ws.send(JSON.stringify({ jsonrpc: '2.0', ...msg }));
  const request = (method, params) =>
    new Promise((resolve, reject) => {
      const id = `s${nextId++}`;
      pending.set(id, { resolve, reject });
      send({ id, method, params });
    });
  const nextNotification = (method, ms = 10000) =>
    withDeadline(new Promise((resolve) => notificationWaiters.push({ method, resolve })), ms, `the fake server to receive ${method}`);

  const tools = [
    { name: 'rich', description: 'Answer with every kind of content.', inputSchema: { type: 'object', properties: {} } },
    { name: 'fail', description: 'Fail as a tool (isError).', inputSchema: { type: 'object', properties: {} } },
    { name: 'form', description: 'Echo the arguments of a rich form.', inputSchema: FORM_SCHEMA },
    { name: 'elicit', description: 'Ask the caller for details (elicitation).', inputSchema: { type: 'object', properties: { message: { type: 'string' } } } },
    { name: 'roots', description: 'List the caller\u2019s roots.', inputSchema: { type: 'object', properties: {} } },
    { name: 'rootsChange', description: 'Wait for the caller\u2019s roots to change, then list them.', inputSchema: { type: 'object', properties: {} } },
  ];
  for (let i = 0; i < fillerTools; i++) {
    tools.push({ name: `filler${String(i).padStart(3, '0')}`, description: `Filler tool ${i}.`, inputSchema: { type: 'object', properties: {} } });
  }

  async function callTool(id, params) {
    const related = { 'switchboard/relatedRequest': id };
    switch (params.name) {
      case 'rich':
        return {
          content: [
            text('Some text'),
            { type: 'image', data: PNG_BASE64, mimeType: 'image/png' },
            { type: 'audio', data: WAV_BASE64, mimeType: 'audio/wav' },
            { type: 'resource_link', uri: 'demo://counter', name: 'counter', mimeType: 'text/plain', description: 'The demo counter' },
            { type: 'resource', resource: { uri: 'fake://embedded', mimeType: 'text/plain', text: 'embedded body' } },
          ],
          structuredContent: { nested: { list: [1, 2, { deep: true }], name: 'x' }, ok: true },
        };
      case 'fail':
        return { content: [text('it went wrong')], isError: true };
      case 'form':
        return { content: [text(JSON.stringify(params.arguments))], structuredContent: { arguments: params.arguments ?? {} } };
      case 'elicit': {
        const res = await request('elicitation/create', {
          message: params.arguments?.message ?? 'Tell me about yourself',
          requestedSchema: {
            type: 'object',
            properties: {
              nickname: { type: 'string', title: 'Nickname', description: 'What to call you' },
              age: { type: 'integer', minimum: 0 },
              subscribe: { type: 'boolean', default: false },
              plan: { type: 'string', enum: ['free', 'pro'], enumNames: ['Free', 'Pro'] },
            },
            required: ['nickname'],
          },
          _meta: related,
        });
        return { content: [text(JSON.stringify(res))], structuredContent: res };
      }
      case 'roots': {
        const res = await request('roots/list', { _meta: related });
        return { content: [text(JSON.stringify(res))], structuredContent: res };
      }
      case 'rootsChange': {
        await nextNotification('notifications/roots/list_changed');
        const res = await request('roots/list', { _meta: related });
        return { content: [text(JSON.stringify(res))], structuredContent: res };
      }
    }
    if (params.name.startsWith('filler')) return { content: [text(params.name)] };
    throw Object.assign(new Error(`unknown tool ${params.name}`), { code: -32602 });
  }

  async function onRequest(m) {
    try {
      let result;
      switch (m.method) {
        case 'initialize':
          result = {
            protocolVersion: '2025-11-25',
            capabilities: { tools: { listChanged: true } },
            serverInfo: { name, title: 'Scripted test server', version: '1.0.0' },
          };
          break;
        case 'ping':
          result = {};
          break;
        case 'tools/list': {
          // Pages of 40, so that the hub follows cursors too.
          const start = Number(m.params?.cursor ?? 0);
          const page = tools.slice(start, start + 40);
          result = { tools: page };
          if (start + 40 < tools.length) result.nextCursor = String(start + 40);
          break;
        }
        case 'tools/call':
          result = await callTool(m.id, m.params);
          break;
        default:
          send({ id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } });
          return;
      }
      send({ id: m.id, result });
    } catch (err) {
      send({ id: m.id, error: { code: err.code ?? -32603, message: err.message, data: err.data } });
    }
  }

  ws.on('message', (data) => {
    const m = JSON.parse(String(data));
    received.push(m);
    if ('method' in m && 'id' in m) onRequest(m);
    else if ('method' in m) {
      for (const w of [...notificationWaiters]) {
        if (w.method === m.method) {
          notificationWaiters.splice(notificationWaiters.indexOf(w), 1);
          w.resolve(m.params);
        }
      }
    } else {
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      if (m.error) p.reject(Object.assign(new Error(m.error.message), m.error));
      else p.resolve(m.result);
    }
  });
  await withDeadline(
    new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    }),
    10000,
    'the fake server to connect',
  );
  await hub.process.waitLine(new RegExp(`msg="server registered".* server=${name}\\b`), 10000, from);
  return {
    name,
    received,
    nextNotification,
    /** close disconnects the server. */
    close: () =>
      new Promise((resolve) => {
        if (ws.readyState === WebSocket.CLOSED) return resolve();
        ws.once('close', resolve);
        ws.close(1000, 'done');
      }),
  };
}
