// The `redis` section of `npm run bench` (issue 11): the Redis store against SQLite in the same
// run, and two hosts (two circuitlog processes on one Redis) against one.
//
//   GET /allowed (closed), Redis       vs the same on SQLite          goal ≥ 0.9x (answered from the cache)
//   failure outcomes, Redis            vs SQLite                      (report: every one a Lua compare-and-set)
//   2 hosts vs 1                       failure outcomes on one circuit, summed over both hosts (report)
//
// redis-server runs as the docs recommend (appendonly yes, appendfsync everysec) in a temp dir
// on a random loopback port; without redis-server the section is skipped with a note.

import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import autocannon from 'autocannon';
import { missingPrograms, probeOk, startProcess } from './lib.mjs';

const JSON_HEADERS = { 'content-type': 'application/json' };

/** `ctx`: helpers of run.mjs (as for the policy section). */
export async function redisSection(ctx) {
  const durationSec = ctx.durationFor('redis');
  const skipped = missingPrograms(['redis-server'], { id: 'redis', title: 'Redis store', durationSec });
  if (skipped) return skipped;
  const tmp = ctx.tempDir('circuitlog-bench-redis-');
  const procs = [];
  const redis = await startRedisServer(tmp);
  try {
    const env = (extra) => ({
      HOST: '127.0.0.1',
      CIRCUITLOG_LOG_LEVEL: 'warn',
      CIRCUITLOG_CONFIG: '',
      CIRCUITLOG_TOKEN: '',
      ...extra,
    });
    const start = (name, extra) =>
      startProcess({
        name,
        args: [ctx.dist],
        cwd: ctx.repoRoot,
        port: 'auto',
        readyPath: '/health',
        timeoutMs: 30_000,
        env: env(extra),
      });
    const sqlite = await start('circuitlog-sqlite', { CIRCUITLOG_DB: path.join(tmp, 'bench.db') });
    procs.push(sqlite);
    const hostA = await start('circuitlog-redis-a', { CIRCUITLOG_STORE: redis.url });
    procs.push(hostA);
    const hostB = await start('circuitlog-redis-b', { CIRCUITLOG_STORE: redis.url });
    procs.push(hostB);
    for (const server of [sqlite, hostA]) await ctx.setupBenchCircuits(server.url);
    const allowed = (id, label, server, goal = null) => ({
      id,
      label,
      url: `${server.url}/circuits/bench-ok/allowed`,
      goal,
      pid: server.pid,
    });
    const fail = (id, label, server) => ({
      id,
      label,
      url: `${server.url}/circuits/bench-fail/outcomes`,
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":false}',
      pid: server.pid,
    });
    const scenarios = [
      {
        id: 'redis-vs-sqlite',
        title: 'redis: Redis store vs SQLite',
        baseline: 'sqlite-allowed',
        targets: [
          allowed('sqlite-allowed', 'SQLite: GET /circuits/bench-ok/allowed (closed)', sqlite),
          allowed('redis-allowed', 'Redis: GET /circuits/bench-ok/allowed (closed)', hostA, 0.9),
          fail('sqlite-fail', 'SQLite: POST /circuits/bench-fail/outcomes {"success":false}', sqlite),
          fail('redis-fail', 'Redis: POST /circuits/bench-fail/outcomes {"success":false}', hostA),
        ],
      },
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));
    const one = results[0].targets.find((t) => t.id === 'redis-fail');
    ctx.log(`redis :: 2 hosts, failure outcomes on one circuit (${durationSec}s)`);
    const two = await Promise.all(
      [hostA, hostB].map((h) => load(`${h.url}/circuits/bench-fail/outcomes`, durationSec)),
    );
    const twoRps = two.reduce((n, r) => n + r.rps, 0);
    const lag = await crossHostLag(hostA.url, hostB.url);
    const count = async (server) => (await (await fetch(`${server.url}/circuits/bench-fail`)).json()).failure_count;
    const [a, b] = [await count(hostA), await count(hostB)];
    return {
      id: 'redis',
      title: 'Redis store: vs SQLite, and 2 hosts vs 1',
      durationSec,
      results,
      notes: [
        `2 hosts vs 1 (failure outcomes, one circuit): ${Math.round(twoRps)} req/s summed over both (${two.map((r) => Math.round(r.rps)).join(' + ')}, non-2xx ${two.reduce((n, r) => n + r.non2xx, 0)}) vs ${Math.round(one?.rps ?? 0)} req/s on one host: ${(twoRps / (one?.rps || 1)).toFixed(2)}x. All processes share this machine's CPUs.`,
        `Cross-host lag (a trip on host A refused on host B), median of 20: ${lag.median} ms, max ${lag.max} ms (each includes one request to B).`,
        `redis-server ${redisVersion()} with appendonly yes, appendfsync everysec, in ${tmp}; circuitlog: 1 process each, log level warn.`,
      ],
      checks: [{ what: 'both hosts show the same failure_count after the load', ok: a === b, detail: `${a} vs ${b}` }],
    };
  } finally {
    await ctx.stopEach(procs);
    redis.stop();
    ctx.removeTemp(tmp);
  }
}

async function load(url, durationSec) {
  const r = await autocannon({
    url,
    method: 'POST',
    headers: JSON_HEADERS,
    body: '{"success":false}',
    connections: 16,
    duration: durationSec,
  });
  return { rps: r.requests.total / (r.duration || durationSec), non2xx: r.non2xx + r.errors };
}

/** Trip on A, poll B until it refuses; reset on A, poll B until it admits. Milliseconds per change. */
async function crossHostLag(a, b) {
  const lags = [];
  await probeOk(`${a}/circuits/bench-lag`, { method: 'PATCH', headers: JSON_HEADERS, body: '{"failure_threshold":1}' });
  for (let i = 0; i < 10; i++) {
    for (const [action, wanted] of [
      ['failure', 503],
      ['reset', 200],
    ]) {
      await fetch(`${b}/circuits/bench-lag/allowed`);
      const started = performance.now();
      await fetch(`${a}/circuits/bench-lag/${action}`, { method: 'POST', headers: JSON_HEADERS, body: '{}' });
      for (let k = 0; k < 2_000 && (await fetch(`${b}/circuits/bench-lag/allowed`)).status !== wanted; k++);
      lags.push(performance.now() - started);
    }
  }
  lags.sort((x, y) => x - y);
  return { median: lags[lags.length >> 1].toFixed(1), max: lags.at(-1).toFixed(1) };
}

function redisVersion() {
  return (
    spawnSync('redis-server', ['--version'])
      .stdout.toString()
      .match(/v=(\S+)/)?.[1] ?? '?'
  );
}

async function startRedisServer(dir) {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
    ],
    { stdio: 'ignore' },
  );
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
