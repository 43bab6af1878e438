// The `metrics` section of `npm run bench` (issue 9): does /metrics slow the hot path, and
// how long does a scrape take with many circuits?
//
//   - GET /circuits/bench-ok/allowed with metrics on (the default) vs the same build with
//     `metrics: { enabled: false }`, loaded back to back in one run (goal: on >= 0.95x off);
//   - POST failure outcomes (every one a write and a counter increment), on vs off (informative);
//   - GET /metrics with 10,000 circuits (BENCH_METRICS_CIRCUITS): median and worst of 20 scrapes.

import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

const JSON_HEADERS = { 'content-type': 'application/json' };
const SCRAPES = 20;

/** Create `count` circuits with `concurrency` requests in flight (one failure outcome each). */
async function createCircuits(baseUrl, count, concurrency = 32) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const res = await fetch(`${baseUrl}/circuits/bench-many%2Fc${i}/outcomes`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: '{"success":false}',
      });
      if (res.status !== 200) throw new Error(`creating circuit ${i}: ${res.status}`);
      await res.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Time `SCRAPES` sequential GET /metrics: {medianMs, maxMs, bytes, series}. */
async function timeScrapes(baseUrl) {
  const times = [];
  let text = '';
  for (let i = 0; i < SCRAPES; i++) {
    const t0 = performance.now();
    const res = await fetch(`${baseUrl}/metrics`);
    text = await res.text();
    times.push(performance.now() - t0);
    if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  }
  times.sort((a, b) => a - b);
  const series = text.split('\n').filter((l) => l && !l.startsWith('#')).length;
  return { medianMs: times[Math.floor(times.length / 2)], maxMs: times.at(-1), bytes: Buffer.byteLength(text), series };
}

/**
 * @param ctx what bench/run.mjs lends: startCircuitlog, setupBenchCircuits, tempDir,
 *   removeTemp, stopEach, runSuite, suiteOptions, durationSec, envInt, log
 */
export async function metricsSection(ctx) {
  const { durationSec, log } = ctx;
  const tmp = ctx.tempDir('circuitlog-bench-metrics-');
  const procs = [];
  try {
    const offConfig = path.join(tmp, 'metrics-off.yaml');
    fs.writeFileSync(offConfig, 'metrics:\n  enabled: false\n');
    const on = await ctx.startCircuitlog({
      name: 'circuitlog-metrics-on',
      db: path.join(tmp, 'on.db'),
      logLevel: 'warn',
    });
    procs.push(on);
    const off = await ctx.startCircuitlog({
      name: 'circuitlog-metrics-off',
      db: path.join(tmp, 'off.db'),
      logLevel: 'warn',
      config: offConfig,
    });
    procs.push(off);
    await ctx.setupBenchCircuits(on.url);
    await ctx.setupBenchCircuits(off.url);
    if ((await fetch(`${off.url}/metrics`)).status !== 404) throw new Error('metrics-off server still serves /metrics');
    const failTarget = (id, label, s, goal) => ({
      id,
      label,
      url: `${s.url}/circuits/bench-fail/outcomes`,
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":false}',
      pid: s.pid,
      goal,
    });
    const scenarios = [
      {
        id: 'metrics-allowed',
        title: 'metrics: GET allowed',
        baseline: 'off',
        targets: [
          {
            id: 'off',
            label: 'metrics.enabled false: GET /circuits/bench-ok/allowed',
            url: `${off.url}/circuits/bench-ok/allowed`,
            pid: off.pid,
          },
          {
            id: 'on',
            label: 'metrics on (default): GET /circuits/bench-ok/allowed',
            url: `${on.url}/circuits/bench-ok/allowed`,
            pid: on.pid,
            goal: 0.95,
          },
        ],
      },
      {
        id: 'metrics-fail',
        title: 'metrics: POST outcome failure (write + counters)',
        baseline: 'off',
        targets: [
          failTarget('off', 'metrics.enabled false: POST failure', off),
          failTarget('on', 'metrics on: POST failure', on),
        ],
      },
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));

    const count = ctx.envInt('BENCH_METRICS_CIRCUITS', 10_000, 1, 1_000_000);
    log(`creating ${count} circuits for the scrape timing`);
    await createCircuits(on.url, count);
    const scrape = await timeScrapes(on.url);
    log(
      `GET /metrics with ${count + 2} circuits: median ${scrape.medianMs.toFixed(1)} ms, max ${scrape.maxMs.toFixed(1)} ms, ${scrape.series} series, ${scrape.bytes} bytes`,
    );
    return {
      id: 'metrics',
      title: 'Metrics: /metrics on vs metrics.enabled false (ratio = on / off)',
      durationSec,
      results,
      scrape: { circuits: count + 2, ...scrape },
      notes: [
        'Two circuitlog processes of the same build, 1 worker each, log level warn; the second has `metrics: { enabled: false }` (no registry, no counting, no /metrics).',
        `GET /metrics with ${count + 2} circuits (per-circuit series for the first 10,000: metrics.max_circuits), ${SCRAPES} sequential scrapes after the load runs: median ${scrape.medianMs.toFixed(1)} ms, max ${scrape.maxMs.toFixed(1)} ms, ${scrape.series} series, ${(scrape.bytes / 1024 / 1024).toFixed(2)} MiB.`,
      ],
      checks: [],
    };
  } finally {
    await ctx.stopEach(procs);
    ctx.removeTemp(tmp);
  }
}
