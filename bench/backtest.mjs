// The `backtest` section of `npm run bench` (issue 31, docs/policy-lab.md): the policy lab's engine
// over a recorded history of 1,000,000 outcomes (built from dist/, in this process).
//
//   one policy       decoding the 1M entries and replaying them with one policy         goal ≤ 2 s
//   backtest         the live policy and one proposed, and the fidelity check           (informative)
//   grid in process  the live replay and 27 candidates over the same 1M, in this thread  (informative)
//   in the worker    the backtest through BacktestRunner (a worker thread): the event-loop delay of this
//                    thread meanwhile (perf_hooks monitorEventLoopDelay)                goal < 50 ms max
//   27-point grid    the same grid through BacktestRunner, its candidates split over its worker threads
//                    (by default min(4, cores - 1), at least 1), the event-loop delay     goal ≤ 30 s, < 50 ms
//                    meanwhile; then over every core (at most 4), informative
//   RSS              this process's RSS (the workers' heaps included) sampled every 50 ms during both runs
//
// The history: calls every 20 ms (50/s, about 5.6 hours) through the service's own `/call` step under
// "5 failures in 10 s" (test/lab/story.ts's live policy), a batch job's 6 failures in 8 s every hour and a
// 4-minute outage; only admitted calls are recorded, as the server records them.

import { monitorEventLoopDelay } from 'node:perf_hooks';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const OUTCOMES = 1_000_000;
const HOUR_MS = 3_600_000;
const GOALS = { onePolicyMs: 2_000, gridMs: 30_000, loopDelayMs: 50 };

const fmt = (n, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function load(dist) {
  const mod = (p) => import(pathToFileURL(path.join(dist, p)).href);
  const [backtest, replay, worker, history, policy, service, defaults] = await Promise.all([
    mod('lab/backtest.js'),
    mod('lab/replay.js'),
    mod('lab/backtest-worker.js'),
    mod('domain/history.js'),
    mod('domain/policy.js'),
    mod('service/breaker-service.js'),
    mod('domain/policy-defaults.js'),
  ]);
  return { ...backtest, ...replay, ...worker, ...history, ...policy, ...service, ...defaults };
}

/** The recorded history: OUTCOMES admitted calls, as the stores write them. */
function record(lab, live, start) {
  const entries = [];
  const texts = new Map();
  const textOf = (o, t) => {
    let s = texts.get(o);
    if (s === undefined) texts.set(o, (s = lab.encodeEntry({ type: 'outcome', t, outcome: o })));
    return s;
  };
  const ok = { success: true };
  const failed = { success: false };
  const outageStart = start + 3 * HOUR_MS + 40 * 60_000;
  const fails = (t) => {
    if (t >= outageStart && t < outageStart + 240_000) return true;
    const inHour = (t - start) % HOUR_MS;
    return inHour >= 30 * 60_000 && inHour <= 30 * 60_000 + 8_000 && (inHour - 30 * 60_000) % 1_600 === 0;
  };
  let circuit = null;
  let outcomes = 0;
  for (let t = start; outcomes < OUTCOMES; t += 20) {
    const outcome = fails(t) ? failed : ok;
    const step = lab.callStep(
      { name: 'bench', settings: live, now: t },
      outcome,
      { probeLeaseMs: 10_000 },
      () => 1,
      () => 0,
    )(circuit);
    circuit = step.circuit;
    if (step.verdict.allowed) {
      entries.push({ t, text: textOf(outcome, t) });
      outcomes++;
    }
    for (const e of lab.transitionEntries(t, step.transitions)) entries.push({ t, text: lab.encodeEntry(e) });
  }
  return entries;
}

const timed = (fn) => {
  const t0 = performance.now();
  const value = fn();
  return { value, ms: performance.now() - t0 };
};

/** `ctx`: helpers of run.mjs (repoRoot, log). */
export async function backtestSection(ctx) {
  const started = Date.now();
  const lab = await load(path.join(ctx.repoRoot, 'dist'));
  const window = (size, rate, minimumCalls) => ({
    type: 'time',
    size,
    minimumCalls,
    failureRateThreshold: rate,
    slowCallDurationMs: null,
    slowCallRateThreshold: 100,
  });
  const live = lab.resolvePolicy({
    failureThreshold: 5,
    timeoutSeconds: 1,
    halfOpenMaxCalls: 1,
    window: window(10, 1, 250),
  });
  const proposed = lab.resolvePolicy({
    failureThreshold: 8,
    timeoutSeconds: 1,
    halfOpenMaxCalls: 1,
    window: window(15, 1.07, 375),
  });
  const start = Date.UTC(2026, 11, 1);
  const recorded = timed(() => record(lab, live, start));
  const entries = recorded.value;
  const to = entries.at(-1).t + 1;
  ctx.log(`backtest :: recorded ${fmt(entries.length)} entries (${fmt(OUTCOMES)} outcomes) in ${fmt(recorded.ms)} ms`);
  const input = { circuit: 'bench', entries, current: live, proposed: [proposed], from: start, to };

  const onePolicy = timed(() => {
    const history = lab.decodeHistory('bench', entries, start, to);
    return lab.replay(history, { kind: 'live', current: live });
  });
  ctx.log(`backtest :: one policy ${fmt(onePolicy.ms)} ms (${onePolicy.value.figures.openings} openings)`);
  const both = timed(() => lab.backtest(input, 'bench'));
  ctx.log(
    `backtest :: backtest ${fmt(both.ms)} ms, fidelity ${both.value.fidelity.matched}/${both.value.fidelity.recorded}`,
  );

  const points = lab.gridPoints(live, lab.POLICY_DEFAULTS.circuit, {
    failure_threshold: [5, 8, 10],
    'window.size': [10, 15, 30],
    'window.failure_rate_threshold': [1, 1.07, 2],
  });
  const gridRun = timed(() =>
    lab.grid(
      { ...input, proposed: points.map((p) => p.policy) },
      points.map((p) => p.values),
      'bench-grid',
    ),
  );
  const best = gridRun.value.candidates[0];
  ctx.log(`backtest :: 27-point grid in process ${fmt(gridRun.ms)} ms; best ${JSON.stringify(best.values)}`);

  // The machine's own noise first: the same monitor for 5 s with nothing running in this process.
  const idle = monitorEventLoopDelay({ resolution: 10 });
  idle.enable();
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  idle.disable();
  const idleMaxMs = idle.max / 1e6;
  const idleP99Ms = idle.percentile(99) / 1e6;
  const runner = new lab.BacktestRunner({ timeoutMs: 300_000, maxHeapMb: 2_048 });
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const baseRss = process.memoryUsage().rss;
  let peakRss = baseRss;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 50);
  delay.enable();
  const t0 = performance.now();
  const inWorker = await runner.backtest(input);
  const workerMs = performance.now() - t0;
  delay.disable();
  clearInterval(sampler);
  const maxDelayMs = delay.max / 1e6;
  const p99DelayMs = delay.percentile(99) / 1e6;
  ctx.log(
    `backtest :: in the worker ${fmt(workerMs)} ms; event-loop delay max ${fmt(maxDelayMs, 1)} ms, p99 ${fmt(p99DelayMs, 1)} ms; RSS peak ${fmt(peakRss / 2 ** 20)} MiB`,
  );

  // The goal row: the 27-point grid through the runner, its candidates over its worker threads
  // (by default all cores but one); then, informative, over every core (at most 4).
  await runner.close();
  const gridThrough = async (threads) => {
    const r = new lab.BacktestRunner({ timeoutMs: 300_000, maxHeapMb: 2_048, threads });
    const baseRss = process.memoryUsage().rss;
    let peakRss = baseRss;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
    }, 50);
    const loop = monitorEventLoopDelay({ resolution: 10 });
    loop.enable();
    const t0 = performance.now();
    const result = await r.grid({
      input: { ...input, proposed: points.map((p) => p.policy) },
      values: points.map((p) => p.values),
    });
    const ms = performance.now() - t0;
    loop.disable();
    clearInterval(sampler);
    await r.close();
    const run = { threads, result, ms, maxMs: loop.max / 1e6, p99Ms: loop.percentile(99) / 1e6, baseRss, peakRss };
    ctx.log(
      `backtest :: 27-point grid through the runner (${threads} threads) ${fmt(ms)} ms; event-loop delay max ${fmt(run.maxMs, 1)} ms, p99 ${fmt(run.p99Ms, 1)} ms; RSS peak ${fmt(peakRss / 2 ** 20)} MiB`,
    );
    return run;
  };
  const threaded = await gridThrough(lab.defaultGridThreads());
  const everyCore = Math.min(4, os.availableParallelism());
  const allCores = everyCore === threaded.threads ? null : await gridThrough(everyCore);
  const gridRows = (g, label) => [
    [
      `27-point grid through the runner, ${g.threads} worker thread(s) (${label})`,
      `${fmt(g.ms)} ms`,
      label === 'the default'
        ? `goal ≤ ${fmt(GOALS.gridMs)} ms: ${goal(g.ms <= GOALS.gridMs)}; packing, transfer, decode and the live replay per thread, the candidates split`
        : 'informative',
    ],
    [
      `event-loop delay during it (max / p99)`,
      `${fmt(g.maxMs, 1)} / ${fmt(g.p99Ms, 1)} ms`,
      label === 'the default' ? `goal < ${GOALS.loopDelayMs} ms: ${goal(g.maxMs < GOALS.loopDelayMs)}` : 'informative',
    ],
    [
      'RSS before / peak during it',
      `${fmt(g.baseRss / 2 ** 20)} / ${fmt(g.peakRss / 2 ** 20)} MiB`,
      'this process, the worker threads included',
    ],
  ];
  const goal = (ok) => (ok ? 'met' : 'NOT met');
  const checks = [
    {
      what: 'the worker answers what the engine answers in process',
      ok: JSON.stringify({ ...inWorker, id: '' }) === JSON.stringify({ ...both.value, id: '' }),
      detail: `fidelity ${inWorker.fidelity.matched}/${inWorker.fidelity.recorded}`,
    },
    {
      what: "the grid through the runner's threads answers what the grid answers in process",
      ok: [threaded, allCores]
        .filter((g) => g !== null)
        .every((g) => JSON.stringify({ ...g.result, id: '' }) === JSON.stringify({ ...gridRun.value, id: '' })),
      detail: `${threaded.result.candidates.length} candidates; best ${JSON.stringify(threaded.result.candidates[0].values)}`,
    },
  ];
  const rows = [
    ["record the history (the service's /call step)", `${fmt(recorded.ms)} ms`, `${fmt(entries.length)} entries`],
    [
      'one policy: decode + replay',
      `${fmt(onePolicy.ms)} ms`,
      `goal ≤ ${fmt(GOALS.onePolicyMs)} ms: ${goal(onePolicy.ms <= GOALS.onePolicyMs)}`,
    ],
    [
      'backtest: live + proposed + fidelity',
      `${fmt(both.ms)} ms`,
      `fidelity ${both.value.fidelity.matched}/${both.value.fidelity.recorded}`,
    ],
    ...gridRows(threaded, 'the default'),
    ...(allCores === null ? [] : gridRows(allCores, 'every core')),
    [
      '27-point grid in process (this thread, informative)',
      `${fmt(gridRun.ms)} ms`,
      `one thread whose domain call sites already saw the recording; best ${JSON.stringify(best.values)}`,
    ],
    ['backtest in the worker thread', `${fmt(workerMs)} ms`, 'packing, transfer, decode, 2 replays'],
    [
      'event-loop delay meanwhile (max / p99)',
      `${fmt(maxDelayMs, 1)} / ${fmt(p99DelayMs, 1)} ms`,
      `goal < ${GOALS.loopDelayMs} ms: ${goal(maxDelayMs < GOALS.loopDelayMs)}`,
    ],
    [
      'event-loop delay idle, 5 s, the same monitor (max / p99)',
      `${fmt(idleMaxMs, 1)} / ${fmt(idleP99Ms, 1)} ms`,
      "the machine's own noise",
    ],
    [
      'RSS before / peak during the worker run',
      `${fmt(baseRss / 2 ** 20)} / ${fmt(peakRss / 2 ** 20)} MiB`,
      'this process, the worker included',
    ],
  ];
  const table = ['| what | measured | note |', '| --- | --- | --- |', ...rows.map((r) => `| ${r.join(' | ')} |`)].join(
    '\n',
  );
  return {
    id: 'backtest',
    title: `Policy lab: backtests over ${fmt(OUTCOMES)} recorded outcomes`,
    durationSec: Math.round((Date.now() - started) / 1000),
    results: [],
    notes: [
      'The engine from dist/lab in the bench process; the history recorded through the service\'s /call step under "5 failures in 10 s" (50 calls/s, an hourly batch job, a 4-minute outage).',
    ],
    markdownExtra: `${table}\n\n${checks.map((c) => `- check: ${c.what}: ${c.ok ? 'ok' : 'FAILED'} (${c.detail})`).join('\n')}`,
    checks,
  };
}
