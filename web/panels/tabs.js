// The tabs of the workspace (tools, resources, prompts), with the keyboard
// handling of a tablist; the last one chosen is remembered.
import { $ } from '../ui/dom.js';
import { store } from './session.js';

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

/** setCount shows n as the count of the tab id. */
export const setCount = (id, n) => {
  $(`#${id} .count`).textContent = String(n);
};
