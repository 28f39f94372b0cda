// End-to-end tests of the dashboard's Traffic view: Debian's chromium,
// driven by playwright-core, against real hubs (bin/hub), one alone and two
// sharing a redis-server, under the strict Content-Security-Policy.
import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import WebSocket from 'ws';

import { SwitchboardClient, RpcError } from '../../switchboard.js';
import { formatNumber } from '../../ui/chart.js';
import { startHub } from '../helpers/hub.js';
import { startRedis } from '../helpers/redis.js';
import { launch, openDashboard, poll, horizontalOverflow, ARTIFACTS, STRICT_CSP } from '../helpers/browser.js';
import { startCspProxy } from '../helpers/csp-proxy.js';

let browser;
const pages = [];
const clients = [];

async function newPage(url) {
  const page = await openDashboard(browser.context, url);
  pages.push(page);
  return page;
}

/** caller connects a Node client (the ws package as its WebSocket) that the test's afterEach closes. */
async function caller(wsURL, name, version) {
  const c = new SwitchboardClient(wsURL, { WebSocket, clientInfo: { name, version }, reconnect: false });
  clients.push(c);
  await c.connect();
  return c;
}

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  const problems = [];
  for (const page of pages.splice(0)) {
    problems.push(...page.problems);
    await page.close();
  }
  assert.deepEqual(problems, [], 'the page logged problems');
});

/** openTraffic waits until the dashboard is connected, then shows the Traffic view. */
async function openTraffic(page) {
  await page.getByRole('status').filter({ hasText: /^\s*Connected/ }).waitFor();
  await page.getByRole('tab', { name: /^Traffic/ }).click();
  await page.locator('#traffic-status').filter({ hasText: /^Updated/ }).waitFor();
}

/** figure returns the text of one of the view's figures (Calls/s, Calls, p50...). */
const figure = (page, name) => page.locator(`#traffic-figures [data-figure="${name}"] dd`).textContent();

/** statsDoc reads switchboard://stats through the page's own client. */
const statsDoc = (page) => page.evaluate(async () => JSON.parse((await window.switchboard.client.readResource('switchboard://stats')).contents[0].text));

/** rowCells returns the cells' text of a table's body rows. */
const rowCells = (page, label) =>
  page.evaluate((l) => [...document.querySelectorAll(`table[aria-label="${l}"] tbody tr`)].map((tr) => [...tr.children].map((c) => c.textContent)), label);

/** chartColumn sums one column of a chart's data table (one render: read at once). */
const chartColumn = (page, title, column) =>
  page.evaluate(
    ({ title, column }) => {
      const fig = [...document.querySelectorAll('#traffic-charts figure')].find((f) => f.querySelector('figcaption').textContent === title);
      const table = fig.querySelector('table');
      const i = [...table.querySelectorAll('thead th')].findIndex((th) => th.textContent === column);
      return {
        sum: [...table.querySelectorAll('tbody tr')].reduce((s, tr) => s + (Number(tr.children[i].textContent) || 0), 0),
        label: fig.querySelector('svg').getAttribute('aria-label'),
      };
    },
    { title, column },
  );

const ms = (v) => (v === null || v === undefined ? '\u2013' : `${formatNumber(v)} ms`);

describe('the Traffic view of one hub', () => {
  let hub;
  let proxy;
  before(async () => {
    [hub, browser] = await Promise.all([startHub(), launch()]);
    proxy = await startCspProxy(hub.addr, STRICT_CSP);
  });
  after(async () => {
    await browser?.close();
    await proxy?.close();
    await hub?.stop();
  });

  it('shows known calls, some failing, in the figures, charts, tables and call log, as switchboard://stats counts them', async () => {
    const page = await newPage(proxy.url);
    await openTraffic(page);
    assert.equal(await figure(page, 'Calls'), '0');
    await page.getByText('No calls yet: they appear here as clients make them.').waitFor();

    const c = await caller(hub.wsURL, 'traffic-e2e', '3.2');
    for (let i = 0; i < 3; i++) assert.equal((await c.callTool('demo__add', { a: i, b: 1 })).structuredContent.sum, i + 1);
    await assert.rejects(c.callTool('demo__add', { a: 'x', b: 1 }), (err) => err instanceof RpcError && err.code === -32602);
    await assert.rejects(c.callTool('demo__nope', {}), (err) => err instanceof RpcError && err.code === -32602);

    // The figures: five calls, two failed (one refused by the hub itself).
    await poll(() => figure(page, 'Calls'), (v) => v === '5', { what: 'the Calls figure to reach 5' });
    const doc = await statsDoc(page);
    assert.equal(doc.hub.total, 5);
    assert.equal(await figure(page, 'Errors'), String(doc.hub.errorsTotal));
    assert.equal(doc.hub.errorsTotal, 2);
    assert.equal(await figure(page, 'p50'), ms(doc.hub.p50Ms));
    assert.equal(await figure(page, 'p99'), ms(doc.hub.p99Ms));
    const add = doc.servers.find((s) => s.name === 'demo').items.find((it) => it.name === 'add');
    assert.deepEqual(add.outcomes, { ok: 3, '-32602': 1 });

    // The busiest tools: add first, its numbers those of the resource.
    const busiest = await poll(() => rowCells(page, 'Busiest tools'), (rows) => rows.length > 0 && rows[0][6] === '4', { what: 'add in the busiest tools' });
    assert.deepEqual(busiest[0].slice(0, 2), ['add', 'demo']);
    assert.deepEqual(busiest[0].slice(4), [ms(add.p50Ms), ms(add.p99Ms), String(add.total), String(add.errorsTotal)]);

    // Errors by code over the window.
    const errorRows = await page.evaluate(() => [...document.querySelectorAll('#traffic-errors tbody tr')].map((tr) => [...tr.children].map((c) => c.textContent)));
    assert.deepEqual(
      errorRows.map((r) => r.slice(0, 3)),
      [['-32602', 'invalid params', '2']],
    );

    // The charts: the calls per second of the last minute add up to the
    // calls, and say so in their text alternative.
    const rate = await poll(() => chartColumn(page, 'Whole hub: calls and errors per second', 'calls'), (r) => Math.round(r.sum) === 5, { what: 'the chart to hold 5 calls' });
    assert.equal(Math.round(rate.sum), doc.hub.series.calls.reduce((a, b) => a + b, 0));
    assert.match(rate.label, /^Whole hub: calls and errors per second, over the last \d+ s: calls [\d.]+ \/s now, at most [\d.]+; errors /);
    const errs = await chartColumn(page, 'Whole hub: calls and errors per second', 'errors');
    assert.equal(Math.round(errs.sum), 2);

    // The call log: five calls, newest first, filtered by result and server.
    const log = await poll(() => rowCells(page, 'Call log'), (rows) => rows.length === 5, { what: 'five calls in the log' });
    assert.deepEqual(
      log.map((r) => [r[1], r[2], r[4]]),
      [
        ['traffic-e2e', 'demo__nope', 'error -32602 (invalid params)'],
        ['traffic-e2e', 'demo \u203a add', 'error -32602 (invalid params)'],
        ['traffic-e2e', 'demo \u203a add', 'ok'],
        ['traffic-e2e', 'demo \u203a add', 'ok'],
        ['traffic-e2e', 'demo \u203a add', 'ok'],
      ],
    );
    await page.getByLabel('Result').selectOption('-32602');
    assert.equal((await rowCells(page, 'Call log')).length, 2);
    await page.getByLabel('Result').selectOption('*');
    await page.getByLabel('Server', { exact: true }).selectOption('demo');
    assert.equal((await rowCells(page, 'Call log')).length, 4);
    await page.getByLabel('Server', { exact: true }).selectOption('*');
    assert.equal(await page.locator('#traffic-calls tr.call-args').count(), 0, 'no arguments unless asked for');

    // The clients: the caller, by its name and version.
    const clientRows = await poll(() => rowCells(page, 'Clients'), (rows) => rows.some((r) => r[0] === 'traffic-e2e 3.2'), { what: 'the caller among the clients' });
    const row = clientRows.find((r) => r[0] === 'traffic-e2e 3.2');
    assert.deepEqual(row.slice(1, 3), ['websocket', 'anonymous']);

    // One tool on demand: its own figures and charts.
    await page.locator('table[aria-label="Busiest tools"]').getByRole('button', { name: 'add' }).click();
    await poll(() => figure(page, 'Calls'), (v) => v === '4', { what: "add's own Calls figure" });
    await page.locator('#traffic-charts figcaption').filter({ hasText: 'add on demo: latency' }).waitFor();
    await page.getByLabel('Show', { exact: true }).selectOption('');

    // Arguments, when asked for (anonymous is admin here), for the calls
    // made while they are watched.
    await page.getByLabel('Show arguments').check();
    assert.equal((await c.callTool('demo__add', { a: 20, b: 22 })).structuredContent.sum, 42);
    await page.locator('#traffic-calls tr.call-args').filter({ hasText: '{"a":20,"b":22}' }).waitFor();

    // Screenshots: 1280x800 and 390 px wide, light and dark.
    const toTraffic = () => page.evaluate(() => window.scrollTo(0, document.querySelector('.tabs-panel').getBoundingClientRect().top + window.scrollY - 90));
    await toTraffic();
    await page.screenshot({ path: path.join(ARTIFACTS, 'traffic-1280x800-light.png') });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: path.join(ARTIFACTS, 'traffic-1280x800-dark.png') });
    await page.setViewportSize({ width: 390, height: 844 });
    await poll(() => horizontalOverflow(page), (v) => v === 0, { what: 'no horizontal scroll at 390 px' });
    await toTraffic();
    await page.screenshot({ path: path.join(ARTIFACTS, 'traffic-390-dark.png') });
    await page.screenshot({ path: path.join(ARTIFACTS, 'traffic-390-dark-full.png'), fullPage: true });
    await page.emulateMedia({ colorScheme: 'light' });
    await toTraffic();
    await page.screenshot({ path: path.join(ARTIFACTS, 'traffic-390-light.png') });
    await page.screenshot({ path: path.join(ARTIFACTS, 'traffic-390-light-full.png'), fullPage: true });
    const [tabRight, listRight] = await page.evaluate(() => [document.querySelector('#tab-traffic'), document.querySelector('.tablist')].map((el) => el.getBoundingClientRect().right));
    assert.ok(tabRight <= listRight, `the Traffic tab shows whole at 390 px (its right edge at ${tabRight}, the tabs' at ${listRight})`);
    await poll(
      () => page.evaluate(() => document.querySelector('#traffic-charts svg').getBoundingClientRect().width),
      (w) => w > 250 && w <= 390,
      { what: 'the charts to fit 390 px' },
    );
  });
});

describe('the Traffic view of two hubs sharing Redis', () => {
  let redis;
  let a;
  let b;
  let proxy;
  before(async () => {
    redis = await startRedis();
    [a, b, browser] = await Promise.all([
      startHub({ args: ['--redis', redis.url] }),
      startHub({ demo: false, args: ['--redis', redis.url] }),
      launch(),
    ]);
    proxy = await startCspProxy(a.addr, STRICT_CSP);
  });
  after(async () => {
    await browser?.close();
    await proxy?.close();
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
  });

  it("shows the second instance's calls, clients and call log", async () => {
    const page = await newPage(proxy.url);
    await openTraffic(page);
    // B hears that A's dashboard watches and sends its share.
    const instances = await poll(() => rowCells(page, 'Instances'), (rows) => rows.length === 2, { ms: 15000, what: 'both instances in the table' });
    assert.equal(instances.filter((r) => r[0].endsWith('this one')).length, 1);

    const onB = await caller(b.wsURL, 'on-b', '1.0');
    await poll(async () => (await onB.listTools()).tools.map((t) => t.name), (names) => names.includes('demo__add'), { ms: 15000, what: "B to list A's demo server" });
    // B logs calls for A's dashboard once it has heard that it watches:
    // echo until one shows, then make the known calls.
    let warm = 0;
    await poll(
      async () => {
        await onB.callTool('demo__echo', { text: 'warm-up' });
        warm += 1;
        return rowCells(page, 'Call log');
      },
      (rs) => rs.some((r) => r[1] === 'on-b'),
      { interval: 300, what: "B's first call in A's log" },
    );
    for (let i = 0; i < 2; i++) await onB.callTool('demo__add', { a: 1, b: i });

    const doc = await poll(() => statsDoc(page), (d) => d.instances.find((i) => !i.self)?.total === warm + 2, { what: "B's calls in A's switchboard://stats" });
    const bID = doc.instances.find((i) => !i.self).id;
    assert.equal(doc.instances.find((i) => i.self).total, 0, "A's clients made no call");
    const demo = doc.servers.find((s) => s.name === 'demo');
    assert.equal(demo.items.find((it) => it.name === 'add').total, 2);
    const rows = await poll(() => rowCells(page, 'Instances'), (rs) => rs.some((r) => r[0].startsWith(bID.slice(0, 8)) && r[7] === String(warm + 2)), {
      what: "B's row to count its calls",
    });
    const bRow = rows.find((r) => r[0].startsWith(bID.slice(0, 8)));
    assert.equal(bRow[1], '1', "B's one client");
    await poll(() => figure(page, 'Calls'), (v) => v === String(doc.hub.total), { what: 'the Calls figure to match the resource' });
    assert.equal(doc.hub.total, warm + 2);

    const log = await poll(() => rowCells(page, 'Call log'), (rs) => rs.filter((r) => r[1] === 'on-b' && r[2] === 'demo \u203a add').length === 2, { what: "B's calls in A's log" });
    assert.deepEqual(log.slice(0, 2).map((r) => [r[1], r[2], r[4]]), [
      ['on-b', 'demo \u203a add', 'ok'],
      ['on-b', 'demo \u203a add', 'ok'],
    ]);
    const clientRows = await poll(() => rowCells(page, 'Clients'), (rs) => rs.some((r) => r[0] === 'on-b 1.0'), { what: "B's client in A's list" });
    assert.equal(clientRows.find((r) => r[0] === 'on-b 1.0')[3], bID.slice(0, 8));
    await page.evaluate(() => window.scrollTo(0, document.querySelector('.tabs-panel').getBoundingClientRect().top + window.scrollY - 90));
    await page.screenshot({ path: path.join(ARTIFACTS, 'traffic-two-instances-1280x800.png') });
  });
});

describe('the call log of a hub that traces', () => {
  let hub;
  before(async () => {
    // Spans go nowhere here (nothing listens on the endpoint): they are
    // dropped and counted, and every call still has its trace id.
    const endpoint = process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = 'http://127.0.0.1:9';
    try {
      [hub, browser] = await Promise.all([startHub({ args: ['--tracing', '--tracing-ui-url', 'http://jaeger.example:16686'] }), launch()]);
    } finally {
      if (endpoint === undefined) delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
      else process.env.OTEL_EXPORTER_OTLP_ENDPOINT = endpoint;
    }
  });
  after(async () => {
    await browser?.close();
    await hub?.stop();
  });

  it("links each call to its trace in the tracing UI", async () => {
    const page = await newPage(hub.httpURL);
    await openTraffic(page);
    const c = await caller(hub.wsURL, 'traced', '1.0');
    await c.callTool('demo__add', { a: 1, b: 2 });
    const rows = await poll(() => rowCells(page, 'Call log'), (rs) => rs.length === 1, { what: 'the call in the log' });
    const headers = await page.evaluate(() => [...document.querySelectorAll('table[aria-label="Call log"] thead th')].map((th) => th.textContent));
    assert.equal(headers.at(-1), 'Trace');
    const doc = await page.evaluate(async () => JSON.parse((await window.switchboard.client.readResource('switchboard://calls')).contents[0].text));
    const traceId = doc.calls.at(-1).traceId;
    assert.match(traceId, /^[0-9a-f]{32}$/);
    assert.equal(rows[0].at(-1), traceId.slice(0, 8));
    const link = page.locator('table[aria-label="Call log"] td.trace a');
    assert.equal(await link.getAttribute('href'), `http://jaeger.example:16686/trace/${traceId}`);
    assert.equal(await link.getAttribute('rel'), 'noopener noreferrer');
  });
});
