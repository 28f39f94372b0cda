// The top bar: the hub's URL and token, logging in with the token, and the
// state of the connection.
import { State } from '../switchboard.js';
import { $ } from '../ui/dom.js';
import { client, store } from './session.js';

const statusEl = $('#conn-status');
const statusText = $('#conn-status .status-text');
const connectForm = $('#connect-form');
/** urlInput is the field of the hub's URL. */
export const urlInput = $('#hub-url');
const tokenInput = $('#hub-token');
const disconnectBtn = $('#disconnect-btn');
const oauthLoginBtn = $('#oauth-login');
let retryTicker = null;

/** showState shows the connection state d (a state event's detail) in the top bar. */
export function showState(d) {
  clearInterval(retryTicker);
  statusEl.dataset.state = d.state;
  let text;
  switch (d.state) {
    case State.CONNECTING:
      text = d.attempt ? `Reconnecting (attempt ${d.attempt})\u2026` : 'Connecting\u2026';
      break;
    case State.OPEN: {
      const si = client?.serverInfo;
      text = `Connected${si ? ` \u00b7 ${si.title ?? si.name} ${si.version}` : ''}`;
      break;
    }
    case State.RECONNECTING: {
      const until = Date.now() + d.delayMs;
      const why = d.reason ? ` (${d.reason})` : d.closeCode ? ` (code ${d.closeCode})` : '';
      const tick = () => {
        const s = Math.max(0, (until - Date.now()) / 1000).toFixed(1);
        statusText.textContent = `Connection lost${why}. Retrying in ${s} s (attempt ${d.attempt})`;
      };
      tick();
      retryTicker = setInterval(tick, 200);
      statusEl.title = '';
      return;
    }
    case State.CLOSED:
      text = d.error ? `Disconnected: ${d.error.message}` : 'Disconnected';
      break;
    default:
      text = 'Not connected';
  }
  statusText.textContent = text;
  statusEl.title = d.state === State.OPEN ? (client?.instructions ?? '') : '';
  disconnectBtn.disabled = !(d.state === State.OPEN || d.state === State.RECONNECTING || d.state === State.CONNECTING);
  document.body.dataset.connection = d.state;
}

/** tokenHint adds to the status that the hub may require a token. */
export function tokenHint() {
  statusText.textContent += ' \u2014 if the hub requires a token, enter it and press Connect.';
}

/**
 * login hands the token to the hub that served this page (POST /login),
 * which keeps it in an HttpOnly cookie that the browser sends with the
 * WebSocket upgrade: the token then never appears in a URL. It returns true
 * when the token must go in ?token= instead (another hub's URL, or a hub
 * without /login), and throws when the hub refuses the token.
 */
export async function login(url, token) {
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new Error(`not a URL: ${url}`);
  }
  const sameOrigin = u.host === location.host && (u.protocol === 'wss:') === (location.protocol === 'https:');
  if (!sameOrigin) return Boolean(token);
  const res = await fetch(token ? 'login' : 'logout', {
    method: 'POST',
    body: new URLSearchParams(token ? { token } : {}),
    credentials: 'same-origin',
  }).catch(() => null);
  if (!res || res.status === 404 || res.status === 405) return Boolean(token);
  if (res.ok) return false;
  if (res.status === 401) throw new Error('the hub does not know this token');
  throw new Error(`logging in failed: ${res.status} ${(await res.text()).trim()}`);
}

/**
 * offerOAuthLogin shows "Sign in" when the hub that served this page logs
 * the dashboard in through its identity provider (HEAD /login/oauth says
 * "Switchboard-Login: oauth"): the button goes to the provider, which sends
 * the browser back logged in, its access token in the same HttpOnly cookie
 * as a token's.
 */
export async function offerOAuthLogin() {
  const res = await fetch('login/oauth', { method: 'HEAD', credentials: 'same-origin' }).catch(() => null);
  oauthLoginBtn.hidden = res?.headers.get('Switchboard-Login') !== 'oauth';
}

/**
 * bindForm makes the Connect button call connect with the form's URL and
 * token, the Disconnect button close the current client, and Sign in go to
 * the identity provider.
 */
export function bindForm(connect) {
  connectForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const url = urlInput.value.trim();
    store.set('url', url);
    connect(url, tokenInput.value.trim());
  });

  disconnectBtn.addEventListener('click', () => {
    client?.close(1000, 'disconnected by the user');
  });

  oauthLoginBtn.addEventListener('click', () => location.assign('login/oauth'));
}
