// The `overload` section of `npm run bench` (issue 21): circuitlog's proxy in front of an
// upstream with a real capacity (bench/overload/capacity-upstream.mjs: C requests at once in
// L ms, the rest queued), driven open loop (bench/overload/open-loop.mjs), with the adaptive
// concurrency limit and with no limit (circuitlog before issue 21). Breakers are kept out of
// the way (failure_threshold 1,000,000; request_timeout_ms 10 s) so that the limit alone is
// measured. Goodput: 200 answers within 2x the no-load p99, per second, against the capacity C / L.
//
// Per mode, one ramp: no load (0.1x, 3 s: the no-load p99), half capacity (2 s of warm-up, then
// 30 s steady: refusals counted), 1x, 1.5x, 2x (5 s each), 3x (15 s: the limit's settling, goodput, p99),
// and 0.5x again (10 s: recovery). Then retries with every node failing: upstream traffic per
// request with retry_budget {percent: 100} (what `retries: 1` did before) and the default budget.
//
// Env: BENCH_OVERLOAD_CAPACITY (32), BENCH_OVERLOAD_LATENCY_MS (20), BENCH_OVERLOAD_STEADY_S (30),
//      BENCH_OVERLOAD_RAMP_S (15), BENCH_OVERLOAD_MODES (adaptive,none), BENCH_OVERLOAD_RETRY (1; 0 skips it). Writes bench/results/overload.svg (goodput against load).

import fs from 'node:fs';
import path from 'node:path';
import { loopbackPool, openLoop, percentile } from './overload/open-loop.mjs';
import { goodputSvg, textPlot } from './overload/plot.mjs';

const SAMPLE_MS = 250; // the limit and in-flight gauges are read this often
const MODES = [
  { id: 'adaptive', label: 'adaptive limit', block: '    concurrency: { limit: adaptive }\n' },
  { id: 'none', label: 'no limit (before)', block: '' },
];

/** @param ctx what bench/run.mjs lends: startCircuitlog, startProcess, tempDir, removeTemp, stopEach, envInt, log, repoRoot */
export async function overloadSection(ctx) {
  const { log } = ctx;
  const C = ctx.envInt('BENCH_OVERLOAD_CAPACITY', 32, 2, 10_000);
  const latencyMs = ctx.envInt('BENCH_OVERLOAD_LATENCY_MS', 20, 1, 10_000);
  const steadySec = ctx.envInt('BENCH_OVERLOAD_STEADY_S', 30, 1, 600);
  const rampSec = ctx.envInt('BENCH_OVERLOAD_RAMP_S', 15, 5, 600);
  const wanted = (process.env.BENCH_OVERLOAD_MODES ?? 'adaptive,none').split(',');
  const capacity = (C / latencyMs) * 1000; // answers per second
  const tmp = ctx.tempDir('circuitlog-bench-overload-');
  const procs = [];
  try {
    const upstream = await startCapacity(ctx, { capacity: C, latencyMs });
    procs.push(upstream);
    const phases = [
      { id: 'noload', load: 0.1, sec: 3 },
      { id: 'warm-up', load: 0.5, sec: 2 }, // the limit grows from `initial` to the load's peaks
      { id: 'steady', load: 0.5, sec: steadySec },
      { id: '1x', load: 1, sec: 5 },
      { id: '1.5x', load: 1.5, sec: 5 },
      { id: '2x', load: 2, sec: 5 },
      { id: 'ramp', load: 3, sec: rampSec },
      { id: 'recovery', load: 0.5, sec: 10 },
    ];
    const modes = [];
    for (const mode of MODES.filter((m) => wanted.includes(m.id))) {
      const config = writeConfig(tmp, mode.id, { cap: [upstream.url] }, mode.block);
      const server = await ctx.startCircuitlog({
        name: `circuitlog-overload-${mode.id}`,
        db: path.join(tmp, `${mode.id}.db`),
        config,
        logLevel: 'warn',
      });
      procs.push(server);
      log(`overload: ${mode.label}, C = ${C} at ${latencyMs} ms (capacity ${capacity.toFixed(0)}/s)`);
      modes.push({ ...mode, ...(await runRamp(ctx, server.url, upstream.url, phases, capacity)) });
      await ctx.stopEach([server]);
      procs.pop();
    }
    const retry = process.env.BENCH_OVERLOAD_RETRY === '0' ? null : await retrySection(ctx, tmp, procs);
    const rows = table(modes, capacity);
    const svg = path.join(ctx.repoRoot, 'bench', 'results', 'overload.svg');
    fs.mkdirSync(path.dirname(svg), { recursive: true });
    fs.writeFileSync(svg, goodputSvg(curves(modes, capacity), { C, latencyMs }));
    log(`wrote ${path.relative(ctx.repoRoot, svg)}`);
    return {
      id: 'overload',
      title: `Overload: adaptive concurrency vs no limit, an upstream of C = ${C} at ${latencyMs} ms (capacity ${capacity.toFixed(0)}/s); retry budget`,
      durationSec: phases.reduce((s, p) => s + p.sec, 0),
      results: [],
      overload: {
        C,
        latencyMs,
        capacity,
        modes: modes.map(({ phases: ps, trace, ...m }) => ({ ...m, phases: ps, trace })),
        retry,
      },
      markdownExtra: [rows, '', '```', textPlot(curves(modes, capacity)), '```', '', retry?.markdown ?? ''].join('\n'),
      notes: notes(modes, C, latencyMs, retry),
      checks: checks(modes, C, capacity, retry),
    };
  } finally {
    await ctx.stopEach(procs.reverse());
    ctx.removeTemp(tmp);
  }
}

function startCapacity(ctx, { capacity, latencyMs, status = 200 }) {
  return ctx.startProcess({
    name: `capacity-upstream-${status}`,
    args: [path.join(ctx.repoRoot, 'bench', 'overload', 'capacity-upstream.mjs')],
    cwd: ctx.repoRoot,
    env: { CAPACITY: String(capacity), LATENCY_MS: String(latencyMs), STATUS: String(status), PORT: '0' },
  });
}

function writeConfig(dir, id, upstreams, block) {
  const file = path.join(dir, `${id}.yaml`);
  const lines = ['# generated by bench/overload.mjs', 'local_dc: dc1', 'upstreams:'];
  for (const [name, urls] of Object.entries(upstreams)) {
    lines.push(`  ${name}:`, '    nodes:');
    for (const [i, url] of urls.entries()) lines.push(`      - { id: n${i + 1}, dc: dc1, url: "${url}" }`);
    lines.push(
      '    failure_threshold: 1000000',
      '    request_timeout_ms: 10000',
      '    health_check: { enabled: false }',
    );
  }
  fs.writeFileSync(file, `${lines.join('\n')}\n${block}`);
  return file;
}

/** Every phase in turn on one proxy; the gauges are sampled throughout. */
async function runRamp(ctx, proxyUrl, upstreamUrl, phases, capacity) {
  const pool = loopbackPool(proxyUrl);
  const trace = [];
  const t0 = performance.now();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      trace.push({ t: (performance.now() - t0) / 1000, ...(await gauges(proxyUrl, 'cap')) });
      await new Promise((r) => setTimeout(r, SAMPLE_MS));
    }
  })();
  const out = [];
  let noLoadP99 = null;
  try {
    for (const [i, phase] of phases.entries()) {
      if (['1x', '1.5x', '2x'].includes(phase.id)) await drained(upstreamUrl); // each load point from an empty queue
      const startedAt = (performance.now() - t0) / 1000;
      const r = await openLoop({
        pool,
        path: '/proxy/cap/item',
        ratePerSecond: phase.load * capacity,
        durationMs: phase.sec * 1000,
        maxOutstanding: 4_000,
        timeoutMs: 15_000,
        seed: i + 1,
      });
      const ok = r.latencies(200);
      noLoadP99 ??= percentile(ok, 99);
      const good = r.count({ status: 200, withinMs: 2 * noLoadP99 });
      const row = {
        id: phase.id,
        load: phase.load,
        sec: phase.sec,
        startedAt,
        offered: r.sent + r.notSent,
        ok: ok.length,
        refused: r.statuses[503] ?? 0,
        other: r.answered - ok.length - (r.statuses[503] ?? 0),
        errors: r.errors,
        notSent: r.notSent,
        p50: percentile(ok, 50),
        p99: percentile(ok, 99),
        goodput: good / phase.sec,
        // the first and the last halves of the phase: how fast the limit settles
        refusedLastHalf: r.count({ status: 503, fromMs: (phase.sec * 1000) / 2 }),
      };
      out.push(row);
      ctx.log(
        `  ${phase.id} ${phase.load}x ${phase.sec}s: ok ${row.ok}, refused ${row.refused}, other ${row.other}, errors ${row.errors}, not sent ${row.notSent}, p99 ${row.p99.toFixed(1)} ms, goodput ${row.goodput.toFixed(0)}/s (${((100 * row.goodput) / capacity).toFixed(0)}%)`,
      );
    }
  } finally {
    sampling = false;
    await sampler;
    await pool.close();
  }
  await drained(upstreamUrl);
  return { phases: out, trace, noLoadP99 };
}

/** The limit and in-flight gauges of `upstream` from /metrics (null when absent). */
async function gauges(url, upstream) {
  try {
    const text = await (await fetch(`${url}/metrics`)).text();
    const read = (name) => {
      const m = text.match(new RegExp(`^${name}\\{upstream="${upstream}"\\} (\\S+)$`, 'm'));
      return m ? Number(m[1]) : null;
    };
    return { limit: read('circuitlog_proxy_concurrency_limit'), inFlight: read('circuitlog_proxy_in_flight') };
  } catch {
    return { limit: null, inFlight: null };
  }
}

/** Wait until the upstream has nothing in service or queued (a no-limit run leaves a backlog). */
async function drained(upstreamUrl) {
  for (let i = 0; i < 600; i++) {
    const s = await (await fetch(`${upstreamUrl}/__stats`)).json();
    if (s.inService === 0 && s.queued === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the capacity upstream did not drain in 60 s');
}

/** Retries with every node failing: node hits per request, with an unbounded and the default budget. */
async function retrySection(ctx, tmp, procs) {
  const failing = [];
  for (let i = 0; i < 2; i++) {
    const p = await startCapacity(ctx, { capacity: 1_000, latencyMs: 2, status: 500 });
    procs.push(p);
    failing.push(p);
  }
  const rate = 200; // requests per second
  const sec = 9; // inside one 10 s budget window (its 1 s buckets): the bound is per window
  const rows = [];
  for (const run of [
    {
      id: 'unbounded',
      label: 'retries: 1, retry_budget {percent: 100} (as before)',
      block: '    retries: 1\n    retry_budget: { percent: 100 }\n',
    },
    {
      id: 'default',
      label: 'retries: 1, default retry_budget {percent: 20, min_per_second: 3}',
      block: '    retries: 1\n',
    },
  ]) {
    const config = writeConfig(tmp, `retry-${run.id}`, { fail: failing.map((p) => p.url) }, run.block);
    const server = await ctx.startCircuitlog({
      name: `circuitlog-retry-${run.id}`,
      db: path.join(tmp, `retry-${run.id}.db`),
      config,
      logLevel: 'warn',
    });
    const before = await hits(failing);
    const pool = loopbackPool(server.url);
    const r = await openLoop({
      pool,
      path: '/proxy/fail/item',
      ratePerSecond: rate,
      durationMs: sec * 1000,
      maxOutstanding: 1_000,
    });
    await pool.close();
    const nodeHits = (await hits(failing)) - before;
    await ctx.stopEach([server]);
    const allowed = r.sent * 1.2 + 3 * 10; // 20% plus 3/s over the 10 s window
    rows.push({
      ...run,
      requests: r.sent,
      nodeHits,
      ratio: nodeHits / r.sent,
      allowedRatio: allowed / r.sent,
      status500: r.statuses[500] ?? 0,
    });
    ctx.log(`  retry ${run.id}: ${r.sent} requests, ${nodeHits} node hits (${(nodeHits / r.sent).toFixed(2)}x)`);
  }
  const markdown = [
    `Every node failing (2 nodes answering 500), ${rate} requests/s for ${sec} s:`,
    '',
    '| budget | requests | node hits | hits per request | bound (1.2 + 30 per 10 s) |',
    '|---|---:|---:|---:|---:|',
    ...rows.map(
      (r) => `| ${r.label} | ${r.requests} | ${r.nodeHits} | ${r.ratio.toFixed(3)} | ${r.allowedRatio.toFixed(3)} |`,
    ),
  ].join('\n');
  return { rate, sec, rows, markdown };
}

async function hits(procs) {
  let n = 0;
  for (const p of procs) n += (await (await fetch(`${p.url}/__stats`)).json()).received;
  return n;
}

function curves(modes, capacity) {
  return modes.map((m) => ({
    label: m.label,
    points: m.phases
      .filter((p) => p.id !== 'recovery' && p.id !== 'warm-up')
      .map((p) => ({ load: p.load, goodput: p.goodput / capacity })),
  }));
}

function table(modes, capacity) {
  const head =
    '| mode | phase | load | offered | 200 | 503 refused | other / errors / not sent | p50 ms | p99 ms | goodput /s | of capacity |';
  const lines = [head, '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|'];
  for (const m of modes) {
    for (const p of m.phases) {
      lines.push(
        `| ${m.label} | ${p.id} | ${p.load}x | ${p.offered} | ${p.ok} | ${p.refused} | ${p.other} / ${p.errors} / ${p.notSent} | ${p.p50.toFixed(1)} | ${p.p99.toFixed(1)} | ${p.goodput.toFixed(0)} | ${((100 * p.goodput) / capacity).toFixed(0)}% |`,
      );
    }
  }
  return lines.join('\n');
}

/** When the limit first stayed within +-20% of C after the 3x ramp began (s), and where it ended. */
function settling(mode, C) {
  const ramp = mode.phases.find((p) => p.id === 'ramp');
  const recovery = mode.phases.find((p) => p.id === 'recovery');
  const during = mode.trace.filter((s) => s.t >= ramp.startedAt && s.t < recovery.startedAt && s.limit !== null);
  if (during.length === 0) return null;
  const within = (s) => s.limit >= 0.8 * C && s.limit <= 1.2 * C;
  let settledAt = null;
  for (let i = 0; i < during.length; i++) {
    if (during.slice(i).every(within)) {
      settledAt = during[i].t - ramp.startedAt;
      break;
    }
  }
  const after = mode.trace.filter((s) => s.t >= recovery.startedAt && s.limit !== null);
  return {
    settledAt,
    last: during[during.length - 1].limit,
    min: Math.min(...during.map((s) => s.limit)),
    max: Math.max(...during.map((s) => s.limit)),
    recoveryMin: after.length ? Math.min(...after.map((s) => s.limit)) : null,
  };
}

function notes(modes, C, latencyMs, retry) {
  const out = [
    `Capacity upstream: C = ${C} at once, ${latencyMs} ms each, FIFO queue behind; one node; load generator open loop (Poisson arrivals), at most 4,000 outstanding (more arrivals are counted "not sent").`,
  ];
  for (const m of modes) {
    const s = settling(m, C);
    const limit = s
      ? ` Limit during 3x: ${s.min}..${s.max}, last ${s.last}; within ±20% of C for good from ${s.settledAt === null ? 'never' : `${s.settledAt.toFixed(1)} s`} after the ramp; lowest during recovery ${s.recoveryMin}.`
      : '';
    out.push(
      `${m.label}: no-load p99 ${m.noLoadP99.toFixed(1)} ms (goodput counts 200s within ${(2 * m.noLoadP99).toFixed(1)} ms).${limit}`,
    );
  }
  for (const r of retry?.rows ?? [])
    out.push(`Retries, ${r.label}: ${r.nodeHits} node hits for ${r.requests} requests (${r.ratio.toFixed(3)}x).`);
  return out;
}

function checks(modes, C, capacity, retry) {
  const out = [];
  const adaptive = modes.find((m) => m.id === 'adaptive');
  const none = modes.find((m) => m.id === 'none');
  const phase = (m, id) => m.phases.find((p) => p.id === id);
  if (adaptive !== undefined) {
    const ramp = phase(adaptive, 'ramp');
    const steady = phase(adaptive, 'steady');
    const s = settling(adaptive, C);
    out.push(
      {
        what: 'adaptive, 3x: goodput >= 90% of capacity',
        ok: ramp.goodput >= 0.9 * capacity,
        detail: `${ramp.goodput.toFixed(0)}/s of ${capacity.toFixed(0)}/s`,
      },
      {
        what: 'adaptive, 3x: admitted p99 <= 2x no-load p99',
        ok: ramp.p99 <= 2 * adaptive.noLoadP99,
        detail: `${ramp.p99.toFixed(1)} ms vs ${(2 * adaptive.noLoadP99).toFixed(1)} ms`,
      },
      {
        what: 'adaptive: limit within ±20% of C within 10 s of the 3x ramp',
        ok: s !== null && s.settledAt !== null && s.settledAt <= 10,
        detail:
          s === null
            ? 'no limit gauge'
            : `settled after ${s.settledAt?.toFixed(1) ?? 'never'} s, range ${s.min}..${s.max}`,
      },
      {
        what: 'adaptive: steady half capacity, 0 refusals',
        ok: steady.refused === 0,
        detail: `${steady.refused} refused of ${steady.offered}`,
      },
      {
        what: 'adaptive: 0 refusals in the second half of the recovery at half capacity',
        ok: phase(adaptive, 'recovery').refusedLastHalf === 0,
        detail: `${phase(adaptive, 'recovery').refusedLastHalf}`,
      },
    );
  }
  if (none !== undefined)
    out.push({
      what: 'no limit, 3x: goodput collapses (< 50% of capacity)',
      ok: phase(none, 'ramp').goodput < 0.5 * capacity,
      detail: `${phase(none, 'ramp').goodput.toFixed(0)}/s`,
    });
  const def = retry?.rows.find((r) => r.id === 'default');
  if (def !== undefined)
    out.push({
      what: 'every node failing: retries add at most 20% + 3/s',
      ok: def.nodeHits <= def.allowedRatio * def.requests,
      detail: `${def.ratio.toFixed(3)}x <= ${def.allowedRatio.toFixed(3)}x`,
    });
  return out;
}
