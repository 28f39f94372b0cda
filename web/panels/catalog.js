// The catalog panel: the virtual servers of the hub's catalog file, each
// with its members, its tools, prompts and resources under their effective
// names (an alias shows the server's own name beside it, and the arguments
// the catalog fixes), its warnings, and why the last catalog offered was
// refused, if it was. It reads switchboard://catalog, kept live by a
// subscription; tokens that may not read it (clients) see why instead.
import { $, h, replaceChildren, plural, coalesce } from '../ui/dom.js';
import { client, isOpen } from './session.js';
import { want } from './resources.js';
import { setCount } from './tabs.js';
import { log } from './log.js';

/** CATALOG_URI is the hub's resource describing its catalog. */
export const CATALOG_URI = 'switchboard://catalog';

const statusEl = $('#catalog-status');
const refusedEl = $('#catalog-refused');
const list = $('#catalog-servers');
let subscribed = false;

/** refreshCatalog reads CATALOG_URI again and shows it. */
export const refreshCatalog = coalesce(async () => {
  if (!isOpen()) return;
  let doc;
  try {
    const res = await client.readResource(CATALOG_URI);
    doc = JSON.parse(res.contents[0].text);
  } catch (err) {
    resetCatalog(`The catalog cannot be shown: ${err.message}`);
    return;
  }
  if (!subscribed) {
    subscribed = true;
    want(CATALOG_URI, 'catalog').catch((err) => log('error', `subscribing to ${CATALOG_URI}: ${err.message}`));
  }
  render(doc);
});

/** resetCatalog empties the panel, saying why. */
export function resetCatalog(why = 'Not connected.') {
  subscribed = false;
  replaceChildren(statusEl, why);
  replaceChildren(refusedEl);
  refusedEl.hidden = true;
  replaceChildren(list);
  setCount('tab-catalog', 0);
}

function render(doc) {
  const servers = doc.virtualServers ?? [];
  setCount('tab-catalog', servers.length);
  const inForce = doc.inForce
    ? `Catalog ${doc.file ? `${doc.file} ` : ''}in force since ${new Date(doc.inForce.written).toLocaleString()} (from instance ${String(doc.inForce.origin).slice(0, 8)}); /mcp lists ${doc.discovery === 'search' ? 'the search tools' : 'every tool'}.`
    : `No catalog file; /mcp lists ${doc.discovery === 'search' ? 'the search tools' : 'every tool'}.`;
  replaceChildren(statusEl, inForce);
  if (doc.refused) {
    refusedEl.hidden = false;
    replaceChildren(
      refusedEl,
      h('strong', { text: `The last catalog (${doc.refused.from}) was refused; the one in force stays. ` }),
      h('span', { text: doc.refused.message }),
      doc.refused.problems?.length ? h('ul', {}, doc.refused.problems.map((p) => h('li', { text: p.line ? `line ${p.line}: ${p.message}` : p.message }))) : [],
    );
  } else {
    refusedEl.hidden = true;
    replaceChildren(refusedEl);
  }
  replaceChildren(
    list,
    servers.length ? servers.map(card) : h('li', { class: 'empty', text: 'No virtual servers.' }),
  );
}

/** card renders one virtual server. */
function card(vs) {
  const items = (label, its) =>
    its?.length
      ? h(
          'div',
          { class: 'catalog-items' },
          h('h4', { text: label }),
          h(
            'ul',
            { 'aria-label': `${label} of ${vs.name}` },
            its.map((it) =>
              h(
                'li',
                { class: 'catalog-item' },
                h('code', { class: 'catalog-name', text: it.name }),
                h('span', { class: 'muted small', text: ` \u2190 ${it.server}${it.orig ? ` ${it.orig}` : ''}` }),
                it.fixed?.length ? h('span', { class: 'badge', text: `fixed: ${it.fixed.join(', ')}` }) : [],
              ),
            ),
          ),
        )
      : [];
  return h(
    'li',
    { class: 'catalog-server', dataset: { virtual: vs.name } },
    h(
      'div',
      { class: 'server-head' },
      h('strong', { class: 'server-name', text: vs.name }),
      vs.title ? h('span', { class: 'muted', text: ` ${vs.title}` }) : [],
      h('span', { class: 'badge', text: vs.discovery }),
      h('code', { class: 'muted small', text: ` /servers/${vs.name}/mcp` }),
    ),
    h('p', { class: 'muted small', text: `Members: ${(vs.members ?? []).join(', ') || 'none'} \u00b7 ${plural(vs.tools?.length ?? 0, 'tool')}` }),
    vs.warnings?.length
      ? h('ul', { class: 'catalog-warnings', 'aria-label': `Warnings of ${vs.name}` }, vs.warnings.map((w) => h('li', { class: 'warning', text: w.line ? `line ${w.line}: ${w.message}` : w.message })))
      : [],
    items('Tools', vs.tools),
    items('Prompts', vs.prompts),
    items('Resources', vs.resources),
    items('Templates', vs.resourceTemplates),
  );
}
