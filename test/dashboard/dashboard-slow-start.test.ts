import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Issue 29 on the dashboard (real server, headless Chromium): a circuit cooling down and one
// ramping up after its cool-down ended each carry a badge in their state cell.

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'];

let browser: Browser;
let server: ServerProcess;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root (npm test does it first)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  const dir = tempDir();
  server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite') });
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

describe('dashboard: cool-downs and the slow start', () => {
  it('shows "cooling down" on a cooling circuit and "ramping N%" once its cool-down ended into a ramp', async () => {
    expect((await send('PATCH', 'ramping', '', { ramp: { seconds: 600, start_percent: 10 } })).status).toBe(201);
    await send('POST', 'cooling', '/outcomes', { kind: 'throttled', retry_after_seconds: 600 });
    await send('POST', 'ramping', '/outcomes', { kind: 'throttled', retry_after_seconds: 1 });
    await send('POST', 'plain', '/outcomes', { success: true });
    const page = await (await browser.newContext()).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/dashboard`);
    const badge = (name: string) => page.locator(`tr[data-circuit="${name}"] .slow-start-badge`);
    await badge('cooling').waitFor({ timeout: 10_000 });
    expect(await badge('cooling').textContent()).toBe('cooling down');
    // The due-transition timer ends the 1 s cool-down (cool_down_ended, live on the stream): then it ramps.
    await page.locator('tr[data-circuit="ramping"] .slow-start-badge.ramping').waitFor({ timeout: 15_000 });
    const shown = /^ramping (\d+)%$/.exec((await badge('ramping').textContent()) ?? '');
    expect(Number(shown?.[1])).toBeGreaterThanOrEqual(10); // start_percent, growing by 0.15 points a second
    expect(Number(shown?.[1])).toBeLessThan(100);
    expect(await badge('plain').count()).toBe(0);
    expect(errors).toEqual([]);
  });
});
