// The notification log: every notification, server request and change of
// state, with a filter, pause and the level of the servers' log messages.
import { $, h, append, formatTime, plural } from '../ui/dom.js';
import { client, isOpen, store } from './session.js';

const LOG_LIMIT = 500;

const logEl = $('#log');
const logFilter = $('#log-filter');
const pauseBtn = $('#log-pause');
const logLevel = $('#log-level');
const logCount = $('#log-count');
let paused = false;
let held = [];

/** log adds an entry to the log (held while it is paused). */
export function log(kind, method, params) {
  const now = new Date();
  const json = params === undefined ? '' : JSON.stringify(params);
  const short = json.length > 240 ? `${json.slice(0, 240)}\u2026` : json;
  const entry = h(
    'div',
    { class: ['log-entry', `kind-${kind}`], dataset: { kind, text: `${kind} ${method} ${json}`.toLowerCase() } },
    h('time', { datetime: now.toISOString(), text: `${formatTime(now)}.${String(now.getMilliseconds()).padStart(3, '0')}` }),
    h('span', { class: 'log-kind', text: kind }),
    h('code', { class: 'log-method', text: method }),
    short ? h('code', { class: 'log-params', title: json.length > 240 ? json.slice(0, 4000) : null, text: short }) : null,
  );
  if (paused) {
    held.push(entry);
    pauseBtn.textContent = `Resume (${held.length} new)`;
    return;
  }
  addEntries([entry]);
}

function addEntries(entries) {
  const q = logFilter.value.trim().toLowerCase();
  for (const e of entries) e.hidden = Boolean(q) && !e.dataset.text.includes(q);
  const stick = logEl.scrollTop + logEl.clientHeight >= logEl.scrollHeight - 24;
  append(logEl, entries);
  while (logEl.childElementCount > LOG_LIMIT) logEl.firstElementChild.remove();
  if (stick) logEl.scrollTop = logEl.scrollHeight;
  logCount.textContent = plural(logEl.childElementCount, 'entry', 'entries');
}

logFilter.addEventListener('input', () => {
  const q = logFilter.value.trim().toLowerCase();
  for (const e of logEl.children) e.hidden = Boolean(q) && !e.dataset.text.includes(q);
});
pauseBtn.addEventListener('click', () => {
  paused = !paused;
  pauseBtn.setAttribute('aria-pressed', String(paused));
  pauseBtn.textContent = paused ? 'Resume' : 'Pause';
  if (!paused) {
    addEntries(held);
    held = [];
  }
});
$('#log-clear').addEventListener('click', () => {
  logEl.replaceChildren();
  held = [];
  if (paused) pauseBtn.textContent = 'Resume';
  logCount.textContent = plural(0, 'entry', 'entries');
});
logLevel.value = store.get('logLevel', '');
logLevel.addEventListener('change', () => {
  store.set('logLevel', logLevel.value);
  if (isOpen() && logLevel.value) client.setLoggingLevel(logLevel.value).catch((err) => log('error', err.message));
});

/** applyLogLevel asks c for the chosen level of log messages, if one is chosen. */
export function applyLogLevel(c) {
  if (logLevel.value) c.setLoggingLevel(logLevel.value).catch((err) => log('error', err.message));
}
