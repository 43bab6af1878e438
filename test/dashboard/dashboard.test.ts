import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { proxyYaml, startNodes, type FakeNode } from '../proxy/fake-node.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Debian's chromium, installed by scripts/provision.mjs (npm test's pretest step).
const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const TOKEN = 'dashboard-token-0123456789';

/**
 * The test's own calls, each on a connection of its own: a keep-alive connection left idle would
 * hold each server's graceful stop (afterEach) until the connection times out (about 2 s a test).
 */
const noKeepAlive = new Agent({ pipelining: 0 });
const fetch = async (url: string, init: RequestInit = {}): Promise<Response> =>
  (await undiciFetch(url, {
    ...(init as Parameters<typeof undiciFetch>[1]),
    dispatcher: noKeepAlive,
  })) as unknown as Response;

let browser: Browser;
let context: BrowserContext;
const servers: ServerProcess[] = [];
let nodes: Record<string, FakeNode> = {};

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root (npm test does it first)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  nodes = await startNodes('dc1-1', 'dc1-2', 'dc2-1');
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await noKeepAlive.close();
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});
// A fresh context per test: no cache, cookies or storage from another test, and closing it
// closes its connections, so a server's graceful stop does not wait out an idle keep-alive.
beforeEach(async () => {
  context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
});
afterEach(async () => {
  await context.close();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** A server on a fresh database; stopped after the test unless `stopAfterTest` is false. */
async function start(env: Record<string, string> = {}, stopAfterTest = true): Promise<ServerProcess> {
  const dir = tempDir();
  const config = path.join(dir, 'circuitlog.yaml');
  fs.writeFileSync(config, proxyYaml(nodes, 'health_check: { enabled: false }'));
  const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config, ...env });
  if (stopAfterTest) servers.push(server);
  return server;
}

/** A page that records console errors and uncaught exceptions. */
async function openPage(): Promise<{ page: Page; errors: string[]; dialogs: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  return { page, errors, dialogs };
}

const api = (server: ServerProcess, method: string, name: string, action = '', headers: Record<string, string> = {}) =>
  fetch(`${server.url}/circuits/${encodeURIComponent(name)}${action}`, { method, headers });

const stateOf = (page: Page, name: string) => page.locator(`tr[data-circuit="${name}"] .state`);

describe('dashboard in headless Chromium', () => {
  it('lists circuits, turns a tripped circuit open live within 2 s, closes it with Reset, with no console errors', async () => {
    const server = await start();
    for (const name of ['payments/charge', 'payments/refund', 'email/send'])
      await api(server, 'POST', name, '/success');
    for (let i = 0; i < 5; i++) await api(server, 'POST', 'search/query', '/failure');
    for (let i = 0; i < 3; i++) await api(server, 'POST', 'users/dc1-1', '/failure');
    const force = { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"forced_state":"open"}' };
    expect((await fetch(`${server.url}/circuits/payments%2Frefund`, force)).status).toBe(200);
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/`);
    expect(page.url()).toBe(`${server.url}/dashboard`);
    await page.locator('#live.on').waitFor({ timeout: 10_000 });
    expect(await page.locator('#token-form').isVisible()).toBe(false);
    expect(await stateOf(page, 'payments/charge').textContent()).toBe('closed');
    expect(await stateOf(page, 'search/query').textContent()).toBe('open');
    expect(await page.locator('tr[data-circuit="payments/refund"] .forced-badge').textContent()).toBe('forced open');
    await expect
      .poll(() => page.locator('tr[data-circuit="search/query"] td.countdown').textContent())
      .toMatch(/^probes in \d+s$/);

    for (let i = 0; i < 5; i++) await api(server, 'POST', 'payments/charge', '/failure');
    await page.locator('tr[data-circuit="payments/charge"] .state.open').waitFor({ timeout: 2_000 });
    expect(await stateOf(page, 'payments/charge').textContent()).toBe('open');
    await page
      .locator('#timeline li', { hasText: 'payments/charge: closed → open (failure_threshold_reached)' })
      .waitFor({ timeout: 5_000 });

    await page.locator('tr[data-circuit="payments/charge"] button[data-action="reset"]').click();
    await page.locator('tr[data-circuit="payments/charge"] .state.closed').waitFor({ timeout: 5_000 });
    expect((await (await api(server, 'GET', 'payments/charge')).json()).state).toBe('closed');
    expect(await page.locator('tr[data-circuit="payments/charge"] td.last').textContent()).toMatch(
      /^open → closed \(manual_reset\)/,
    );

    expect(errors).toEqual([]);
  });

  it('forces a circuit open and closed with the buttons and clears the force, showing it on the row', async () => {
    const server = await start();
    await api(server, 'POST', 'payments/charge', '/success');
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    const row = page.locator('tr[data-circuit="payments/charge"]');
    await row.locator('.state.closed').waitFor({ timeout: 10_000 });
    await row.locator('button[data-action="force-open"]').click();
    await row.locator('.forced-badge.open', { hasText: 'forced open' }).waitFor({ timeout: 5_000 });
    expect((await (await api(server, 'GET', 'payments/charge')).json()).forced_state).toBe('open');
    expect((await api(server, 'GET', 'payments/charge', '/allowed')).status).toBe(503);
    await row.locator('button[data-action="force-closed"]').click();
    await row.locator('.forced-badge.closed', { hasText: 'forced closed' }).waitFor({ timeout: 5_000 });
    await row.locator('button[data-action="clear"]').click();
    await row.locator('.forced-badge').waitFor({ state: 'detached', timeout: 5_000 });
    expect((await (await api(server, 'GET', 'payments/charge')).json()).forced_state).toBeNull();
    await page
      .locator('#timeline li', { hasText: 'payments/charge: closed → closed (force_cleared)' })
      .waitFor({ timeout: 5_000 });
    expect(errors).toEqual([]);
  });

  it('shows the failure rate of a circuit with a window', async () => {
    const server = await start();
    const patch = (body: unknown) =>
      fetch(`${server.url}/circuits/search%2Fquery`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await patch({ window: { type: 'count', size: 10 } })).status).toBe(201);
    for (const success of [false, true, true, true]) {
      await fetch(`${server.url}/circuits/search%2Fquery/outcomes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ success }),
      });
    }
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    const cell = page.locator('tr[data-circuit="search/query"] td.failures');
    await cell.waitFor({ timeout: 10_000 });
    expect(await cell.textContent()).toBe('25% of 4');
    expect(errors).toEqual([]);
  });

  it('groups node circuits by upstream and data centre, local DC first', async () => {
    const server = await start();
    for (let i = 0; i < 3; i++) await api(server, 'POST', 'users/dc1-1', '/failure');
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    const group = page.locator('section[data-upstream="users"]');
    await group.waitFor({ timeout: 10_000 });
    expect(await group.locator('div[data-dc]').evaluateAll((els) => els.map((e) => e.getAttribute('data-dc')))).toEqual(
      ['dc1', 'dc2'],
    );
    expect(await group.locator('div[data-dc="dc1"] h3').textContent()).toBe('dc1 (local): 1 of 2 nodes closed');
    expect(await group.locator('div[data-dc="dc1"]').getAttribute('class')).toBe('dc degraded');
    expect(await group.locator('div[data-dc="dc2"] tr[data-circuit="users/dc2-1"] .state').textContent()).toBe(
      'closed',
    );
    // A node forced open is down for its DC, whatever its state says.
    const force = { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"forced_state":"open"}' };
    expect((await fetch(`${server.url}/circuits/users%2Fdc1-2`, force)).status).toBe(200);
    await group
      .locator('div[data-dc="dc1"] h3', { hasText: 'dc1 (local): 0 of 2 nodes closed' })
      .waitFor({ timeout: 5_000 });
    expect(await group.locator('div[data-dc="dc1"]').getAttribute('class')).toBe('dc down');
    expect(errors).toEqual([]);
  });

  it('keeps a change the stream brought over a snapshot that was asked for before it', async () => {
    // The race behind a flaky run: the page takes a new snapshot when its stream connects; a
    // force that lands while that snapshot is on its way is shown from the stream, and the
    // snapshot, answered before the force, arrives after it. Here that order is made certain:
    // every list request after the first is answered by the server at once and handed to
    // the page only when the test says so.
    const server = await start();
    await api(server, 'POST', 'billing/invoice', '/success');
    const { page, errors } = await openPage();
    let lists = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let heldOne!: () => void;
    const held = new Promise<void>((resolve) => (heldOne = resolve));
    await page.route(/\/dashboard\/api\/state\?/, async (route) => {
      const url = route.request().url();
      if (!url.includes('after=') || url.includes('state=') || ++lists === 1) return route.continue();
      const response = await route.fetch(); // the server answers now, before the force
      heldOne();
      await gate;
      await route.fulfill({ response });
    });
    await page.goto(`${server.url}/dashboard`);
    await page.locator('tr[data-circuit="billing/invoice"]').waitFor({ timeout: 10_000 });
    await held;
    const force = { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"forced_state":"open"}' };
    expect((await fetch(`${server.url}/circuits/billing%2Finvoice`, force)).status).toBe(200);
    const badge = page.locator('tr[data-circuit="billing/invoice"] .forced-badge');
    await badge.waitFor({ timeout: 10_000 });
    release();
    await page.locator(`body[data-snapshots="${lists}"]`).waitFor({ timeout: 10_000 });
    // Read at once (a locator would wait, and the next full reload, 15 s on, would bring it back).
    expect(await badge.allTextContents()).toEqual(['forced open']);
    expect(errors).toEqual([]);
  });

  it("shows each upstream's concurrency limit and its requests in flight", async () => {
    const slow = await startNodes('dc1-9');
    slow['dc1-9']!.mode = 'hang';
    const dir = tempDir();
    const config = path.join(dir, 'circuitlog.yaml');
    fs.writeFileSync(
      config,
      `local_dc: dc1\nupstreams:\n  slow:\n    nodes: [{ id: dc1-9, dc: dc1, url: "${slow['dc1-9']!.url}" }]\n    request_timeout_ms: 20000\n    health_check: { enabled: false }\n    concurrency: { limit: fixed, max: 5 }\n  fast:\n    nodes: [{ id: dc1-1, dc: dc1, url: "${nodes['dc1-1']!.url}" }]\n    health_check: { enabled: false }\n    concurrency: { limit: adaptive, initial: 30 }\n`,
    );
    const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config });
    servers.push(server);
    const held = [0, 1].map(() => fetch(`${server.url}/proxy/slow/x`).catch(() => null));
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    await page
      .locator('section[data-upstream="slow"] h2 .load', { hasText: 'limit 5 (fixed) · 2 in flight' })
      .waitFor({ timeout: 10_000 });
    expect(await page.locator('section[data-upstream="fast"] h2 .load').textContent()).toBe(
      'limit 30 (adaptive) · 0 in flight',
    );
    await slow['dc1-9']!.stop(); // the held requests end
    await Promise.all(held);
    await page
      .locator('section[data-upstream="slow"] h2 .load', { hasText: 'limit 5 (fixed) · 0 in flight' })
      .waitFor({ timeout: 10_000 });
    expect(errors).toEqual([]);
  });

  it('filters circuits by name', async () => {
    const server = await start();
    for (const name of ['payments/charge', 'email/send']) await api(server, 'POST', name, '/success');
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    await stateOf(page, 'email/send').waitFor({ timeout: 10_000 });
    await page.fill('#filter', 'PAY');
    await page.locator('tr[data-circuit="email/send"]').waitFor({ state: 'detached', timeout: 5_000 });
    expect(await page.locator('tr[data-circuit="payments/charge"]').count()).toBe(1);
    expect(errors).toEqual([]);
  });

  it('with a token set, loads without it, asks for it, keeps it in sessionStorage and never puts it in a URL', async () => {
    const server = await start({ CIRCUITLOG_TOKEN: TOKEN });
    await api(server, 'POST', 'payments/charge', '/success', { authorization: `Bearer ${TOKEN}` });
    const { page, errors } = await openPage();
    const urls: string[] = [];
    page.on('request', (r) => urls.push(r.url()));
    const res = await page.goto(`${server.url}/dashboard`);
    expect(res?.status()).toBe(200);
    await page.locator('#token-form').waitFor({ state: 'visible', timeout: 10_000 });
    expect(await page.locator('tr[data-circuit]').count()).toBe(0);
    await page.fill('#token', TOKEN);
    await page.click('#token-form button');
    await page.locator('#live.on').waitFor({ timeout: 10_000 });
    expect(await stateOf(page, 'payments/charge').textContent()).toBe('closed');
    expect(await page.evaluate(() => sessionStorage.getItem('circuitlog-token'))).toBe(TOKEN);
    for (let i = 0; i < 5; i++)
      await api(server, 'POST', 'payments/charge', '/failure', { authorization: `Bearer ${TOKEN}` });
    await page.locator('tr[data-circuit="payments/charge"] .state.open').waitFor({ timeout: 5_000 });
    expect(urls.some((u) => u.includes('/events/stream'))).toBe(true);
    expect(urls.filter((u) => u.includes(TOKEN))).toEqual([]);
    expect(errors).toEqual([]);
  });
});

const WIDTHS = [375, 1024, 1366];
/** `DASHBOARD_SCREENSHOTS=1` refreshes the committed screenshots in docs/images/; else a temp folder. */
const IMAGES =
  process.env.DASHBOARD_SCREENSHOTS === '1'
    ? path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'docs', 'images')
    : fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-screenshots-'));

/** A server with a forced-open circuit, an open one, a half-open one and closed ones, plus proxy nodes. */
async function mixedServer(stopAfterTest = true): Promise<ServerProcess> {
  const server = await start({}, stopAfterTest);
  for (const name of ['payments/charge', 'email/send', 'search/query', 'zz/reports-export-with-a-rather-long-name'])
    await api(server, 'POST', name, '/success');
  for (let i = 0; i < 5; i++) await api(server, 'POST', 'search/query', '/failure');
  for (let i = 0; i < 3; i++) await api(server, 'POST', 'users/dc1-1', '/failure');
  const force = { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"forced_state":"open"}' };
  expect((await fetch(`${server.url}/circuits/payments%2Fcharge`, force)).status).toBe(200);
  return server;
}

describe('dashboard at a glance', () => {
  // The two tests that only look share one mixed server; the others change or stop their own.
  let lookOnly: Promise<ServerProcess> | undefined;
  const lookOnlyServer = (): Promise<ServerProcess> => {
    lookOnly ??= mixedServer(false);
    return lookOnly;
  };
  afterAll(async () => {
    await (await lookOnly)?.stop();
  });

  it('shows a circuit forced open as refusing calls, counts it so in the header, and lists refusing circuits first', async () => {
    const server = await lookOnlyServer();
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    await page.locator('#live.on').waitFor({ timeout: 10_000 });
    const forced = page.locator('tr[data-circuit="payments/charge"]');
    expect(await forced.locator('.calls').textContent()).toBe('refused');
    expect(await forced.locator('.calls').getAttribute('class')).toBe('calls refused');
    // --open's red, not green (read in one step: a render may replace the row meanwhile)
    expect(
      await page.evaluate(
        () => getComputedStyle(document.querySelector('tr[data-circuit="payments/charge"] .calls')!).backgroundColor,
      ),
    ).toBe('rgb(229, 72, 77)');
    expect(await forced.locator('.state').getAttribute('class')).toBe('state closed overridden');
    expect(await page.locator('#summary').textContent()).toBe('7 circuits: 3 refusing calls, 0 probing, 4 allowing');
    const order = await page
      .locator('section.group:not([data-upstream]) tbody tr')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-circuit')));
    expect(order).toEqual([
      'payments/charge',
      'search/query',
      'email/send',
      'zz/reports-export-with-a-rather-long-name',
    ]);
    expect(errors).toEqual([]);
  });

  it('asks before Reset and Force, and does nothing when the answer is no', async () => {
    const server = await mixedServer();
    const { page, errors, dialogs } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    const row = page.locator('tr[data-circuit="email/send"]');
    await row.locator('.calls.allowed').waitFor({ timeout: 10_000 });
    page.removeAllListeners('dialog');
    page.once('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await row.locator('button[data-action="force-open"]').click();
    await expect.poll(() => dialogs.length).toBe(1);
    expect(dialogs[0]).toBe('Force email/send open? Every call is refused until the force is cleared.');
    expect((await (await api(server, 'GET', 'email/send')).json()).forced_state).toBeNull();
    page.once('dialog', (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    await page.locator('tr[data-circuit="search/query"] button[data-action="reset"]').click();
    await page.locator('tr[data-circuit="search/query"] .calls.allowed').waitFor({ timeout: 5_000 });
    expect(dialogs[1]).toBe('Reset search/query? It closes now and admits every call.');
    expect(errors).toEqual([]);
  });

  it('greys out the whole page and says so when the server stops answering', async () => {
    const server = await mixedServer();
    const { page } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    await page.locator('#live.on').waitFor({ timeout: 10_000 });
    expect(await page.locator('#stale').isVisible()).toBe(false);
    await server.stop('SIGKILL');
    await page.locator('body.stale').waitFor({ timeout: 10_000 });
    expect(await page.locator('#stale').textContent()).toMatch(/^Not live: the server does not answer/);
    expect(await page.locator('main').evaluate((e) => getComputedStyle(e).filter)).toBe('grayscale(1)');
    await page.screenshot({ path: path.join(IMAGES, 'dashboard-stale.png'), fullPage: true });
  });

  it('fits 375, 1024 and 1366 px wide with no horizontal overflow, the timeline fully on screen', async () => {
    const server = await lookOnlyServer();
    const { page, errors } = await openPage();
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${server.url}/dashboard`);
      await page.locator('#live.on').waitFor({ timeout: 10_000 });
      await page.locator('#timeline li').first().waitFor({ timeout: 5_000 });
      const sizes = await page.evaluate(() => ({
        scroll: document.documentElement.scrollWidth,
        viewport: window.innerWidth,
        right: Math.max(
          ...[...document.querySelectorAll('aside, section.group, header, td, button')].map(
            (e) => e.getBoundingClientRect().right,
          ),
        ),
      }));
      expect(sizes.scroll, `${width} px`).toBeLessThanOrEqual(sizes.viewport);
      expect(sizes.right, `${width} px`).toBeLessThanOrEqual(width);
      await page.screenshot({ path: path.join(IMAGES, `dashboard-${width}.png`), fullPage: true });
    }
    await page.setViewportSize({ width: 1366, height: 900 });
    await page.screenshot({ path: path.join(IMAGES, 'dashboard.png'), fullPage: true });
    expect(errors).toEqual([]);
  });
});

describe('dashboard: detect-only circuits (issue 17)', () => {
  const patch = (server: ServerProcess, name: string, body: unknown) =>
    fetch(`${server.url}/circuits/${encodeURIComponent(name)}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  const fail = (server: ServerProcess, name: string, caller: string) =>
    fetch(`${server.url}/circuits/${encodeURIComponent(name)}/outcomes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ success: false, caller }),
    });

  it('marks forced-closed circuits whose rules would refuse (open underneath, or isolating a caller), and no other', async () => {
    const server = await start();
    expect((await patch(server, 'trial/open', { failure_threshold: 1, forced_state: 'closed' })).status).toBe(201);
    expect(
      (
        await patch(server, 'trial/isolating', {
          failure_threshold: 2,
          forced_state: 'closed',
          quorum: { min_callers: 2 },
        })
      ).status,
    ).toBe(201);
    expect((await patch(server, 'trial/quiet', { forced_state: 'closed' })).status).toBe(201);
    await fail(server, 'trial/open', 'a');
    await fail(server, 'trial/isolating', 'bad');
    await fail(server, 'trial/isolating', 'bad');
    const { page, errors } = await openPage();
    await page.goto(`${server.url}/dashboard`);
    await page.locator('#live.on').waitFor({ timeout: 10_000 });
    const badge = (name: string) => page.locator(`tr[data-circuit="${name}"] .would-refuse-badge`);
    expect(await badge('trial/open').textContent()).toBe('would refuse');
    expect(await badge('trial/open').getAttribute('title')).toBe(
      'Detect-only: the rules hold it open: every call would be refused',
    );
    expect(await badge('trial/isolating').getAttribute('title')).toBe(
      'Detect-only: 1 isolated caller(s) would be refused: bad',
    );
    expect(await badge('trial/quiet').count()).toBe(0);
    // Still admitting every call: the force decides.
    expect(await page.locator('tr[data-circuit="trial/open"] .calls').textContent()).toBe('allowed');
    expect(await page.locator('tr[data-circuit="trial/open"]').getAttribute('class')).toContain('would-refuse');
    // Enforced: the marker goes, the row refuses.
    expect((await patch(server, 'trial/open', { forced_state: null })).status).toBe(200);
    await page.locator('tr[data-circuit="trial/open"] .calls.refused').waitFor({ timeout: 5_000 });
    expect(await badge('trial/open').count()).toBe(0);
    expect(errors).toEqual([]);
  });
});
