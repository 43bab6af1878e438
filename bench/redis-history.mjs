// Issue 31 on Redis: outcome intake with the outcome history on vs off, in one run, on one
// redis-server (appendonly yes, appendfsync everysec, as bench/redis.mjs and the docs).
//
//   failure outcomes (every one rewrites the circuit)       history on vs off    goal >= 0.8x
//   success outcomes on a closed circuit (change nothing)   history on vs off    (report: off answers
//                                                           from the cache; on, each is appended in Redis)
//
// The store is driven in this process (dist/store/redis/open.js) the way the service drives it:
// CONCURRENCY callers in flight on one circuit, each `apply(name, step, hook)` with the outcome
// hook the service passes (`{type: 'outcome', t, outcome}`); writes to one circuit queue and go
// in one compare-and-set. Rounds alternate off/on; the median of the rounds is reported.
//
//   node bench/redis-history.mjs      (after `npm run build`; BENCH_HISTORY_SEC per round, default 3;
//                                      BENCH_HISTORY_ROUNDS, default 3; BENCH_HISTORY_CONCURRENCY, default 64)

import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { envInt, makeTempDir, median, probeOk, runLoad, startProcess, stopAll } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => import(path.join(root, 'dist', p));

const roundSec = envInt('BENCH_HISTORY_SEC', 3);
const rounds = envInt('BENCH_HISTORY_ROUNDS', 3);
const concurrency = envInt('BENCH_HISTORY_CONCURRENCY', 64);

async function startRedisServer(dir) {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
  const child = spawn('redis-server', [...args, '--appendonly', 'yes', '--appendfsync', 'everysec'], {
    stdio: 'ignore',
  });
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.end(() => resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `redis://127.0.0.1:${port}/0`, stop: () => child.kill('SIGKILL') };
}

/** redis-server's total µs in scripts so far (`INFO commandstats`: EVAL and EVALSHA). */
async function scriptUsec(store) {
  const info = await store.redis.command(['INFO', 'commandstats'], 'read');
  return [...info.matchAll(/cmdstat_eval(?:sha)?:calls=\d+,usec=(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
}

/**
 * Outcomes per second through `store.apply` for `sec` seconds, `concurrency` in flight, and the
 * CPU µs per outcome of this process and of redis-server's scripts (both stores share one server
 * and run one at a time).
 */
async function intake(store, name, success, policy, sec) {
  const cpu = process.cpuUsage();
  const usec = await scriptUsec(store);
  const { newCircuit, recordOutcome } = await dist('domain/circuit.js');
  const outcome = { success };
  let count = 0;
  const started = performance.now();
  const until = started + sec * 1_000;
  const loop = async () => {
    while (performance.now() < until) {
      const now = Date.now();
      const step = (c) => recordOutcome(c ?? newCircuit(name, policy, now), outcome, now);
      const hook = () => ({ type: 'outcome', t: now, outcome });
      await store.apply(name, step, hook);
      count++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const rate = count / ((performance.now() - started) / 1_000);
  const { user, system } = process.cpuUsage(cpu);
  return { rate, hostUs: (user + system) / count, redisUs: ((await scriptUsec(store)) - usec) / count };
}

/**
 * The same over HTTP: `POST /circuits/bench-fail/outcomes {"success":false}` (every one a write)
 * on two app processes (`bench/history-server.mjs`), history off and on, each on a database of
 * its own of the same redis-server; autocannon, `concurrency` connections, rounds alternating.
 */
async function httpIntake(redisUrl) {
  const start = (mode, db) =>
    startProcess({
      name: `history-${mode}`,
      args: [path.join(root, 'bench', 'history-server.mjs'), redisUrl.replace(/\/0$/, `/${db}`), mode],
      cwd: root,
      port: 'auto',
      readyPath: '/health',
      timeoutMs: 30_000,
    });
  const servers = { off: await start('off', 1), on: await start('on', 2) };
  const headers = { 'content-type': 'application/json' };
  for (const s of Object.values(servers))
    await probeOk(`${s.url}/circuits/bench-fail/call`, {
      method: 'POST',
      headers,
      body: '{"success":false,"threshold":1000000000}',
    });
  const load = (mode, durationSec) =>
    runLoad({
      tool: 'autocannon',
      url: `${servers[mode].url}/circuits/bench-fail/outcomes`,
      method: 'POST',
      headers,
      body: '{"success":false}',
      connections: concurrency,
      durationSec,
    });
  const answered = { off: 1, on: 1 }; // the set-up call
  for (const mode of ['off', 'on']) answered[mode] += (await load(mode, 1)).requests; // warm-up
  const rates = { off: [], on: [] };
  for (let r = 0; r < rounds; r++)
    for (const mode of r % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
      const run = await load(mode, roundSec);
      if (run.non2xx + run.errors + run.timeouts > 0) throw new Error(`${mode}: ${JSON.stringify(run)}`);
      rates[mode].push(run.rps);
      answered[mode] += run.requests;
    }
  await stopAll();
  // What each wrote to the history of bench-fail (`circuitlog:` prefix, the default).
  const { RedisKeys } = await dist('store/redis/redis-keys.js');
  const { createClient } = await import('@redis/client');
  const key = new RedisKeys('circuitlog:').history('bench-fail');
  const entries = {};
  for (const [mode, db] of [
    ['off', 1],
    ['on', 2],
  ]) {
    const client = createClient({ url: redisUrl.replace(/\/0$/, `/${db}`), RESP: 2 });
    await client.connect();
    entries[mode] = await client.xLen(key);
    client.destroy();
  }
  return { off: median(rates.off), on: median(rates.on), rounds: rates, entries, answered };
}

/** Exactly `total` outcome entries into `name`'s history (unchanged-circuit writes after the first). */
async function fill(store, name, outcome, policy, total) {
  const { newCircuit, recordOutcome } = await dist('domain/circuit.js');
  let left = total;
  const loop = async () => {
    while (left > 0) {
      left--;
      const now = Date.now();
      await store.apply(
        name,
        (c) =>
          c === null ? recordOutcome(newCircuit(name, policy, now), outcome, now) : { circuit: c, transitions: [] },
        () => ({ type: 'outcome', t: now, outcome }),
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
}

async function main() {
  const { openRedisStore } = await dist('store/redis/open.js');
  const pino = (await import('pino')).default;
  const logger = pino({ level: 'silent' });
  const redis = await startRedisServer(makeTempDir('circuitlog-bench-history-'));
  const policy = { failureThreshold: 1_000_000_000, timeoutSeconds: 30, halfOpenMaxCalls: 1 }; // stays closed
  try {
    const open = (enabled) =>
      openRedisStore({ url: redis.url, logger, prefix: `b-${randomUUID()}:`, history: { enabled } });
    const stores = { off: await open(false), on: await open(true) };
    const scenarios = [
      { id: 'failure', label: 'failure outcomes (each rewrites the circuit)', success: false, goal: 0.8 },
      { id: 'success', label: 'success outcomes on a closed circuit (change nothing)', success: true, goal: null },
    ];
    const results = [];
    for (const s of scenarios) {
      const rates = { off: [], on: [] };
      for (const mode of ['off', 'on']) await intake(stores[mode].store, `w-${s.id}`, s.success, policy, 1); // warm-up
      const cpu = { off: [], on: [] };
      for (let r = 0; r < rounds; r++)
        for (const mode of r % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
          const run = await intake(stores[mode].store, `c-${s.id}`, s.success, policy, roundSec);
          rates[mode].push(run.rate);
          cpu[mode].push(run);
        }
      const off = median(rates.off);
      const on = median(rates.on);
      const us = (mode, k) => median(cpu[mode].map((c) => c[k])).toFixed(2);
      const perOutcome = `host ${us('off', 'hostUs')} -> ${us('on', 'hostUs')} µs, redis-server scripts ${us('off', 'redisUs')} -> ${us('on', 'redisUs')} µs`;
      results.push({ ...s, off, on, ratio: on / off, rounds: rates, perOutcome });
    }
    const http = await httpIntake(redis.url);
    results.unshift({
      id: 'http-failure',
      label: 'HTTP `POST /outcomes {"success":false}` (each rewrites the circuit)',
      goal: 0.8,
      ...http,
      ratio: http.on / http.off,
    });
    const memory = [];
    for (const [label, outcome] of [
      ['bare failure `[0]`', { success: false }],
      [
        'success with duration and caller `[1,23,"checkout-7f9c"]`',
        { success: true, durationMs: 23, caller: 'checkout-7f9c' },
      ],
    ]) {
      const name = `m-${memory.length}`;
      await fill(stores.on.store, name, outcome, policy, 100_000);
      const key = stores.on.store.keys.history(name);
      const [length, bytes] = await Promise.all([
        stores.on.store.redis.command(['XLEN', key], 'read'),
        stores.on.store.redis.command(['MEMORY', 'USAGE', key, 'SAMPLES', '0'], 'read'),
      ]);
      memory.push({ label, length, bytes });
    }
    console.log(
      `Redis outcome history on vs off: ${rounds} rounds x ${roundSec} s, ${concurrency} in flight, one circuit`,
    );
    console.log('| scenario | off (outcomes/s) | on (outcomes/s) | on/off | goal |');
    console.log('|---|---:|---:|---:|---|');
    for (const r of results)
      console.log(
        `| ${r.label} | ${Math.round(r.off)} | ${Math.round(r.on)} | ${r.ratio.toFixed(2)}x | ${r.goal === null ? 'report' : `>= ${r.goal}x ${r.ratio >= r.goal ? 'met' : 'NOT met'}`} |`,
      );
    console.log(`rounds: ${JSON.stringify(results.map((r) => ({ id: r.id, ...r.rounds })))}`);
    for (const r of results)
      if (r.perOutcome !== undefined) console.log(`CPU per outcome (median), off -> on, ${r.id}: ${r.perOutcome}`);
    console.log(
      `HTTP: outcomes answered 2xx / history entries of bench-fail: off ${http.answered.off} / ${http.entries.off}, on ${http.answered.on} / ${http.entries.on}`,
    );
    for (const m of memory)
      console.log(
        `MEMORY USAGE of a history stream of ${m.length} entries, ${m.label}: ${m.bytes} B (${(m.bytes / m.length).toFixed(1)} B/entry)`,
      );
    await Promise.all(Object.values(stores).map((o) => o.close()));
  } finally {
    redis.stop();
  }
}

await main();
