import Database from 'better-sqlite3';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultMigrationsDir, migrate, readMigrations } from '../../src/store/sqlite/database.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Issue 20: the dashboard with 100,000 circuits stays usable: one page at a time, the circuits
// refusing calls first wherever they are in the table, and a search answered by the server.
// The first-screen time is measured by the bench (`BENCH_ONLY=scale`), not asserted here.

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
const CIRCUITS = 100_000;

let context: BrowserContext;
let server: ServerProcess;

/** 100,000 closed circuits written into a migrated file in one statement (as the scale bench seeds). */
function seed(file: string): void {
  const db = new Database(file);
  migrate(db, readMigrations(defaultMigrationsDir()));
  db.prepare(`INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at)
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
    SELECT 'fleet/c' || i, 5, 30, ?, ? FROM n`).run(CIRCUITS, Date.now(), Date.now());
  db.close();
}

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root (npm test does it first)`);
  const dir = tempDir();
  seed(path.join(dir, 'db.sqlite'));
  server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite') });
  // Made last: the newest id, 100,000 circuits past the first page.
  for (let i = 0; i < 5; i++) await fetch(`${server.url}/circuits/deep%2Ftripped/failure`, { method: 'POST' });
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1400, height: 900 },
  });
}, 120_000);
afterAll(async () => {
  await context?.close();
  await server?.stop();
});

describe('dashboard with 100,000 circuits, in headless Chromium', () => {
  it('shows one page of 100 with the open circuit first, pages on, and finds a circuit deep in the table by a server search', async () => {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(e.message));
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(`${server.url}/dashboard`);
    await page.locator('#live.on').waitFor({ timeout: 20_000 });
    const rows = page.locator('section.group tbody tr');
    await page.locator('tr[data-circuit="fleet/c99"]').waitFor({ timeout: 10_000 });
    const names = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-circuit')));
    expect(names).toEqual([
      'deep/tripped',
      ...Array.from({ length: 100 }, (_, i) => `fleet/c${i}`).sort((a, b) => a.localeCompare(b)),
    ]);
    expect(await page.locator('tr[data-circuit="deep/tripped"] .calls').textContent()).toBe('refused');
    expect(await page.locator('#summary').textContent()).toBe(
      'page 1, 100 circuits; in all: 1 refusing calls, 0 probing',
    );
    // The browser asked for pages, never for the whole table.
    const limits = requests
      .filter((u) => u.includes('/dashboard/api/state'))
      .map((u) => Number(new URL(u).searchParams.get('limit')));
    expect(limits.length).toBeGreaterThan(0);
    expect(Math.max(...limits)).toBeLessThanOrEqual(500);

    await page.click('#next-page');
    await page.locator('tr[data-circuit="fleet/c199"]').waitFor({ timeout: 10_000 });
    expect(await page.locator('tr[data-circuit="fleet/c0"]').count()).toBe(0);
    expect(await rows.count()).toBe(101);
    expect(await page.locator('#summary').textContent()).toMatch(/^page 2, 100 circuits;/);
    await page.click('#prev-page');
    await page.locator('tr[data-circuit="fleet/c0"]').waitFor({ timeout: 10_000 });

    await page.fill('#filter', 'C99998');
    await page.locator('tr[data-circuit="fleet/c99998"]').waitFor({ timeout: 20_000 });
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-circuit')))).toEqual(['fleet/c99998']);
    expect(requests.some((u) => u.includes('q=c99998'))).toBe(true);
    await page.fill('#filter', 'no-such-circuit');
    await page.locator('p.empty', { hasText: 'No circuit matches the filter.' }).waitFor({ timeout: 20_000 });
    expect(errors).toEqual([]);
  });
});
