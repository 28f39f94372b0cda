// The servers panel: the servers, their replicas and the hub instances, from
// the hub's switchboard://servers resource (kept live by a subscription).
import { $, h, replaceChildren, since, plural, coalesce } from '../ui/dom.js';
import { client, isOpen } from './session.js';
import { log } from './log.js';

/** SERVERS_URI is the hub's resource describing its servers and instances. */
export const SERVERS_URI = 'switchboard://servers';

const serversList = $('#servers');
const instancesList = $('#instances');
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

/** resetServers forgets the servers of the last connection. */
export function resetServers() {
  serversDoc = null;
  renderServers();
}
