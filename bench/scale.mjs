// The `scale` section of `npm run bench` (issue 20): what grows with the number of circuits N,
// and what the transition-log retention costs a request.
//
// For N = 1, 10,000, 100,000 and 1,000,000 circuits (BENCH_SCALE_N, a comma list), on SQLite and
// on Redis (BENCH_SCALE_STORES=sqlite,redis):
//   - GET /circuits/bench-ok/allowed (closed) and a failure outcome (bench-fail): req/s, and the
//     ratio to N = 1 of the same store in the same run (goal ≥ 0.8x at every N);
//   - GET /circuits?limit=100 with a cursor 90% deep into the table: p50 of 50 requests (goal < 5 ms);
//   - server RSS after the load, and (RSS at N - RSS at 1) / N bytes per circuit;
//   - start-up time to the first /health 200 (goal < 5 s at N = 1,000,000);
//   - GET /metrics render time, p50 of 10 scrapes (metrics.max_circuits = 10,000 labelled).
// One server per N runs at once and the loads are interleaved (alternating order with BENCH_ROUNDS > 1),
// so that every N sees the same machine. The N - 2 filler circuits are written into the store directly before the server starts
// (SQLite: one INSERT transaction on the migrated file; Redis: the store's key layout, pipelined),
// not through the API: a million POSTs would take longer than the whole section. bench-ok and
// bench-fail are then made through the API as in the other sections.
//
// Retention (SQLite): BENCH_SCALE_OLD_ROWS (10,000,000) transitions 60 days old over 10,000 circuits;
// p99 of GET /allowed with retention off (events.retention 0/0) vs while the sweep deletes them; then,
// without load, the wait (at most BENCH_SCALE_DRAIN_SEC, 900 s) for the sweep's `housekeeping` line:
// the time to delete the whole backlog, and rows/s.
//
// Writes bench/results/scale.svg (req/s ratio and RSS against N).

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { percentileSorted, probeOk, startProcess } from './lib.mjs';
import { fanoutMarkdown, fanoutRun } from './fanout.mjs';
import { dashboardRun } from './dashboard-load.mjs';

const JSON_HEADERS = { 'content-type': 'application/json' };
const DAY_MS = 86_400_000;

/** `ctx`: helpers of run.mjs. */
export async function scaleSection(ctx) {
  const durationSec = ctx.durationFor('scale');
  const ns = (process.env.BENCH_SCALE_N || '1,10000,100000,1000000').split(',').map(Number);
  const stores = (process.env.BENCH_SCALE_STORES || 'sqlite,redis').split(',');
  const oldRows = ctx.envInt('BENCH_SCALE_OLD_ROWS', 10_000_000, 0, 100_000_000);
  const require = createRequire(path.join(ctx.repoRoot, 'package.json'));
  const Database = require('better-sqlite3');
  const dist = (p) => import(pathToFileURL(path.join(ctx.repoRoot, 'dist', p)).href);
  const { migrate, readMigrations, defaultMigrationsDir } = await dist('store/sqlite/database.js');
  const { newCircuit } = await dist('domain/circuit.js');
  const shards = await dist('store/redis/shards.js');
  const libs = { Database, migrate, readMigrations, defaultMigrationsDir, newCircuit, shards, require };

  const rows = [];
  const tmp = ctx.tempDir('circuitlog-bench-scale-');
  try {
    for (const store of stores) {
      if (store === 'redis' && spawnSync('sh', ['-c', 'command -v redis-server']).status !== 0) continue;
      rows.push(...(await measureStore(ctx, libs, tmp, store, ns, durationSec)));
    }
    const fanout = process.env.BENCH_SCALE_FANOUT === '0' || ctx.skipFanout ? null : await fanoutRun(ctx, tmp);
    const dashboard =
      process.env.BENCH_SCALE_DASHBOARD === '0'
        ? null
        : await dashboardRun({ ...ctx, require }, tmp, (file, n) => seedSqlite(libs, file, n));
    const retention = oldRows > 0 ? await retentionRun(ctx, libs, tmp, oldRows, durationSec) : null;
    for (const r of rows) {
      const base = rows.find((b) => b.store === r.store && b.n === ns[0]);
      r.allowedRatio = r.allowedRps / base.allowedRps;
      r.failRatio = r.failRps / base.failRps;
      r.bytesPerCircuit = r.n > base.n ? (r.rssBytes - base.rssBytes) / (r.n - base.n) : null;
      r.redisBytesPerCircuit =
        r.redisBytes !== null && r.n > base.n ? (r.redisBytes - base.redisBytes) / (r.n - base.n) : null;
    }
    const svg = path.join(ctx.repoRoot, 'bench', 'results', 'scale.svg');
    fs.mkdirSync(path.dirname(svg), { recursive: true });
    fs.writeFileSync(svg, plot(rows, ns));
    ctx.log(`wrote ${path.relative(ctx.repoRoot, svg)}`);
    return {
      id: 'scale',
      title: 'Scale: cost against the number of circuits N (ratio = value at N / value at N = 1, same store, same run)',
      durationSec,
      results: [],
      table: rows,
      retention,
      fanout,
      dashboard,
      markdownExtra: tableMarkdown(rows, retention, fanout, dashboard),
      notes: [
        "Filler circuits are written into the store directly (one SQLite transaction, or pipelined Redis commands in the store's layout) before circuitlog starts; bench-ok and bench-fail through the API. One circuitlog process, log level warn, metrics on (max_circuits 10,000).",
        `Load: ${ctx.suiteOptions(durationSec).connections} connections, ${durationSec} s per target after a 1 s warm-up, one round; all processes share this machine's CPUs with other work, so compare ratios.`,
      ],
      checks: [],
    };
  } finally {
    ctx.removeTemp(tmp);
  }
}

/**
 * One store at every N: seed and start one server per N (start-up timed), then load them all in
 * one suite, interleaved and in alternating order per round (BENCH_ROUNDS), so that each N sees
 * the same machine; then the list, RSS and /metrics figures per server.
 */
async function measureStore(ctx, libs, tmp, store, ns, durationSec) {
  const servers = [];
  try {
    for (const n of ns) servers.push(await startAt(ctx, libs, tmp, store, n));
    const targets = servers.flatMap(({ n, server }) => [
      {
        id: `allowed-${n}`,
        label: `${store} N=${n}: GET /circuits/bench-ok/allowed`,
        url: `${server.url}/circuits/bench-ok/allowed`,
        pid: server.pid,
      },
      {
        id: `fail-${n}`,
        label: `${store} N=${n}: POST failure outcome`,
        url: `${server.url}/circuits/bench-fail/outcomes`,
        method: 'POST',
        headers: JSON_HEADERS,
        body: '{"success":false}',
        pid: server.pid,
      },
    ]);
    const [result] = await ctx.runSuite(
      [{ id: `scale-${store}`, title: `scale: ${store}`, baseline: `allowed-${ns[0]}`, targets }],
      { ...ctx.suiteOptions(durationSec), warmupSec: 1 },
    );
    const rows = [];
    for (const { n, server, redis, startupMs, gaugesMs, deepCursor } of servers) {
      const allowed = result.targets.find((t) => t.id === `allowed-${n}`);
      const fail = result.targets.find((t) => t.id === `fail-${n}`);
      const rssBytes = rssOf(server.pid);
      const listP50 = await timeList(server.url, deepCursor);
      const metricsP50 = await timeMetrics(server.url);
      const redisBytes = redis ? await redisUsedMemory(libs, redis.url) : null;
      rows.push({
        store,
        n,
        redisBytes,
        startupMs,
        gaugesMs,
        allowedRps: allowed.rps,
        allowedP99: allowed.p99,
        failRps: fail.rps,
        failP99: fail.p99,
        listP50,
        rssBytes,
        metricsP50,
        valid: allowed.valid && fail.valid,
      });
      ctx.log(
        `scale :: ${store} N=${n}: start ${startupMs.toFixed(0)} ms, allowed ${allowed.rps.toFixed(0)}/s, fail ${fail.rps.toFixed(0)}/s, list p50 ${listP50.toFixed(2)} ms, RSS ${(rssBytes / 2 ** 20).toFixed(0)} MiB, /metrics ${metricsP50.toFixed(1)} ms`,
      );
    }
    return rows;
  } finally {
    for (const { server, redis } of servers) {
      await server.stop();
      redis?.stop();
    }
  }
}

/** Seed N - 2 filler circuits, start circuitlog on them (timed to the first /health 200), make bench-ok and bench-fail. */
async function startAt(ctx, libs, tmp, store, n) {
  const filler = Math.max(0, n - 2);
  const dir = path.join(tmp, `${store}-${n}`);
  fs.mkdirSync(dir);
  let redis = null;
  const env = { HOST: '127.0.0.1', CIRCUITLOG_LOG_LEVEL: 'warn', CIRCUITLOG_CONFIG: '', CIRCUITLOG_TOKEN: '' };
  const seedStarted = performance.now();
  if (store === 'sqlite') {
    env.CIRCUITLOG_DB = path.join(dir, 'scale.db');
    seedSqlite(libs, env.CIRCUITLOG_DB, filler);
  } else {
    redis = await startRedisServer(dir);
    env.CIRCUITLOG_STORE = redis.url;
    await seedRedis(libs, redis.url, filler);
  }
  ctx.log(
    `scale :: ${store} N=${n}: seeded ${filler} circuits in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`,
  );
  const startedAt = performance.now();
  const server = await startProcess({
    name: `circuitlog-${store}-${n}`,
    args: [path.join(ctx.repoRoot, 'dist', 'main.js')],
    cwd: ctx.repoRoot,
    port: 'auto',
    readyPath: '/health',
    timeoutMs: 120_000,
    env,
  });
  const startupMs = performance.now() - startedAt;
  // Redis: the state gauges' mirror loads in the background after start-up; the loads below wait for it.
  const gaugesMs = (await gaugesComplete(server.url)) - startedAt;
  if (store === 'redis')
    ctx.log(
      `scale :: ${store} N=${n}: serving after ${startupMs.toFixed(0)} ms, state gauges complete after ${gaugesMs.toFixed(0)} ms`,
    );
  await ctx.setupBenchCircuits(server.url);
  // The id 90 % into the table: SQLite's seeded ids are 1..N, Redis's (i + 1) * 16 + shard (seedRedis).
  const deepCursor = Math.floor(n * 0.9) * (store === 'redis' ? libs.shards.SHARDS : 1);
  return { n, server, redis, startupMs, gaugesMs, deepCursor };
}

/** When /metrics first shows the per-state counts (a Redis host's mirror has loaded); bounded to 10 minutes. */
async function gaugesComplete(url) {
  for (let i = 0; i < 6_000; i++) {
    const text = await (await fetch(`${url}/metrics`)).text();
    if (text.includes('circuitlog_circuits{state="closed"}')) return performance.now();
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url}: the state gauges did not appear within 10 minutes`);
}

function seedSqlite({ Database, migrate, readMigrations, defaultMigrationsDir }, file, count, now = Date.now()) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  migrate(db, readMigrations(defaultMigrationsDir()));
  // One statement generating the rows (a recursive CTE): several times faster than a loop of INSERTs.
  db.prepare(`INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at)
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
    SELECT 'scale/c' || i, 5, 30, ?, ? FROM n`).run(count, now, now);
  if (count === 0) db.prepare("DELETE FROM circuits WHERE name = 'scale/c0'").run(); // the CTE yields at least one row
  db.close();
}

/**
 * Circuits in the Redis store's sharded layout (src/store/redis/scripts.ts, shards.ts): per
 * circuit its hash under its shard's tag and its shard's `index` entry (id `n * 16 + shard`),
 * then each shard's `ids` and `version` counters (names `scale-c<i>`: with no `/` they spread
 * over the 16 shards; `scale/c<i>` would all share one, see shards.ts), as RESP piped into `redis-cli --pipe` (about a
 * million commands a second). The layout before shards would be moved circuit by circuit at start
 * (legacy-keys.ts), which is a one-off upgrade, not what a host's start costs.
 */
async function seedRedis({ newCircuit, shards }, url, count) {
  const port = new URL(url).port;
  const pipe = spawn('redis-cli', ['-p', port, '--pipe'], { stdio: ['pipe', 'ignore', 'inherit'] });
  const done = new Promise((resolve, reject) =>
    pipe.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`redis-cli --pipe exited ${code}`)))),
  );
  const resp = (args) => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
  const { SHARDS, SHARD_TAGS, shardOf } = shards;
  const base = (shard) => `circuitlog:{${SHARD_TAGS[shard]}}:`;
  const now = Date.now();
  const template = newCircuit('x', { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 }, now);
  const CHUNK = 10_000;
  for (let from = 0; from < count; from += CHUNK) {
    let text = '';
    for (let i = from; i < Math.min(count, from + CHUNK); i++) {
      const name = `scale-c${i}`; // no '/': spread over the shards, as a fleet keyed by tenant is
      const shard = shardOf(name);
      const id = (i + 1) * SHARDS + shard;
      const json = JSON.stringify({ ...template, id, name });
      text += resp(['HSET', `${base(shard)}c:${name}`, 'v', String(i + 1), 'id', String(id), 'c', json]);
      text += resp(['ZADD', `${base(shard)}index`, String(id), name]);
    }
    if (!pipe.stdin.write(text)) await new Promise((r) => pipe.stdin.once('drain', r));
  }
  let tail = '';
  for (let shard = 0; shard < SHARDS; shard++)
    tail += resp(['SET', `${base(shard)}ids`, String(count)]) + resp(['SET', `${base(shard)}version`, String(count)]);
  pipe.stdin.end(tail);
  await done;
}

async function redisUsedMemory({ require }, url) {
  const { createClient } = require('@redis/client');
  const client = createClient({ url, RESP: 2 });
  await client.connect();
  const info = await client.sendCommand(['INFO', 'memory']);
  await client.quit();
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

function rssOf(pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) * 1024;
}

/** p50 of 50 sequential GET /circuits?limit=100 starting after `cursor`. */
async function timeList(url, cursor) {
  const times = [];
  for (let i = 0; i < 50; i++) {
    const t0 = performance.now();
    const res = await fetch(`${url}/circuits?limit=100${cursor > 0 ? `&cursor=${cursor}` : ''}`);
    const body = await res.json();
    times.push(performance.now() - t0);
    if (res.status !== 200 || (cursor > 0 && body.circuits.length === 0))
      throw new Error(`list at cursor ${cursor}: ${res.status}`);
  }
  return percentileSorted(
    times.sort((a, b) => a - b),
    50,
  );
}

async function timeMetrics(url) {
  const times = [];
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    const res = await fetch(`${url}/metrics`);
    await res.text();
    times.push(performance.now() - t0);
    if (res.status !== 200) throw new Error(`/metrics: ${res.status}`);
  }
  return percentileSorted(
    times.sort((a, b) => a - b),
    50,
  );
}

/**
 * `rows` transitions 60 days old on 10,000 circuits; GET /allowed p99 with retention off, then
 * while the default retention (30 days) deletes them, on the same file.
 */
async function retentionRun(ctx, libs, tmp, rows, durationSec) {
  const file = path.join(tmp, 'retention.db');
  const circuits = 10_000;
  const seeded = performance.now();
  seedSqlite(libs, file, circuits);
  const db = new libs.Database(file);
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -1000000'); // 1 GB while seeding: the circuit index takes its rows in random order
  const old = Date.now() - 60 * DAY_MS;
  const PER_TX = 1_000_000;
  const insert = db.prepare(`INSERT INTO transitions (circuit_id, from_state, to_state, reason, at)
    WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
    SELECT (i % ${circuits}) + 1, 'closed', 'open', 'failure_threshold_reached', ? + i / 100 FROM n`);
  for (let from = 0; from < rows; from += PER_TX) insert.run(from, Math.min(rows, from + PER_TX), old);
  db.close();
  ctx.log(`scale :: retention: seeded ${rows} transitions in ${((performance.now() - seeded) / 1000).toFixed(1)} s`);
  const off = path.join(tmp, 'retention-off.yaml');
  fs.writeFileSync(off, 'events:\n  retention: { max_age_days: 0, max_per_circuit: 0 }\n');
  const drainLimitSec = ctx.envInt('BENCH_SCALE_DRAIN_SEC', 900, 0, 3_600);
  const run = async (label, config) => {
    const started = performance.now();
    const server = await ctx.startCircuitlog({
      name: `circuitlog-retention-${label}`,
      db: file,
      logLevel: 'info',
      config,
    });
    let sweptAt = null; // the first sweep's `housekeeping` line: the backlog is gone
    server.onLog = (entry) => {
      if (entry?.event === 'housekeeping' && sweptAt === null) sweptAt = performance.now();
    };
    try {
      await ctx.setupBenchCircuits(server.url);
      const loadStarted = performance.now();
      const [result] = await ctx.runSuite(
        [
          {
            id: `retention-${label}`,
            title: `retention ${label}`,
            baseline: 'allowed',
            targets: [
              {
                id: 'allowed',
                label: `retention ${label}: GET /allowed`,
                url: `${server.url}/circuits/bench-ok/allowed`,
                pid: server.pid,
              },
            ],
          },
        ],
        { ...ctx.suiteOptions(durationSec), warmupSec: 0 },
      );
      const loadMs = performance.now() - loadStarted;
      // Without load, until the sweep is done (bounded by BENCH_SCALE_DRAIN_SEC): how long the whole backlog takes.
      const waitUntil = performance.now() + drainLimitSec * 1000;
      while (label === 'sweeping' && sweptAt === null && performance.now() < waitUntil) await sleepMs(500);
      const drainMs = sweptAt === null ? null : sweptAt - started;
      const ranMs = performance.now() - started;
      return { ...result.targets[0], loadMs, loadStarted: loadStarted - started, drainMs, ranMs, logs: server.logs };
    } finally {
      await server.stop();
    }
  };
  const baseline = await run('off', off);
  const during = await run('sweeping', '');
  const check = new libs.Database(file, { readonly: true });
  const left = check.prepare('SELECT count(*) FROM transitions').pluck().get();
  check.close();
  const deleted = rows - left;
  const sweepDone = during.drainMs !== null;
  ctx.log(
    `scale :: retention: p99 ${baseline.p99.toFixed(2)} ms off vs ${during.p99.toFixed(2)} ms sweeping; ${deleted} rows deleted${sweepDone ? `, all in ${(during.drainMs / 1000).toFixed(1)} s from start` : ` (not done after ${drainLimitSec} s)`} (${Math.round(deleted / ((during.drainMs ?? during.ranMs) / 1000))}/s)`,
  );
  return {
    rows,
    baselineRps: baseline.rps,
    baselineP99: baseline.p99,
    duringRps: during.rps,
    duringP99: during.p99,
    deleted,
    sweepDone,
    drainMs: during.drainMs,
    deletedPerSec: deleted / ((during.drainMs ?? during.ranMs) / 1000),
  };
}

const sleepMs = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function startRedisServer(dir) {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = s.address().port;
      s.close(async () => {
        const child = spawn(
          'redis-server',
          ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'],
          { stdio: 'ignore' },
        );
        for (let i = 0; i < 200; i++) {
          const ok = await new Promise((r) => {
            const socket = net.connect(port, '127.0.0.1', () => socket.end(() => r(true)));
            socket.once('error', () => r(false));
          });
          if (ok) return resolve({ url: `redis://127.0.0.1:${port}/0`, stop: () => child.kill('SIGKILL') });
          await new Promise((r) => setTimeout(r, 50));
        }
        reject(new Error('redis-server did not start'));
      });
    });
  });
}

const f0 = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–');

function tableMarkdown(rows, retention, fanout, dashboard) {
  const lines = [
    '| store | N | /allowed req/s | ratio | failure req/s | ratio | list p50 ms (deep cursor) | RSS MiB | RSS bytes/circuit | redis-server bytes/circuit | start-up ms | state gauges complete ms | /metrics p50 ms |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.store} | ${f0(r.n)} | ${f0(r.allowedRps)} | ${f2(r.allowedRatio)}x | ${f0(r.failRps)} | ${f2(r.failRatio)}x | ${f2(r.listP50)} | ${f0(r.rssBytes / 2 ** 20)} | ${r.bytesPerCircuit === null ? '–' : f0(r.bytesPerCircuit)} | ${r.redisBytesPerCircuit == null ? '–' : f0(r.redisBytesPerCircuit)} | ${f0(r.startupMs)} | ${f0(r.gaugesMs)} | ${f2(r.metricsP50)} |`,
    ),
  ];
  const big = rows.filter((r) => r.n === Math.max(...rows.map((x) => x.n)));
  lines.push(
    '',
    'Goals (issue 20):',
    ...rows
      .filter((r) => r.allowedRatio !== 1 || r.n !== rows[0].n)
      .filter((r) => r.n > Math.min(...rows.map((x) => x.n)))
      .map(
        (r) =>
          `- ${r.store} N=${f0(r.n)}: /allowed ${f2(r.allowedRatio)}x, failure ${f2(r.failRatio)}x (goal ≥ 0.80x): ${r.allowedRatio >= 0.8 && r.failRatio >= 0.8 ? 'met' : 'NOT met'}`,
      ),
    ...rows.map(
      (r) =>
        `- ${r.store} N=${f0(r.n)}: list p50 ${f2(r.listP50)} ms (goal < 5 ms): ${r.listP50 < 5 ? 'met' : 'NOT met'}`,
    ),
    ...big.map(
      (r) =>
        `- ${r.store} N=${f0(r.n)}: start-up ${f0(r.startupMs)} ms (goal < 5,000 ms), /metrics p50 ${f2(r.metricsP50)} ms (goal < 50 ms): ${r.startupMs < 5000 ? 'met' : 'NOT met'} / ${r.metricsP50 < 50 ? 'met' : 'NOT met'}`,
    ),
  );
  if (fanout) lines.push('', fanoutMarkdown(fanout));
  if (dashboard) {
    const { few, many } = dashboard;
    lines.push(
      '',
      `Dashboard in headless Chromium, median of 5 loads: first row on screen ${f0(many.firstRowMs)} ms at ${f0(many.n)} circuits (${many.rows} rows on the page) vs ${f0(few.firstRowMs)} ms at ${f0(few.n)} (${f2(many.firstRowMs / few.firstRowMs)}x); stream live ${f0(many.liveMs)} vs ${f0(few.liveMs)} ms.`,
      `- dashboard at ${f0(many.n)} circuits: first screen ${f0(many.firstRowMs)} ms (goal < 1,000 ms): ${many.firstRowMs < 1000 ? 'met' : 'NOT met'}`,
    );
  }
  if (retention) {
    lines.push(
      '',
      `Retention (SQLite, ${f0(retention.rows)} transitions 60 days old): GET /allowed p99 ${f2(retention.baselineP99)} ms with retention off, ${f2(retention.duringP99)} ms while the sweep runs (${f0(retention.baselineRps)} vs ${f0(retention.duringRps)} req/s); ${f0(retention.deleted)} rows deleted${retention.sweepDone ? `, the whole backlog in ${f0(retention.drainMs / 1000)} s from start-up (${f0(retention.deletedPerSec)} rows/s)` : ` (${f0(retention.deletedPerSec)} rows/s; the sweep had not finished when the wait ended)`}.`,
    );
  }
  return lines.join('\n');
}

/** Two small panels: req/s ratio to N = 1, and RSS in MiB, against N (log scale); exported to redraw a saved run. */
export function plot(rows, ns) {
  const W = 360;
  const H = 220;
  const pad = { l: 48, r: 12, t: 28, b: 36 };
  const xs = ns.map((n) => Math.log10(Math.max(1, n)));
  const x = (n) =>
    pad.l +
    ((Math.log10(Math.max(1, n)) - Math.min(...xs)) / (Math.max(...xs) - Math.min(...xs) || 1)) * (W - pad.l - pad.r);
  const series = [
    { key: 'allowedRatio', store: 'sqlite', label: 'SQLite /allowed', color: '#1f77b4' },
    { key: 'failRatio', store: 'sqlite', label: 'SQLite failure (dashed)', color: '#1f77b4', dash: '4 3' },
    { key: 'allowedRatio', store: 'redis', label: 'Redis /allowed', color: '#d62728' },
    { key: 'failRatio', store: 'redis', label: 'Redis failure (dashed)', color: '#d62728', dash: '4 3' },
  ];
  const panel = (ox, title, ymax, lines, yfmt, goal = null) => {
    const y = (v) => pad.t + (1 - v / ymax) * (H - pad.t - pad.b);
    const parts = [
      `<g transform="translate(${ox},0)">`,
      `<text x="${W / 2}" y="16" text-anchor="middle" font-size="13">${title}</text>`,
    ];
    for (let k = 0; k <= 4; k++) {
      const v = (ymax * k) / 4;
      parts.push(
        `<line x1="${pad.l}" x2="${W - pad.r}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/><text x="${pad.l - 4}" y="${y(v) + 4}" text-anchor="end" font-size="10">${yfmt(v)}</text>`,
      );
    }
    if (goal !== null)
      parts.push(
        `<line x1="${pad.l}" x2="${W - pad.r}" y1="${y(goal)}" y2="${y(goal)}" stroke="#999" stroke-dasharray="2 2"/><text x="${W - pad.r}" y="${y(goal) - 3}" text-anchor="end" font-size="9" fill="#777">goal ${goal}x</text>`,
      );
    for (const n of ns)
      parts.push(
        `<text x="${x(n)}" y="${H - pad.b + 14}" text-anchor="middle" font-size="10">${n >= 1e6 ? `${n / 1e6}M` : n >= 1e3 ? `${n / 1e3}k` : n}</text>`,
      );
    parts.push(`<text x="${W / 2}" y="${H - 6}" text-anchor="middle" font-size="11">circuits (N, log scale)</text>`);
    lines.forEach((s, i) => {
      const pts = rows
        .filter((r) => r.store === s.store && Number.isFinite(s.value(r)))
        .map((r) => `${x(r.n).toFixed(1)},${y(s.value(r)).toFixed(1)}`);
      if (pts.length === 0) return;
      parts.push(
        `<polyline fill="none" stroke="${s.color}" stroke-width="2" ${s.dash ? `stroke-dasharray="${s.dash}"` : ''} points="${pts.join(' ')}"/>`,
      );
      parts.push(
        `<text x="${pad.l + 6}" y="${pad.t + 12 + 12 * i}" font-size="10" fill="${s.color}">${s.label}</text>`,
      );
    });
    parts.push('</g>');
    return parts.join('');
  };
  const ratioMax = Math.max(1.2, ...rows.flatMap((r) => [r.allowedRatio, r.failRatio]).filter(Number.isFinite));
  const rssMax = Math.max(...rows.map((r) => r.rssBytes / 2 ** 20)) * 1.1;
  const left = panel(
    0,
    'req/s at N / req/s at N = 1',
    Math.ceil(ratioMax * 5) / 5,
    series.map((s) => ({ ...s, value: (r) => r[s.key] })),
    (v) => v.toFixed(1),
    0.8,
  );
  const rss = [
    { store: 'sqlite', label: 'SQLite RSS', color: '#1f77b4', value: (r) => r.rssBytes / 2 ** 20 },
    { store: 'redis', label: 'Redis host RSS', color: '#d62728', value: (r) => r.rssBytes / 2 ** 20 },
  ];
  const right = panel(W, 'server RSS (MiB)', Math.ceil(rssMax / 50) * 50, rss, (v) => v.toFixed(0));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${H}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${left}${right}</svg>\n`;
}
