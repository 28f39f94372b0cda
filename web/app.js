// The Switchboard dashboard: a live MCP client of the hub that served it,
// built on switchboard.js. Plain ES modules, no build step, no inline
// script or style, so that a strict Content-Security-Policy holds.
//
// This module wires the panels (panels/*.js, one per part of the page) to
// the client of the current connection: it connects, hands the server's
// requests to the dialogs, and routes notifications to the panels.
import { SwitchboardClient, defaultHubURL, State } from './switchboard.js';
import { jsonTree } from './ui/render.js';
import * as dialogs from './ui/dialogs.js';
import { client, setClient, store } from './panels/session.js';
import { showState, tokenHint, login, bindForm, urlInput, offerOAuthLogin } from './panels/connection.js';
import { log, applyLogLevel } from './panels/log.js';
import { SERVERS_URI, refreshServers, resetServers } from './panels/servers.js';
import { refreshTools, resetTools } from './panels/tools.js';
import { refreshResources, resetResources, resourceUpdated, want } from './panels/resources.js';
import { refreshPrompts, resetPrompts } from './panels/prompts.js';
import { roots, renderRoots } from './panels/roots.js';
import { trafficOpened, trafficUpdated, resetTraffic } from './panels/traffic.js';
import { CATALOG_URI, refreshCatalog, resetCatalog } from './panels/catalog.js';

let connectGen = 0;

/**
 * connect connects the dashboard to url. With doLogin (the Connect button),
 * the token field is what counts: a token logs in, an empty one logs out.
 */
async function connect(url, token, { doLogin = true } = {}) {
  const gen = ++connectGen;
  if (client) {
    const old = client;
    setClient(null);
    old.close(1000, 'dashboard reconnecting');
  }
  resetWorkspace();
  showState({ state: State.CONNECTING });
  let inQuery = false;
  try {
    if (doLogin) inQuery = await login(url, token);
  } catch (err) {
    if (gen !== connectGen) return;
    showState({ state: State.CLOSED, error: err });
    log('error', `login: ${err.message}`);
    return;
  }
  if (gen !== connectGen) return; // a newer Connect won
  const c = new SwitchboardClient(url, {
    token: inQuery ? token : undefined,
    clientInfo: { name: 'switchboard-dashboard', title: 'Switchboard dashboard', version: '0.1.0' },
    onSampling: (params, ctx) => {
      log('request', 'sampling/createMessage', params);
      return dialogs.sampling(params, ctx);
    },
    onElicitation: (params, ctx) => {
      log('request', 'elicitation/create', params);
      return dialogs.elicitation(params, ctx);
    },
    roots: () => roots.map((r) => ({ ...r })),
    reconnect: { initialDelayMs: 500, maxDelayMs: 10000 },
  });
  setClient(c);
  const mine = (fn) => (ev) => {
    if (client === c) fn(ev);
  };
  c.addEventListener('state', mine((ev) => {
    showState(ev.detail);
    if (ev.detail.state !== State.OPEN) log('state', ev.detail.state, ev.detail.reason ? { code: ev.detail.closeCode, reason: ev.detail.reason } : undefined);
  }));
  c.addEventListener('open', mine((ev) => onOpen(ev.detail.reconnected)));
  c.addEventListener('notification', mine((ev) => onNotification(ev.detail)));
  c.addEventListener('error', mine((ev) => log('error', ev.detail.error.message)));
  c.connect().catch((err) => {
    if (client === c && !token && /could not connect/.test(err.message)) {
      tokenHint();
    }
  });
}

async function onOpen(reconnected) {
  log('state', reconnected ? 'open (reconnected, subscriptions renewed)' : 'open', { serverInfo: client.serverInfo, protocolVersion: client.protocolVersion });
  if (!reconnected) {
    const c = client;
    want(SERVERS_URI, 'sidebar').catch((err) => log('error', `subscribing to ${SERVERS_URI}: ${err.message}`));
    applyLogLevel(c);
  }
  trafficOpened();
  await Promise.all([refreshServers(), refreshTools(), refreshResources(), refreshPrompts(), refreshCatalog()]);
}

function onNotification({ method, params }) {
  log('notification', method, params);
  switch (method) {
    case 'notifications/tools/list_changed':
      refreshTools();
      break;
    case 'notifications/resources/list_changed':
      refreshResources();
      break;
    case 'notifications/prompts/list_changed':
      refreshPrompts();
      break;
    case 'notifications/resources/updated':
      if (params.uri === SERVERS_URI) refreshServers();
      if (params.uri === CATALOG_URI) refreshCatalog();
      trafficUpdated(params.uri);
      resourceUpdated(params.uri);
      break;
  }
}

bindForm(connect);
offerOAuthLogin();

/** resetWorkspace empties the panels that show what the hub offers. */
function resetWorkspace() {
  resetServers();
  resetTools();
  resetResources();
  resetPrompts();
  resetTraffic();
  resetCatalog();
}

const params = new URLSearchParams(location.search);
urlInput.value = params.get('hub') ?? store.get('url', defaultHubURL());
renderRoots();
resetWorkspace();
showState({ state: State.IDLE });
// On load, connect without logging in or out: a cookie from an earlier
// login (this browser session) still applies.
if (params.get('autoconnect') !== '0') connect(urlInput.value, '', { doLogin: false });

// For debugging in the console (and tests): the current client.
Object.defineProperty(window, 'switchboard', { get: () => ({ client, jsonTree }) });
