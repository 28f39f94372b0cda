// Line charts in plain SVG for the Traffic view. Everything is built with
// createElementNS and textContent (never markup from data); colours come
// from the stylesheet's classes, so both themes apply. Each chart carries
// its figures as text too: an aria-label that says the latest and the
// highest value of each line, and a table of every point.
import { h } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';

/** svg creates an SVG element with attributes. */
function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) if (c) el.append(c);
  return el;
}

/**
 * niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
 * @param {number} v
 */
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/**
 * formatNumber shows a figure with the precision that matters: two decimals
 * under 10, one under 100, none above.
 * @param {number|null|undefined} v
 */
export function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '\u2013';
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a < 10) return v.toFixed(2);
  if (a < 100) return v.toFixed(1);
  return String(Math.round(v));
}

/**
 * @typedef {object} Series
 * @property {string} name  Shown in the legend, the label and the table.
 * @property {string} cls   The class of its line (its colour).
 * @property {(number|null)[]} points  Oldest first, one per step; null is a gap.
 * @property {boolean} [area]  Fill under the line.
 */

/**
 * lineChart returns a figure: an SVG of the series over the last
 * points.length steps, a legend with each line's latest value, and a table
 * of every point (in a details element) as its text alternative.
 * The table's details element keeps o.open, and tells o.onToggle when a
 * person opens or closes it (charts are redrawn every second).
 * @param {{title: string, unit: string, stepSeconds: number, series: Series[], width: number, height?: number, open?: boolean, onToggle?: (open: boolean) => void}} o
 * @returns {HTMLElement}
 */
export function lineChart(o) {
  const { title, unit, stepSeconds, series } = o;
  const width = Math.max(200, Math.round(o.width));
  const height = o.height ?? 150;
  const n = Math.max(2, ...series.map((s) => s.points.length));
  const pad = { left: 44, right: 10, top: 10, bottom: 22 };
  const values = series.flatMap((s) => s.points.filter((v) => v !== null && v !== undefined));
  const top = niceMax(Math.max(0, ...values));
  const x = (i) => pad.left + (i / (n - 1)) * (width - pad.left - pad.right);
  const y = (v) => pad.top + (1 - v / top) * (height - pad.top - pad.bottom);

  const grid = [0, top / 2, top].map((v) =>
    svg('g', { class: 'chart-grid' }, svg('line', { x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }), svg('text', { x: pad.left - 6, y: y(v) + 4, 'text-anchor': 'end', text: formatNumber(v) })),
  );
  const span = Math.round((n - 1) * stepSeconds);
  const xLabels = [
    svg('text', { class: 'chart-axis', x: pad.left, y: height - 6, 'text-anchor': 'start', text: `-${span} s` }),
    svg('text', { class: 'chart-axis', x: width - pad.right, y: height - 6, 'text-anchor': 'end', text: 'now' }),
  ];
  const lines = series.map((s) => {
    const off = n - s.points.length; // a shorter series ends at "now"
    let d = '';
    let pen = false;
    s.points.forEach((v, i) => {
      if (v === null || v === undefined) {
        pen = false;
        return;
      }
      d += `${pen ? 'L' : 'M'}${x(i + off).toFixed(1)} ${y(v).toFixed(1)} `;
      pen = true;
    });
    const parts = [];
    if (s.area && d) {
      const first = s.points.findIndex((v) => v !== null && v !== undefined);
      const last = s.points.length - 1 - [...s.points].reverse().findIndex((v) => v !== null && v !== undefined);
      parts.push(svg('path', { class: `chart-area ${s.cls}`, d: `${d}L${x(last + off).toFixed(1)} ${y(0)} L${x(first + off).toFixed(1)} ${y(0)} Z` }));
    }
    parts.push(svg('path', { class: `chart-line ${s.cls}`, d: d.trim() }));
    const last = s.points.length - 1;
    const v = s.points[last];
    if (v !== null && v !== undefined) parts.push(svg('circle', { class: `chart-dot ${s.cls}`, cx: x(last + off).toFixed(1), cy: y(v).toFixed(1), r: 3 }));
    return parts;
  });
  const latest = (s) => [...s.points].reverse().find((v) => v !== null && v !== undefined) ?? null;
  const peak = (s) => Math.max(0, ...s.points.filter((v) => v !== null && v !== undefined));
  const summary = series.map((s) => `${s.name} ${formatNumber(latest(s))} ${unit} now, at most ${formatNumber(peak(s))}`).join('; ');
  const chart = svg(
    'svg',
    { class: 'chart', role: 'img', 'aria-label': `${title}, over the last ${span} s: ${summary}`, viewBox: `0 0 ${width} ${height}`, width, height },
    grid,
    xLabels,
    lines,
  );
  const legend = h(
    'ul',
    { class: 'chart-legend', 'aria-hidden': 'true' },
    series.map((s) => h('li', {}, h('span', { class: `swatch ${s.cls}` }), `${s.name} `, h('strong', { text: `${formatNumber(latest(s))} ${unit}` }))),
  );
  const rows = [];
  for (let i = n - 1; i >= 0; i--) {
    const ago = Math.round((n - 1 - i) * stepSeconds);
    rows.push(
      h(
        'tr',
        {},
        h('th', { scope: 'row', text: ago === 0 ? 'now' : `-${ago} s` }),
        series.map((s) => {
          const v = s.points[i - (n - s.points.length)];
          return h('td', { text: formatNumber(v) });
        }),
      ),
    );
  }
  const table = h(
    'details',
    { class: 'chart-data', open: Boolean(o.open), on: { toggle: (ev) => o.onToggle?.(ev.currentTarget.open) } },
    h('summary', { text: 'Data table' }),
    h('div', { class: 'table-wrap' }, h('table', { class: 'data-table' }, h('caption', { text: `${title} (${unit})` }), h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'When' }), series.map((s) => h('th', { scope: 'col', text: s.name })))), h('tbody', {}, rows))),
  );
  return h('figure', { class: 'chart-figure' }, h('figcaption', { text: title }), chart, legend, table);
}
