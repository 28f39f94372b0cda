// Helpers that drive Debian's chromium (never a downloaded browser) with
// playwright-core, and wait on conditions with deadlines.
import { chromium } from 'playwright-core';
import { existsSync, mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The browser the tests drive: $CHROMIUM, else Debian's /usr/bin/chromium. */
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

/** Screenshots and traces go here (git-ignored). */
export const ARTIFACTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../artifacts');

/** The Content-Security-Policy the dashboard must work under. */
export const STRICT_CSP = "default-src 'self'; connect-src 'self' ws: wss:";

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];

/**
 * launch starts chromium with a fresh user-data directory and returns its
 * context; close() closes it and removes the directory.
 * @param {{colorScheme?: 'light'|'dark', viewport?: {width: number, height: number}}} [opts]
 */
export async function launch(opts = {}) {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) or set CHROMIUM; the tests never download a browser`);
  }
  mkdirSync(ARTIFACTS, { recursive: true });
  const userDataDir = mkdtempSync(path.join(tmpdir(), 'switchboard-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: opts.viewport ?? { width: 1280, height: 800 },
    colorScheme: opts.colorScheme ?? 'light',
    reducedMotion: 'reduce',
  });
  context.setDefaultTimeout(10000);
  return {
    context,
    async close() {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * openDashboard opens url in a new page and records console errors, page
 * errors and CSP violations in page.problems. Pass the URL of a
 * startCspProxy to test under a given policy.
 * @param {import('playwright-core').BrowserContext} context
 * @param {string} url
 */
export async function openDashboard(context, url) {
  const page = await context.newPage();
  page.problems = [];
  page.on('pageerror', (err) => page.problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') page.problems.push(`console error: ${msg.text()}`);
  });
  await page.goto(url);
  return page;
}

/**
 * poll evaluates fn until pred holds of its value, within ms; it resolves
 * with that value or rejects naming what, with the last value seen.
 * @template T
 * @param {() => Promise<T>} fn
 * @param {(v: T) => boolean} pred
 * @param {{ms?: number, what: string, interval?: number}} o
 * @returns {Promise<T>}
 */
export async function poll(fn, pred, o) {
  const { ms = 10000, what, interval = 50 } = o;
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (pred(last)) return last;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, interval));
  }
}

/**
 * horizontalOverflow returns how many pixels the page scrolls sideways
 * (0 when it does not).
 * @param {import('playwright-core').Page} page
 */
export function horizontalOverflow(page) {
  return page.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) - document.documentElement.clientWidth);
}
