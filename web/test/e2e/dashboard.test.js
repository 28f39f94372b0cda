// End-to-end tests of the dashboard: Debian's chromium, driven by
// playwright-core, against the real hub (bin/hub --demo) serving the page
// under the strict Content-Security-Policy "default-src 'self'; connect-src
// 'self' ws: wss:".
import { describe, it, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { startHub, startDemo, startConnect, tokensFile } from '../helpers/hub.js';
import { startFakeServer, FORM_SCHEMA } from '../helpers/fake-server.js';
import { launch, openDashboard, poll, horizontalOverflow, ARTIFACTS, STRICT_CSP } from '../helpers/browser.js';
import { startCspProxy } from '../helpers/csp-proxy.js';
import { ROOT } from '../helpers/hub.js';
import { freePort } from '../helpers/redis.js';

const { startAuthorizationServer } = await import(path.join(ROOT, 'e2e', 'oauth', 'flow.mjs'));

/** tool returns the list item of a tool, found by its aggregated name. */
const tool = (page, name) =>
  page.getByRole('list', { name: 'Tools' }).getByRole('listitem').filter({ has: page.getByText(name, { exact: true }) });

/** openTool expands a tool's card and returns it. */
async function openTool(page, name) {
  const li = tool(page, name);
  const details = li.locator('details').first();
  if ((await details.getAttribute('open')) === null) await li.locator('summary').first().click();
  await li.getByRole('button', { name: 'Call' }).waitFor();
  return li;
}

/** connected waits until the status says the dashboard is connected and the demo tools are listed. */
async function connected(page, tools = ['demo__add']) {
  await page.getByRole('status').filter({ hasText: /^\s*Connected/ }).waitFor();
  await tab(page, 'Tools'); // the dashboard reopens the last tab used
  for (const t of tools) await tool(page, t).waitFor();
}

/** tab selects a tab (Tools, Resources, Prompts). */
async function tab(page, name) {
  await page.getByRole('tab', { name: new RegExp(`^${name}`) }).click();
}

/**
 * readability, run in the page on an element, returns the WCAG contrast
 * ratio of its text colour against the first opaque background behind it,
 * and that background.
 * @param {Element} el
 */
function readability(el) {
  const rgb = (s) => s.match(/[\d.]+/g).map(Number);
  const luminance = ([r, g, b]) => {
    const lin = (c) => ((c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  let background = 'rgb(255, 255, 255)';
  for (let e = el; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    const v = rgb(c);
    if (v.length < 4 || v[3] === 1) {
      background = c;
      break;
    }
  }
  const [a, b] = [luminance(rgb(getComputedStyle(el).color)), luminance(rgb(background))].sort((x, y) => y - x);
  return { ratio: (a + 0.05) / (b + 0.05), background };
}

let browser;
const pages = [];
async function newPage(url) {
  const page = await openDashboard(browser.context, url);
  pages.push(page);
  return page;
}

afterEach(async () => {
  const problems = [];
  for (const page of pages.splice(0)) {
    problems.push(...page.problems);
    await page.close();
  }
  // No CSP violation, console error or uncaught exception in any test.
  assert.deepEqual(problems, [], 'the page logged problems');
});

describe('dashboard with the demo server', () => {
  let hub;
  let proxy; // the hub, with the strict CSP added to every response
  let url;
  before(async () => {
    [hub, browser] = await Promise.all([startHub(), launch()]);
    proxy = await startCspProxy(hub.addr, STRICT_CSP);
    url = proxy.url;
  });
  after(async () => {
    await browser?.close();
    await proxy?.close();
    await hub?.stop();
  });

  it('connects through the form and shows the connection state and the servers', async () => {
    const page = await newPage(`${url}?autoconnect=0`);
    await page.getByRole('status').filter({ hasText: 'Not connected' }).waitFor();
    const hubURL = page.getByLabel('Hub URL');
    assert.equal(await hubURL.inputValue(), `ws://${proxy.addr}/mcp`, 'the hub URL defaults to the page host + /mcp');
    await page.getByLabel('Token').fill('not-checked-yet');
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await connected(page, ['demo__add', 'demo__ask', 'demo__echo', 'demo__increment', 'demo__slow']);
    const servers = page.getByRole('list', { name: 'Servers' });
    const demo = servers.getByRole('listitem').filter({ has: page.getByText('demo', { exact: true }) });
    await demo.filter({ hasText: '1 replica' }).waitFor();
    await demo.filter({ hasText: 'Switchboard demo 1.0.0' }).waitFor();
    await page.getByRole('list', { name: 'Hub instances' }).getByRole('listitem').filter({ hasText: 'this instance' }).waitFor();
    assert.equal(await tool(page, 'demo__add').getByText('Add two numbers.').count(), 1, 'each tool shows its description');
    // Disconnect, then the state says so.
    await page.getByRole('button', { name: 'Disconnect' }).click();
    await page.getByRole('status').filter({ hasText: /^\s*Disconnected/ }).waitFor();
  });

  it('calls demo__add through the generated form and shows the result', async () => {
    const page = await newPage(url);
    await connected(page);
    const add = await openTool(page, 'demo__add');
    const a = add.getByLabel('a', { exact: true });
    assert.equal(await a.getAttribute('required'), '', 'a is required');
    assert.equal(await a.getAttribute('type'), 'number');
    await a.fill('2');
    await add.getByLabel('b', { exact: true }).fill('40');
    await add.getByRole('button', { name: 'Call' }).click();
    await add.locator('.content-text').filter({ hasText: /^42$/ }).waitFor();
    const tree = add.locator('.json-tree').filter({ hasText: 'structuredContent' });
    await tree.filter({ hasText: 'sum: 42' }).waitFor();
    assert.equal(await tree.locator('details').first().getAttribute('open'), '', 'the JSON tree starts open');
    await tree.locator('summary').first().click();
    assert.equal(await tree.locator('details').first().getAttribute('open'), null, 'and collapses');
    await add.getByRole('status').filter({ hasText: /^Done in/ }).waitFor();

    // The raw JSON fallback carries the same arguments.
    await add.getByRole('button', { name: 'Edit as JSON' }).click();
    const raw = add.getByLabel('Arguments (JSON)');
    assert.deepEqual(JSON.parse(await raw.inputValue()), { a: 2, b: 40 });
    await raw.fill('{"a": 1.5, "b": 1}');
    await add.getByRole('button', { name: 'Call' }).click();
    await add.locator('.content-text').filter({ hasText: /^2\.5$/ }).waitFor();
  });

  it('shows a protocol error clearly', async () => {
    const page = await newPage(url);
    await connected(page);
    const add = await openTool(page, 'demo__add');
    await add.getByRole('button', { name: 'Edit as JSON' }).click();
    await add.getByLabel('Arguments (JSON)').fill('{"a": "x", "b": 1}');
    await add.getByRole('button', { name: 'Call' }).click();
    await add.getByRole('alert').filter({ hasText: /Error -32602/ }).waitFor();
  });

  it('shows the progress bar of demo__slow moving', async () => {
    const page = await newPage(url);
    await connected(page);
    const slow = await openTool(page, 'demo__slow');
    assert.equal(await slow.getByLabel('steps', { exact: true }).inputValue(), '10', 'defaults fill the form');
    await slow.getByLabel('steps', { exact: true }).fill('8');
    await slow.getByLabel('delayMs', { exact: true }).fill('250');
    await slow.getByRole('button', { name: 'Call' }).click();
    const bar = slow.getByRole('progressbar');
    const seen = new Set();
    await poll(
      async () => {
        const v = await bar.getAttribute('aria-valuenow');
        if (v !== null) seen.add(Number(v));
        return [...seen];
      },
      (values) => values.length >= 3,
      { ms: 10000, what: 'three distinct progress values' },
    );
    const values = [...seen];
    assert.deepEqual(values, [...values].sort((x, y) => x - y), 'progress only grows');
    assert.equal(await bar.getAttribute('aria-valuemax'), '8');
    await slow.locator('.content-text').filter({ hasText: 'done after 8 steps' }).waitFor();
    assert.equal(await bar.getAttribute('aria-valuenow'), '8');
  });

  it('cancels a call', async () => {
    const page = await newPage(url);
    await connected(page);
    const slow = await openTool(page, 'demo__slow');
    await slow.getByLabel('steps', { exact: true }).fill('100');
    await slow.getByLabel('delayMs', { exact: true }).fill('100');
    const cancel = slow.getByRole('button', { name: 'Cancel' });
    assert.equal(await cancel.isDisabled(), true, 'Cancel is disabled while nothing runs');
    await slow.getByRole('button', { name: 'Call' }).click();
    await poll(() => slow.getByRole('progressbar').getAttribute('aria-valuenow'), (v) => Number(v) >= 1, { what: 'the first progress report' });
    await cancel.click();
    await slow.getByRole('status').filter({ hasText: /^Cancelled after/ }).waitFor();
    assert.equal(await slow.getByRole('button', { name: 'Call' }).isEnabled(), true);
    assert.equal(await cancel.isDisabled(), true);
    assert.equal(await slow.locator('.content-text').count(), 0, 'no result after a cancel');
    // The hub forwarded the cancel: the demo replica has nothing in flight.
    await page.getByRole('list', { name: 'Servers' }).getByText(/0 in flight/).waitFor();
  });

  it('subscribes to demo://clock and shows live updates, then unsubscribes', async () => {
    const page = await newPage(url);
    await connected(page);
    await tab(page, 'Resources');
    const clock = page.getByRole('list', { name: 'Resources' }).getByRole('listitem').filter({ has: page.getByText('demo://clock', { exact: true }) });
    await clock.getByRole('button', { name: 'Read' }).click();
    const first = await clock.locator('pre.text').textContent();
    assert.ok(!Number.isNaN(Date.parse(first)), `the clock reads as a time: ${first}`);
    await clock.getByRole('button', { name: 'Subscribe', exact: true }).click();
    await clock.getByRole('button', { name: 'Unsubscribe', exact: true }).waitFor();
    const live = clock.locator('.live');
    await live.filter({ hasText: /Live/ }).waitFor();
    const updates = await poll(async () => Number(await live.getAttribute('data-updates')), (n) => n >= 2, { ms: 6000, what: 'two demo://clock updates' });
    assert.ok(updates >= 2);
    assert.match(await live.textContent(), /updated \d\d:\d\d:\d\d/, 'the indicator shows the last update time');
    // The open contents follow the updates.
    await poll(() => clock.locator('pre.text').textContent(), (t) => t !== first, { ms: 4000, what: 'the contents to refresh' });
    // The log shows the notifications.
    await page.getByRole('log').getByText('notifications/resources/updated').first().waitFor();
    await clock.getByRole('button', { name: 'Unsubscribe', exact: true }).click();
    await clock.getByRole('button', { name: 'Subscribe', exact: true }).waitFor();
    assert.equal(await live.isHidden(), true);
  });

  it('reads a resource template and gets a prompt', async () => {
    const page = await newPage(url);
    await connected(page);
    await tab(page, 'Resources');
    const greeting = page.getByRole('list', { name: 'Resource templates' }).getByRole('listitem').filter({ hasText: 'demo://greeting/{name}' });
    await greeting.getByLabel('name', { exact: true }).fill('Ada Lovelace');
    await greeting.getByRole('button', { name: 'Read' }).click();
    await greeting.locator('pre.text').filter({ hasText: 'Hello, Ada%20Lovelace!' }).or(greeting.locator('pre.text').filter({ hasText: 'Hello, Ada Lovelace!' })).waitFor();

    await tab(page, 'Prompts');
    const greet = page.getByRole('list', { name: 'Prompts' }).getByRole('listitem').filter({ has: page.getByText('demo__greet', { exact: true }) });
    await greet.locator('summary').click();
    await greet.getByLabel('name', { exact: true }).fill('Ada');
    await greet.getByLabel('style', { exact: true }).fill('formal');
    await greet.getByRole('button', { name: 'Get prompt' }).click();
    await greet.locator('.message').filter({ hasText: 'Write a formal greeting for Ada.' }).waitFor();
    await greet.locator('.role').filter({ hasText: 'user' }).waitFor();
  });

  it('answers a sampling request (demo__ask) in a dialog', async () => {
    const page = await newPage(url);
    await connected(page);
    const ask = await openTool(page, 'demo__ask');
    await ask.getByLabel('question', { exact: true }).fill('What colour is the sky?');
    await ask.getByRole('button', { name: 'Call' }).click();
    const dialog = page.getByRole('dialog', { name: 'Sampling request' });
    await dialog.waitFor();
    await dialog.getByText('What colour is the sky?').waitFor();
    await dialog.getByText('200', { exact: true }).waitFor(); // maxTokens
    await dialog.getByLabel('Response').fill('Blue, mostly.');
    await page.screenshot({ path: path.join(ARTIFACTS, 'sampling-dialog-1280x800.png') });
    await dialog.getByRole('button', { name: 'Send response' }).click();
    await dialog.waitFor({ state: 'detached' });
    await ask.locator('.content-text').filter({ hasText: /^Blue, mostly\.$/ }).waitFor();

    // Declining fails the call with the reason.
    await ask.getByRole('button', { name: 'Call' }).click();
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Decline' }).click();
    await ask.getByRole('alert').filter({ hasText: /declined/ }).waitFor();
  });

  it('filters and pauses the notification log', async () => {
    const page = await newPage(url);
    await connected(page);
    await tab(page, 'Resources');
    const clock = page.getByRole('list', { name: 'Resources' }).getByRole('listitem').filter({ has: page.getByText('demo://clock', { exact: true }) });
    await clock.getByRole('button', { name: 'Subscribe', exact: true }).click();
    const log = page.getByRole('log');
    const entries = log.locator('.log-entry');
    await log.getByText('"uri":"demo://clock"').first().waitFor();

    await page.getByLabel('Filter the log').fill('demo://clock');
    const visible = () => entries.evaluateAll((els) => els.filter((e) => !e.hidden).map((e) => e.textContent));
    const shown = await visible();
    assert.ok(shown.length > 0 && shown.every((t) => t.includes('demo://clock')), `only matching entries: ${shown}`);

    const pause = page.getByRole('button', { name: 'Pause' });
    await pause.click();
    assert.equal(await page.getByRole('button', { name: /^Resume/ }).getAttribute('aria-pressed'), 'true');
    const before = await entries.count();
    await page.getByRole('button', { name: /^Resume \(\d+ new\)/ }).waitFor({ timeout: 5000 });
    assert.equal(await entries.count(), before, 'nothing is added while paused');
    await page.getByRole('button', { name: /^Resume/ }).click();
    assert.ok((await entries.count()) > before, 'held entries are added on resume');
    await page.getByRole('button', { name: 'Pause' }).waitFor();
    await clock.getByRole('button', { name: 'Unsubscribe', exact: true }).click();
  });

  it('sees a server disappear and reappear live', async () => {
    const page = await newPage(url);
    await connected(page);
    const servers = page.getByRole('list', { name: 'Servers' });
    const demo2 = servers.getByRole('listitem').filter({ has: page.getByText('demo2', { exact: true }) });
    let proc = await startDemo(hub, 'demo2');
    try {
      await demo2.waitFor();
      await tool(page, 'demo2__add').waitFor();
      await proc.stop('SIGKILL');
      await demo2.waitFor({ state: 'detached' });
      await tool(page, 'demo2__add').waitFor({ state: 'detached' });
      assert.equal(await servers.getByRole('listitem').filter({ has: page.getByText('demo', { exact: true }) }).count(), 1, 'demo stays');
      proc = await startDemo(hub, 'demo2');
      await demo2.waitFor();
      await tool(page, 'demo2__add').waitFor();
      await page.getByRole('log').getByText('notifications/tools/list_changed').first().waitFor();
    } finally {
      await proc.stop('SIGKILL');
    }
    await demo2.waitFor({ state: 'detached' });
  });

  it('shows a server whose child keeps exiting, and why, readable at 390 px in both themes', async () => {
    const page = await newPage(url);
    await connected(page);
    // A real connector whose child exits at once: the hub shows the reason
    // the connector closed with, which a person can act on.
    const proc = await startConnect(hub, ['--name', 'flaky', '--', 'sh', '-c', 'echo broken >&2; exit 3']);
    try {
      const flaky = page
        .getByRole('list', { name: 'Left lately' })
        .getByRole('listitem')
        .filter({ has: page.getByText('flaky', { exact: true }) });
      await flaky.filter({ hasText: /server exited with status 3; restarting in \S+ \(1011 server error\)/ }).waitFor();
      await flaky.filter({ hasText: /\d+ (s|min) ago/ }).waitFor();
      assert.equal(
        await page.getByRole('list', { name: 'Servers' }).getByText('flaky', { exact: true }).count(),
        0,
        'a departed server is not listed among the connected ones',
      );
      await page.setViewportSize({ width: 390, height: 844 });
      const backgrounds = {};
      for (const colorScheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme });
        const { ratio, background } = await poll(
          () => flaky.locator('.departed-reason').evaluate(readability),
          (r) => !Object.values(backgrounds).includes(r.background),
          { what: `the ${colorScheme} theme to apply` },
        );
        backgrounds[colorScheme] = background;
        assert.equal(await horizontalOverflow(page), 0, `no horizontal scroll at 390 px (${colorScheme})`);
        assert.ok(ratio >= 4.5, `the reason is readable in the ${colorScheme} theme: contrast ${ratio.toFixed(2)} on ${background}`);
        await page.locator('section[aria-labelledby="servers-title"]').screenshot({ path: path.join(ARTIFACTS, `departed-390-${colorScheme}.png`) });
      }
    } finally {
      await proc.stop();
    }
  });

  it('shows the URIs a second server lists and the first one serves', async () => {
    const page = await newPage(url);
    await connected(page);
    const proc = await startDemo(hub, 'demo3');
    try {
      const conflicts = page.getByRole('list', { name: 'URI conflicts' }).getByRole('listitem');
      await conflicts
        .filter({ has: page.getByText('demo://counter', { exact: true }) })
        .filter({ hasText: 'Resource served by demo; also listed by demo3, which does not serve it' })
        .waitFor();
    } finally {
      await proc.stop('SIGKILL');
    }
    await page.getByRole('list', { name: 'URI conflicts' }).waitFor({ state: 'detached' });
  });

  it('fits 390 px without horizontal scrolling, and takes screenshots at both widths', async () => {
    const page = await newPage(url);
    await connected(page);
    // Something in every part of the page: a result, a subscription, log entries.
    const add = await openTool(page, 'demo__add');
    await add.getByLabel('a', { exact: true }).fill('2');
    await add.getByLabel('b', { exact: true }).fill('40');
    await add.getByRole('button', { name: 'Call' }).click();
    await add.locator('.json-tree').filter({ hasText: 'sum: 42' }).waitFor();
    const slow = await openTool(page, 'demo__slow');
    await slow.getByLabel('steps', { exact: true }).fill('4');
    await slow.getByLabel('delayMs', { exact: true }).fill('50');
    await slow.getByRole('button', { name: 'Call' }).click();
    await slow.locator('.content-text').filter({ hasText: 'done after 4 steps' }).waitFor();
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-1280x800.png') });
    assert.equal(await horizontalOverflow(page), 0, 'no horizontal scroll at 1280 px');

    await page.setViewportSize({ width: 390, height: 844 });
    for (const name of ['Tools', 'Resources', 'Prompts']) {
      await tab(page, name);
      if (name === 'Resources') {
        const clock = page.getByRole('list', { name: 'Resources' }).getByRole('listitem').filter({ has: page.getByText('demo://clock', { exact: true }) });
        await clock.getByRole('button', { name: 'Read' }).click();
        await clock.getByRole('button', { name: 'Subscribe', exact: true }).click();
        await clock.locator('.live').filter({ hasText: /updated/ }).waitFor();
        const servers = page.getByRole('list', { name: 'Resources' }).getByRole('listitem').filter({ has: page.getByText('switchboard://servers', { exact: true }) });
        await servers.getByRole('button', { name: 'Read' }).click();
        await servers.locator('.json-tree').waitFor();
        await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-390-resources.png'), fullPage: true });
      }
      assert.equal(await horizontalOverflow(page), 0, `no horizontal scroll at 390 px on the ${name} tab`);
    }
    await tab(page, 'Tools');
    await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-390.png'), fullPage: true });
  });
});

describe('dashboard with a scripted server (rich content, elicitation, forms, roots)', () => {
  let hub;
  let fake;
  let proxy;
  let url;
  before(async () => {
    [hub, browser] = await Promise.all([startHub({ demo: false }), launch({ colorScheme: 'dark' })]);
    fake = await startFakeServer(hub);
    proxy = await startCspProxy(hub.addr, STRICT_CSP);
    url = proxy.url;
  });
  after(async () => {
    await browser?.close();
    await proxy?.close();
    await fake?.close();
    await hub?.stop();
  });

  it('renders text, image, audio, resource links, embedded resources and structuredContent', async () => {
    // The strict CSP blocks data: URLs for images and audio; the hub's own
    // policy allows them, so this page comes straight from the hub.
    const page = await newPage(hub.httpURL);
    await connected(page, ['fake__rich']);
    const rich = await openTool(page, 'fake__rich');
    await rich.getByRole('button', { name: 'Call' }).click();
    await rich.locator('.content-text').filter({ hasText: 'Some text' }).waitFor();
    const img = rich.getByRole('img', { name: 'Image result (image/png)' });
    await poll(() => img.evaluate((el) => el.complete && el.naturalWidth), (w) => w === 8, { what: 'the 8x8 image to load' });
    await rich.locator('audio[controls]').waitFor();
    await rich.getByText('The demo counter').waitFor();
    await rich.locator('.content-resource').filter({ hasText: 'fake://embedded' }).filter({ hasText: 'embedded body' }).waitFor();
    const tree = rich.locator('.json-tree').filter({ hasText: 'structuredContent' });
    await tree.filter({ hasText: 'deep: true' }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'rich-content-dark-1280.png') });

    const fail = await openTool(page, 'fake__fail');
    await fail.getByRole('button', { name: 'Call' }).click();
    await fail.getByRole('alert').filter({ hasText: 'The tool reported an error' }).filter({ hasText: 'it went wrong' }).waitFor();
    await fail.getByRole('status').filter({ hasText: /^Failed in/ }).waitFor();
  });

  it('under the strict CSP, says why an image cannot be shown instead of breaking', async () => {
    const page = await newPage(url);
    await connected(page, ['fake__rich']);
    const rich = await openTool(page, 'fake__rich');
    await rich.getByRole('button', { name: 'Call' }).click();
    await rich.getByText(/This image \(image\/png\) could not be shown/).waitFor();
    // Chromium reports the blocked data: URLs; those are the expected problems.
    page.problems = page.problems.filter((p) => !(p.includes("'data:") && p.includes('Content Security Policy')));
  });

  it('generates a form from inputSchema: defaults, enum, boolean, nested object, array, required', async () => {
    const page = await newPage(url);
    await connected(page, ['fake__form']);
    const form = await openTool(page, 'fake__form');
    assert.equal(await form.getByLabel('title', { exact: true }).inputValue(), 'untitled');
    assert.equal(await form.getByLabel('count', { exact: true }).inputValue(), '3');
    assert.equal(await form.getByLabel('enabled', { exact: true }).isChecked(), true);
    const color = form.getByLabel('color', { exact: true });
    assert.equal(await color.evaluate((el) => el.tagName), 'SELECT');
    assert.deepEqual(await color.locator('option').allTextContents(), ['red', 'green', 'blue']);
    assert.equal(await color.locator('option:checked').textContent(), 'green');
    await color.selectOption({ label: 'blue' });
    await form.getByLabel('ratio', { exact: true }).fill('0.25');
    await form.getByLabel('enabled', { exact: true }).uncheck();
    const owner = form.getByRole('group', { name: /owner/ });
    await owner.getByLabel('name', { exact: true }).fill('Ada');
    await owner.getByLabel('age', { exact: true }).fill('36');
    const tags = form.getByRole('group', { name: /tags/ });
    await tags.getByRole('button', { name: 'Add tags item' }).click();
    await tags.getByLabel('tags[0]', { exact: true }).fill('x');
    await tags.getByRole('button', { name: 'Add tags item' }).click();
    await tags.getByLabel('tags[1]', { exact: true }).fill('y');
    await tags.getByRole('button', { name: 'Add tags item' }).click();
    await tags.getByLabel('tags[2]', { exact: true }).fill('z');
    await tags.getByRole('button', { name: 'Remove tags[1]' }).click();
    // Required: clearing title blocks the call (native validation).
    await form.getByLabel('title', { exact: true }).fill('');
    await form.getByRole('button', { name: 'Call' }).click();
    assert.equal(await form.getByLabel('title', { exact: true }).evaluate((el) => el.validity.valueMissing), true);
    assert.equal(await form.locator('.tool-result').count(), 0, 'no call without the required title');
    await form.getByLabel('title', { exact: true }).fill('Report');
    await form.getByRole('button', { name: 'Call' }).click();
    const result = form.locator('.tool-result');
    await result.waitFor();
    const sent = JSON.parse(await result.locator('.content-text').textContent());
    assert.deepEqual(sent, { title: 'Report', count: 3, ratio: 0.25, enabled: false, color: 'blue', owner: { name: 'Ada', age: 36 }, tags: ['x', 'z'] });
    assert.deepEqual(Object.keys(FORM_SCHEMA.properties), ['title', 'count', 'ratio', 'enabled', 'color', 'owner', 'tags']);
  });

  it('answers an elicitation request with a form generated from requestedSchema', async () => {
    const page = await newPage(url);
    await connected(page, ['fake__elicit']);
    const elicit = await openTool(page, 'fake__elicit');
    await elicit.getByLabel('message', { exact: true }).fill('Who are you?');
    await elicit.getByRole('button', { name: 'Call' }).click();
    const dialog = page.getByRole('dialog', { name: 'Information requested' });
    await dialog.getByText('Who are you?').waitFor();
    await dialog.getByLabel('nickname', { exact: true }).fill('zed');
    await dialog.getByLabel('age', { exact: true }).fill('7');
    await dialog.getByLabel('subscribe', { exact: true }).check();
    await dialog.getByLabel('plan', { exact: true }).selectOption({ label: 'Pro' });
    await dialog.getByRole('button', { name: 'Accept' }).click();
    await dialog.waitFor({ state: 'detached' });
    const res = elicit.locator('.tool-result .content-text');
    await res.waitFor();
    assert.deepEqual(JSON.parse(await res.textContent()), { action: 'accept', content: { nickname: 'zed', age: 7, subscribe: true, plan: 'pro' } });

    for (const [button, action] of [
      ['Decline', 'decline'],
      ['Cancel', 'cancel'],
    ]) {
      await elicit.getByRole('button', { name: 'Call' }).click();
      await dialog.waitFor();
      await dialog.getByRole('button', { name: button }).click();
      await elicit.locator('.tool-result .content-text').filter({ hasText: `"action":"${action}"` }).waitFor();
    }
  });

  it('edits roots and answers roots/list with them', async () => {
    const page = await newPage(url);
    await connected(page, ['fake__roots']);
    const rootsList = page.getByRole('list', { name: 'Roots' });
    for (const r of await rootsList.getByRole('button', { name: /^Remove root/ }).all()) await r.click();
    await page.getByLabel('Root URI').fill('file:///srv/project');
    await page.getByLabel('Root name').fill('project');
    await page.getByRole('button', { name: 'Add root' }).click();
    await page.getByLabel('Root URI').fill('file:///tmp');
    await page.getByRole('button', { name: 'Add root' }).click();
    await rootsList.getByText('file:///srv/project').waitFor();
    const roots = await openTool(page, 'fake__roots');
    await roots.getByRole('button', { name: 'Call' }).click();
    const res = roots.locator('.tool-result .content-text');
    await res.waitFor();
    assert.deepEqual(JSON.parse(await res.textContent()), { roots: [{ uri: 'file:///srv/project', name: 'project' }, { uri: 'file:///tmp' }] });
    await rootsList.getByRole('button', { name: 'Remove root file:///tmp' }).click();
    await roots.getByRole('button', { name: 'Call' }).click();
    await res.filter({ hasText: '{"roots":[{"uri":"file:///srv/project","name":"project"}]}' }).waitFor();
  });
});

describe('dashboard reconnecting by itself', () => {
  let hub;
  let proxy;
  before(async () => {
    [hub, browser] = await Promise.all([startHub(), launch()]);
    proxy = await startCspProxy(hub.addr, STRICT_CSP);
  });
  after(async () => {
    await browser?.close();
    await proxy?.close();
    await hub?.stop('SIGKILL');
  });

  it('shows the lost connection, reconnects when the hub is back and renews its subscriptions', async () => {
    const page = await newPage(proxy.url);
    await connected(page);
    await tab(page, 'Resources');
    const clock = page.getByRole('list', { name: 'Resources' }).getByRole('listitem').filter({ has: page.getByText('demo://clock', { exact: true }) });
    await clock.getByRole('button', { name: 'Subscribe', exact: true }).click();
    const live = clock.locator('.live');
    await poll(async () => Number(await live.getAttribute('data-updates')), (n) => n >= 1, { ms: 5000, what: 'a demo://clock update' });

    const { port } = hub;
    await hub.stop();
    await page.getByRole('status').filter({ hasText: /Connection lost.*Retrying in/ }).waitFor();
    await page.getByRole('list', { name: 'Servers' }).getByRole('listitem').first().waitFor(); // the last known state stays
    hub = await startHub({ port });
    await page.getByRole('status').filter({ hasText: /^\s*Connected/ }).waitFor({ timeout: 20000 });
    // The new hub instance is listed, and the clock's updates resume: the
    // client subscribed again on its own.
    await page.getByRole('list', { name: 'Hub instances' }).getByText(hub.process.lines.join('\n').match(/instance=(\w{8})/)[1]).waitFor();
    const before = Number(await live.getAttribute('data-updates'));
    await poll(async () => Number(await live.getAttribute('data-updates')), (n) => n >= before + 2, { ms: 6000, what: 'demo://clock updates after the reconnection' });
    await page.getByRole('log').getByText('open (reconnected, subscriptions renewed)').waitFor();
    // Chromium logs the refused connections while the hub was down.
    page.problems = page.problems.filter((p) => !/WebSocket connection to .* failed/.test(p));
  });
});

describe('dashboard with a hub that requires tokens', () => {
  let hub;
  let demo;
  let proxy;
  before(async () => {
    const file = tokensFile([{ name: 'ops', token: 'ops-secret', roles: ['admin'] }]);
    [hub, browser] = await Promise.all([startHub({ demo: false, args: ['--tokens', file] }), launch()]);
    demo = await startDemo(hub, 'demo', { token: 'ops-secret' });
    proxy = await startCspProxy(hub.addr, STRICT_CSP);
  });
  after(async () => {
    await browser?.close();
    await proxy?.close();
    await demo?.stop();
    await hub?.stop();
  });

  it('logs in with the token (a cookie, not a URL parameter) and stays logged in on reload', async () => {
    const page = await newPage(proxy.url);
    const sockets = [];
    page.on('websocket', (ws) => sockets.push(ws.url()));
    const status = page.getByRole('status').filter({ hasText: /^\s*Disconnected/ });
    await status.filter({ hasText: 'if the hub requires a token' }).waitFor();
    await page.getByLabel('Token').fill('not-the-token');
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await status.filter({ hasText: 'the hub does not know this token' }).waitFor();
    await page.getByLabel('Token').fill('ops-secret');
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await connected(page);
    const add = await openTool(page, 'demo__add');
    await add.getByLabel('a', { exact: true }).fill('1');
    await add.getByLabel('b', { exact: true }).fill('2');
    await add.getByRole('button', { name: 'Call' }).click();
    await add.locator('.content-text').filter({ hasText: /^3$/ }).waitFor();
    assert.ok(sockets.length > 0 && sockets.every((u) => !u.includes('token=')), `no token in WebSocket URLs: ${sockets}`);

    await page.reload();
    await connected(page);
    // Chromium logs the refused token-less WebSocket and the refused login (401s).
    page.problems = page.problems.filter((p) => !/WebSocket connection to .* failed|status of 401/.test(p));
  });
});

describe('dashboard behind an identity provider', () => {
  let as;
  let hub;
  let resource;
  before(async () => {
    as = await startAuthorizationServer();
    // The dashboard's client, registered as an operator would: a native
    // client, whose loopback redirect URI matches the hub's on any port.
    const client = await as.register({
      client_name: 'switchboard dashboard', application_type: 'native', token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/login/oauth/callback'], grant_types: ['authorization_code'], response_types: ['code'],
    });
    const port = await freePort();
    resource = `http://127.0.0.1:${port}/mcp`;
    [hub, browser] = await Promise.all([
      startHub({ port, args: ['--public-url', `http://127.0.0.1:${port}`, '--oauth-issuer', as.issuer, '--dashboard-client-id', client.client_id] }),
      launch(),
    ]);
  });
  after(async () => {
    await browser?.close();
    await hub?.stop();
    await as?.stop();
  });

  it('signs in through the provider (its login and consent pages) and comes back connected, the token in an HttpOnly cookie', async () => {
    const page = await newPage(hub.httpURL);
    const sockets = [];
    page.on('websocket', (ws) => sockets.push(ws.url()));
    await page.getByRole('status').filter({ hasText: 'if the hub requires a token' }).waitFor();
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('input[name="login"]').fill('dana'); // the provider's login page
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.getByRole('button', { name: 'Continue' }).click(); // its consent page
    await connected(page);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'switchboard_token');
    assert.ok(cookie, 'logged in');
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Strict');
    assert.ok(sockets.every((u) => !u.includes('token=')), `no token in WebSocket URLs: ${sockets}`);
    // Chromium logs the refused WebSocket before the login (a 401), and the
    // provider's favicon, which the test server has not (a 404).
    page.problems = page.problems.filter((p) => !/WebSocket connection to .* failed|status of 40[14]/.test(p));
  });

  it('lets a page\u2019s own switchboard.js carry an access token as a subprotocol (tokenVia), never in a URL', async () => {
    const machine = await as.machineClient('mcp:client');
    const token = await as.token(machine, resource, 'mcp:client');
    const page = await newPage(hub.httpURL);
    const sockets = [];
    page.on('websocket', (ws) => sockets.push(ws.url()));
    const sum = await page.evaluate(async ({ url, token }) => {
      const { SwitchboardClient } = await import('/switchboard.js');
      const client = new SwitchboardClient(url, { token, tokenVia: 'subprotocol', reconnect: false });
      await client.connect();
      try {
        return (await client.callTool('demo__add', { a: 20, b: 22 })).structuredContent.sum;
      } finally {
        client.close();
      }
    }, { url: hub.wsURL, token });
    assert.equal(sum, 42);
    assert.ok(sockets.includes(hub.wsURL), `the page's own WebSocket: ${sockets}`);
    assert.ok(sockets.every((u) => !u.includes('token=')), `no token in WebSocket URLs: ${sockets}`);
    // The dashboard itself, not signed in, is refused (a 401) meanwhile.
    page.problems = page.problems.filter((p) => !/WebSocket connection to .* failed|status of 40[14]/.test(p));
  });
});
