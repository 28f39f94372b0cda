// The Switchboard dashboard: a live MCP client of the hub that served it,
// built on switchboard.js. Plain ES modules, no build step, no inline
// script or style, so that a strict Content-Security-Policy holds.
import { SwitchboardClient, defaultHubURL, State } from './switchboard.js';
import { h, uid, append, replaceChildren, reconcile, formatTime, since, plural, coalesce } from './ui/dom.js';
import { buildSchemaForm, isSupported, FormError, labelRow } from './ui/schema-form.js';
import { toolResult, resourceContents, messages, rpcError, jsonTree } from './ui/render.js';
import * as dialogs from './ui/dialogs.js';

const $ = (sel) => document.querySelector(sel);
const SERVERS_URI = 'switchboard://servers';
const LOG_LIMIT = 500;
const store = {
  get: (k, d) => {
    try {
      const v = localStorage.getItem(`switchboard.${k}`);
      return v === null ? d : JSON.parse(v);
    } catch {
      return d;
    }
  },
  set: (k, v) => {
    try {
      localStorage.setItem(`switchboard.${k}`, JSON.stringify(v));
    } catch {
      /* private mode: not persisted */
    }
  },
};

/** @type {SwitchboardClient|null} */
let client = null;

// ---------------------------------------------------------------- status

const statusEl = $('#conn-status');
const statusText = $('#conn-status .status-text');
const connectForm = $('#connect-form');
const urlInput = $('#hub-url');
const tokenInput = $('#hub-token');
const disconnectBtn = $('#disconnect-btn');
let retryTicker = null;

function showState(d) {
  clearInterval(retryTicker);
  statusEl.dataset.state = d.state;
  let text;
  switch (d.state) {
    case State.CONNECTING:
      text = d.attempt ? `Reconnecting (attempt ${d.attempt})\u2026` : 'Connecting\u2026';
      break;
    case State.OPEN: {
      const si = client?.serverInfo;
      text = `Connected${si ? ` \u00b7 ${si.title ?? si.name} ${si.version}` : ''}`;
      break;
    }
    case State.RECONNECTING: {
      const until = Date.now() + d.delayMs;
      const why = d.reason ? ` (${d.reason})` : d.closeCode ? ` (code ${d.closeCode})` : '';
      const tick = () => {
        const s = Math.max(0, (until - Date.now()) / 1000).toFixed(1);
        statusText.textContent = `Connection lost${why}. Retrying in ${s} s (attempt ${d.attempt})`;
      };
      tick();
      retryTicker = setInterval(tick, 200);
      statusEl.title = '';
      return;
    }
    case State.CLOSED:
      text = d.error ? `Disconnected: ${d.error.message}` : 'Disconnected';
      break;
    default:
      text = 'Not connected';
  }
  statusText.textContent = text;
  statusEl.title = d.state === State.OPEN ? (client?.instructions ?? '') : '';
  disconnectBtn.disabled = !(d.state === State.OPEN || d.state === State.RECONNECTING || d.state === State.CONNECTING);
  document.body.dataset.connection = d.state;
}

// ---------------------------------------------------------------- connection

/**
 * login hands the token to the hub that served this page (POST /login),
 * which keeps it in an HttpOnly cookie that the browser sends with the
 * WebSocket upgrade: the token then never appears in a URL. It returns true
 * when the token must go in ?token= instead (another hub's URL, or a hub
 * without /login), and throws when the hub refuses the token.
 */
async function login(url, token) {
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new Error(`not a URL: ${url}`);
  }
  const sameOrigin = u.host === location.host && (u.protocol === 'wss:') === (location.protocol === 'https:');
  if (!sameOrigin) return Boolean(token);
  const res = await fetch(token ? 'login' : 'logout', {
    method: 'POST',
    body: new URLSearchParams(token ? { token } : {}),
    credentials: 'same-origin',
  }).catch(() => null);
  if (!res || res.status === 404 || res.status === 405) return Boolean(token);
  if (res.ok) return false;
  if (res.status === 401) throw new Error('the hub does not know this token');
  throw new Error(`logging in failed: ${res.status} ${(await res.text()).trim()}`);
}

let connectGen = 0;

/**
 * connect connects the dashboard to url. With doLogin (the Connect button),
 * the token field is what counts: a token logs in, an empty one logs out.
 */
async function connect(url, token, { doLogin = true } = {}) {
  const gen = ++connectGen;
  if (client) {
    const old = client;
    client = null;
    old.close(1000, 'dashboard reconnecting');
  }
  resetWorkspace();
  showState({ state: State.CONNECTING });
  let inQuery = false;
  try {
    if (doLogin) inQuery = await login(url, token);
  } catch (err) {
    if (gen !== connectGen) return;
    showState({ state: State.CLOSED, error: err });
    log('error', `login: ${err.message}`);
    return;
  }
  if (gen !== connectGen) return; // a newer Connect won
  const c = new SwitchboardClient(url, {
    token: inQuery ? token : undefined,
    clientInfo: { name: 'switchboard-dashboard', title: 'Switchboard dashboard', version: '0.1.0' },
    onSampling: (params, ctx) => {
      log('request', 'sampling/createMessage', params);
      return dialogs.sampling(params, ctx);
    },
    onElicitation: (params, ctx) => {
      log('request', 'elicitation/create', params);
      return dialogs.elicitation(params, ctx);
    },
    roots: () => roots.map((r) => ({ ...r })),
    reconnect: { initialDelayMs: 500, maxDelayMs: 10000 },
  });
  client = c;
  const mine = (fn) => (ev) => {
    if (client === c) fn(ev);
  };
  c.addEventListener('state', mine((ev) => {
    showState(ev.detail);
    if (ev.detail.state !== State.OPEN) log('state', ev.detail.state, ev.detail.reason ? { code: ev.detail.closeCode, reason: ev.detail.reason } : undefined);
  }));
  c.addEventListener('open', mine((ev) => onOpen(ev.detail.reconnected)));
  c.addEventListener('notification', mine((ev) => onNotification(ev.detail)));
  c.addEventListener('error', mine((ev) => log('error', ev.detail.error.message)));
  c.connect().catch((err) => {
    if (client === c && !token && /could not connect/.test(err.message)) {
      statusText.textContent += ' \u2014 if the hub requires a token, enter it and press Connect.';
    }
  });
}

async function onOpen(reconnected) {
  log('state', reconnected ? 'open (reconnected, subscriptions renewed)' : 'open', { serverInfo: client.serverInfo, protocolVersion: client.protocolVersion });
  if (!reconnected) {
    const c = client;
    want(SERVERS_URI, 'sidebar').catch((err) => log('error', `subscribing to ${SERVERS_URI}: ${err.message}`));
    if (logLevel.value) c.setLoggingLevel(logLevel.value).catch((err) => log('error', err.message));
  }
  await Promise.all([refreshServers(), refreshTools(), refreshResources(), refreshPrompts()]);
}

function onNotification({ method, params }) {
  log('notification', method, params);
  switch (method) {
    case 'notifications/tools/list_changed':
      refreshTools();
      break;
    case 'notifications/resources/list_changed':
      refreshResources();
      break;
    case 'notifications/prompts/list_changed':
      refreshPrompts();
      break;
    case 'notifications/resources/updated':
      if (params.uri === SERVERS_URI) refreshServers();
      resourceUpdated(params.uri);
      break;
  }
}

const isOpen = () => client?.state === State.OPEN;

connectForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const url = urlInput.value.trim();
  store.set('url', url);
  connect(url, tokenInput.value.trim());
});

disconnectBtn.addEventListener('click', () => {
  client?.close(1000, 'disconnected by the user');
});

// ---------------------------------------------------------------- servers

const serversList = $('#servers');
const instancesList = $('#instances');
const statsEl = $('#stats');
let serversDoc = null;

const refreshServers = coalesce(async () => {
  if (!isOpen()) return;
  try {
    const res = await client.readResource(SERVERS_URI);
    serversDoc = JSON.parse(res.contents[0].text);
    renderServers();
  } catch (err) {
    log('error', `reading ${SERVERS_URI}: ${err.message}`);
  }
});

function renderServers() {
  const doc = serversDoc;
  if (!doc) {
    replaceChildren(statsEl);
    replaceChildren(serversList, h('li', { class: 'empty', text: 'Not connected.' }));
    replaceChildren(instancesList);
    return;
  }
  const c = doc.counts ?? {};
  replaceChildren(
    statsEl,
    [
      ['Servers', c.servers],
      ['Replicas', c.replicas],
      ['Clients', c.clients],
      ['Instances', c.instances],
      ['Tools', c.tools],
      ['Resources', c.resources],
      ['Prompts', c.prompts],
    ].map(([k, v]) => h('div', { class: 'stat' }, h('dt', { text: k }), h('dd', { text: String(v ?? 0) }))),
  );
  if (!doc.servers.length) {
    replaceChildren(serversList, h('li', { class: 'empty', text: 'No server is connected. Servers dial out to /mcp/server.' }));
  } else {
    replaceChildren(
      serversList,
      doc.servers.map((s) =>
        h(
          'li',
          { class: 'server', dataset: { server: s.name } },
          h(
            'div',
            { class: 'server-head' },
            h('span', { class: 'dot online', 'aria-hidden': 'true' }),
            h('strong', { class: 'server-name', text: s.name }),
            h('span', { class: 'badge', text: plural(s.replicas?.length ?? 0, 'replica') }),
          ),
          h('p', { class: 'muted small', text: [plural(s.tools, 'tool'), plural(s.resources, 'resource'), plural(s.resourceTemplates, 'template'), plural(s.prompts, 'prompt')].join(' \u00b7 ') }),
          h(
            'ul',
            { class: 'replicas', 'aria-label': `Replicas of ${s.name}` },
            (s.replicas ?? []).map((r) =>
              h(
                'li',
                { class: 'replica' },
                h('span', { class: 'replica-name', text: `${r.serverInfo?.title ?? r.serverInfo?.name ?? r.name} ${r.serverInfo?.version ?? ''}`.trim() }),
                h('span', { class: 'muted small', text: [`MCP ${r.protocolVersion}`, `connected ${since(r.connectedAt)} ago`, `${r.inFlight} in flight`, `instance ${String(r.instance).slice(0, 8)}`].join(' \u00b7 ') }),
              ),
            ),
          ),
        ),
      ),
    );
  }
  replaceChildren(
    instancesList,
    (doc.instances ?? []).map((i) =>
      h(
        'li',
        { class: 'instance', dataset: { instance: i.id } },
        h('div', { class: 'server-head' }, h('span', { class: 'dot online', 'aria-hidden': 'true' }), h('code', { text: String(i.id).slice(0, 8) }), i.self ? h('span', { class: 'badge accent', text: 'this instance' }) : null),
        h('span', { class: 'muted small', text: [i.addr, plural(i.clients, 'client'), plural(i.replicas, 'replica'), `up ${since(i.startedAt)}`].filter(Boolean).join(' \u00b7 ') }),
      ),
    ),
  );
}
setInterval(() => serversDoc && renderServers(), 15000);

// ---------------------------------------------------------------- tabs

const tabs = [...document.querySelectorAll('[role="tab"]')];
function selectTab(tab, focus = false) {
  for (const t of tabs) {
    const selected = t === tab;
    t.setAttribute('aria-selected', String(selected));
    t.tabIndex = selected ? 0 : -1;
    document.getElementById(t.getAttribute('aria-controls')).hidden = !selected;
  }
  if (focus) tab.focus();
  store.set('tab', tab.id);
}
tabs.forEach((t, i) => {
  t.addEventListener('click', () => selectTab(t));
  t.addEventListener('keydown', (ev) => {
    const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[ev.key];
    if (next === undefined) return;
    ev.preventDefault();
    selectTab(tabs[(next + tabs.length) % tabs.length], true);
  });
});
selectTab(tabs.find((t) => t.id === store.get('tab', 'tab-tools')) ?? tabs[0]);

const setCount = (id, n) => {
  $(`#${id} .count`).textContent = String(n);
};

// ---------------------------------------------------------------- progress bar

function progressBar(label) {
  const fill = h('div', { class: 'progress-fill' });
  const bar = h('div', { class: 'progress', role: 'progressbar', 'aria-label': label, 'aria-valuemin': '0', hidden: true }, fill);
  const text = h('span', { class: 'progress-text muted small' });
  const wrap = h('div', { class: 'progress-wrap' }, bar, text);
  return {
    el: wrap,
    start() {
      bar.hidden = false;
      bar.classList.add('indeterminate');
      bar.classList.remove('done');
      bar.removeAttribute('aria-valuenow');
      bar.removeAttribute('aria-valuemax');
      bar.removeAttribute('aria-valuetext');
      fill.style.width = '';
      text.textContent = 'Waiting for the server\u2026';
    },
    update(p) {
      bar.setAttribute('aria-valuenow', String(p.progress));
      if (typeof p.total === 'number' && p.total > 0) {
        bar.classList.remove('indeterminate');
        bar.setAttribute('aria-valuemax', String(p.total));
        // CSSOM, not a style attribute: allowed under a strict CSP.
        fill.style.width = `${Math.min(100, (p.progress / p.total) * 100)}%`;
      }
      const desc = p.message ?? (p.total ? `${p.progress} of ${p.total}` : String(p.progress));
      bar.setAttribute('aria-valuetext', desc);
      text.textContent = desc;
    },
    finish(outcome) {
      const reported = bar.hasAttribute('aria-valuenow');
      bar.classList.remove('indeterminate');
      bar.classList.toggle('done', outcome === 'done');
      // A call that reported no progress needs no bar once it is over.
      bar.hidden = !reported;
      if (outcome === 'done' && reported && !bar.hasAttribute('aria-valuemax')) fill.style.width = '100%';
      text.textContent = outcome === 'done' ? (reported ? text.textContent : '') : reported ? `${outcome} at ${text.textContent}` : '';
    },
  };
}

const elapsed = (t0) => {
  const ms = performance.now() - t0;
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
};

function openLink(uri, target) {
  if (!isOpen()) return;
  replaceChildren(target, h('p', { class: 'muted small', text: `Reading ${uri}\u2026` }));
  client.readResource(uri).then(
    (res) => replaceChildren(target, (res.contents ?? []).map(resourceContents)),
    (err) => replaceChildren(target, rpcError(err)),
  );
}

// ---------------------------------------------------------------- tools

const toolsList = $('#tools');
const toolSearch = $('#tool-search');
const toolCount = $('#tool-count');
const toolCache = new Map();
let tools = [];

const refreshTools = coalesce(async () => {
  if (!isOpen()) return;
  try {
    tools = (await client.listTools()).tools;
  } catch (err) {
    log('error', `listing tools: ${err.message}`);
    return;
  }
  renderTools();
});

function renderTools() {
  const q = toolSearch.value.trim().toLowerCase();
  const shown = tools.filter((t) => !q || [t.name, t.title, t.description, t._meta?.['switchboard/server']].some((s) => s?.toLowerCase().includes(q)));
  reconcile(toolsList, shown, (t) => t.name, toolItem, toolCache);
  setCount('tab-tools', tools.length);
  toolCount.textContent = q ? `${shown.length} of ${plural(tools.length, 'tool')}` : plural(tools.length, 'tool');
  $('#tools-empty').hidden = shown.length > 0;
  $('#tools-empty').textContent = tools.length ? 'No tool matches the search.' : isOpen() ? 'No tools.' : 'Connect to see the tools.';
}
toolSearch.addEventListener('input', renderTools);

function itemHead(name, server, extra = []) {
  return h('span', { class: 'item-head' }, h('code', { class: 'name', text: name }), server ? h('span', { class: 'badge', title: 'server', text: server }) : null, extra);
}

function annotationBadges(a = {}) {
  const out = [];
  if (a.readOnlyHint) out.push(h('span', { class: 'badge subtle', text: 'read-only' }));
  if (a.destructiveHint) out.push(h('span', { class: 'badge warn', text: 'destructive' }));
  if (a.idempotentHint) out.push(h('span', { class: 'badge subtle', text: 'idempotent' }));
  if (a.openWorldHint) out.push(h('span', { class: 'badge subtle', text: 'open world' }));
  return out;
}

function toolItem(tool) {
  const details = h(
    'details',
    { class: 'item-details' },
    h(
      'summary',
      {},
      itemHead(tool.name, tool._meta?.['switchboard/server'], annotationBadges(tool.annotations)),
      tool.title ? h('span', { class: 'item-title', text: tool.title }) : null,
      h('span', { class: 'desc', text: tool.description || 'No description.' }),
    ),
  );
  let built = false;
  details.addEventListener('toggle', () => {
    if (details.open && !built) {
      built = true;
      details.append(toolForm(tool));
    }
  });
  return h('li', { class: 'item tool', dataset: { name: tool.name } }, details);
}

function toolForm(tool) {
  const schema = tool.inputSchema ?? { type: 'object' };
  const supported = isSupported(schema);
  const fields = supported ? buildSchemaForm(schema, { idPrefix: `tool-${tool.name}` }) : null;
  const rawId = uid(`tool-${tool.name}-raw`);
  const raw = h('textarea', { id: rawId, class: 'json', rows: 6, spellcheck: 'false' });
  const rawField = h('div', { class: 'field', hidden: supported }, h('label', { for: rawId, text: 'Arguments (JSON)' }), raw);
  const toggle = h('button', { type: 'button', class: 'link small', 'aria-pressed': String(!supported), text: 'Edit as JSON', disabled: !supported });
  let rawMode = !supported;
  if (!supported) raw.value = '{}';
  const formError = h('p', { class: 'form-error', role: 'alert', hidden: true });
  const showError = (msg) => {
    formError.textContent = msg;
    formError.hidden = !msg;
  };
  toggle.addEventListener('click', () => {
    showError('');
    if (!rawMode) {
      let v = {};
      try {
        v = fields.get();
      } catch {
        /* start from what parses */
      }
      raw.value = JSON.stringify(v, null, 2);
    } else {
      try {
        fields.set(JSON.parse(raw.value || '{}'));
      } catch {
        showError('The JSON does not parse: fix it or clear it before going back to the form.');
        return;
      }
    }
    rawMode = !rawMode;
    // The hidden fields must not block the submit with their constraints.
    form.noValidate = rawMode;
    toggle.setAttribute('aria-pressed', String(rawMode));
    fields.el.hidden = rawMode;
    rawField.hidden = !rawMode;
  });
  const callBtn = h('button', { type: 'submit', class: 'primary', text: 'Call' });
  const cancelBtn = h('button', { type: 'button', class: 'secondary', text: 'Cancel', disabled: true });
  const progress = progressBar(`Progress of ${tool.name}`);
  const status = h('p', { class: 'call-status muted small', role: 'status' });
  const out = h('div', { class: 'result' });
  let ac = null;
  cancelBtn.addEventListener('click', () => ac?.abort(new DOMException('Cancelled by the user', 'AbortError')));

  const form = h(
    'form',
    { class: 'tool-form' },
    fields && !fields.empty ? fields.el : fields ? h('p', { class: 'muted small', text: 'This tool takes no arguments.' }) : null,
    rawField,
    formError,
    h('div', { class: 'form-actions' }, callBtn, cancelBtn, supported ? toggle : null),
    progress.el,
    status,
    out,
  );
  if (fields?.empty) fields.el.hidden = true;
  form.noValidate = rawMode;
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError('');
    let args;
    try {
      if (rawMode) {
        args = raw.value.trim() ? JSON.parse(raw.value) : {};
        if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new FormError('', 'the arguments must be a JSON object');
      } else {
        args = fields.get();
      }
    } catch (err) {
      showError(err instanceof SyntaxError ? `The arguments are not valid JSON: ${err.message}` : err.message);
      return;
    }
    if (!isOpen()) {
      showError('Not connected to the hub.');
      return;
    }
    ac = new AbortController();
    const t0 = performance.now();
    callBtn.disabled = true;
    cancelBtn.disabled = false;
    progress.start();
    status.textContent = `Calling ${tool.name}\u2026`;
    out.replaceChildren();
    try {
      const res = await client.callTool(tool.name, args, { signal: ac.signal, onProgress: (p) => progress.update(p) });
      progress.finish('done');
      status.textContent = `${res.isError ? 'Failed' : 'Done'} in ${elapsed(t0)}`;
      out.replaceChildren(toolResult(res, { onOpenLink: openLink }));
    } catch (err) {
      if (err?.name === 'AbortError') {
        progress.finish('Cancelled');
        status.textContent = `Cancelled after ${elapsed(t0)}`;
      } else {
        progress.finish('Failed');
        status.textContent = `Failed after ${elapsed(t0)}`;
        out.replaceChildren(rpcError(err));
      }
    } finally {
      ac = null;
      callBtn.disabled = false;
      cancelBtn.disabled = true;
    }
  });
  return form;
}

// ---------------------------------------------------------------- resources

const resourcesList = $('#resources');
const templatesList = $('#templates');
const resourceCache = new Map();
const templateCache = new Map();
/** @type {Map<string, {updates: number, last?: Date, owners: Set<string>}>} */
const subs = new Map();
/** @type {Map<string, {onUpdate: () => void, setSubscribed: (on: boolean) => void}>} */
const resourceViews = new Map();

const refreshResources = coalesce(async () => {
  if (!isOpen()) return;
  let resources;
  let templates;
  try {
    [{ resources }, { resourceTemplates: templates }] = await Promise.all([client.listResources(), client.listResourceTemplates()]);
  } catch (err) {
    log('error', `listing resources: ${err.message}`);
    return;
  }
  reconcile(resourcesList, resources, (r) => r.uri, resourceItem, resourceCache);
  reconcile(templatesList, templates, (t) => t.uriTemplate, templateItem, templateCache);
  for (const uri of [...resourceViews.keys()]) if (!resourceCache.has(uri)) resourceViews.delete(uri);
  setCount('tab-resources', resources.length + templates.length);
  $('#resources-empty').hidden = resources.length > 0;
  $('#templates-empty').hidden = templates.length > 0;
});

function resourceItem(r) {
  const out = h('div', { class: 'item-output' });
  const live = h('span', { class: 'live', hidden: true, dataset: { updates: '0' } });
  const readBtn = h('button', { type: 'button', class: 'secondary', text: 'Read' });
  const subBtn = h('button', { type: 'button', class: 'secondary', text: 'Subscribe', 'aria-pressed': 'false' });
  let shown = false;
  const read = async () => {
    if (!isOpen()) return;
    readBtn.disabled = true;
    try {
      const res = await client.readResource(r.uri);
      replaceChildren(out, (res.contents ?? []).map(resourceContents));
      shown = true;
    } catch (err) {
      replaceChildren(out, rpcError(err));
    } finally {
      readBtn.disabled = false;
    }
  };
  readBtn.addEventListener('click', read);
  const renderLive = () => {
    const s = subs.get(r.uri);
    const on = Boolean(s?.owners.has('user'));
    subBtn.textContent = on ? 'Unsubscribe' : 'Subscribe';
    subBtn.setAttribute('aria-pressed', String(on));
    live.hidden = !on;
    if (!on) return;
    live.dataset.updates = String(s.updates);
    live.replaceChildren(
      h('span', { class: 'live-dot', 'aria-hidden': 'true' }),
      s.last ? `Live \u00b7 updated ${formatTime(s.last)} \u00b7 ${plural(s.updates, 'update')}` : 'Live \u00b7 waiting for updates',
    );
  };
  subBtn.addEventListener('click', async () => {
    if (!isOpen()) return;
    subBtn.disabled = true;
    const on = subs.get(r.uri)?.owners.has('user');
    try {
      if (on) await unwant(r.uri, 'user');
      else await want(r.uri, 'user');
    } catch (err) {
      replaceChildren(out, rpcError(err));
    } finally {
      subBtn.disabled = false;
      renderLive();
    }
  });
  resourceViews.set(r.uri, {
    onUpdate: () => {
      renderLive();
      live.classList.remove('pulse');
      void live.offsetWidth; // restart the animation
      live.classList.add('pulse');
      if (shown && subs.get(r.uri)?.owners.has('user')) read();
    },
    renderLive,
  });
  renderLive();
  return h(
    'li',
    { class: 'item resource', dataset: { uri: r.uri } },
    h('div', { class: 'item-row' }, itemHead(r.uri, r._meta?.['switchboard/server'], r.mimeType ? h('span', { class: 'badge subtle', text: r.mimeType }) : null), live),
    r.title || r.name || r.description ? h('p', { class: 'desc' }, r.title ?? r.name, r.description ? ` \u2014 ${r.description}` : '') : null,
    h('div', { class: 'item-actions' }, readBtn, subBtn),
    out,
  );
}

/** want subscribes to uri on behalf of owner (reference-counted). */
async function want(uri, owner) {
  let s = subs.get(uri);
  if (!s) {
    s = { updates: 0, owners: new Set() };
    subs.set(uri, s);
  }
  const first = s.owners.size === 0;
  s.owners.add(owner);
  if (first) {
    try {
      await client.subscribe(uri);
    } catch (err) {
      s.owners.delete(owner);
      throw err;
    }
  }
}

/** unwant drops owner's interest in uri; the last one unsubscribes. */
async function unwant(uri, owner) {
  const s = subs.get(uri);
  if (!s?.owners.delete(owner)) return;
  s.updates = 0;
  s.last = undefined;
  if (s.owners.size === 0) {
    subs.delete(uri);
    await client.unsubscribe(uri);
  }
}

function resourceUpdated(uri) {
  const s = subs.get(uri);
  if (s) {
    s.updates += 1;
    s.last = new Date();
  }
  resourceViews.get(uri)?.onUpdate();
}

/** templateVars returns the variable names of an RFC 6570 template. */
function templateVars(t) {
  const out = [];
  for (const m of t.matchAll(/\{([+#./;?&]?)([^}]+)\}/g)) {
    for (const v of m[2].split(',')) out.push({ op: m[1], name: v.replace(/[*]$|:\d+$/, '') });
  }
  return out.filter((v, i) => out.findIndex((x) => x.name === v.name) === i);
}

/** expandTemplate expands the simple and reserved forms ({x}, {+x}) and the query form ({?x,y}). */
function expandTemplate(t, values) {
  return t.replace(/\{([+#./;?&]?)([^}]+)\}/g, (_, op, list) => {
    const names = list.split(',').map((v) => v.replace(/[*]$|:\d+$/, ''));
    const enc = (v) => (op === '+' || op === '#' ? encodeURI(v) : encodeURIComponent(v));
    const present = names.filter((n) => values[n] !== undefined && values[n] !== '');
    if (op === '?' || op === '&') return present.length ? op + present.map((n) => `${n}=${enc(values[n])}`).join('&') : '';
    const sep = { '.': '.', '/': '/', ';': ';' }[op] ?? ',';
    const prefix = { '#': '#', '.': '.', '/': '/', ';': ';' }[op] ?? '';
    return present.length ? prefix + present.map((n) => enc(values[n])).join(sep) : '';
  });
}

function completer(input, ref, argName, others) {
  const listId = uid('completions');
  const datalist = h('datalist', { id: listId });
  input.setAttribute('list', listId);
  let timer;
  let seq = 0;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (!isOpen() || !client.serverCapabilities?.completions) return;
      const mine = ++seq;
      try {
        const res = await client.complete(ref, { name: argName, value: input.value }, { arguments: others() });
        if (mine !== seq) return;
        replaceChildren(datalist, (res.completion?.values ?? []).map((v) => h('option', { value: v })));
      } catch {
        /* completions are a nicety */
      }
    }, 150);
  });
  return datalist;
}

function templateItem(t) {
  const vars = templateVars(t.uriTemplate);
  const out = h('div', { class: 'item-output' });
  const inputs = {};
  const values = () => Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value]));
  const fields = vars.map((v) => {
    const id = uid(`tpl-${t.uriTemplate}-${v.name}`);
    const input = h('input', { id, type: 'text', required: true, autocomplete: 'off' });
    inputs[v.name] = input;
    const others = () => {
      const o = values();
      delete o[v.name];
      return o;
    };
    return h('div', { class: 'field' }, labelRow(id, v.name, true), input, completer(input, { type: 'ref/resource', uri: t.uriTemplate }, v.name, others));
  });
  const preview = h('code', { class: 'uri preview' });
  const updatePreview = () => {
    preview.textContent = expandTemplate(t.uriTemplate, values());
  };
  const form = h('form', { class: 'template-form' }, h('div', { class: 'fields inline-fields' }, fields), h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'secondary', text: 'Read' }), preview), out);
  form.addEventListener('input', updatePreview);
  updatePreview();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!isOpen()) return;
    const uri = expandTemplate(t.uriTemplate, values());
    try {
      const res = await client.readResource(uri);
      replaceChildren(out, (res.contents ?? []).map(resourceContents));
    } catch (err) {
      replaceChildren(out, rpcError(err));
    }
  });
  return h(
    'li',
    { class: 'item template', dataset: { template: t.uriTemplate } },
    h('div', { class: 'item-row' }, itemHead(t.uriTemplate, t._meta?.['switchboard/server'], t.mimeType ? h('span', { class: 'badge subtle', text: t.mimeType }) : null)),
    t.title || t.name || t.description ? h('p', { class: 'desc' }, t.title ?? t.name, t.description ? ` \u2014 ${t.description}` : '') : null,
    form,
  );
}

// ---------------------------------------------------------------- prompts

const promptsList = $('#prompts');
const promptCache = new Map();

const refreshPrompts = coalesce(async () => {
  if (!isOpen()) return;
  let prompts;
  try {
    ({ prompts } = await client.listPrompts());
  } catch (err) {
    log('error', `listing prompts: ${err.message}`);
    return;
  }
  reconcile(promptsList, prompts, (p) => p.name, promptItem, promptCache);
  setCount('tab-prompts', prompts.length);
  $('#prompts-empty').hidden = prompts.length > 0;
});

function promptItem(p) {
  const details = h(
    'details',
    { class: 'item-details' },
    h('summary', {}, itemHead(p.name, p._meta?.['switchboard/server']), p.title ? h('span', { class: 'item-title', text: p.title }) : null, h('span', { class: 'desc', text: p.description || 'No description.' })),
  );
  let built = false;
  details.addEventListener('toggle', () => {
    if (!details.open || built) return;
    built = true;
    const inputs = {};
    const values = () => Object.fromEntries(Object.entries(inputs).filter(([, el]) => el.value !== '').map(([k, el]) => [k, el.value]));
    const fields = (p.arguments ?? []).map((a) => {
      const id = uid(`prompt-${p.name}-${a.name}`);
      const hintId = `${id}-hint`;
      const input = h('input', { id, type: 'text', required: a.required, 'aria-required': a.required ? 'true' : null, 'aria-describedby': a.description ? hintId : null, autocomplete: 'off' });
      inputs[a.name] = input;
      const others = () => {
        const o = values();
        delete o[a.name];
        return o;
      };
      return h(
        'div',
        { class: 'field' },
        labelRow(id, a.name, a.required),
        input,
        completer(input, { type: 'ref/prompt', name: p.name }, a.name, others),
        a.description ? h('p', { class: 'hint', id: hintId, text: a.description }) : null,
      );
    });
    const out = h('div', { class: 'result' });
    const btn = h('button', { type: 'submit', class: 'primary', text: 'Get prompt' });
    const form = h('form', { class: 'prompt-form' }, fields.length ? h('div', { class: 'fields' }, fields) : h('p', { class: 'muted small', text: 'This prompt takes no arguments.' }), h('div', { class: 'form-actions' }, btn), out);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (!isOpen()) return;
      btn.disabled = true;
      try {
        const res = await client.getPrompt(p.name, values());
        replaceChildren(out, res.description ? h('p', { class: 'muted', text: res.description }) : null, messages(res.messages, { onOpenLink: openLink }));
      } catch (err) {
        replaceChildren(out, rpcError(err));
      } finally {
        btn.disabled = false;
      }
    });
    details.append(form);
  });
  return h('li', { class: 'item prompt', dataset: { name: p.name } }, details);
}

// ---------------------------------------------------------------- log

const logEl = $('#log');
const logFilter = $('#log-filter');
const pauseBtn = $('#log-pause');
const logLevel = $('#log-level');
const logCount = $('#log-count');
let paused = false;
let held = [];

function log(kind, method, params) {
  const now = new Date();
  const json = params === undefined ? '' : JSON.stringify(params);
  const short = json.length > 240 ? `${json.slice(0, 240)}\u2026` : json;
  const entry = h(
    'div',
    { class: ['log-entry', `kind-${kind}`], dataset: { kind, text: `${kind} ${method} ${json}`.toLowerCase() } },
    h('time', { datetime: now.toISOString(), text: `${formatTime(now)}.${String(now.getMilliseconds()).padStart(3, '0')}` }),
    h('span', { class: 'log-kind', text: kind }),
    h('code', { class: 'log-method', text: method }),
    short ? h('code', { class: 'log-params', title: json.length > 240 ? json.slice(0, 4000) : null, text: short }) : null,
  );
  if (paused) {
    held.push(entry);
    pauseBtn.textContent = `Resume (${held.length} new)`;
    return;
  }
  addEntries([entry]);
}

function addEntries(entries) {
  const q = logFilter.value.trim().toLowerCase();
  for (const e of entries) e.hidden = Boolean(q) && !e.dataset.text.includes(q);
  const stick = logEl.scrollTop + logEl.clientHeight >= logEl.scrollHeight - 24;
  append(logEl, entries);
  while (logEl.childElementCount > LOG_LIMIT) logEl.firstElementChild.remove();
  if (stick) logEl.scrollTop = logEl.scrollHeight;
  logCount.textContent = plural(logEl.childElementCount, 'entry', 'entries');
}

logFilter.addEventListener('input', () => {
  const q = logFilter.value.trim().toLowerCase();
  for (const e of logEl.children) e.hidden = Boolean(q) && !e.dataset.text.includes(q);
});
pauseBtn.addEventListener('click', () => {
  paused = !paused;
  pauseBtn.setAttribute('aria-pressed', String(paused));
  pauseBtn.textContent = paused ? 'Resume' : 'Pause';
  if (!paused) {
    addEntries(held);
    held = [];
  }
});
$('#log-clear').addEventListener('click', () => {
  logEl.replaceChildren();
  held = [];
  if (paused) pauseBtn.textContent = 'Resume';
  logCount.textContent = plural(0, 'entry', 'entries');
});
logLevel.value = store.get('logLevel', '');
logLevel.addEventListener('change', () => {
  store.set('logLevel', logLevel.value);
  if (isOpen() && logLevel.value) client.setLoggingLevel(logLevel.value).catch((err) => log('error', err.message));
});

// ---------------------------------------------------------------- roots

const rootsList = $('#roots');
const rootForm = $('#root-form');
let roots = store.get('roots', []);

function renderRoots() {
  if (!roots.length) {
    replaceChildren(rootsList, h('li', { class: 'empty', text: 'No roots: servers that ask get an empty list.' }));
    return;
  }
  replaceChildren(
    rootsList,
    roots.map((r, i) =>
      h(
        'li',
        { class: 'root' },
        h('span', { class: 'root-text' }, r.name ? h('strong', { text: r.name }) : null, h('code', { class: 'uri', text: r.uri })),
        h('button', {
          type: 'button',
          class: 'icon-button',
          'aria-label': `Remove root ${r.uri}`,
          title: 'Remove',
          text: '\u2715',
          on: {
            click: () => {
              roots.splice(i, 1);
              rootsChanged();
            },
          },
        }),
      ),
    ),
  );
}

function rootsChanged() {
  store.set('roots', roots);
  renderRoots();
  if (isOpen()) {
    client.setRoots(() => roots.map((r) => ({ ...r })));
    log('notification', 'notifications/roots/list_changed (sent)', { roots });
  }
}

rootForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const uri = $('#root-uri').value.trim();
  const name = $('#root-name').value.trim();
  if (!uri) return;
  roots.push(name ? { uri, name } : { uri });
  rootForm.reset();
  rootsChanged();
});

// ---------------------------------------------------------------- start

function resetWorkspace() {
  serversDoc = null;
  tools = [];
  subs.clear();
  resourceViews.clear();
  for (const [list, cache] of [
    [toolsList, toolCache],
    [resourcesList, resourceCache],
    [templatesList, templateCache],
    [promptsList, promptCache],
  ]) {
    cache.clear();
    list.replaceChildren();
  }
  renderServers();
  renderTools();
  for (const id of ['tab-resources', 'tab-prompts']) setCount(id, 0);
}

const params = new URLSearchParams(location.search);
urlInput.value = params.get('hub') ?? store.get('url', defaultHubURL());
renderRoots();
resetWorkspace();
showState({ state: State.IDLE });
// On load, connect without logging in or out: a cookie from an earlier
// login (this browser session) still applies.
if (params.get('autoconnect') !== '0') connect(urlInput.value, '', { doLogin: false });

// For debugging in the console (and tests): the current client.
Object.defineProperty(window, 'switchboard', { get: () => ({ client, jsonTree }) });
