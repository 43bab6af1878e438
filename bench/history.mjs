// The `history` section of `npm run bench` (issue 31's Speed): outcome intake with the outcome
// history on (the default) vs `history: {enabled: false}`, SQLite, two circuitlog processes of
// this build on their own files, measured back to back in the same run:
//
//   - POST /circuits/bench-ok/outcomes {"success":true} on a healthy circuit: off, nothing is
//     written; on, every one is a write (its history row), through the group commit;
//   - POST /circuits/bench-fail/outcomes {"success":false} (threshold 10^9: every one a write either way);
//   - POST /outcomes with 100 failures over 10 circuits (requests/s x 100 = outcomes/s).
//
// Goal: with history on >= 0.8x off for each. Then the bytes per outcome on a real file
// (bench/history-size.mjs, BENCH_HISTORY_SIZE_N outcomes, default 200,000).

import fs from 'node:fs';
import path from 'node:path';
import { probeOk } from './lib.mjs';
import { measureHistorySize } from './history-size.mjs';

const JSON_HEADERS = { 'content-type': 'application/json' };
const BATCH_ITEMS = 100;

/**
 * @param ctx what bench/run.mjs lends: startCircuitlog, setupBenchCircuits, tempDir, removeTemp,
 *   stopEach, runSuite, suiteOptions, durationSec, envInt, log
 */
export async function historySection(ctx) {
  const { durationSec } = ctx;
  const tmp = ctx.tempDir('circuitlog-bench-history-');
  const procs = [];
  try {
    const offConfig = path.join(tmp, 'off.yaml');
    fs.writeFileSync(offConfig, 'history:\n  enabled: false\n');
    const on = await ctx.startCircuitlog({ name: 'history-on', db: path.join(tmp, 'on.db'), logLevel: 'warn' });
    procs.push(on);
    const off = await ctx.startCircuitlog({
      name: 'history-off',
      db: path.join(tmp, 'off.db'),
      config: offConfig,
      logLevel: 'warn',
    });
    procs.push(off);
    for (const server of [on, off]) {
      await ctx.setupBenchCircuits(server.url);
      for (let k = 0; k < 10; k++)
        await probeOk(`${server.url}/circuits/bench-batch-${k}`, {
          method: 'PATCH',
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ failure_threshold: 1_000_000_000 }),
        });
    }
    const batchBody = JSON.stringify({
      outcomes: Array.from({ length: BATCH_ITEMS }, (_, i) => ({ circuit: `bench-batch-${i % 10}`, success: false })),
    });
    const target = (id, server, urlPath, body, goal) => ({
      id,
      label: `history ${id}: POST ${urlPath}`,
      url: `${server.url}${urlPath}`,
      method: 'POST',
      headers: JSON_HEADERS,
      body,
      pid: server.pid,
      goal,
    });
    const pair = (id, title, urlPath, body) => ({
      id,
      title,
      baseline: 'off',
      targets: [target('off', off, urlPath, body), target('on', on, urlPath, body, 0.8)],
    });
    const scenarios = [
      pair(
        'history-success',
        'history: POST success outcome on a healthy circuit, history on vs off',
        '/circuits/bench-ok/outcomes',
        '{"success":true}',
      ),
      pair(
        'history-failure',
        'history: POST failure outcome (threshold 10^9, every one a write), history on vs off',
        '/circuits/bench-fail/outcomes',
        '{"success":false}',
      ),
      pair(
        'history-batch',
        `history: POST /outcomes, ${BATCH_ITEMS} failures a request, history on vs off`,
        '/outcomes',
        batchBody,
      ),
    ];
    const results = await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec));
    const sizeN = ctx.envInt('BENCH_HISTORY_SIZE_N', 200_000, 1_000, 100_000_000);
    ctx.log(`history: writing ${sizeN} outcomes to measure the bytes per outcome`);
    const sizes = [];
    for (const mix of ['http', 'bare']) sizes.push({ mix, ...(await measureHistorySize(sizeN, mix)) });
    const sizeNotes = sizes.map(
      (s) =>
        `Bytes per outcome (${s.mix === 'http' ? 'as the HTTP routes record one: success, duration_ms and the late rule' : 'a bare success, text [1]'}): ${s.bytesPerOutcome.toFixed(1)} (${s.n} outcomes over 10 circuits grew the file by ${s.bytes} bytes after a WAL checkpoint; entry text ${s.entryChars.toFixed(1)} chars); a day at 1,000 outcomes/s, if all kept: ${((s.bytesPerOutcome * 86_400_000) / 1e9).toFixed(2)} GB.`,
    );
    return {
      id: 'history',
      title: 'The outcome history: intake with history on vs off, SQLite (ratio = on / off)',
      durationSec,
      results,
      notes: [
        'Two circuitlog processes (1 worker, log level warn, each its own file), measured one after the other: the default config (history on) and history.enabled: false.',
        'With history on a success on a healthy circuit is a write (its history row, in the group commit) where off it writes nothing; a failure writes the circuit either way, and on also its history row.',
        ...sizeNotes,
      ],
      checks: [],
    };
  } finally {
    await ctx.stopEach(procs);
    ctx.removeTemp(tmp);
  }
}
