// A progress bar for a call that reports progress (notifications/progress).
import { h } from './dom.js';

/**
 * progressBar returns a bar for the progress of one call: start it when the
 * call goes out, update it with each progress report, finish it with the
 * outcome ('done', 'Cancelled', 'Failed').
 * @param {string} label
 */
export function progressBar(label) {
  const fill = h('div', { class: 'progress-fill' });
  const bar = h('div', { class: 'progress', role: 'progressbar', 'aria-label': label, 'aria-valuemin': '0', hidden: true }, fill);
  const text = h('span', { class: 'progress-text muted small' });
  const wrap = h('div', { class: 'progress-wrap' }, bar, text);
  return {
    el: wrap,
    start() {
      bar.hidden = false;
      bar.classList.add('indeterminate');
      bar.classList.remove('done');
      bar.removeAttribute('aria-valuenow');
      bar.removeAttribute('aria-valuemax');
      bar.removeAttribute('aria-valuetext');
      fill.style.width = '';
      text.textContent = 'Waiting for the server\u2026';
    },
    update(p) {
      bar.setAttribute('aria-valuenow', String(p.progress));
      if (typeof p.total === 'number' && p.total > 0) {
        bar.classList.remove('indeterminate');
        bar.setAttribute('aria-valuemax', String(p.total));
        // CSSOM, not a style attribute: allowed under a strict CSP.
        fill.style.width = `${Math.min(100, (p.progress / p.total) * 100)}%`;
      }
      const desc = p.message ?? (p.total ? `${p.progress} of ${p.total}` : String(p.progress));
      bar.setAttribute('aria-valuetext', desc);
      text.textContent = desc;
    },
    finish(outcome) {
      const reported = bar.hasAttribute('aria-valuenow');
      bar.classList.remove('indeterminate');
      bar.classList.toggle('done', outcome === 'done');
      // A call that reported no progress needs no bar once it is over.
      bar.hidden = !reported;
      if (outcome === 'done' && reported && !bar.hasAttribute('aria-valuemax')) fill.style.width = '100%';
      text.textContent = outcome === 'done' ? (reported ? text.textContent : '') : reported ? `${outcome} at ${text.textContent}` : '';
    },
  };
}
