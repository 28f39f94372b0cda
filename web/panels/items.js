// What the tools, resources and prompts panels share: the head of an item,
// opening a resource link, and completions for an argument.
import { h, uid, replaceChildren } from '../ui/dom.js';
import { resourceContents, rpcError } from '../ui/render.js';
import { client, isOpen } from './session.js';

/** openLink reads the resource uri into target (a link in a result or message). */
export function openLink(uri, target) {
  if (!isOpen()) return;
  replaceChildren(target, h('p', { class: 'muted small', text: `Reading ${uri}\u2026` }));
  client.readResource(uri).then(
    (res) => replaceChildren(target, (res.contents ?? []).map(resourceContents)),
    (err) => replaceChildren(target, rpcError(err)),
  );
}

/** itemHead is the first line of a tool, resource or prompt: its name, its server and badges. */
export function itemHead(name, server, extra = []) {
  return h('span', { class: 'item-head' }, h('code', { class: 'name', text: name }), server ? h('span', { class: 'badge', title: 'server', text: server }) : null, extra);
}

/**
 * completer offers completion/complete's values for input, the argument
 * argName of ref, as a datalist; others returns the other arguments.
 */
export function completer(input, ref, argName, others) {
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
