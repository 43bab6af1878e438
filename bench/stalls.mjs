// The `stalls` section of `npm run bench` (issue 15): work that used to grow with the table
// and block the event loop, measured against a baseline of the same run.
//
//   - 1,000 failure outcomes, one per circuit, on circuits past `metrics.max_circuits` with
//     100,000 circuits (BENCH_STALLS_CIRCUITS), metrics on vs `metrics.enabled: false`;
//   - GET /health latency (max of a 20 ms poll) while 20 `Last-Event-ID: 0` streams replay
//     100,000 transitions (BENCH_STALLS_TRANSITIONS), vs the same poll on the idle server;
//   - GET /health latency while /dashboard/api/state pages through the circuits, and the
//     time of one /dashboard/api/state answer.
//
// The databases are filled with SQL before the servers start (minutes over HTTP otherwise).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

const JSON_HEADERS = { 'content-type': 'application/json' };
const OUTCOMES = 1_000;
const STREAMS = 20;

/** Start once (migrates), stop, then insert circuits and transitions in one transaction each. */
async function seedDatabase(ctx, file, circuits, transitions) {
  const first = await ctx.startCircuitlog({ name: 'circuitlog-seed', db: file, logLevel: 'warn' });
  await ctx.stopEach([first]);
  const Database = createRequire(path.join(ctx.repoRoot, 'package.json'))('better-sqlite3');
  const db = new Database(file);
  const insert = db.prepare(
    'INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES (?, 1000000000, 30, 0, 0)',
  );
  const log = db.prepare(
    "INSERT INTO transitions (circuit_id, from_state, to_state, reason, at) VALUES (?, 'closed', 'open', 'failure_threshold_reached', ?)",
  );
  db.transaction(() => {
    for (let i = 1; i <= circuits; i++) insert.run(`stall-c${i}`);
    for (let i = 1; i <= transitions; i++) log.run(1 + (i % circuits), Date.now());
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

/** `count` sequential failure outcomes on distinct circuits from `fromIndex`: total ms. */
async function timeOutcomes(url, fromIndex, count) {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${url}/circuits/stall-c${fromIndex + i}/outcomes`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":false}',
    });
    if (res.status !== 200) throw new Error(`outcome: ${res.status}`);
    await res.arrayBuffer();
  }
  return performance.now() - t0;
}

// The poller runs in a process of its own: this one is busy reading the streams it measures.
const POLLER = `
let worst = 0, done = false;
process.stdin.on('data', () => {}).on('end', () => (done = true));
while (!done) {
  const t0 = performance.now();
  await (await fetch(process.argv[1] + '/health')).arrayBuffer();
  worst = Math.max(worst, performance.now() - t0);
  await new Promise((r) => setTimeout(r, 20));
}
process.stdout.write(String(worst));
`;

/** Poll GET /health every 20 ms (from another process) while \`work\` runs; the slowest answer in ms. */
async function healthDuring(url, work) {
  const poller = spawn(process.execPath, ['--input-type=module', '-e', POLLER, url], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  poller.stdout.on('data', (d) => (out += d));
  const exited = new Promise((resolve) => poller.once('exit', resolve));
  await new Promise((r) => setTimeout(r, 200)); // the poller is up and has answers
  try {
    await work();
  } finally {
    poller.stdin.end();
    await exited;
  }
  return Number(out);
}

/** Open `n` replaying streams and read each until it has `expect` transition events. */
async function replay(url, n, expect) {
  await Promise.all(
    Array.from({ length: n }, async () => {
      const controller = new AbortController();
      const res = await fetch(`${url}/events/stream`, { headers: { 'last-event-id': '0' }, signal: controller.signal });
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let seen = 0;
      let tail = '';
      while (seen < expect) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended after ${seen} events`);
        const text = tail + decoder.decode(value, { stream: true });
        seen += text.split('event: transition').length - 1;
        tail = text.slice(-20);
        seen -= tail.split('event: transition').length - 1;
      }
      controller.abort();
    }),
  );
}

/** @param ctx what bench/run.mjs lends: startCircuitlog, tempDir, removeTemp, stopEach, envInt, log, repoRoot */
export async function stallsSection(ctx) {
  const { log } = ctx;
  const circuits = ctx.envInt('BENCH_STALLS_CIRCUITS', 100_000, 20_000, 1_000_000);
  const transitions = ctx.envInt('BENCH_STALLS_TRANSITIONS', 100_000, 1_000, 1_000_000);
  const tmp = ctx.tempDir('circuitlog-bench-stalls-');
  const procs = [];
  try {
    const seed = path.join(tmp, 'seed.db');
    log(`seeding ${circuits} circuits and ${transitions} transitions`);
    await seedDatabase(ctx, seed, circuits, transitions);
    fs.copyFileSync(seed, path.join(tmp, 'on.db'));
    fs.copyFileSync(seed, path.join(tmp, 'off.db'));
    const offConfig = path.join(tmp, 'metrics-off.yaml');
    fs.writeFileSync(offConfig, 'metrics:\n  enabled: false\n');
    const on = await ctx.startCircuitlog({
      name: 'circuitlog-stalls-on',
      db: path.join(tmp, 'on.db'),
      logLevel: 'warn',
    });
    procs.push(on);
    const off = await ctx.startCircuitlog({
      name: 'circuitlog-stalls-off',
      db: path.join(tmp, 'off.db'),
      logLevel: 'warn',
      config: offConfig,
    });
    procs.push(off);

    const past = circuits - 2 * OUTCOMES; // well past the default cap of 10,000
    const offMs = await timeOutcomes(off.url, past, OUTCOMES);
    const onMs = await timeOutcomes(on.url, past, OUTCOMES);
    const onAgainMs = await timeOutcomes(on.url, past + OUTCOMES, OUTCOMES);
    log(
      `${OUTCOMES} outcomes past the cap: metrics off ${offMs.toFixed(0)} ms, on ${onMs.toFixed(0)} ms, on again ${onAgainMs.toFixed(0)} ms`,
    );

    const idleMs = await healthDuring(on.url, () => new Promise((r) => setTimeout(r, 1_000)));
    const replayMs = await healthDuring(on.url, () => replay(on.url, STREAMS, transitions));
    log(
      `GET /health worst: idle ${idleMs.toFixed(1)} ms, during ${STREAMS} replays of ${transitions} transitions ${replayMs.toFixed(1)} ms`,
    );

    let stateMs = 0;
    const pageMs = await healthDuring(on.url, async () => {
      const t0 = performance.now();
      let after = '';
      for (;;) {
        const res = await fetch(`${on.url}/dashboard/api/state?limit=500${after}`);
        const body = await res.json();
        if (res.status !== 200) throw new Error(`/dashboard/api/state: ${res.status}`);
        if (body.next_after === null || body.next_after === undefined) break;
        after = `&after=${encodeURIComponent(body.next_after)}`;
      }
      stateMs = performance.now() - t0;
    });
    log(
      `/dashboard/api/state, every page of ${circuits} circuits: ${stateMs.toFixed(0)} ms; GET /health worst meanwhile ${pageMs.toFixed(1)} ms`,
    );

    const notes = [
      `Two circuitlog processes of the same build on copies of one database with ${circuits} circuits and ${transitions} transitions; log level warn.`,
      `${OUTCOMES} sequential failure outcomes, one per circuit, all past metrics.max_circuits (10,000): metrics.enabled false ${offMs.toFixed(0)} ms (baseline), metrics on ${onMs.toFixed(0)} ms (${(onMs / offMs).toFixed(2)}x), the next ${OUTCOMES} ${onAgainMs.toFixed(0)} ms (${(onAgainMs / offMs).toFixed(2)}x).`,
      `GET /health, slowest answer of a 20 ms poll: idle ${idleMs.toFixed(1)} ms (baseline); while ${STREAMS} streams replay all ${transitions} transitions (Last-Event-ID: 0) ${replayMs.toFixed(1)} ms.`,
      `Every page of /dashboard/api/state (limit 500, as the page reads it): ${stateMs.toFixed(0)} ms in all; GET /health slowest meanwhile ${pageMs.toFixed(1)} ms.`,
    ];
    return {
      id: 'stalls',
      title: 'Stalls: work past metrics.max_circuits, Last-Event-ID replays, dashboard paging',
      durationSec: 0,
      results: [],
      stalls: { circuits, transitions, offMs, onMs, onAgainMs, idleMs, replayMs, stateMs, pageMs },
      notes,
      checks: [],
    };
  } finally {
    await ctx.stopEach(procs);
    ctx.removeTemp(tmp);
  }
}
