// The Traffic view: the operator's live picture of the hub, from its own
// resources. switchboard://stats gives calls/s, errors/s by code and p50/p99
// latency per server and tool, across every instance; switchboard://clients
// who is connected; switchboard://calls the last calls (and, for admins who
// ask, their arguments). The view subscribes to them only while it is shown:
// when nobody looks, the hub spends nothing on them.
import { $, h, replaceChildren, formatTime, plural, since, coalesce } from '../ui/dom.js';
import { lineChart, formatNumber } from '../ui/chart.js';
import { client, isOpen } from './session.js';
import { want, unwant } from './resources.js';
import { log } from './log.js';

/** The hub's resources the view shows. */
export const STATS_URI = 'switchboard://stats';
export const CLIENTS_URI = 'switchboard://clients';
export const CALLS_URI = 'switchboard://calls';
export const CALLS_ARGS_URI = 'switchboard://calls?arguments=1';

const OWNER = 'traffic';
const HISTORY = 60; // points kept per scope: what the charts span when the hub sends no series
const BUSIEST = 10;
const FORBIDDEN = -32003;

const panel = $('#panel-traffic');
const scopeSelect = $('#traffic-scope');
const statusEl = $('#traffic-status');
const figuresEl = $('#traffic-figures');
const chartsEl = $('#traffic-charts');
const errorsEl = $('#traffic-errors');
const busiestEl = $('#traffic-busiest');
const instancesEl = $('#traffic-instances');
const clientsEl = $('#traffic-clients');
const callsEl = $('#traffic-calls');
const callsServer = $('#calls-server');
const callsOutcome = $('#calls-outcome');
const callsArgs = $('#calls-args');
const callsNote = $('#calls-note');

let active = false; // shown, and subscribed
let stats = null;
let clients = null;
let clientsErr = null;
let calls = null;
let callsErr = null;
let argsWanted = false;
let lastAt = '';
/** @type {Map<string, {calls: number, errors: number, p50: number|null, p99: number|null}[]>} */
const history = new Map();
const openTables = new Set();

/** scopeKey names the hub, a server or one of its items, for the scope selector and the history. */
const itemKey = (server, it) => `i:${server}\n${it.method}\n${it.name ?? ''}`;
const itemLabel = (it) => (it.method === 'tools/call' ? it.name : it.name ? `${it.method} ${it.name}` : it.method);

// ------------------------------------------------------------ lifecycle

/** start subscribes to the view's resources and reads them. */
async function start() {
  if (active || !isOpen()) return;
  active = true;
  const sub = async (uri) => {
    try {
      await want(uri, OWNER);
      return null;
    } catch (err) {
      if (err.code !== FORBIDDEN) log('error', `subscribing to ${uri}: ${err.message}`);
      return err;
    }
  };
  await sub(STATS_URI);
  clientsErr = await sub(CLIENTS_URI);
  callsErr = await sub(argsWanted ? CALLS_ARGS_URI : CALLS_URI);
  if (callsErr && argsWanted) {
    argsRefused(callsErr);
    callsErr = await sub(CALLS_URI);
  }
  await Promise.all([refreshStats(), refreshClients(), refreshCalls()]);
}

/** stop unsubscribes (the hub stops computing what nobody watches). */
function stop() {
  if (!active) return;
  active = false;
  if (!isOpen()) return;
  for (const uri of [STATS_URI, CLIENTS_URI, CALLS_URI, CALLS_ARGS_URI]) {
    unwant(uri, OWNER).catch((err) => log('error', `unsubscribing from ${uri}: ${err.message}`));
  }
}

const shown = () => !panel.hidden;
new MutationObserver(() => (shown() ? start() : stop())).observe(panel, { attributes: true, attributeFilter: ['hidden'] });

/**
 * trafficOpened starts the view on a new connection if it is shown, or
 * reads everything again after a reconnection (the client renewed the
 * subscriptions by itself).
 */
export function trafficOpened() {
  if (active) Promise.all([refreshStats(), refreshClients(), refreshCalls()]);
  else if (shown()) start();
}

/** trafficUpdated reads again the resource of the view that changed. */
export function trafficUpdated(uri) {
  if (!active) return;
  if (uri === STATS_URI) refreshStats();
  else if (uri === CLIENTS_URI) refreshClients();
  else if (uri === CALLS_URI || uri === CALLS_ARGS_URI) refreshCalls();
}

/** resetTraffic forgets what the last connection showed. */
export function resetTraffic() {
  active = false;
  stats = clients = calls = clientsErr = callsErr = null;
  lastAt = '';
  history.clear();
  renderAll();
}

async function readJSON(uri) {
  const res = await client.readResource(uri);
  return JSON.parse(res.contents[0].text);
}

const refreshStats = coalesce(async () => {
  if (!active || !isOpen()) return;
  try {
    stats = await readJSON(STATS_URI);
  } catch (err) {
    log('error', `reading ${STATS_URI}: ${err.message}`);
    return;
  }
  remember(stats);
  renderStats();
});

const refreshClients = coalesce(async () => {
  if (!active || !isOpen() || clientsErr) return renderClients();
  try {
    clients = await readJSON(CLIENTS_URI);
  } catch (err) {
    clientsErr = err;
  }
  renderClients();
});

const refreshCalls = coalesce(async () => {
  if (!active || !isOpen() || callsErr) return renderCalls();
  try {
    calls = await readJSON(argsWanted ? CALLS_ARGS_URI : CALLS_URI);
  } catch (err) {
    callsErr = err;
  }
  renderCalls();
});

// Arguments: only on request, and only for tokens that may see them (admins).
callsArgs.addEventListener('change', async () => {
  argsWanted = callsArgs.checked;
  callsNote.hidden = true;
  if (!active || !isOpen()) return;
  if (argsWanted) {
    try {
      await want(CALLS_ARGS_URI, OWNER);
    } catch (err) {
      argsRefused(err);
      return;
    }
  } else {
    unwant(CALLS_ARGS_URI, OWNER).catch(() => {});
  }
  refreshCalls();
});

function argsRefused(err) {
  argsWanted = false;
  callsArgs.checked = false;
  callsNote.hidden = false;
  callsNote.textContent = err.code === FORBIDDEN ? 'Arguments are for admin tokens only: this token may not see them.' : `Arguments unavailable: ${err.message}`;
}

// ------------------------------------------------------------ history

/** remember keeps each scope's latest interval and percentiles, for the charts the hub sends no series of. */
function remember(doc) {
  if (doc.at === lastAt) return;
  lastAt = doc.at;
  const push = (key, f) => {
    let pts = history.get(key);
    if (!pts) history.set(key, (pts = []));
    pts.push({ calls: f.last?.calls ?? 0, errors: f.last?.errors ?? 0, p50: f.p50Ms ?? null, p99: f.p99Ms ?? null });
    if (pts.length > HISTORY) pts.shift();
  };
  push('', doc.hub);
  for (const s of doc.servers) {
    push(`s:${s.name}`, s);
    for (const it of s.items) push(itemKey(s.name, it), it);
  }
}

/** scoped returns the figures the scope selector names, and its title. */
function scoped() {
  const key = scopeSelect.value;
  if (key.startsWith('s:')) {
    const s = stats.servers.find((x) => x.name === key.slice(2));
    if (s) return { key, title: `Server ${s.name}`, f: s };
  } else if (key.startsWith('i:')) {
    for (const s of stats.servers) {
      const it = s.items.find((x) => itemKey(s.name, x) === key);
      if (it) return { key, title: `${itemLabel(it)} on ${s.name}`, f: it };
    }
  }
  return { key: '', title: 'Whole hub', f: stats.hub };
}

// ------------------------------------------------------------ rendering

/** table is a data table, or the empty text without rows; a head cell is its text, or [text, title]. */
const table = (label, head, rows, empty) =>
  rows.length
    ? h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'data-table', 'aria-label': label },
          h('thead', {}, h('tr', {}, head.map((c) => (Array.isArray(c) ? h('th', { scope: 'col', title: c[1], text: c[0] }) : h('th', { scope: 'col', text: c }))))),
          h('tbody', {}, rows),
        ),
      )
    : h('p', { class: 'empty', text: empty });

const num = (v) => h('td', { class: 'num', text: formatNumber(v) });
const int = (v) => h('td', { class: 'num', text: String(v ?? 0) });
const ms = (v) => h('td', { class: 'num', text: v === null || v === undefined ? '\u2013' : `${formatNumber(v)} ms` });

function renderAll() {
  renderStats();
  renderClients();
  renderCalls();
}

function renderStats() {
  if (!stats) {
    statusEl.textContent = isOpen() ? 'Open this view to watch the traffic.' : 'Not connected.';
    replaceChildren(figuresEl);
    replaceChildren(chartsEl);
    replaceChildren(errorsEl);
    replaceChildren(busiestEl);
    replaceChildren(instancesEl);
    return;
  }
  const step = stats.intervalMs / 1000;
  renderScopes();
  const { key, title, f } = scoped();
  const instances = stats.instances ?? [];
  statusEl.textContent = [`Updated ${formatTime(stats.at)}`, instances.length ? plural(instances.length, 'instance') : null, `window ${Math.round(stats.windowSeconds)} s`].filter(Boolean).join(' \u00b7 ');

  const conns = (kind) => instances.reduce((n, i) => n + Object.entries(i.connections ?? {}).filter(([k]) => k.startsWith(`${kind}/`)).reduce((m, [, v]) => m + v, 0), 0);
  replaceChildren(
    figuresEl,
    [
      ['Calls/s', formatNumber(f.rate)],
      ['Errors/s', formatNumber(f.errorRate)],
      ['p50', f.p50Ms === null || f.p50Ms === undefined ? '\u2013' : `${formatNumber(f.p50Ms)} ms`],
      ['p99', f.p99Ms === null || f.p99Ms === undefined ? '\u2013' : `${formatNumber(f.p99Ms)} ms`],
      ['Calls', String(f.total)],
      ['Errors', String(f.errorsTotal)],
      ...(key === '' && instances.length
        ? [
            ['Clients', String(conns('client') + conns('dashboard'))],
            ['In flight', String(instances.reduce((n, i) => n + i.inFlight, 0))],
          ]
        : []),
    ].map(([k, v]) => h('div', { class: 'stat', dataset: { figure: k } }, h('dt', { text: k }), h('dd', { text: v }))),
  );

  // Calls and errors per second: the hub's own series where it sends one,
  // else what this page saw.
  const pts = history.get(key) ?? [];
  const perSecond = (counts) => counts.map((c) => c / step);
  const callsSeries = f.series ? perSecond(f.series.calls) : perSecond(pts.map((p) => p.calls));
  const errorsSeries = f.series ? perSecond(f.series.errors) : perSecond(pts.map((p) => p.errors));
  const width = Math.max(200, chartsEl.clientWidth || 600);
  const chartWidth = width >= 760 ? (width - 16) / 2 : width;
  const chart = (id, o) =>
    lineChart({ ...o, stepSeconds: step, width: chartWidth, open: openTables.has(id), onToggle: (open) => (open ? openTables.add(id) : openTables.delete(id)) });
  replaceChildren(
    chartsEl,
    chart('rate', {
      title: `${title}: calls and errors per second`,
      unit: '/s',
      series: [
        { name: 'calls', cls: 'series-calls', points: callsSeries, area: true },
        { name: 'errors', cls: 'series-errors', points: errorsSeries },
      ],
    }),
    chart('latency', {
      title: `${title}: latency`,
      unit: 'ms',
      series: [
        { name: 'p50', cls: 'series-p50', points: pts.map((p) => p.p50) },
        { name: 'p99', cls: 'series-p99', points: pts.map((p) => p.p99) },
      ],
    }),
  );

  const span = stats.windowSeconds || 1;
  const codes = Object.entries(f.outcomes ?? {}).filter(([k]) => k !== 'ok');
  codes.sort((a, b) => b[1] - a[1]);
  replaceChildren(
    errorsEl,
    table(
      `${title}: errors by code, over the last ${Math.round(span)} s`,
      ['Code', 'Meaning', 'Calls', 'Per second'],
      codes.map(([code, n]) => h('tr', { dataset: { code } }, h('th', { scope: 'row', text: code }), h('td', { text: meaning(code) }), int(n), num(n / span))),
      `No errors in the last ${Math.round(span)} s.`,
    ),
  );

  const items = stats.servers.flatMap((s) => s.items.map((it) => ({ server: s.name, it })));
  items.sort((a, b) => b.it.rate - a.it.rate || b.it.calls - a.it.calls || b.it.total - a.it.total);
  replaceChildren(
    busiestEl,
    table(
      'Busiest tools',
      ['Tool', 'Server', 'Calls/s', 'Errors/s', 'p50', 'p99', 'Calls', 'Errors'],
      items.slice(0, BUSIEST).map(({ server, it }) =>
        h(
          'tr',
          { dataset: { server, tool: it.name ?? '', method: it.method } },
          h('th', { scope: 'row' }, h('button', { type: 'button', class: 'link', title: 'Chart this one', text: itemLabel(it), on: { click: () => setScope(itemKey(server, it)) } })),
          h('td', { text: server }),
          num(it.rate),
          num(it.errorRate),
          ms(it.p50Ms),
          ms(it.p99Ms),
          int(it.total),
          int(it.errorsTotal),
        ),
      ),
      'No calls yet.',
    ),
  );

  $('#traffic-instances-title').hidden = !instances.length;
  replaceChildren(
    instancesEl,
    instances.length
      ? table(
          'Instances',
          [
            'Instance',
            'Clients',
            'Dashboards',
            'Servers',
            'In flight',
            'Calls/s',
            'Errors/s',
            'Calls',
            ['Limited', 'Requests refused by the rate limit (-32004)'],
            ['Slow', 'Connections closed as slow consumers'],
            ['Dropped', 'Notifications dropped for clients that read too slowly'],
          ],
          instances.map((i) => {
            const c = i.connections ?? {};
            const byTransport = (kind) => ['websocket', 'http'].map((t) => c[`${kind}/${t}`] ?? 0);
            const [cw, ch] = byTransport('client');
            const [dw, dh] = byTransport('dashboard');
            return h(
              'tr',
              { dataset: { instance: i.id } },
              h('th', { scope: 'row' }, h('code', { text: i.id.slice(0, 8) }), i.self ? h('span', { class: 'badge accent', text: 'this one' }) : null),
              h('td', { class: 'num', title: `${cw} WebSocket, ${ch} HTTP`, text: `${cw + ch}` }),
              h('td', { class: 'num', title: `${dw} WebSocket, ${dh} HTTP`, text: `${dw + dh}` }),
              int(c['server/websocket']),
              int(i.inFlight),
              num(i.rate),
              num(i.errorRate),
              int(i.total),
              int(i.rateLimited),
              int(i.slowConsumers),
              int(i.droppedNotices),
            );
          }),
          '',
        )
      : null,
  );
}

/** renderScopes keeps the scope selector's options in step with the servers and tools. */
function renderScopes() {
  const want = [['', 'Whole hub']];
  for (const s of stats.servers) {
    want.push([`s:${s.name}`, `Server ${s.name}`]);
    for (const it of s.items) want.push([itemKey(s.name, it), `\u2003${itemLabel(it)} (${s.name})`]);
  }
  const have = [...scopeSelect.options].map((o) => [o.value, o.textContent]);
  if (JSON.stringify(have) === JSON.stringify(want)) return;
  const value = scopeSelect.value;
  replaceChildren(scopeSelect, want.map(([v, t]) => h('option', { value: v, text: t })));
  scopeSelect.value = want.some(([v]) => v === value) ? value : '';
}

function setScope(key) {
  scopeSelect.value = key;
  renderStats();
  scopeSelect.focus();
}
scopeSelect.addEventListener('change', () => stats && renderStats());

const MEANINGS = {
  cancelled: 'cancelled by the client',
  other: 'another code (a server\u2019s own)',
  '-32000': 'connection closed',
  '-32001': 'timed out',
  '-32002': 'resource not found',
  '-32003': 'forbidden',
  '-32004': 'rate limited',
  '-32600': 'invalid request',
  '-32601': 'method not found',
  '-32602': 'invalid params',
  '-32603': 'internal error',
};
const meaning = (code) => MEANINGS[code] ?? '';

function renderClients() {
  if (clientsErr) {
    replaceChildren(clientsEl, h('p', { class: 'empty', text: clientsErr.code === FORBIDDEN ? 'Only dashboard and admin tokens see the clients.' : `Unavailable: ${clientsErr.message}` }));
    return;
  }
  if (!clients) {
    replaceChildren(clientsEl);
    return;
  }
  const list = [...clients.clients].reverse(); // newest first
  replaceChildren(
    clientsEl,
    h('p', { class: 'muted small', text: clients.total > list.length ? `${plural(clients.total, 'client')}, the first ${list.length} listed` : plural(clients.total, 'client') }),
    table(
      'Clients',
      ['Client', 'Transport', 'Token', 'Instance', 'Connected', 'In flight'],
      list.map((c) =>
        h(
          'tr',
          { dataset: { client: c.id } },
          h('th', { scope: 'row', text: c.name ? `${c.name}${c.version ? ` ${c.version}` : ''}` : '(not initialized)' }),
          h('td', { text: c.role === 'dashboard' ? `${c.transport} (dashboard)` : c.transport }),
          h('td', { text: c.token }),
          h('td', {}, h('code', { text: String(c.instance).slice(0, 8) })),
          h('td', { title: c.connectedAt, text: `${since(c.connectedAt)} ago` }),
          int(c.inFlight),
        ),
      ),
      'No clients.',
    ),
  );
}

function renderCalls() {
  if (callsErr) {
    replaceChildren(callsEl, h('p', { class: 'empty', text: callsErr.code === FORBIDDEN ? 'Only dashboard and admin tokens see the call log.' : `Unavailable: ${callsErr.message}` }));
    return;
  }
  if (!calls) {
    replaceChildren(callsEl);
    return;
  }
  const entries = calls.calls;
  // The filters offer what the log holds.
  const keep = (select, first, values) => {
    const want = [...first, ...[...new Set(values)].sort().map((v) => [v, v || 'the hub (refused)'])];
    const value = select.value;
    if (JSON.stringify([...select.options].map((o) => [o.value, o.textContent])) !== JSON.stringify(want)) {
      replaceChildren(select, want.map(([v, t]) => h('option', { value: v, text: t })));
      select.value = want.some(([v]) => v === value) ? value : first[0][0];
    }
  };
  keep(callsServer, [['*', 'All servers']], entries.map((e) => e.server ?? ''));
  keep(
    callsOutcome,
    [
      ['*', 'All results'],
      ['errors', 'Errors only'],
      ['ok', 'ok'],
    ],
    entries.filter((e) => e.outcome !== 'ok').map(outcomeKey),
  );
  const server = callsServer.value;
  const outcome = callsOutcome.value;
  const shownEntries = entries
    .filter((e) => server === '*' || (e.server ?? '') === server)
    .filter((e) => outcome === '*' || (outcome === 'errors' ? e.outcome === 'error' : outcomeKey(e) === outcome))
    .reverse(); // newest first
  // The Trace column is there when the hub traces (--tracing).
  const traced = entries.some((e) => e.traceId);
  const columns = ['Time', 'Client', 'Tool', 'Duration', 'Result', ...(traced ? ['Trace'] : [])];
  replaceChildren(
    callsEl,
    h('p', { class: 'muted small', 'aria-live': 'polite', text: `${plural(shownEntries.length, 'call')} shown of the last ${entries.length}` }),
    calls.skipped > 0
      ? h('p', { class: 'hint', text: `${plural(calls.skipped, 'call')} not logged: under load each instance logs at most 100 calls a second, and 100 failed ones beyond.` })
      : null,
    table(
      'Call log',
      columns,
      shownEntries.map((e) => {
        const at = new Date(e.at);
        const row = h(
          'tr',
          { class: e.outcome === 'ok' ? null : 'failed', dataset: { outcome: e.outcome, code: e.code ? String(e.code) : '', server: e.server ?? '' } },
          h('td', {}, h('time', { datetime: e.at, text: `${formatTime(at)}.${String(at.getMilliseconds()).padStart(3, '0')}` })),
          h('td', { title: [e.clientId, e.token && `token ${e.token}`, `instance ${String(e.instance).slice(0, 8)}`].filter(Boolean).join(' \u00b7 '), text: e.client || '(unnamed)' }),
          h('td', {}, h('code', { text: e.server ? `${e.server} \u203a ${e.name || e.method}` : e.name || e.method })),
          h('td', { class: 'num', text: `${formatNumber(e.durationMs)} ms` }),
          h('td', { class: 'result', title: e.message ?? null, text: resultText(e) }),
          traced ? h('td', { class: 'trace' }, traceCell(e)) : null,
        );
        if (!calls.arguments || !e.arguments) return row;
        return [row, h('tr', { class: 'call-args' }, h('td', { colspan: String(columns.length) }, h('code', { text: e.arguments })))];
      }),
      server !== '*' || outcome !== '*' ? 'No call matches the filters.' : 'No calls yet: they appear here as clients make them.',
    ),
  );
}

/**
 * traceCell shows a call's trace id, short, as a link to its page in the
 * tracing UI when the hub names one (--tracing-ui-url); the full id is its
 * title. A call tracing left out has none.
 */
function traceCell(e) {
  if (!e.traceId) return null;
  const id = h('code', { text: e.traceId.slice(0, 8), title: `trace ${e.traceId}` });
  if (!/^https?:\/\//.test(e.traceUrl ?? '')) return id;
  return h('a', { href: e.traceUrl, target: '_blank', rel: 'noopener noreferrer' }, id);
}

const outcomeKey = (e) => (e.outcome === 'error' ? String(e.code) : e.outcome);
const resultText = (e) => (e.outcome === 'error' ? `error ${e.code}${meaning(String(e.code)) ? ` (${meaning(String(e.code))})` : ''}` : e.outcome);
callsServer.addEventListener('change', renderCalls);
callsOutcome.addEventListener('change', renderCalls);

// Charts follow the panel's width.
let lastWidth = 0;
new ResizeObserver(() => {
  const w = chartsEl.clientWidth;
  if (stats && Math.abs(w - lastWidth) > 8) {
    lastWidth = w;
    renderStats();
  }
}).observe(chartsEl);

renderAll();
