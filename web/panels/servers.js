// The servers panel: the servers, their replicas and the hub instances, from
// the hub's switchboard://servers resource (kept live by a subscription);
// and what went wrong: servers that left lately and why (a connector's
// child that keeps exiting shows here), and resources two servers claimed.
import { $, h, replaceChildren, since, plural, coalesce } from '../ui/dom.js';
import { client, isOpen } from './session.js';
import { log } from './log.js';

/** SERVERS_URI is the hub's resource describing its servers and instances. */
export const SERVERS_URI = 'switchboard://servers';

const serversList = $('#servers');
const instancesList = $('#instances');
const troubleEl = $('#server-trouble');
const statsEl = $('#stats');
let serversDoc = null;

/** refreshServers reads SERVERS_URI again and shows it. */
export const refreshServers = coalesce(async () => {
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
    replaceChildren(troubleEl);
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
  renderTrouble(doc);
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

/** closeWords names the WebSocket close codes a server's connection ends with. */
const closeWords = { 1000: 'closed', 1001: 'going away', 1006: 'connection lost', 1008: 'policy', 1009: 'message too big', 1011: 'server error' };

/** departedText says why a server left, as the hub recorded it. */
function departedText(d) {
  const code = d.code ? `${d.code} ${closeWords[d.code] ?? ''}`.trim() : '';
  if (d.reason && code) return `${d.reason} (${code})`;
  return d.reason || code || 'disconnected';
}

/** renderTrouble shows the servers that left lately and the resources two servers claimed, when there are any. */
function renderTrouble(doc) {
  const departed = doc.departed ?? [];
  const conflicts = doc.conflicts ?? [];
  replaceChildren(
    troubleEl,
    departed.length ? h('h3', { text: 'Left lately' }) : null,
    departed.length
      ? h(
          'ul',
          { class: 'server-list', 'aria-label': 'Left lately' },
          departed.map((d) =>
            h(
              'li',
              { class: 'server departed', dataset: { server: d.name } },
              h(
                'div',
                { class: 'server-head' },
                h('span', { class: 'dot offline', 'aria-hidden': 'true' }),
                h('strong', { class: 'server-name', text: d.name }),
                h('span', { class: 'badge warn', text: 'left' }),
              ),
              h('p', { class: 'departed-reason', text: departedText(d) }),
              h('span', { class: 'muted small', text: [`${since(d.at)} ago`, d.instance ? `instance ${String(d.instance).slice(0, 8)}` : ''].filter(Boolean).join(' \u00b7 ') }),
            ),
          ),
        )
      : null,
    conflicts.length ? h('h3', { text: 'URI conflicts' }) : null,
    conflicts.length
      ? h(
          'ul',
          { class: 'server-list', 'aria-label': 'URI conflicts' },
          conflicts.map((c) =>
            h(
              'li',
              { class: 'server conflict' },
              h('code', { class: 'conflict-key', text: c.key }),
              h('span', { class: 'muted small', text: `${c.kind === 'resourceTemplate' ? 'Template' : 'Resource'} served by ${c.kept}; also listed by ${c.refused}, which does not serve it` }),
            ),
          ),
        )
      : null,
  );
}

setInterval(() => serversDoc && renderServers(), 15000);

/** resetServers forgets the servers of the last connection. */
export function resetServers() {
  serversDoc = null;
  renderServers();
}
