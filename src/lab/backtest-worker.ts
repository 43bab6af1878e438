/**
 * Backtests off the event loop: one worker thread per process (node:worker_threads), started
 * on the first backtest and kept; one backtest at a time (a second one is refused at once with
 * BACKTEST_BUSY, `Retry-After: 1`); each within a time limit (BACKTEST_TIMEOUT) and a heap
 * limit (BACKTEST_TOO_LARGE): past either the worker is stopped and the next job starts a new one.
 *
 * The thread runs `dist/lab/backtest-thread.js`: next to this file when it runs from dist/,
 * and the built copy when it runs from src/ (vitest; test/global-setup.ts builds dist/ first).
 */
import { randomUUID } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { AppError, type ErrorCode } from '../domain/errors.js';
import { PACK_CHUNK, type PackedEntries, packChunk, type ThreadAnswer, type ThreadJob } from './backtest-job.js';
import type { BacktestInput, BacktestResult, GridResult } from './backtest-types.js';

export interface BacktestRunnerOptions {
  /** Longest a backtest or grid may run before its worker is stopped. */
  readonly timeoutMs?: number;
  /** The worker's heap limit, MiB (`resourceLimits.maxOldGenerationSizeMb`). */
  readonly maxHeapMb?: number;
  /** The thread's script; by default the built `backtest-thread.js` (see the file's comment). */
  readonly threadUrl?: URL;
}

export const BACKTEST_DEFAULTS = Object.freeze({
  timeoutMs: 120_000, // 2 min: a 27-point grid over a million outcomes takes well under 30 s
  maxHeapMb: 1_024, // 1 GiB: a million-outcome history decoded and replayed needs a few hundred MiB
});

/** A grid job: the input's `proposed` are the candidates, `values[i]` names candidate i. */
export interface GridJob {
  readonly input: BacktestInput;
  readonly values: readonly Readonly<Record<string, number>>[];
}

/** The built thread script, from dist/ whether this module runs from dist/ or from src/. */
export function defaultThreadUrl(): URL {
  return import.meta.url.endsWith('.ts')
    ? new URL('../../dist/lab/backtest-thread.js', import.meta.url)
    : new URL('./backtest-thread.js', import.meta.url);
}

/** Pack a history for the thread, yielding to the event loop between chunks. */
async function pack(entries: BacktestInput['entries']): Promise<PackedEntries> {
  const times = new Float64Array(entries.length);
  const texts: string[] = [];
  for (let start = 0; start < entries.length; start += PACK_CHUNK) {
    if (start > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    texts.push(packChunk(entries, times, start, Math.min(entries.length, start + PACK_CHUNK)));
  }
  return { times, texts };
}

export class BacktestRunner {
  private worker: Worker | null = null;
  private busy = false;
  private readonly timeoutMs: number;
  private readonly maxHeapMb: number;
  private readonly threadUrl: URL;

  constructor(options: BacktestRunnerOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? BACKTEST_DEFAULTS.timeoutMs;
    this.maxHeapMb = options.maxHeapMb ?? BACKTEST_DEFAULTS.maxHeapMb;
    this.threadUrl = options.threadUrl ?? defaultThreadUrl();
  }

  /** Is a backtest running (a new one would be refused)? */
  get running(): boolean {
    return this.busy;
  }

  /** Runs `backtest` in the worker; rejects with AppError BACKTEST_BUSY, BACKTEST_TIMEOUT or BACKTEST_TOO_LARGE, or the backtest's own error. */
  backtest(input: BacktestInput): Promise<BacktestResult> {
    return this.run(input, null) as Promise<BacktestResult>;
  }

  /** Runs `grid` in the worker; rejects as `backtest` does. */
  grid(job: GridJob): Promise<GridResult> {
    return this.run(job.input, job.values) as Promise<GridResult>;
  }

  /** Stops the worker (tests, shutdown); a running job is rejected. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker !== null) await worker.terminate();
  }

  private async run(input: BacktestInput, values: ThreadJob['values']): Promise<BacktestResult | GridResult> {
    if (this.busy)
      throw new AppError('BACKTEST_BUSY', 'Another backtest is running in this process; try again when it is done.', {
        retryAfterSeconds: 1,
      });
    this.busy = true;
    try {
      const { entries, ...rest } = input;
      const packed = await pack(entries);
      const job: ThreadJob = { id: randomUUID(), input: rest, packed, values };
      return await this.post(job);
    } finally {
      this.busy = false;
    }
  }

  private started(): Worker {
    if (this.worker !== null) return this.worker;
    const worker = new Worker(this.threadUrl, { resourceLimits: { maxOldGenerationSizeMb: this.maxHeapMb } });
    worker.unref(); // an idle worker keeps no process alive
    this.worker = worker;
    return worker;
  }

  private post(job: ThreadJob): Promise<BacktestResult | GridResult> {
    const worker = this.started();
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      const stop = (error: AppError) => {
        done();
        if (this.worker === worker) this.worker = null;
        void worker.terminate();
        reject(error);
      };
      const timer = setTimeout(
        () =>
          stop(
            new AppError(
              'BACKTEST_TIMEOUT',
              `The backtest did not finish within ${this.timeoutMs} ms; it was stopped.`,
            ),
          ),
        this.timeoutMs,
      );
      const onMessage = (answer: ThreadAnswer) => {
        done();
        if (answer.ok) resolve(answer.result);
        else
          reject(
            new AppError(
              answer.code as ErrorCode,
              answer.message,
              answer.fields === null ? {} : { fields: answer.fields },
            ),
          );
      };
      const onError = (error: Error) => {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ERR_WORKER_OUT_OF_MEMORY')
          stop(
            new AppError('BACKTEST_TOO_LARGE', `The backtest needed more than ${this.maxHeapMb} MiB; it was stopped.`),
          );
        else stop(new AppError('INTERNAL', 'The backtest worker failed.', { cause: error }));
      };
      const onExit = () => stop(new AppError('INTERNAL', 'The backtest worker stopped.'));
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
      worker.ref(); // a running backtest keeps the process until it answers
      worker.postMessage(job, [job.packed.times.buffer as ArrayBuffer]);
    }).finally(() => worker.unref()) as Promise<BacktestResult | GridResult>;
  }
}
