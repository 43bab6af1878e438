import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// The dashboard's "what if" panel (assets/dashboard/what-if.js) in headless Chromium, against a
// real server (dist/main.js) whose circuit has a recorded history.

const CHROMIUM = '/usr/bin/chromium'; // Debian's, installed by scripts/provision.mjs
/** `DASHBOARD_SCREENSHOTS=1` refreshes docs/images/dashboard-what-if.png; else a temp folder. */
const IMAGES =
  process.env.DASHBOARD_SCREENSHOTS === '1'
    ? path.join(path.dirname(new URL(import.meta.url).pathname), '..', '..', 'docs', 'images')
    : fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-screenshots-'));
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

let browser: Browser;
const servers: ServerProcess[] = [];
beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root`);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
}, 60_000);
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** A server whose circuit 'db' (failure_threshold 3) opened once: 2 failures, a success, 3 failures. */
async function recorded(): Promise<ServerProcess> {
  const server = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
  servers.push(server);
  const send = (method: string, suffix: string, body: unknown) =>
    fetch(`${server.url}/circuits/db${suffix}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  expect((await send('PATCH', '', { failure_threshold: 3, timeout_seconds: 3_600 })).status).toBe(201);
  for (const success of [false, false, true, false, false, false])
    expect((await send('POST', '/outcomes', { success })).status).toBe(200);
  return server;
}

describe('dashboard: the what-if panel', () => {
  it('backtests the values typed in on a circuit and shows both figures side by side and the picture', async () => {
    const server = await recorded();
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    try {
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(m.text());
      });
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${server.url}/dashboard`);
      await page.locator('tr[data-circuit="db"] td.name').click(); // picks the circuit in the panel
      await page.locator('#what-if summary').click();
      expect(await page.inputValue('#wi-circuit')).toBe('db');
      await page.fill('#wi-failure-threshold', '10');
      await page.click('#wi-run');
      await page.locator('#wi-picture:not([hidden])').waitFor({ timeout: 20_000 });
      const cells = (figure: string) => page.locator(`#wi-figures tr[data-figure="${figure}"] td`).allTextContents();
      expect(await cells('openings')).toEqual(['1', '0']);
      expect(await cells('refused calls')).toEqual(['0', '0']);
      expect(await page.locator('#wi-summary').textContent()).toMatch(/^6 outcomes replayed, .*Fidelity 1\/1 /);
      // The picture is the answer's SVG, drawn by the browser.
      await expect
        .poll(() => page.locator('#wi-picture').evaluate((img: HTMLImageElement) => img.naturalWidth))
        .toBeGreaterThan(0);
      await page.locator('#what-if').screenshot({ path: path.join(IMAGES, 'dashboard-what-if.png') });

      // A value the PATCH rules refuse is shown, naming the field; nothing else changes.
      await page.fill('#wi-failure-threshold', '0');
      await page.click('#wi-run');
      await page.locator('#wi-status.error').waitFor({ timeout: 10_000 });
      expect(await page.locator('#wi-status').textContent()).toMatch(/failure_threshold/);
      expect(errors.filter((e) => !e.includes('422'))).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
