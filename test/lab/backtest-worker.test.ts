import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';
import type { StoredEntry } from '../../src/domain/history.js';
import type { BacktestInput } from '../../src/lab/backtest-types.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import { backtest, grid, gridPoints } from '../../src/lab/backtest.js';
import { BacktestRunner, defaultGridThreads, gridShares } from '../../src/lab/backtest-worker.js';
import { DAY_START, EIGHT_IN_FIFTEEN, FIVE_IN_TEN, HOUR_MS, recordStory } from './story.js';

const story = recordStory(FIVE_IN_TEN, 1); // the first hour: one batch job
const input: BacktestInput = {
  circuit: 'orders-db',
  entries: story.entries,
  current: FIVE_IN_TEN,
  proposed: [EIGHT_IN_FIFTEEN],
  from: DAY_START,
  to: DAY_START + HOUR_MS,
  createdAt: DAY_START,
};

/** A thread script that takes jobs and never answers. */
function silentThread(): URL {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'lab-')), 'silent.mjs');
  writeFileSync(file, "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', () => {});\n");
  return pathToFileURL(file);
}

const rejection = async (p: Promise<unknown>) => {
  const error = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
};

describe('backtests in a worker thread (lab/backtest-worker.ts)', () => {
  const runners: BacktestRunner[] = [];
  const runner = (options?: ConstructorParameters<typeof BacktestRunner>[0]) => {
    const r = new BacktestRunner(options);
    runners.push(r);
    return r;
  };
  afterEach(async () => {
    await Promise.all(runners.splice(0).map((r) => r.close()));
  });

  it('answers what the engine answers in process', async () => {
    const result = await runner().backtest(input);
    const here = backtest(input, result.id);
    expect(result).toEqual(here);
    expect(result.current.openings).toBe(1);
    expect(result.fidelity.ratio).toBe(1);
  });

  it('runs a grid, its candidates ranked', async () => {
    const result = await runner().grid({
      input: { ...input, proposed: [FIVE_IN_TEN, EIGHT_IN_FIFTEEN] },
      values: [{ n: 5 }, { n: 8 }],
    });
    expect(result.candidates.map((c) => c.values)).toEqual([{ n: 8 }, { n: 5 }]);
    expect(result.candidates.map((c) => c.rank)).toEqual([1, 2]);
  });

  it('refuses a second backtest while one runs, with BACKTEST_BUSY and a retry hint', async () => {
    const r = runner();
    const first = r.backtest(input);
    const second = await rejection(r.backtest(input));
    expect(second.code).toBe('BACKTEST_BUSY');
    expect(second.options.retryAfterSeconds).toBe(1);
    expect((await first).fidelity.ratio).toBe(1);
    expect((await r.backtest(input)).outcomes).toBe((await first).outcomes); // free again
  });

  it('stops a backtest past its time limit with BACKTEST_TIMEOUT, and is free again', async () => {
    const r = runner({ timeoutMs: 50, threadUrl: silentThread() });
    expect((await rejection(r.backtest(input))).code).toBe('BACKTEST_TIMEOUT');
    expect(r.running).toBe(false);
    expect((await rejection(r.backtest(input))).code).toBe('BACKTEST_TIMEOUT');
  });

  it('stops a backtest past its heap limit with BACKTEST_TOO_LARGE', async () => {
    const entries: StoredEntry[] = Array.from({ length: 1_000_000 }, (_, i) => ({
      t: DAY_START + i,
      text: `[1,${i}]`,
    }));
    const r = runner({ maxHeapMb: 16 });
    const error = await rejection(r.backtest({ ...input, entries, to: DAY_START + 2_000_000 }));
    expect(error.code).toBe('BACKTEST_TOO_LARGE');
  });

  it("passes the engine's own errors on, as they are", async () => {
    const error = await rejection(runner().backtest({ ...input, proposed: [] }));
    expect(error.code).toBe('BAD_REQUEST');
  });

  const points = gridPoints(FIVE_IN_TEN, POLICY_DEFAULTS.circuit, {
    failure_threshold: [3, 5, 8],
    'window.size': [10, 15],
  });
  const gridJob = {
    input: { ...input, proposed: points.map((p) => p.policy) },
    values: points.map((p) => p.values),
  };

  it('splits a grid over its threads and answers what the in-process grid answers', async () => {
    const r = runner({ threads: 3 });
    const result = await r.grid(gridJob);
    expect(r.threadsAlive).toBe(3); // the 6 candidates went to 3 threads, kept for the next job
    expect(result).toEqual(grid(gridJob.input, gridJob.values, result.id));
    expect(result.candidates).toHaveLength(6);
    expect(result.candidates[0]!.meets_objective).toBe(true);
    // Again on the kept threads: the same answer.
    expect({ ...(await r.grid(gridJob)), id: '' }).toEqual({ ...result, id: '' });
    expect(r.threadsAlive).toBe(3);
    await r.close();
    expect(r.threadsAlive).toBe(0);
  });

  it('splits candidates into contiguous shares, at most one per thread, over all cores but one by default', () => {
    expect(gridShares(27, 4)).toEqual([
      { start: 0, end: 6 },
      { start: 6, end: 13 },
      { start: 13, end: 20 },
      { start: 20, end: 27 },
    ]);
    expect(gridShares(2, 4)).toEqual([
      { start: 0, end: 1 },
      { start: 1, end: 2 },
    ]);
    expect(gridShares(0, 2)).toEqual([{ start: 0, end: 0 }]);
    expect(() => new BacktestRunner({ threads: 5 })).toThrow(RangeError);
    // By default a core is left to the event loop, and at most 4 threads run.
    expect([1, 2, 3, 5, 16].map((cores) => defaultGridThreads(cores))).toEqual([1, 1, 2, 4, 4]);
  });

  it('stops every thread of a grid past its time limit, none left running, and is free again', async () => {
    const r = runner({ timeoutMs: 50, threads: 3, threadUrl: silentThread() });
    expect((await rejection(r.grid(gridJob))).code).toBe('BACKTEST_TIMEOUT');
    expect(r.threadsAlive).toBe(0);
    expect(r.running).toBe(false);
    expect((await rejection(r.grid(gridJob))).code).toBe('BACKTEST_TIMEOUT');
    expect(r.threadsAlive).toBe(0);
  });

  it('stops every thread of a grid when one passes its heap limit', async () => {
    const entries: StoredEntry[] = Array.from({ length: 1_000_000 }, (_, i) => ({
      t: DAY_START + i,
      text: `[1,${i}]`,
    }));
    const r = runner({ maxHeapMb: 16, threads: 2 });
    const error = await rejection(
      r.grid({ ...gridJob, input: { ...gridJob.input, entries, to: DAY_START + 2_000_000 } }),
    );
    expect(error.code).toBe('BACKTEST_TOO_LARGE');
    expect(r.threadsAlive).toBe(0);
  });

  it('refuses a backtest while a grid runs over its threads (one job at a time)', async () => {
    const r = runner({ threads: 2 });
    const running = r.grid(gridJob);
    expect((await rejection(r.backtest(input))).code).toBe('BACKTEST_BUSY');
    expect((await running).candidates).toHaveLength(6);
  });
});
