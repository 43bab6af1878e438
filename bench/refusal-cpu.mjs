// What a refused GET /allowed costs the raw listener, in-process (not part of `npm run bench`):
//
//   npm run build && node bench/refusal-cpu.mjs [another build's dist/ ...]
//
// The listener (`createApp(...).allowedListener`) on Node-shaped request and response objects (no
// socket, no node:http), SQLite in memory, a fake clock: a closed circuit (admitted), an open one
// (every ask a 503 circuit-open), and a ramping one at 99 % (about 1 ask in 100 a 503
// circuit-ramping), 1,000,000 asks each, three rounds, for this build and each dist/ named.
// Process CPU time (user + system) per ask. Figures: docs/performance.md ("Refusals").
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';

const here = path.dirname(new URL(import.meta.url).pathname);
const builds = [path.join(here, '..', 'dist'), ...process.argv.slice(2).map((d) => path.resolve(d))];
const N = 1_000_000;
const flat = (text) => Buffer.from(text, 'latin1').toString('latin1');

async function listenerOf(dist) {
  const load = (file) => import(pathToFileURL(path.join(dist, file)).href);
  const { createApp } = await load('app.js');
  const { defaultMigrationsDir, migrate, openDatabase, readMigrations } = await load('store/sqlite/database.js');
  const { SqliteCircuitStore } = await load('store/sqlite/circuit-store.js');
  const { hostRule } = await load('http/request-guard.js');
  const db = openDatabase(':memory:');
  migrate(db, readMigrations(defaultMigrationsDir()));
  const clock = { now: Date.now() };
  const built = createApp({
    store: new SqliteCircuitStore(db, true),
    clock: () => clock.now,
    logger: pino({ level: 'silent' }),
    circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    policy: { probeLeaseMs: 10_000 },
    hosts: hostRule('127.0.0.1', undefined),
  });
  const send = (url, method, body) =>
    built.app.request(url, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await send('/circuits/closed/outcomes', 'POST', { success: true });
  await send('/circuits/open', 'PATCH', { failure_threshold: 1, timeout_seconds: 3_600 });
  await send('/circuits/open/outcomes', 'POST', { success: false });
  await send('/circuits/ramping', 'PATCH', { failure_threshold: 1e9, ramp: { seconds: 3_600, start_percent: 99 } });
  await send('/circuits/ramping/outcomes', 'POST', { kind: 'throttled', retry_after_seconds: 1 });
  clock.now += 2_000; // the cool-down is over: the ramp begins (written by the next ask)
  await built.app.request('/circuits/ramping/allowed');
  return built.allowedListener;
}

const outgoing = { headersSent: false, writeHead: () => outgoing, end: () => outgoing, destroy() {} };
for (const dist of builds) {
  const listener = await listenerOf(dist);
  for (let round = 0; round < 3; round++) {
    const row = [];
    for (const name of ['closed', 'open', 'ramping']) {
      const urls = Array.from({ length: 4096 }, () => flat(`/circuits/${name}/allowed`));
      const start = process.cpuUsage();
      for (let i = 0; i < N; i++)
        listener({ method: 'GET', url: urls[i & 4095], rawHeaders: ['Host', '127.0.0.1'] }, outgoing);
      const used = process.cpuUsage(start);
      row.push(`${name} ${(((used.user + used.system) * 1000) / N).toFixed(0)} ns`);
    }
    console.log(`${dist}  ${row.join('  ')}`);
  }
}
