// The resources panel: resources with read and subscribe, and resource
// templates with a form for their variables. It also keeps the subscriptions
// of the whole page, counted by owner (the servers panel is one).
import { $, h, uid, replaceChildren, reconcile, formatTime, plural, coalesce } from '../ui/dom.js';
import { labelRow } from '../ui/schema-form.js';
import { resourceContents, rpcError } from '../ui/render.js';
import { client, isOpen } from './session.js';
import { log } from './log.js';
import { setCount } from './tabs.js';
import { itemHead, completer } from './items.js';

const resourcesList = $('#resources');
const templatesList = $('#templates');
const resourceCache = new Map();
const templateCache = new Map();
/** @type {Map<string, {updates: number, last?: Date, owners: Set<string>}>} */
const subs = new Map();
/** @type {Map<string, {onUpdate: () => void, setSubscribed: (on: boolean) => void}>} */
const resourceViews = new Map();

/** refreshResources lists the resources and templates again. */
export const refreshResources = coalesce(async () => {
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
export async function want(uri, owner) {
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
export async function unwant(uri, owner) {
  const s = subs.get(uri);
  if (!s?.owners.delete(owner)) return;
  s.updates = 0;
  s.last = undefined;
  if (s.owners.size === 0) {
    subs.delete(uri);
    await client.unsubscribe(uri);
  }
}

/** resourceUpdated counts a notifications/resources/updated for uri and shows it. */
export function resourceUpdated(uri) {
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

/** resetResources forgets the resources and subscriptions of the last connection. */
export function resetResources() {
  subs.clear();
  resourceViews.clear();
  for (const [list, cache] of [
    [resourcesList, resourceCache],
    [templatesList, templateCache],
  ]) {
    cache.clear();
    list.replaceChildren();
  }
  setCount('tab-resources', 0);
}
