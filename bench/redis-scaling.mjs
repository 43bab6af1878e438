// The scaling part of the `redis-modes` section: outcomes per second, batched `POST /outcomes`
// through HOSTS circuitlog processes, on a Cluster of 1 primary and of 3, alternately (1, 3, 1, 3:
// two factors from the same run). The load generator is undici pools with pre-serialized bodies,
// each connection on its own circuits (no write conflicts between connections); the CPU time of
// every role (the hosts, the primaries, this process) is read from /proc, so the note says where
// the time went.

import fs from 'node:fs';
import { Pool } from 'undici';

export const BATCH = 100; // outcomes per POST /outcomes
export const HOSTS = 3; // circuitlog processes per run
export const CONNECTIONS = Number(process.env.BENCH_SCALING_CONNECTIONS ?? 8); // per host
// Each connection cycles through bodies of 100 distinct circuits, 4,000 per host in all (500 each
// with 8 connections): within the host's cache (10,000 names), so what is measured is writes, not cache misses.
export const CIRCUITS_PER_CONNECTION = Math.max(1, Math.floor(4_000 / (CONNECTIONS * BATCH))) * BATCH;
const WARMUP_SEC = 1; // unmeasured: creates the circuits, fills the caches

/** CPU seconds of a process and its descendants so far (utime + stime from /proc; 0 where unreadable). */
export function cpuSeconds(pids) {
  const tick = 100; // USER_HZ on Linux
  const stats = new Map();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(entry), { ppid: Number(fields[1]), cpu: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // gone meanwhile
    }
  }
  const wanted = new Set(pids);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, s] of stats)
      if (!wanted.has(pid) && wanted.has(s.ppid)) {
        wanted.add(pid);
        grew = true;
      }
  }
  let total = 0;
  for (const pid of wanted) total += stats.get(pid)?.cpu ?? 0;
  return total / tick;
}

/**
 * BENCH_SCALING_CIRCUITS=shared: every connection of a host sends the one body of 100 of its
 * host's 1,000 circuits that the bench sent before (concurrent batches on the same circuits:
 * compare-and-set conflicts, retried); default `own`: each connection on its own circuits.
 */
const SHARED = process.env.BENCH_SCALING_CIRCUITS === 'shared';

function bodies(host, connection) {
  if (SHARED)
    return [
      Buffer.from(
        JSON.stringify({
          outcomes: Array.from({ length: BATCH }, (_, i) => ({
            circuit: `scale-${host}-${(i * 7) % 1_000}`,
            success: i % 3 !== 0,
          })),
        }),
      ),
    ];
  return Array.from({ length: CIRCUITS_PER_CONNECTION / BATCH }, (_, b) =>
    Buffer.from(
      JSON.stringify({
        outcomes: Array.from({ length: BATCH }, (_, i) => ({
          circuit: `scale-${host}-${connection}-${b * BATCH + i}`,
          success: i % 3 !== 0,
        })),
      }),
    ),
  );
}

/** Closed-loop load on every host for `seconds`: answers the 2xx count and the others. */
async function load(urls, seconds) {
  const pools = urls.map((url) => new Pool(url, { connections: CONNECTIONS, pipelining: 1 }));
  const deadline = Date.now() + seconds * 1_000;
  let ok = 0;
  let bad = 0;
  const loop = async (pool, host, connection) => {
    const own = bodies(host, connection);
    for (let i = 0; Date.now() < deadline; i++) {
      try {
        const { statusCode, body } = await pool.request({
          path: '/outcomes',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: own[i % own.length],
        });
        await body.dump();
        if (statusCode === 200) ok++;
        else bad++;
      } catch {
        bad++;
      }
    }
  };
  try {
    await Promise.all(pools.flatMap((pool, h) => Array.from({ length: CONNECTIONS }, (_, c) => loop(pool, h, c))));
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
  return { ok, bad };
}

/**
 * One run: HOSTS fresh circuitlog processes on `cluster`, a warm-up, then `seconds` of load.
 * Answers outcomes/s, errors, and the cores each role used (CPU seconds per second).
 */
export async function scalingRun(ctx, start, cluster, label, seconds) {
  const hosts = [];
  const prof = process.env.BENCH_SCALING_PROF; // a directory: the hosts write V8 CPU profiles there (bench/profile-top.mjs)
  const env = { CIRCUITLOG_STORE: cluster.url };
  const args = prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : [];
  for (let i = 0; i < HOSTS; i++) hosts.push(await start(`circuitlog-${label.replace(' ', '')}-${i}`, env, args));
  try {
    const urls = hosts.map((h) => h.url);
    await load(urls, WARMUP_SEC);
    ctx.log(`redis-modes :: ${HOSTS} hosts, batched outcomes, ${label} (${seconds}s)`);
    const roles = { hosts: hosts.map((h) => h.pid), primaries: cluster.pids };
    const before = Object.fromEntries(Object.entries(roles).map(([k, p]) => [k, cpuSeconds(p)]));
    const self = process.cpuUsage();
    const t0 = Date.now();
    const { ok, bad } = await load(urls, seconds);
    const wall = (Date.now() - t0) / 1_000;
    const cores = Object.fromEntries(Object.entries(roles).map(([k, p]) => [k, (cpuSeconds(p) - before[k]) / wall]));
    const used = process.cpuUsage(self);
    cores.generator = (used.user + used.system) / 1e6 / wall;
    return { outcomesPerSec: (ok * BATCH) / wall, non2xx: bad, cores };
  } finally {
    await ctx.stopEach(hosts);
  }
}

export const coresText = (c) =>
  `cores: hosts ${c.hosts.toFixed(2)}, primaries ${c.primaries.toFixed(2)}, load generator ${c.generator.toFixed(2)}`;
