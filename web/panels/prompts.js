// The prompts panel: each prompt with a form for its arguments (with
// completions) and the messages it returns.
import { $, h, uid, replaceChildren, reconcile, coalesce } from '../ui/dom.js';
import { labelRow } from '../ui/schema-form.js';
import { messages, rpcError } from '../ui/render.js';
import { client, isOpen } from './session.js';
import { log } from './log.js';
import { setCount } from './tabs.js';
import { itemHead, openLink, completer } from './items.js';

const promptsList = $('#prompts');
const promptCache = new Map();

/** refreshPrompts lists the prompts again. */
export const refreshPrompts = coalesce(async () => {
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

/** resetPrompts forgets the prompts of the last connection. */
export function resetPrompts() {
  promptCache.clear();
  promptsList.replaceChildren();
  setCount('tab-prompts', 0);
}
