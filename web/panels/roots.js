// The roots panel: the roots this client answers roots/list with, kept in
// localStorage; a change is announced with notifications/roots/list_changed.
import { $, h, replaceChildren } from '../ui/dom.js';
import { client, isOpen, store } from './session.js';
import { log } from './log.js';

const rootsList = $('#roots');
const rootForm = $('#root-form');
/** roots are the roots this client reports, kept in localStorage. */
export let roots = store.get('roots', []);

/** renderRoots shows the roots. */
export function renderRoots() {
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
