// Rendering of what servers send: content blocks (text, image, audio,
// resource links, embedded resources), resource contents, prompt messages,
// and any JSON as a collapsible tree.
import { h, formatBytes } from './dom.js';

/**
 * jsonTree renders a JSON value as nested details/summary elements.
 * @param {unknown} value
 * @param {{label?: string, open?: number}} [opts] open: depth kept open (default 2).
 * @returns {HTMLElement}
 */
export function jsonTree(value, opts = {}) {
  const { label = 'JSON', open = 2 } = opts;
  return h('div', { class: 'json-tree' }, node(label, value, 0, open));
}

function node(key, value, depth, open) {
  const k = key === null ? null : h('span', { class: 'jt-key', text: key });
  if (value !== null && typeof value === 'object') {
    const isArray = Array.isArray(value);
    const entries = isArray ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const summary = h(
      'summary',
      {},
      k,
      h('span', { class: 'jt-type', text: isArray ? ` [${entries.length}]` : ` {${entries.length}}` }),
    );
    if (entries.length === 0) return h('div', { class: 'jt-leaf' }, k, h('span', { class: 'jt-type', text: isArray ? ' []' : ' {}' }));
    return h(
      'details',
      { class: 'jt-node', open: depth < open },
      summary,
      h('ul', { class: 'jt-children' }, entries.map(([ck, cv]) => h('li', {}, node(ck, cv, depth + 1, open)))),
    );
  }
  const type = value === null ? 'null' : typeof value;
  const text = type === 'string' ? JSON.stringify(value) : String(value);
  return h('div', { class: 'jt-leaf' }, k, k ? h('span', { class: 'jt-sep', text: ': ' }) : null, h('span', { class: `jt-${type}`, text }));
}

const base64Size = (b64) => Math.floor((b64.length * 3) / 4) - (b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0);

function media(kind, data, mimeType) {
  const src = `data:${mimeType};base64,${data}`;
  const caption = h('figcaption', { text: `${kind} \u00b7 ${mimeType} \u00b7 ${formatBytes(base64Size(data))}` });
  const fallback = () =>
    el.replaceWith(
      h('p', { class: 'notice', text: `This ${kind} (${mimeType}) could not be shown: the data is invalid or the page's Content-Security-Policy blocks data: URLs.` }),
    );
  let el;
  if (kind === 'image') {
    el = h('img', { src, alt: `Image result (${mimeType})`, loading: 'lazy', decoding: 'async' });
  } else {
    el = h('audio', { src, controls: true, preload: 'metadata', 'aria-label': `Audio result (${mimeType})` });
  }
  el.addEventListener('error', fallback, { once: true });
  return h('figure', { class: `content content-${kind}` }, el, caption);
}

/**
 * resourceContents renders one entry of a resource's contents.
 * @param {{uri: string, mimeType?: string, text?: string, blob?: string}} c
 */
export function resourceContents(c) {
  const mime = c.mimeType ?? '';
  const head = h('div', { class: 'rc-head' }, h('code', { class: 'uri', text: c.uri }), mime ? h('span', { class: 'badge', text: mime }) : null);
  let body;
  if (typeof c.text === 'string') {
    let parsed;
    if (/json/.test(mime)) {
      try {
        parsed = JSON.parse(c.text);
      } catch {
        /* shown as text */
      }
    }
    body = parsed !== undefined ? jsonTree(parsed, { label: 'contents', open: 3 }) : h('pre', { class: 'text', text: c.text });
  } else if (typeof c.blob === 'string') {
    if (mime.startsWith('image/')) body = media('image', c.blob, mime);
    else if (mime.startsWith('audio/')) body = media('audio', c.blob, mime);
    else body = h('p', { class: 'muted', text: `Binary contents, ${formatBytes(base64Size(c.blob))}` });
  } else {
    body = jsonTree(c, { label: 'contents' });
  }
  return h('div', { class: 'resource-contents' }, head, body);
}

/**
 * contentBlock renders one content block of a tool result or a message.
 * @param {any} block
 * @param {{onOpenLink?: (uri: string, target: HTMLElement) => void}} [opts]
 */
export function contentBlock(block, opts = {}) {
  switch (block?.type) {
    case 'text':
      return h('pre', { class: 'content content-text', text: block.text ?? '' });
    case 'image':
      return media('image', block.data ?? '', block.mimeType ?? 'image/png');
    case 'audio':
      return media('audio', block.data ?? '', block.mimeType ?? 'audio/wav');
    case 'resource_link': {
      const out = h('div', { class: 'link-out' });
      const open = h('button', {
        type: 'button',
        class: 'secondary small',
        text: 'Open',
        'aria-label': `Open ${block.uri}`,
        on: { click: () => opts.onOpenLink?.(block.uri, out) },
      });
      return h(
        'div',
        { class: 'content content-link' },
        h('div', { class: 'rc-head' }, h('span', { class: 'link-icon', 'aria-hidden': 'true', text: '\u2197' }), h('strong', { text: block.title ?? block.name ?? block.uri }), h('code', { class: 'uri', text: block.uri }), block.mimeType ? h('span', { class: 'badge', text: block.mimeType }) : null, opts.onOpenLink ? open : null),
        block.description ? h('p', { class: 'muted', text: block.description }) : null,
        out,
      );
    }
    case 'resource':
      return h('div', { class: 'content content-resource' }, h('p', { class: 'content-label', text: 'Embedded resource' }), resourceContents(block.resource ?? {}));
    default:
      return h('div', { class: 'content' }, jsonTree(block, { label: `${block?.type ?? 'unknown'} content` }));
  }
}

/**
 * toolResult renders a tools/call result: its content blocks,
 * structuredContent as a JSON tree, and isError as an error.
 * @param {{content?: any[], structuredContent?: unknown, isError?: boolean}} res
 * @param {{onOpenLink?: (uri: string, target: HTMLElement) => void}} [opts]
 */
export function toolResult(res, opts = {}) {
  const blocks = (res?.content ?? []).map((b) => contentBlock(b, opts));
  return h(
    'div',
    { class: ['tool-result', res?.isError && 'is-error'], role: res?.isError ? 'alert' : null },
    res?.isError ? h('p', { class: 'error-title', text: 'The tool reported an error' }) : null,
    blocks.length ? blocks : h('p', { class: 'muted', text: 'No content.' }),
    res?.structuredContent !== undefined ? jsonTree(res.structuredContent, { label: 'structuredContent' }) : null,
  );
}

/**
 * messages renders prompt or sampling messages (role and content).
 * @param {{role: string, content: any}[]} msgs
 * @param {{onOpenLink?: (uri: string, target: HTMLElement) => void}} [opts]
 */
export function messages(msgs, opts = {}) {
  return h(
    'ol',
    { class: 'messages' },
    (msgs ?? []).map((m) =>
      h(
        'li',
        { class: ['message', `role-${m.role}`] },
        h('span', { class: 'role', text: m.role }),
        h('div', { class: 'message-body' }, (Array.isArray(m.content) ? m.content : [m.content]).map((c) => contentBlock(c, opts))),
      ),
    ),
  );
}

/**
 * rpcError renders a JSON-RPC error: code, message and data.
 * @param {{code?: number, message: string, data?: unknown, name?: string}} err
 */
export function rpcError(err) {
  return h(
    'div',
    { class: 'rpc-error', role: 'alert' },
    h('p', {}, h('strong', { text: 'Error' }), err.code !== undefined ? h('code', { class: 'code', text: ` ${err.code}` }) : null, ` ${err.message}`),
    err.data !== undefined ? jsonTree(err.data, { label: 'data' }) : null,
  );
}
