// The scaling part of the `redis-modes` section: outcomes per second, batched `POST /outcomes`
// through HOSTS circuitlog processes, on a Cluster of 1 primary and of 3, alternately (1, 3, 1, 3:
// two factors from the same run). The load generator is undici pools with pre-serialized bodies,
// each connection on its own circuits (no write conflicts between connections); the CPU time of
// every role (the hosts, the primaries, this process) is read from /proc, so the note says where
// the time went.

import fs from 'node:fs';
import { Pool } from 'undici';
import { cgroupSupport, cpuGroup } from './cpu-cap.mjs';

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
 * One run: HOSTS fresh circuitlog processes (of the build `dist`) on `cluster`, a warm-up, then
 * `seconds` of load. Answers outcomes/s, errors, the cores each role used (CPU seconds per
 * second; `each`: per primary) and, when `groups` (the primaries' CPU cgroups) are given, the
 * share of the cfs periods in which each was throttled.
 */
export async function scalingRun(
  ctx,
  start,
  cluster,
  label,
  seconds,
  { dist = ctx.dist, groups = [], build = 'this' } = {},
) {
  const hosts = [];
  // A directory: the hosts write V8 CPU profiles there (bench/profile-top.mjs), a BENCH_BASELINE_DIST build's in baseline/.
  const prof =
    process.env.BENCH_SCALING_PROF &&
    (build === 'this' ? process.env.BENCH_SCALING_PROF : `${process.env.BENCH_SCALING_PROF}/baseline`);
  const env = { CIRCUITLOG_STORE: cluster.url };
  if (prof) fs.mkdirSync(prof, { recursive: true });
  const args = prof ? ['--cpu-prof', '--cpu-prof-dir', prof] : [];
  for (let i = 0; i < HOSTS; i++)
    hosts.push(await start(`circuitlog-${label.replace(/ /g, '')}-${i}`, env, args, dist));
  try {
    const urls = hosts.map((h) => h.url);
    await load(urls, WARMUP_SEC);
    ctx.log(`redis-modes :: ${HOSTS} hosts, batched outcomes, ${label} (${seconds}s)`);
    const roles = { hosts: hosts.map((h) => h.pid), primaries: cluster.pids };
    const before = Object.fromEntries(Object.entries(roles).map(([k, p]) => [k, cpuSeconds(p)]));
    const eachBefore = cluster.pids.map((p) => cpuSeconds([p]));
    const statBefore = groups.map((g) => g.stat());
    const self = process.cpuUsage();
    const t0 = Date.now();
    const { ok, bad } = await load(urls, seconds);
    const wall = (Date.now() - t0) / 1_000;
    const cores = Object.fromEntries(Object.entries(roles).map(([k, p]) => [k, (cpuSeconds(p) - before[k]) / wall]));
    cores.each = cluster.pids.map((p, i) => (cpuSeconds([p]) - eachBefore[i]) / wall);
    const used = process.cpuUsage(self);
    cores.generator = (used.user + used.system) / 1e6 / wall;
    const throttled = groups.map((g, i) => {
      const s = g.stat();
      const periods = s.periods - statBefore[i].periods;
      return periods > 0 ? (s.throttled - statBefore[i].throttled) / periods : 0;
    });
    const outcomesPerSec = (ok * BATCH) / wall;
    return {
      outcomesPerSec,
      non2xx: bad,
      cores,
      throttled,
      hostUsPerOutcome: (cores.hosts * 1e6) / (outcomesPerSec || 1),
    };
  } finally {
    await ctx.stopEach(hosts);
  }
}

const f2 = (n) => n.toFixed(2);
export const coresText = (c) =>
  `cores: hosts ${f2(c.hosts)}, primaries ${f2(c.primaries)}${c.each.length > 1 ? ` (${c.each.map(f2).join(' + ')})` : ''}, load generator ${f2(c.generator)}`;

/**
 * The capped run's cap: each primary in a CPU cgroup of its own with this share of one core per
 * cfs period. 0.1 of a core: one primary then serves about 10,000 outcomes/s here, a fifth of
 * what the hosts can send on this machine, so with 1 primary the primary is the limit (throttled
 * in nearly every period) and the hosts have spare CPU, and 3 primaries, each capped the same,
 * have room to show their scaling before the hosts run out of the 2 cores. A 10 ms period (the
 * quota is 1 ms, the least cgroup v1 takes): a script waits at most 9 ms for the next period,
 * far below the 1 s command timeout, and the 24 batches in flight keep every primary's queue
 * full, so the run is bound by the primaries' throughput, not by the period's latency.
 */
export const CAP_SHARE = Number(process.env.BENCH_SCALING_CAP ?? 0.1);
export const CAP_PERIOD_US = Number(process.env.BENCH_SCALING_CAP_PERIOD_US ?? 10_000);
const ROUNDS = 2;

/**
 * The scaling part: BENCH_SCALING_RUNS=uncapped,capped (default both), ROUNDS rounds of
 * 1 primary then 3 each; with BENCH_BASELINE_DIST every run is repeated with that build's
 * hosts right after this build's (the same clusters), so host CPU per outcome compares in one run.
 * Answers { pairs, notes, checks }; where no cgroup can be written, the capped run says why in both.
 */
export async function scalingPart(ctx, start, clusters, seconds) {
  const kinds = new Set((process.env.BENCH_SCALING_RUNS ?? 'uncapped,capped').split(','));
  const baseDist = process.env.BENCH_BASELINE_DIST
    ? `${process.env.BENCH_BASELINE_DIST.replace(/\/$/, '')}/main.js`
    : null;
  const builds = [{ build: 'this', dist: ctx.dist }, ...(baseDist ? [{ build: 'baseline', dist: baseDist }] : [])];
  const pairs = [];
  const notes = [];
  const checks = [];
  let share = CAP_SHARE; // as the cgroup has it (its quota rounded, at least 1 ms)
  const rounds = async (kind, groupsOf) => {
    for (let round = 1; round <= ROUNDS; round++) {
      const runs = {};
      for (const [n, cluster] of [
        ['one', clusters.one],
        ['three', clusters.three],
      ])
        for (const { build, dist } of builds) {
          const label = `${kind} ${n === 'one' ? '1 primary' : '3 primaries'}${build === 'this' ? '' : ' (baseline build)'}`;
          runs[`${build}-${n}`] = await scalingRun(ctx, start, cluster, label, seconds, {
            dist,
            build,
            groups: groupsOf(cluster),
          });
        }
      for (const { build } of builds) {
        const one = runs[`${build}-one`];
        const three = runs[`${build}-three`];
        const factor = three.outcomesPerSec / (one.outcomesPerSec || 1);
        pairs.push({ kind, share: kind === 'capped' ? share : null, round, build, one, three, factor });
      }
    }
  };
  if (kinds.has('uncapped')) await rounds('uncapped', () => []);
  if (kinds.has('capped')) {
    const support = cgroupSupport();
    if (!support.ok) {
      const why = `capped run NOT run: ${support.reason}`;
      ctx.log(`redis-modes :: ${why}`);
      notes.push(
        `Capped run (each primary capped at ${CAP_SHARE} of a core): ${why}. Only the uncapped figures above.`,
      );
      checks.push({ what: 'capped scaling run', ok: true, detail: why });
    } else {
      const groups = new Map();
      try {
        for (const pid of [...clusters.one.pids, ...clusters.three.pids]) {
          const g = cpuGroup(support, `primary-${pid}`, CAP_SHARE, CAP_PERIOD_US);
          g.add(pid);
          groups.set(pid, g);
        }
        const g0 = [...groups.values()][0];
        share = g0.quotaUs / g0.periodUs;
        notes.push(
          `Capped run: each redis-server primary in a CPU cgroup of its own (cgroup v${support.version}, ${support.version === 1 ? `cpu.cfs_quota_us ${g0.quotaUs} / cpu.cfs_period_us ${g0.periodUs}` : `cpu.max "${g0.quotaUs} ${g0.periodUs}"`}: ${share} of one core each), as if each primary ran saturated on a machine of its own: with 1 primary the primary is the limit and the hosts have spare CPU, so 3 primaries against 1 is Redis's scaling. "throttled": the share of cfs periods in which a primary used up its quota. The 16 shards fall 6, 5, 5 on 3 primaries (shards.ts): the primary with 6 has the most to do and is throttled first. The uncapped run lets every process use any core: there the hosts are the limit on this machine.`,
        );
        await rounds('capped', (cluster) => cluster.pids.map((p) => groups.get(p)));
      } finally {
        for (const g of groups.values()) g.remove();
      }
    }
  }
  const summary = ['uncapped', 'capped']
    .map((kind) => [kind, pairs.filter((p) => p.kind === kind && p.build === 'this')])
    .filter(([, ps]) => ps.length > 0)
    .map(([kind, ps]) => `${kind} ${ps.map((p) => `${p.factor.toFixed(2)}x`).join(', ')}`);
  if (summary.length > 0)
    notes.unshift(`Scaling factor, 3 primaries against 1 (goal > 1.5x at 3), per round: ${summary.join('; ')}.`);
  return {
    pairs,
    notes: [...pairs.map(pairNote), ...notes, ...baselineNotes(pairs)],
    checks: [...checksOf(pairs), ...checks],
  };
}

const pct = (x) => `${Math.round(x * 100)}%`;

function runText(r) {
  const throttled = r.throttled.length > 0 ? `; throttled ${r.throttled.map(pct).join(', ')}` : '';
  return `${Math.round(r.outcomesPerSec)} (non-2xx ${r.non2xx}; ${coresText(r.cores)}${throttled}; host CPU ${r.hostUsPerOutcome.toFixed(1)} µs per outcome)`;
}

function pairNote({ kind, share, round, build, one, three, factor }) {
  const who = build === 'this' ? '' : ', BENCH_BASELINE_DIST build';
  return `Outcomes/s, ${kind}${kind === 'capped' ? ` (${share} of a core per primary)` : ''}, round ${round}${who}, ${HOSTS} circuitlog processes, POST /outcomes of ${BATCH} (${CONNECTIONS} connections per host, ${SHARED ? 'all on the same 100 circuits of the host' : `each on its own ${CIRCUITS_PER_CONNECTION} circuits`}): Cluster of 3 primaries ${runText(three)} vs 1 primary ${runText(one)}: ${factor.toFixed(2)}x.`;
}

function baselineNotes(pairs) {
  const out = [];
  for (const p of pairs.filter((x) => x.build === 'this')) {
    const base = pairs.find((x) => x.build === 'baseline' && x.kind === p.kind && x.round === p.round);
    if (!base) continue;
    const r = (a, b) => (a.hostUsPerOutcome / b.hostUsPerOutcome).toFixed(2);
    out.push(
      `Host CPU per outcome, ${p.kind} round ${p.round}, this build against the BENCH_BASELINE_DIST build: 1 primary ${p.one.hostUsPerOutcome.toFixed(1)} vs ${base.one.hostUsPerOutcome.toFixed(1)} µs (${r(p.one, base.one)}x), 3 primaries ${p.three.hostUsPerOutcome.toFixed(1)} vs ${base.three.hostUsPerOutcome.toFixed(1)} µs (${r(p.three, base.three)}x); factor ${p.factor.toFixed(2)}x vs ${base.factor.toFixed(2)}x.`,
    );
  }
  return out;
}

function checksOf(pairs) {
  return [
    {
      what: 'no errors in the scaling runs',
      ok: pairs.every(({ one, three }) => one.non2xx === 0 && three.non2xx === 0),
      detail: pairs.map(({ one, three }) => `${one.non2xx}, ${three.non2xx}`).join('; ') || 'no runs',
    },
  ];
}
