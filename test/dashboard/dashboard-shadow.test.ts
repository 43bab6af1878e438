import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Issue 31 on the dashboard (real server, headless Chromium): a circuit with a shadow policy
// carries a shadow badge with the shadow's state; a shadow event on the stream changes the
// badge, never the row's own state.

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

let browser: Browser;
let server: ServerProcess;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root (npm test does it first)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  server = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

const send = (method: string, name: string, action: string, body: unknown) =>
  fetch(`${server.url}/circuits/${encodeURIComponent(name)}${action}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('dashboard: the shadow policy', () => {
  it('shows a shadow badge that follows the shadow, while the row keeps the live state', async () => {
    expect((await send('PATCH', 'svc', '', { failure_threshold: 10, shadow: { failure_threshold: 2 } })).status).toBe(
      201,
    );
    await send('POST', 'plain', '/outcomes', { success: true });
    const page = await (await browser.newContext()).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/dashboard`);
    const badge = page.locator('tr[data-circuit="svc"] .shadow-badge');
    await badge.waitFor({ timeout: 10_000 });
    expect(await badge.textContent()).toBe('shadow closed');
    for (let i = 0; i < 2; i++) await send('POST', 'svc', '/outcomes', { success: false });
    await page.locator('tr[data-circuit="svc"] .shadow-badge.open').waitFor({ timeout: 10_000 });
    expect(await page.locator('tr[data-circuit="svc"]').getAttribute('class')).toContain('state-closed');
    expect(await page.locator('tr[data-circuit="plain"] .shadow-badge').count()).toBe(0);
    expect(errors).toEqual([]);
  });
});
