// The raw GET /allowed listener's own CPU cost, in-process (not part of `npm run bench`):
//
//   npm run build && node bench/raw-allowed-cpu.mjs [another build's dist/ ...]
//
// 1. A made request id: `crypto.randomUUID` against this build's `newRequestId`, each followed
//    by node:http's header value check (a regular expression), 2,000,000 of each, three times.
// 2. The listener (`createApp(...).allowedListener`) on Node-shaped request and response objects
//    (no socket, no node:http), `GET /circuits/bench-ok/allowed` on a closed circuit, SQLite in
//    memory held exclusively as `CIRCUITLOG_WORKERS=1` holds its file, 2,000,000 calls, three
//    times, for this build and then each dist/ named. Process CPU time (user + system) per call.
// Figures: docs/performance.md ("Third pass").

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';

const here = path.dirname(new URL(import.meta.url).pathname);
const builds = [path.join(here, '..', 'dist'), ...process.argv.slice(2).map((d) => path.resolve(d))];
const N = 2_000_000;
const cpuNsPer = (run) => {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return ((used.user + used.system) * 1000) / N;
};

const { newRequestId } = await import(pathToFileURL(path.join(builds[0], 'request-id.js')).href);
const headerCheck = /[^\t\x20-\x7e\x80-\xff]/; // node:http's checkInvalidHeaderChar
for (let round = 0; round < 3; round++) {
  for (const [name, make] of [
    ['crypto.randomUUID', randomUUID],
    ['newRequestId', newRequestId],
  ]) {
    let bad = 0;
    const ns = cpuNsPer(() => {
      for (let i = 0; i < N; i++) if (headerCheck.test(make())) bad++;
    });
    console.log(`id  ${name.padEnd(18)} ${ns.toFixed(0)} ns per id and header check${bad ? ' (bad!)' : ''}`);
  }
}

async function listenerOf(dist) {
  const load = (file) => import(pathToFileURL(path.join(dist, file)).href);
  const { createApp } = await load('app.js');
  const { defaultMigrationsDir, migrate, openDatabase, readMigrations } = await load('store/sqlite/database.js');
  const { SqliteCircuitStore } = await load('store/sqlite/circuit-store.js');
  const { hostRule } = await load('http/request-guard.js');
  const db = openDatabase(':memory:');
  migrate(db, readMigrations(defaultMigrationsDir()));
  const built = createApp({
    store: new SqliteCircuitStore(db, true),
    clock: Date.now,
    logger: pino({ level: 'silent' }),
    circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    policy: { probeLeaseMs: 10_000 },
    hosts: hostRule('127.0.0.1', undefined),
  });
  const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"success":true}' };
  await built.app.request('/circuits/bench-ok/outcomes', init);
  return built.allowedListener;
}

// Strings as node:http's parser makes them (flat); from a pool, so making them is not timed. A pooled
// string keeps its hash once hashed, which spares the target memo's lookup the hashing of a
// 26-character string that a fresh one costs.
const flat = (text) => Buffer.from(text, 'latin1').toString('latin1');
const urls = Array.from({ length: 4096 }, () => flat('/circuits/bench-ok/allowed'));
const hosts = Array.from({ length: 4096 }, () => flat('127.0.0.1:8080'));
let written = 0;
const outgoing = {
  headersSent: false,
  writeHead(_status, list) {
    written += list.length;
    return this;
  },
  end(text) {
    written += text.length;
    return this;
  },
  destroy() {},
};
for (const dist of builds) {
  const listener = await listenerOf(dist);
  for (let round = 0; round < 3; round++) {
    const ns = cpuNsPer(() => {
      for (let i = 0; i < N; i++) {
        const at = i & 4095;
        listener({ method: 'GET', url: urls[at], rawHeaders: ['Host', hosts[at]] }, outgoing);
      }
    });
    console.log(`listener  ${dist}  ${ns.toFixed(0)} ns per request`);
  }
}
if (written === 0) throw new Error('nothing answered');
