// The `overload` section of `npm run bench` (issue 21): circuitlog's proxy in front of an
// upstream with a real capacity (bench/overload/capacity-upstream.mjs: C requests at once in
// L ms, the rest queued), driven open loop (bench/overload/load-gen.mjs), with the adaptive
// concurrency limit and with no limit (circuitlog before issue 21). Three processes, one event
// loop each: upstream, proxy, load generator (this process only reads the proxy's gauges).
// Breakers are kept out of the way (failure_threshold 1,000,000; request_timeout_ms 10 s) so
// that the limit alone is measured. Goodput: 200 answers within 2x the no-load p99, per second,
// against the capacity C / L.
//
// The dependency is C = 32 at 100 ms (320 answers/s; 3x = 960 requests/s offered): well inside
// what the three processes need of 2 shared cores, so that the figures are the limit's and not
// the CPU's; a 100 ms service time dwarfs the ~1 ms loopback and proxy time (which the limit
// counts as in flight too) and the tens of ms a loaded machine stalls a process; and at C = 32
// Vegas's own queue target (1.6..3.2 requests) stays well inside C ± 20%. bench/README.md and
// docs/performance.md say why.
//
// Per mode, one ramp: no load (0.1x, 10 s: the no-load p99 of ~320 answers), half capacity (2 s of warm-up, then
// 30 s steady: refusals counted), 1x, 1.5x, 2x (5 s each), 3x (15 s: the limit's settling, goodput, p99),
// and 0.5x again (10 s: recovery). Then retries with every node failing: upstream traffic per
// request with retry_budget {percent: 100} (what `retries: 1` did before) and the default budget;
// then soft throttling before a dependency failing 60% of calls (bench/overload/throttle-rate.mjs).
//
// Env: BENCH_OVERLOAD_CAPACITY (32), BENCH_OVERLOAD_LATENCY_MS (100), BENCH_OVERLOAD_STEADY_S (30),
//      BENCH_OVERLOAD_RAMP_S (15), BENCH_OVERLOAD_MODES (adaptive,none), BENCH_OVERLOAD_RETRY (1; 0 skips it),
//      BENCH_OVERLOAD_THROTTLE (1; 0 skips it). Writes bench/results/overload.svg (goodput against load).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { checks, curves, notes, proofTable, table } from './overload/figures.mjs';
import { loopbackPool, openLoop, percentile, summarize } from './overload/open-loop.mjs';
import { goodputSvg, textPlot } from './overload/plot.mjs';
import { throttleMarkdown, throttleRate } from './overload/throttle-rate.mjs';

const SAMPLE_MS = 250; // the limit and in-flight gauges are read this often
const MODES = [
  { id: 'adaptive', label: 'adaptive limit', block: '    concurrency: { limit: adaptive }\n' },
  { id: 'none', label: 'no limit (before)', block: '' },
];

/** @param ctx what bench/run.mjs lends: startCircuitlog, startProcess, tempDir, removeTemp, stopEach, envInt, log, repoRoot */
export async function overloadSection(ctx) {
  const { log } = ctx;
  const C = ctx.envInt('BENCH_OVERLOAD_CAPACITY', 32, 2, 10_000);
  const latencyMs = ctx.envInt('BENCH_OVERLOAD_LATENCY_MS', 100, 1, 10_000);
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
      { id: 'noload', load: 0.1, sec: 10 },
      { id: 'warm-up', load: 0.5, sec: 2 }, // the limit grows from `initial` to the load's peaks
      { id: 'steady', load: 0.5, sec: steadySec },
      { id: '1x', load: 1, sec: 5, drainBefore: true }, // each load point from an empty queue
      { id: '1.5x', load: 1.5, sec: 5, drainBefore: true },
      { id: '2x', load: 2, sec: 5, drainBefore: true },
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
      const job = { url: server.url, path: '/proxy/cap/item', upstreamUrl: upstream.url, capacity, phases };
      modes.push({ ...mode, ...(await runRamp(ctx, tmp, mode.id, job)) });
      await ctx.stopEach([server]);
      procs.pop();
    }
    const retry = process.env.BENCH_OVERLOAD_RETRY === '0' ? null : await retrySection(ctx, tmp, procs);
    const throttle = process.env.BENCH_OVERLOAD_THROTTLE === '0' ? null : await throttleSection(ctx, tmp);
    const svg = path.join(ctx.repoRoot, 'bench', 'results', 'overload.svg');
    fs.mkdirSync(path.dirname(svg), { recursive: true });
    fs.writeFileSync(svg, goodputSvg(curves(modes, capacity), { C, latencyMs }));
    log(`wrote ${path.relative(ctx.repoRoot, svg)}`);
    const figures = { modes, C, latencyMs, capacity, retry, throttle };
    return {
      id: 'overload',
      title: `Overload: adaptive concurrency vs no limit, an upstream of C = ${C} at ${latencyMs} ms (capacity ${capacity.toFixed(0)}/s); retry budget; soft throttling`,
      durationSec: phases.reduce((s, p) => s + p.sec, 0),
      results: [],
      overload: {
        C,
        latencyMs,
        capacity,
        modes: modes.map(({ phases: ps, trace, ...m }) => ({ ...m, phases: ps, trace })),
        retry,
        throttle,
      },
      markdownExtra: [
        proofTable(figures),
        '',
        table(modes, capacity),
        '',
        '```',
        textPlot(curves(modes, capacity)),
        '```',
        '',
        retry?.markdown ?? '',
        '',
        throttle === null ? '' : throttleMarkdown(throttle),
      ].join('\n'),
      notes: notes(figures),
      checks: checks(figures),
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

const epochMs = () => performance.timeOrigin + performance.now();

/** Every phase in turn, sent by a load generator process of its own; the gauges are sampled meanwhile. */
async function runRamp(ctx, tmp, id, job) {
  const jobFile = path.join(tmp, `load-${id}.json`);
  const outFile = path.join(tmp, `load-${id}.out.json`);
  const { capacity } = job;
  fs.writeFileSync(
    jobFile,
    JSON.stringify({
      ...job,
      maxOutstanding: 4_000,
      timeoutMs: 15_000,
      phases: job.phases.map((p, i) => ({ ...p, ratePerSecond: p.load * capacity, seed: i + 1 })),
    }),
  );
  const trace = [];
  const t0 = epochMs();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const at = epochMs();
      trace.push({ t: (at - t0) / 1000, ...(await gauges(job.url, 'cap')) });
      await new Promise((r) => setTimeout(r, Math.max(0, SAMPLE_MS - (epochMs() - at))));
    }
  })();
  try {
    await runLoadGen(ctx, jobFile, outFile);
  } finally {
    sampling = false;
    await sampler;
  }
  const shipped = JSON.parse(fs.readFileSync(outFile, 'utf8')).phases;
  const out = [];
  let noLoadP99 = null;
  let noLoadP50 = null;
  for (const [i, phase] of job.phases.entries()) {
    const raw = shipped[i];
    const r = summarize(raw.records, raw);
    const ok = r.latencies(200);
    noLoadP99 ??= percentile(ok, 99);
    noLoadP50 ??= percentile(ok, 50);
    const good = r.count({ status: 200, withinMs: 2 * noLoadP99 });
    const row = {
      id: phase.id,
      load: phase.load,
      sec: phase.sec,
      startedAt: (raw.startedAt - t0) / 1000,
      offered: r.sent + r.notSent,
      ok: ok.length,
      refused: r.statuses[503] ?? 0,
      other: r.answered - ok.length - (r.statuses[503] ?? 0),
      errors: r.errors,
      notSent: r.notSent,
      p50: percentile(ok, 50),
      p99: percentile(ok, 99),
      goodput: good / phase.sec,
      // the second half of the phase: how fast the limit settles
      refusedLastHalf: r.count({ status: 503, fromMs: (phase.sec * 1000) / 2 }),
    };
    out.push(row);
    ctx.log(
      `  ${phase.id} ${phase.load}x ${phase.sec}s: ok ${row.ok}, refused ${row.refused}, other ${row.other}, errors ${row.errors}, not sent ${row.notSent}, p99 ${row.p99.toFixed(1)} ms, goodput ${row.goodput.toFixed(0)}/s (${((100 * row.goodput) / capacity).toFixed(0)}%)`,
    );
  }
  return { phases: out, trace, noLoadP99, noLoadP50 };
}

/** Run bench/overload/load-gen.mjs on a job file; resolves when it exits 0. */
function runLoadGen(ctx, jobFile, outFile) {
  const script = path.join(ctx.repoRoot, 'bench', 'overload', 'load-gen.mjs');
  const child = spawn(process.execPath, [script, jobFile, outFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8_000);
  });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      process.off('exit', kill);
      if (code === 0) resolve();
      else reject(new Error(`load-gen exited (${code ?? signal}): ${stderr}`));
    });
  });
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

/** Soft throttling before a dependency failing 60% of calls, on a circuitlog of its own. */
async function throttleSection(ctx, tmp) {
  const server = await ctx.startCircuitlog({
    name: 'circuitlog-overload-throttle',
    db: path.join(tmp, 'throttle.db'),
    logLevel: 'warn',
  });
  try {
    const t = await throttleRate(server.url, { window: 10, perSecond: 50, sliceSec: 10 });
    ctx.log(`  throttle: worst slice ${t.worstPp.toFixed(1)} pp from the formula, circuit ${t.state}`);
    return t;
  } finally {
    await ctx.stopEach([server]);
  }
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
