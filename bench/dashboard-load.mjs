// The dashboard part of the `scale` section (issue 20): the first screen of /dashboard in
// headless Chromium (playwright-core and Debian's /usr/bin/chromium) at 100,000 circuits against
// a handful, in the same run: from page.goto() to the first row of the list on screen, and to
// the stream live; median of 5 loads each, a fresh page per load.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { percentileSorted } from './lib.mjs';

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
const LOADS = 5;

/** `seed(file, count)` writes `count` closed circuits into a migrated SQLite file. */
export async function dashboardRun(ctx, tmp, seed) {
  if (!fs.existsSync(CHROMIUM)) {
    ctx.log('scale :: dashboard: /usr/bin/chromium missing, skipped');
    return null;
  }
  const { chromium } = ctx.require('playwright-core');
  const count = ctx.envInt('BENCH_SCALE_DASHBOARD', 100_000, 1, 10_000_000);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-bench-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1400, height: 900 },
  });
  try {
    const out = {};
    for (const [key, n] of [
      ['few', 3],
      ['many', count],
    ]) {
      const db = path.join(tmp, `dashboard-${n}.db`);
      seed(db, n);
      const server = await ctx.startCircuitlog({ name: `circuitlog-dashboard-${n}`, db, logLevel: 'warn' });
      try {
        const firstRow = [];
        const live = [];
        for (let i = 0; i < LOADS + 1; i++) {
          const page = await browser.newPage();
          const t0 = performance.now();
          await page.goto(`${server.url}/dashboard`);
          await page.locator('section.group tbody tr').first().waitFor({ timeout: 60_000 });
          const row = performance.now() - t0;
          await page.locator('#live.on').waitFor({ timeout: 60_000 });
          const on = performance.now() - t0;
          const rows = await page.locator('tr[data-circuit]').count();
          await page.close();
          if (i === 0) continue; // the first load warms the server and the browser
          firstRow.push(row);
          live.push(on);
          out[key] = { n, rows };
        }
        firstRow.sort((a, b) => a - b);
        live.sort((a, b) => a - b);
        Object.assign(out[key], {
          firstRowMs: percentileSorted(firstRow, 50),
          liveMs: percentileSorted(live, 50),
          maxMs: firstRow.at(-1),
        });
      } finally {
        await server.stop();
      }
    }
    ctx.log(
      `scale :: dashboard: first row ${out.many.firstRowMs.toFixed(0)} ms at ${out.many.n} circuits vs ${out.few.firstRowMs.toFixed(0)} ms at ${out.few.n}`,
    );
    return out;
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}
