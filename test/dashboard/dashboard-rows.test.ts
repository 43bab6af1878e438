import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startNodes, type FakeNode } from '../proxy/fake-node.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Issue 27, item 20: what a row says about probes (forced circuits never probe; half-open ones
// show their probes in flight), node tables whose columns line up, buttons on one line at
// 1366 and 1920 px. Screenshots go to DASHBOARD_ROWS_SHOTS (a folder) when set, to look at.

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];
const SHOTS = process.env.DASHBOARD_ROWS_SHOTS;

let browser: Browser;
let context: BrowserContext;
let nodes: Record<string, FakeNode> = {};
const servers: ServerProcess[] = [];

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root (npm test does it first)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  nodes = await startNodes('dc1-1', 'dc1-2', 'dc2-1', 'dc1-22', 'dc3-333');
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});
// A fresh context per test: no cache, cookies or storage from another test, and closing it
// closes its connections, so a server's graceful stop does not wait out an idle keep-alive.
beforeEach(async () => {
  context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
});
afterEach(async () => {
  await context.close();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** Two upstreams over three DCs (node ids of different lengths), health checks off. */
async function start(): Promise<ServerProcess> {
  const dir = tempDir();
  const config = path.join(dir, 'circuitlog.yaml');
  const node = (id: string) => `{ id: ${id}, dc: ${id.split('-')[0]}, url: "${nodes[id]!.url}" }`;
  fs.writeFileSync(
    config,
    [
      'local_dc: dc1',
      'upstreams:',
      `  users:\n    nodes: [${['dc1-1', 'dc1-2', 'dc2-1'].map(node).join(', ')}]\n    health_check: { enabled: false }`,
      `  billing-and-invoices:\n    nodes: [${['dc1-22', 'dc3-333'].map(node).join(', ')}]\n    health_check: { enabled: false }`,
      '',
    ].join('\n'),
  );
  const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config });
  servers.push(server);
  return server;
}

const circuitUrl = (server: ServerProcess, name: string, action = '') =>
  `${server.url}/circuits/${encodeURIComponent(name)}${action}`;
const patch = (server: ServerProcess, name: string, body: unknown) =>
  fetch(circuitUrl(server, name), {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const post = (server: ServerProcess, name: string, action: string) =>
  fetch(circuitUrl(server, name, action), { method: 'POST' });

/** A circuit half-open with one probe of two in flight (its 1 s open time waited out by polling /allowed). */
async function halfOpenWithProbe(server: ServerProcess, name: string): Promise<void> {
  expect((await patch(server, name, { failure_threshold: 1, timeout_seconds: 1, half_open_max_calls: 2 })).status).toBe(
    201,
  );
  expect((await post(server, name, '/failure')).status).toBe(200);
  await expect
    .poll(async () => (await fetch(circuitUrl(server, name, '/allowed'))).status, { timeout: 10_000 })
    .toBe(200);
  const circuit = (await (await fetch(circuitUrl(server, name))).json()) as { state: string; probes_in_flight: number };
  expect([circuit.state, circuit.probes_in_flight]).toEqual(['half_open', 1]);
}

/** A circuit forced closed (detect-only) whose rules hold it open underneath. */
async function forcedClosedOpen(server: ServerProcess, name: string): Promise<void> {
  expect((await patch(server, name, { failure_threshold: 1, forced_state: 'closed' })).status).toBe(201);
  expect((await post(server, name, '/failure')).status).toBe(200);
  expect(((await (await fetch(circuitUrl(server, name))).json()) as { state: string }).state).toBe('open');
}

async function openDashboard(server: ServerProcess, width: number): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  await page.setViewportSize({ width, height: 900 });
  await page.goto(`${server.url}/dashboard`);
  await page.locator('#live.on').waitFor({ timeout: 10_000 });
  return { page, errors };
}

const countdown = (page: Page, name: string) => page.locator(`tr[data-circuit="${name}"] td.countdown`);

describe('dashboard rows: probes', () => {
  it('never says "probes in" for a forced circuit: forced closed over an open circuit, and forced open', async () => {
    const server = await start();
    await forcedClosedOpen(server, 'trial/detect-only');
    expect((await post(server, 'ops/maintenance', '/failure')).status).toBe(200);
    expect((await patch(server, 'ops/maintenance', { failure_threshold: 1 })).status).toBe(200);
    expect((await post(server, 'ops/maintenance', '/failure')).status).toBe(200);
    expect((await patch(server, 'ops/maintenance', { forced_state: 'open' })).status).toBe(200);
    expect((await post(server, 'plain/open', '/failure')).status).toBe(200);
    expect((await patch(server, 'plain/open', { failure_threshold: 1 })).status).toBe(200);
    expect((await post(server, 'plain/open', '/failure')).status).toBe(200);
    const { page, errors } = await openDashboard(server, 1366);
    // The unforced open circuit counts down to its probes; the forced ones say they do not probe.
    await expect.poll(() => countdown(page, 'plain/open').textContent()).toMatch(/^probes in \d+s$/);
    expect(await countdown(page, 'trial/detect-only').textContent()).toBe('no probes (forced)');
    expect(await countdown(page, 'ops/maintenance').textContent()).toBe('no probes (forced)');
    expect(errors).toEqual([]);
  });

  it('shows a half-open circuit’s probes in flight against its limit', async () => {
    const server = await start();
    await halfOpenWithProbe(server, 'search/query');
    const { page, errors } = await openDashboard(server, 1366);
    await expect.poll(() => countdown(page, 'search/query').textContent()).toBe('1 of 2 probes in flight');
    expect(errors).toEqual([]);
  });
});

describe('dashboard layout at 1366 and 1920 px', () => {
  for (const width of [1366, 1920]) {
    it(`lines up the columns of every node table, and keeps each row's buttons on one line (${width} px)`, async () => {
      const server = await start();
      for (let i = 0; i < 3; i++) expect((await post(server, 'users/dc1-1', '/failure')).status).toBe(200);
      expect((await patch(server, 'billing-and-invoices/dc3-333', { forced_state: 'closed' })).status).toBe(200);
      await halfOpenWithProbe(server, 'search/query');
      await forcedClosedOpen(server, 'trial/a-detect-only-circuit-with-a-long-name');
      const { page, errors } = await openDashboard(server, width);
      await page.locator('section[data-upstream="billing-and-invoices"] table').first().waitFor({ timeout: 5_000 });
      if (SHOTS) await page.screenshot({ path: path.join(SHOTS, `dashboard-rows-${width}.png`), fullPage: true });
      const layout = await page.evaluate(() => ({
        nodeTables: [...document.querySelectorAll('section[data-upstream] table')].map((t) =>
          [...t.querySelectorAll('thead th')].map((th) => Math.round(th.getBoundingClientRect().left)),
        ),
        buttonRows: [...document.querySelectorAll('td.actions')].map(
          (td) =>
            new Set([...td.querySelectorAll('button')].map((b) => Math.round(b.getBoundingClientRect().top))).size,
        ),
        scroll: document.documentElement.scrollWidth,
      }));
      expect(layout.nodeTables.length).toBe(4); // users: dc1, dc2; billing-and-invoices: dc1, dc3
      for (const columns of layout.nodeTables.slice(1)) expect(columns).toEqual(layout.nodeTables[0]);
      expect(layout.buttonRows.length).toBeGreaterThan(5);
      expect(layout.buttonRows.every((lines) => lines === 1)).toBe(true);
      expect(layout.scroll).toBeLessThanOrEqual(width);
      expect(errors).toEqual([]);
    });
  }
});
