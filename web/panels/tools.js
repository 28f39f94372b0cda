// The tools panel: the tools of every server, with search, a form generated
// from each inputSchema (raw JSON as a fallback), progress, cancellation and
// the rendered result.
import { $, h, uid, reconcile, plural, coalesce } from '../ui/dom.js';
import { buildSchemaForm, isSupported, FormError } from '../ui/schema-form.js';
import { toolResult, rpcError } from '../ui/render.js';
import { progressBar } from '../ui/progress.js';
import { client, isOpen } from './session.js';
import { log } from './log.js';
import { setCount } from './tabs.js';
import { itemHead, openLink } from './items.js';

const toolsList = $('#tools');
const toolSearch = $('#tool-search');
const toolCount = $('#tool-count');
const toolCache = new Map();
let tools = [];

/** refreshTools lists the tools again. */
export const refreshTools = coalesce(async () => {
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

const elapsed = (t0) => {
  const ms = performance.now() - t0;
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
};

/** resetTools forgets the tools of the last connection. */
export function resetTools() {
  tools = [];
  toolCache.clear();
  toolsList.replaceChildren();
  renderTools();
}
