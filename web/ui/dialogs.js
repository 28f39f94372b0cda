// Requests from servers that a person answers: sampling/createMessage and
// elicitation/create, one modal <dialog> at a time.
import { RpcError } from '../switchboard.js';
import { h } from './dom.js';
import { messages } from './render.js';
import { buildSchemaForm, FormError } from './schema-form.js';

/** The code a declined sampling request is answered with (as the MCP SDKs do). */
export const USER_DECLINED = -1;

let queue = Promise.resolve();

/**
 * enqueue runs show after every dialog before it closed, so that two
 * requests never stack two modal dialogs.
 * @template T
 * @param {() => Promise<T>} show
 * @returns {Promise<T>}
 */
function enqueue(show) {
  const p = queue.then(show, show);
  queue = p.catch(() => {});
  return p;
}

/**
 * modal shows a dialog built by build and settles with what it resolves.
 * The dialog closes when the request is cancelled (signal).
 */
function modal(title, signal, build) {
  return enqueue(
    () =>
      new Promise((resolve, reject) => {
        if (signal?.aborted) {
          reject(signal.reason);
          return;
        }
        const titleId = `dlg-${Math.random().toString(36).slice(2)}`;
        const dialog = h('dialog', { class: 'request-dialog', 'aria-labelledby': titleId });
        let done = false;
        const finish = (fn) => {
          if (done) return;
          done = true;
          signal?.removeEventListener('abort', onAbort);
          dialog.close();
          dialog.remove();
          fn();
        };
        const onAbort = () => finish(() => reject(signal.reason));
        signal?.addEventListener('abort', onAbort, { once: true });
        const api = {
          resolve: (v) => finish(() => resolve(v)),
          reject: (e) => finish(() => reject(e)),
        };
        const { body, onEscape } = build(api);
        dialog.append(h('h2', { id: titleId, text: title }), body);
        // Escape: the dialog's cancel event; answer as the builder says.
        dialog.addEventListener('cancel', (ev) => {
          ev.preventDefault();
          onEscape();
        });
        document.body.append(dialog);
        dialog.showModal();
      }),
  );
}

/**
 * sampling asks the person to answer a sampling/createMessage request in
 * place of a model. It resolves with a CreateMessageResult, or rejects with
 * an RpcError when they decline.
 * @param {any} params
 * @param {{signal?: AbortSignal}} ctx
 */
export function sampling(params, ctx = {}) {
  return modal('Sampling request', ctx.signal, (api) => {
    const responseId = `sampling-response-${Math.random().toString(36).slice(2)}`;
    const textarea = h('textarea', { id: responseId, rows: 4, required: true, placeholder: 'Write the answer the server gets back' });
    const decline = () => api.reject(new RpcError(USER_DECLINED, 'The user declined the sampling request'));
    const form = h(
      'form',
      {
        method: 'dialog',
        on: {
          submit: (ev) => {
            ev.preventDefault();
            api.resolve({ role: 'assistant', content: { type: 'text', text: textarea.value }, model: 'switchboard-dashboard (a person)', stopReason: 'endTurn' });
          },
        },
      },
      h('div', { class: 'field' }, h('label', { for: responseId, text: 'Response' }), textarea),
      h('div', { class: 'form-actions' }, h('button', { type: 'submit', class: 'primary', text: 'Send response' }), h('button', { type: 'button', class: 'secondary', text: 'Decline', on: { click: decline } })),
    );
    const prefs = params.modelPreferences?.hints?.map((x) => x.name).filter(Boolean) ?? [];
    const facts = [
      ['Max tokens', params.maxTokens],
      ['Temperature', params.temperature],
      ['Include context', params.includeContext],
      ['Model hints', prefs.join(', ') || undefined],
      ['Stop sequences', params.stopSequences?.join(', ') || undefined],
    ].filter(([, v]) => v !== undefined && v !== '');
    const body = h(
      'div',
      { class: 'dialog-body' },
      h('p', { class: 'muted', text: 'A server asks the model behind this client to answer. You are the model: read the conversation and write the reply, or decline.' }),
      params.systemPrompt ? h('div', { class: 'system-prompt' }, h('p', { class: 'content-label', text: 'System prompt' }), h('pre', { class: 'text', text: params.systemPrompt })) : null,
      messages(params.messages ?? []),
      facts.length ? h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', { text: k }), h('dd', { text: String(v) })])) : null,
      form,
    );
    queueMicrotask(() => textarea.focus());
    return { body, onEscape: decline };
  });
}

/**
 * elicitation asks the person for what a server's elicitation/create
 * request wants, with a form generated from its requestedSchema. It
 * resolves with {action: "accept", content} | {action: "decline"} |
 * {action: "cancel"}.
 * @param {any} params
 * @param {{signal?: AbortSignal}} ctx
 */
export function elicitation(params, ctx = {}) {
  return modal('Information requested', ctx.signal, (api) => {
    if (params.mode === 'url') {
      // Not declared (form mode only), but answer sensibly if it comes.
      queueMicrotask(() => api.resolve({ action: 'decline' }));
      return { body: h('p', { text: 'URL elicitation is not supported.' }), onEscape: () => api.resolve({ action: 'cancel' }) };
    }
    const fields = buildSchemaForm(params.requestedSchema ?? { type: 'object', properties: {} }, { idPrefix: 'elicit' });
    const error = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const form = h(
      'form',
      {
        method: 'dialog',
        on: {
          submit: (ev) => {
            ev.preventDefault();
            try {
              api.resolve({ action: 'accept', content: fields.get() });
            } catch (err) {
              if (!(err instanceof FormError)) throw err;
              error.textContent = err.message;
              error.hidden = false;
            }
          },
        },
      },
      fields.el,
      error,
      h(
        'div',
        { class: 'form-actions' },
        h('button', { type: 'submit', class: 'primary', text: 'Accept' }),
        h('button', { type: 'button', class: 'secondary', text: 'Decline', on: { click: () => api.resolve({ action: 'decline' }) } }),
        h('button', { type: 'button', class: 'secondary', text: 'Cancel', on: { click: () => api.resolve({ action: 'cancel' }) } }),
      ),
    );
    const body = h('div', { class: 'dialog-body' }, h('p', { class: 'elicit-message', text: params.message ?? 'A server asks for information.' }), form);
    queueMicrotask(() => form.querySelector('input, select, textarea')?.focus());
    return { body, onEscape: () => api.resolve({ action: 'cancel' }) };
  });
}
