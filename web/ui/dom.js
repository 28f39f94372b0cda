// DOM helpers for the dashboard. Everything a server sends is inserted as
// text (never as HTML), so that a tool's output cannot run script in the
// page; together with the page's Content-Security-Policy that keeps
// untrusted content inert.

/**
 * $ returns the first element of the page that matches a CSS selector.
 * @param {string} sel
 */
export const $ = (sel) => document.querySelector(sel);

let seq = 0;

/**
 * uid returns a document-unique id with a readable prefix.
 * @param {string} prefix
 * @returns {string}
 */
export function uid(prefix = 'id') {
  seq += 1;
  return `${String(prefix).replace(/[^A-Za-z0-9_-]/g, '_')}-${seq}`;
}

/**
 * h creates an element. attrs: "class", "text", "on" (event -> listener),
 * "dataset", boolean attributes (true sets, false/null/undefined omits),
 * everything else as an attribute. Children: nodes, strings (as text),
 * arrays, null/undefined/false (skipped).
 * @param {string} tag
 * @param {Record<string, any>} [attrs]
 * @param {...any} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
    else if (k === 'text') el.textContent = String(v);
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = Boolean(v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

/**
 * append appends children (as h does) to el.
 * @param {Node} el
 * @param {any[]} children
 */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * replaceChildren removes every child of el and appends children.
 * @param {Element} el
 * @param {...any} children
 */
export function replaceChildren(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/**
 * reconcile makes list's children match items, in order, reusing the
 * element of each key whose item is unchanged (so that open forms and
 * calls in flight survive a refresh of the list).
 * @template T
 * @param {Element} list
 * @param {T[]} items
 * @param {(item: T) => string} key
 * @param {(item: T) => HTMLElement} create
 * @param {Map<string, {el: HTMLElement, sig: string}>} cache
 */
export function reconcile(list, items, key, create, cache) {
  const keep = new Set();
  const els = items.map((item) => {
    const k = key(item);
    keep.add(k);
    const sig = JSON.stringify(item);
    const cached = cache.get(k);
    if (cached && cached.sig === sig) return cached.el;
    const el = create(item);
    cache.set(k, { el, sig });
    return el;
  });
  for (const k of [...cache.keys()]) if (!keep.has(k)) cache.delete(k);
  // Move nodes only where the order differs, so focus is kept.
  let cursor = list.firstChild;
  for (const el of els) {
    if (el === cursor) {
      cursor = cursor.nextSibling;
    } else {
      list.insertBefore(el, cursor);
    }
  }
  while (cursor) {
    const next = cursor.nextSibling;
    cursor.remove();
    cursor = next;
  }
}

/**
 * formatTime formats a Date (or timestamp) as a local time with seconds.
 * @param {Date|number|string} t
 */
export function formatTime(t) {
  const d = t instanceof Date ? t : new Date(t);
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
}

/**
 * formatBytes formats a byte count for people.
 * @param {number} n
 */
export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * since formats how long ago t was, coarsely ("5 s", "3 min", "2 h").
 * @param {Date|number|string} t
 */
export function since(t) {
  const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}

/**
 * plural returns "1 tool" / "2 tools".
 * @param {number} n
 * @param {string} one
 * @param {string} [many]
 */
export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * coalesce wraps an async function so that calls during a run are merged
 * into one more run after it.
 * @param {() => Promise<void>} fn
 * @returns {() => Promise<void>}
 */
export function coalesce(fn) {
  let running = null;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await fn();
        } while (again);
      } finally {
        running = null;
      }
    })();
    return running;
  };
  return run;
}
