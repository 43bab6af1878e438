// The `policy` section of `npm run bench` (issue 8): every outcome a write, against
// GET /allowed on a closed circuit in the same process and run; and the effect of group commit.
//
//   failure outcomes          POST /circuits/bench-fail/outcomes (threshold 1e9: every one a write)  goal ≥ 0.5x
//   window successes          POST /circuits/bench-window/outcomes on a count window (size 100)      goal ≥ 0.5x
//   batch                     POST /outcomes with 100 items: requests/s × 100 = outcomes/s           (no goal)
//   group commit off          the failure outcomes on a second server with CIRCUITLOG_GROUP_COMMIT=off (p50/p99)

import path from 'node:path';
import { probeOk, startProcess } from './lib.mjs';

const JSON_HEADERS = { 'content-type': 'application/json' };
const BATCH_ITEMS = 100;

/** `ctx`: helpers of run.mjs (startCircuitlog, setupBenchCircuits, tempDir, removeTemp, stopEach, suiteOptions, durationFor, log, runSuite). */
export async function policySection(ctx) {
  const durationSec = ctx.durationFor('policy');
  const tmp = ctx.tempDir('circuitlog-bench-policy-');
  const procs = [];
  try {
    const grouped = await ctx.startCircuitlog({
      name: 'circuitlog',
      db: path.join(tmp, 'grouped.db'),
      logLevel: 'warn',
    });
    procs.push(grouped);
    const single = await startSingle(ctx, path.join(tmp, 'single.db'));
    procs.push(single);
    for (const server of [grouped, single]) {
      await ctx.setupBenchCircuits(server.url);
      await probeOk(`${server.url}/circuits/bench-window`, {
        method: 'PATCH',
        headers: JSON_HEADERS,
        body: JSON.stringify({ window: { type: 'count', size: 100, failure_rate_threshold: 100 } }),
      });
    }
    const batchBody = JSON.stringify({
      outcomes: Array.from({ length: BATCH_ITEMS }, (_, i) => ({ circuit: `bench-batch-${i % 10}`, success: false })),
    });
    const fail = (id, label, server, goal = null) => ({
      id,
      label,
      url: `${server.url}/circuits/bench-fail/outcomes`,
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":false}',
      goal,
      pid: server.pid,
    });
    const allowed = {
      id: 'allowed',
      label: 'GET /circuits/bench-ok/allowed (closed)',
      url: `${grouped.url}/circuits/bench-ok/allowed`,
      pid: grouped.pid,
    };
    const scenarios = [
      {
        id: 'policy-writes',
        title: 'policy: writes vs GET /allowed',
        baseline: 'allowed',
        targets: [
          allowed,
          fail('fail', 'POST /circuits/bench-fail/outcomes {"success":false}', grouped, 0.5),
          {
            id: 'window',
            label: 'POST /circuits/bench-window/outcomes {"success":true} (count window)',
            url: `${grouped.url}/circuits/bench-window/outcomes`,
            method: 'POST',
            headers: JSON_HEADERS,
            body: '{"success":true}',
            goal: 0.5,
            pid: grouped.pid,
          },
          {
            id: 'batch',
            label: `POST /outcomes, ${BATCH_ITEMS} failures a request`,
            url: `${grouped.url}/outcomes`,
            method: 'POST',
            headers: JSON_HEADERS,
            body: batchBody,
            pid: grouped.pid,
          },
        ],
      },
      {
        id: 'policy-group-commit',
        title: 'policy: failure outcomes, group commit on vs off',
        baseline: 'on',
        targets: [fail('on', 'group commit on (default)', grouped), fail('off', 'CIRCUITLOG_GROUP_COMMIT=off', single)],
      },
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));
    const batch = results[0].targets.find((t) => t.id === 'batch');
    const state = async (server, name) => (await (await fetch(`${server.url}/circuits/${name}`)).json()).state;
    const checks = [];
    for (const [label, server] of [
      ['on', grouped],
      ['off', single],
    ]) {
      const s = await state(server, 'bench-fail');
      checks.push({
        what: `group commit ${label}: bench-fail stayed closed (every failure a write)`,
        ok: s === 'closed',
        detail: `state ${s}`,
      });
    }
    const w = await state(grouped, 'bench-window');
    checks.push({
      what: 'bench-window stayed closed (every success a window write)',
      ok: w === 'closed',
      detail: `state ${w}`,
    });
    return {
      id: 'policy',
      title: 'Policy: outcomes as writes vs GET /allowed, batches, group commit',
      durationSec,
      results,
      notes: [
        `POST /outcomes batches: ${Math.round((batch?.rps ?? 0) * BATCH_ITEMS)} outcomes/s (${BATCH_ITEMS} per request, over 10 circuits).`,
        `circuitlog: 1 process each, log level warn, synchronous NORMAL, DB in ${tmp}.`,
      ],
      checks,
    };
  } finally {
    await ctx.stopEach(procs);
    ctx.removeTemp(tmp);
  }
}

/** A second circuitlog with group commit off (startCircuitlog has no env pass-through). */
function startSingle(ctx, db) {
  return startProcess({
    name: 'circuitlog-no-group-commit',
    args: [ctx.dist],
    cwd: ctx.repoRoot,
    port: 'auto',
    readyPath: '/health',
    timeoutMs: 30_000,
    env: {
      HOST: '127.0.0.1',
      CIRCUITLOG_DB: db,
      CIRCUITLOG_LOG_LEVEL: 'warn',
      CIRCUITLOG_CONFIG: '',
      CIRCUITLOG_TOKEN: '',
      CIRCUITLOG_GROUP_COMMIT: 'off',
    },
  });
}
