import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, startServer, tempDir } from '../server-process.js';

// Debian's chromium, installed by scripts/provision.mjs (npm test's pretest step).
const CHROMIUM = '/usr/bin/chromium';

let context: BrowserContext;
let server: ServerProcess;

beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run \`node scripts/provision.mjs\` as root (npm test does it first)`);
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  server = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') }); // an ephemeral port, never 8080
}, 60_000);
afterAll(async () => {
  await context?.close();
  await server?.stop();
});

describe('Swagger UI at /docs', () => {
  it('sends Try it out to the server that served the page, whatever its port', async () => {
    const page = await context.newPage();
    await page.goto(`${server.url}/docs`);
    expect(server.port).not.toBe(8080);
    const operation = page.locator('#operations-service-getHealth');
    await operation.locator('.opblock-summary').click();
    await operation.locator('.try-out__btn').click();
    await operation.locator('.execute').click();
    const requestUrl = operation.locator('.request-url pre');
    await requestUrl.waitFor();
    expect(await requestUrl.textContent()).toBe(`${server.url}/health`);
    await expect
      .poll(async () =>
        operation.locator('.live-responses-table tr.response .response-col_status').first().textContent(),
      )
      .toBe('200');
  });
});
