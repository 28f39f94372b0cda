// End-to-end tests of the dashboard's Catalog tab: Debian's chromium, driven
// by playwright-core, against the real hub (bin/hub --demo --catalog FILE)
// under the strict Content-Security-Policy. The tab shows each virtual
// server, its members and its effective names; when the file is rewritten
// with a mistake, it shows why the catalog was refused while the one in
// force stays; when it is rewritten again, the new names.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { startHub } from '../helpers/hub.js';
import { launch, openDashboard, horizontalOverflow, ARTIFACTS, STRICT_CSP } from '../helpers/browser.js';
import { startCspProxy } from '../helpers/csp-proxy.js';

const FIRST = `
virtualServers:
  - name: support
    title: Support desk
    tools:
      - {server: demo, include: ["add", "echo"]}
      - {server: demo, tool: slow, as: wait, fixed: {steps: 2}}
    resources: [{server: demo, uriPrefix: "demo://"}]
  - {name: finder, discovery: search, tools: [{server: demo}, {server: nowhere}]}
`;
const SECOND = FIRST.replace('{server: demo, include: ["add", "echo"]}', '{server: demo, tool: add, as: plus}');

describe('the Catalog tab', () => {
  let hub;
  let proxy;
  let browser;
  let file;

  before(async () => {
    file = path.join(mkdtempSync(path.join(tmpdir(), 'switchboard-catalog-')), 'catalog.yaml');
    writeFileSync(file, FIRST);
    hub = await startHub({ args: ['--catalog', file] });
    proxy = await startCspProxy(hub.addr, STRICT_CSP);
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await proxy?.close();
    await hub?.stop();
  });

  it('shows each virtual server, its members and effective names, and a refusal', async () => {
    const page = await openDashboard(browser.context, proxy.url);
    await page.getByRole('status').filter({ hasText: /^\s*Connected/ }).waitFor();
    await page.getByRole('tab', { name: /^Catalog/ }).click();
    const support = page.getByRole('list', { name: 'Virtual servers' }).getByRole('listitem').filter({ has: page.getByText('support', { exact: true }) });
    const tools = support.getByRole('list', { name: 'Tools of support' });
    await tools.getByText('wait', { exact: true }).waitFor();
    assert.deepEqual(await tools.locator('.catalog-name').allTextContents(), ['add', 'echo', 'wait']);
    assert.match(await tools.getByRole('listitem').filter({ hasText: 'wait' }).textContent(), /demo slow.*fixed: steps/);
    assert.match(await support.textContent(), /Members: demo/);
    const finder = page.getByRole('list', { name: 'Virtual servers' }).getByRole('listitem').filter({ has: page.getByText('finder', { exact: true }) });
    await finder.getByRole('list', { name: 'Warnings of finder' }).getByText(/"nowhere" is not connected/).waitFor();
    assert.equal(await page.getByRole('tab', { name: /^Catalog/ }).locator('.count').textContent(), '2');

    writeFileSync(file, 'virtualServers:\n  - name: support\n    colour: blue\n');
    const alert = page.getByRole('alert');
    await alert.getByText(/was refused; the one in force stays/).waitFor();
    assert.match(await alert.textContent(), /line 3: unknown field "colour"/);
    assert.deepEqual(await tools.locator('.catalog-name').allTextContents(), ['add', 'echo', 'wait'], 'the catalog in force stays');
    await page.screenshot({ path: path.join(ARTIFACTS, 'catalog-refused.png'), fullPage: true });

    writeFileSync(file, SECOND);
    await tools.getByText('plus', { exact: true }).waitFor();
    assert.deepEqual(await tools.locator('.catalog-name').allTextContents(), ['plus', 'wait']);
    assert.equal(await alert.isVisible(), false, 'the refusal is gone once a catalog is taken');
    assert.equal(await horizontalOverflow(page), 0);
    await page.screenshot({ path: path.join(ARTIFACTS, 'catalog.png'), fullPage: true });
    assert.deepEqual(page.problems, []);
    await page.close();
  });
});
