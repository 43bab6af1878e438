import fs from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Scope } from '../../src/auth/identity.js';
import { buildAuditedApp, credential } from '../audit/audit-app.js';
import { listen } from '../observe/observe-app.js';

// Debian's chromium, installed by scripts/provision.mjs (npm test's pretest step).
const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

let browser: Browser;
let context: BrowserContext;
const cleanup: (() => unknown)[] = [];
beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root`);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
}, 60_000);
afterAll(async () => {
  await browser?.close();
});
beforeEach(async () => {
  context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
});
afterEach(async () => {
  await context.close();
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** Credentials by token: the token is the credential's id here (the test's authenticator). */
const CREDENTIALS: Record<string, Scope[]> = {
  viewer: ['read'],
  oncall: ['read', 'operate'],
  ops: ['admin'],
};

async function serve() {
  const app = buildAuditedApp({
    authenticate: (header) => {
      const id = /^Bearer (.+)$/.exec(header ?? '')?.[1];
      return id !== undefined && CREDENTIALS[id] ? credential(id, CREDENTIALS[id]) : null;
    },
  });
  const server = await listen(app);
  cleanup.push(() => server.close());
  return { app, url: server.url };
}

/** The dashboard signed in with `token`, live; console errors collected, confirmations accepted. */
async function signIn(url: string, token: string): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().includes('401')) errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('dialog', (d) => void d.accept());
  await page.goto(`${url}/dashboard`);
  await page.locator('#token-form').waitFor({ state: 'visible', timeout: 10_000 });
  await page.fill('#token', token);
  await page.click('#token-form button');
  await page.locator('#live.on').waitFor({ timeout: 10_000 });
  return { page, errors };
}

describe('dashboard: who is signed in, who forced or reset a circuit', () => {
  it('shows the signed-in identity and its scopes, and no Reset or Force buttons without operate', async () => {
    const { app, url } = await serve();
    await app.request('PATCH', '/circuits/pay', 'ops', { failure_threshold: 3 });
    const { page, errors } = await signIn(url, 'viewer');
    await page.locator('tr[data-circuit="pay"]').waitFor({ timeout: 5_000 });
    expect(await page.locator('#identity').textContent()).toBe('viewer (read)');
    expect(await page.locator('tr[data-circuit="pay"] button').count()).toBe(0);
    expect(errors).toEqual([]);
  });

  it('shows the buttons to an operate credential, and names who forced the circuit and who reset it', async () => {
    const { app, url } = await serve();
    await app.request('PATCH', '/circuits/pay', 'ops', { forced_state: 'open' });
    const { page, errors } = await signIn(url, 'oncall');
    expect(await page.locator('#identity').textContent()).toBe('oncall (read, operate)');
    const note = page.locator('tr[data-circuit="pay"] .manual-by');
    await expect.poll(() => note.textContent()).toMatch(/^forced open by ops, \d+s ago$/);
    await page.locator('tr[data-circuit="pay"] button[data-action="clear"]').click();
    await expect.poll(() => note.textContent(), { timeout: 5_000 }).toMatch(/^force cleared by oncall, \d+s ago$/);
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/pay/failure', 'ops');
    await page.locator('tr[data-circuit="pay"] .state.open').waitFor({ timeout: 5_000 });
    // The trip is the last transition now; the row still says who cleared the force.
    expect(await note.textContent()).toMatch(/^force cleared by oncall/);
    await page.locator('tr[data-circuit="pay"] button[data-action="reset"]').click();
    await expect.poll(() => note.textContent(), { timeout: 5_000 }).toMatch(/^reset by oncall, \d+s ago$/);
    expect(errors).toEqual([]);
  });
});
