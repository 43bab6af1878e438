/**
 * Backtests off the event loop (node:worker_threads): a backtest runs in one worker thread, a
 * grid's candidates are split over up to `threads` of them (by default
 * `min(4, os.availableParallelism() - 1)`, at least 1: a core is left to the event loop), each thread replaying the live policy itself and then
 * its share of the candidates; the shares are ranked here once all are in (`rankGrid`: the same
 * answer as the in-process `grid`). Threads are started on first use and kept. One job at a time
 * (a second one is refused at once with BACKTEST_BUSY, `Retry-After: 1`); each within a time
 * limit (BACKTEST_TIMEOUT) and, per thread, a heap limit (BACKTEST_TOO_LARGE): past either, or
 * on any thread's error, every thread of the job is stopped (awaited) before the job is
 * rejected, and the next job starts new ones.
 *
 * The thread runs `dist/lab/backtest-thread.js`: next to this file when it runs from dist/,
 * and the built copy when it runs from src/ (vitest; test/global-setup.ts builds dist/ first).
 */
import { randomUUID } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { AppError, type ErrorCode } from '../domain/errors.js';
import { type GridShare, rankGrid } from './backtest.js';
import { gridShares, pack, type ThreadAnswer, type ThreadJob } from './backtest-job.js';
import type { BacktestInput, BacktestResult, GridResult } from './backtest-types.js';

export { gridShares } from './backtest-job.js';

/** Most threads a grid is split over. */
export const MAX_GRID_THREADS = 4;

export interface BacktestRunnerOptions {
  /** Longest a backtest or grid may run before its threads are stopped. */
  readonly timeoutMs?: number;
  /** Each thread's heap limit, MiB (`resourceLimits.maxOldGenerationSizeMb`). */
  readonly maxHeapMb?: number;
  /** The thread's script; by default the built `backtest-thread.js` (see the file's comment). */
  readonly threadUrl?: URL;
  /** Most threads a grid is split over (1 to 4); by default `defaultGridThreads()`. */
  readonly threads?: number;
}

/**
 * `min(4, cores - 1)`, at least 1: a core is left to the event loop. With every core busy in a
 * grid the serving thread waits for one (bench: a 27-point grid on 2 threads of a 2-vCPU machine
 * held the event loop up to 242-267 ms; one backtest thread, 15 ms).
 */
export function defaultGridThreads(cores: number = availableParallelism()): number {
  return Math.max(1, Math.min(MAX_GRID_THREADS, cores - 1));
}

export const BACKTEST_DEFAULTS = Object.freeze({
  timeoutMs: 120_000, // 2 min: a 27-point grid over a million outcomes takes well under 30 s on 2 threads
  maxHeapMb: 1_024, // 1 GiB per thread: a million-outcome history decoded and replayed needs a few hundred MiB
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

export class BacktestRunner {
  private readonly pool: (Worker | null)[] = [];
  /** Threads started and not yet exited (their 'exit' event). */
  private readonly alive = new Set<Worker>();
  private busy = false;
  private readonly timeoutMs: number;
  private readonly maxHeapMb: number;
  private readonly threadUrl: URL;
  private readonly threads: number;

  constructor(options: BacktestRunnerOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? BACKTEST_DEFAULTS.timeoutMs;
    this.maxHeapMb = options.maxHeapMb ?? BACKTEST_DEFAULTS.maxHeapMb;
    this.threadUrl = options.threadUrl ?? defaultThreadUrl();
    const threads = options.threads ?? defaultGridThreads();
    if (!Number.isInteger(threads) || threads < 1 || threads > MAX_GRID_THREADS)
      throw new RangeError(`threads must be an integer from 1 to ${MAX_GRID_THREADS}, not ${threads}`);
    this.threads = threads;
  }

  /** Is a backtest running (a new one would be refused)? */
  get running(): boolean {
    return this.busy;
  }

  /** Threads running now (started, not yet exited): idle ones are kept for the next job. */
  get threadsAlive(): number {
    return this.alive.size;
  }

  /** Runs `backtest` in a worker thread; rejects with AppError BACKTEST_BUSY, BACKTEST_TIMEOUT or BACKTEST_TOO_LARGE, or the backtest's own error. */
  async backtest(input: BacktestInput): Promise<BacktestResult> {
    const [answer] = await this.run(input, [null]);
    return answer as BacktestResult;
  }

  /** Runs a grid over up to `threads` worker threads, ranked once all shares are in; rejects as `backtest` does. */
  async grid(job: GridJob): Promise<GridResult> {
    const { entries: _entries, ...rest } = job.input;
    const id = randomUUID();
    const shares = await this.run(job.input, gridShares(job.input.proposed.length, this.threads));
    return rankGrid(rest, job.values, shares as GridShare[], id);
  }

  /** Stops every thread (tests, shutdown); a running job is rejected. */
  async close(): Promise<void> {
    const workers = this.pool.splice(0).filter((w): w is Worker => w !== null);
    await Promise.all(workers.map((w) => w.terminate()));
  }

  private async run(input: BacktestInput, shares: ThreadJob['share'][]): Promise<(BacktestResult | GridShare)[]> {
    if (this.busy)
      throw new AppError('BACKTEST_BUSY', 'Another backtest is running in this process; try again when it is done.', {
        retryAfterSeconds: 1,
      });
    this.busy = true;
    try {
      const { entries, ...rest } = input;
      const packed = await pack(entries);
      const id = randomUUID();
      // Each thread gets its own copy of the times (transferred); the texts are cloned per thread.
      const jobs: ThreadJob[] = shares.map((share, i) => ({
        id,
        input: rest,
        packed: i === shares.length - 1 ? packed : { times: packed.times.slice(), texts: packed.texts },
        share,
      }));
      return await this.post(jobs);
    } finally {
      this.busy = false;
    }
  }

  private started(i: number): Worker {
    const kept = this.pool[i];
    if (kept !== undefined && kept !== null) return kept;
    const worker = new Worker(this.threadUrl, { resourceLimits: { maxOldGenerationSizeMb: this.maxHeapMb } });
    worker.unref(); // an idle worker keeps no process alive
    this.alive.add(worker);
    // A thread that fails between jobs, or after its job was stopped, just ends (its 'exit' is heard).
    worker.on('error', () => {});
    worker.once('exit', () => {
      this.alive.delete(worker);
      if (this.pool[i] === worker) this.pool[i] = null;
    });
    this.pool[i] = worker;
    return worker;
  }

  /** Stops a thread; resolves once it has exited ('exit': a thread dying of its heap limit may never settle `terminate()`). */
  private stopped(worker: Worker): Promise<void> {
    if (!this.alive.has(worker)) return Promise.resolve();
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.terminate().catch(() => {});
    return exited;
  }

  /** Posts job i to thread i; answers every answer, or rejects once the job's threads are all stopped. */
  private post(jobs: readonly ThreadJob[]): Promise<(BacktestResult | GridShare)[]> {
    const workers = jobs.map((_, i) => this.started(i));
    const answers: (BacktestResult | GridShare)[] = new Array(jobs.length);
    const answered = new Array<boolean>(jobs.length).fill(false);
    return new Promise<(BacktestResult | GridShare)[]>((resolve, reject) => {
      let pending = jobs.length;
      let settled = false;
      const offs: (() => void)[] = [];
      const done = () => {
        settled = true;
        clearTimeout(timer);
        for (const off of offs) off();
      };
      /** Stops the job's threads still working (all of them when `all`), and rejects once they have exited. */
      const stop = (error: AppError, all: boolean) => {
        if (settled) return;
        done();
        const stopping = workers.filter((_, i) => all || !answered[i]);
        for (const w of stopping) {
          const at = this.pool.indexOf(w);
          if (at >= 0) this.pool[at] = null;
        }
        void Promise.all(stopping.map((w) => this.stopped(w))).then(() => reject(error));
      };
      const timer = setTimeout(
        () =>
          stop(
            new AppError(
              'BACKTEST_TIMEOUT',
              `The backtest did not finish within ${this.timeoutMs} ms; it was stopped.`,
            ),
            true,
          ),
        this.timeoutMs,
      );
      workers.forEach((worker, i) => {
        offs.push(
          this.watch(worker, {
            answer: (answer) => {
              if (settled) return;
              answered[i] = true;
              if (!answer.ok) {
                const fields = answer.fields === null ? {} : { fields: answer.fields };
                stop(new AppError(answer.code as ErrorCode, answer.message, fields), false);
                return;
              }
              answers[i] = answer.result;
              if (--pending === 0) {
                done();
                resolve(answers);
              }
            },
            fail: (error) => stop(error, true),
          }),
        );
      });
      // Posted once every listener is on: a thread that fails at once is heard.
      for (const [i, job] of jobs.entries()) workers[i]!.postMessage(job, [job.packed.times.buffer as ArrayBuffer]);
    }).finally(() => {
      for (const w of workers) w.unref();
    });
  }

  /** Listens to a thread for one job (and holds the process meanwhile); answers how to stop listening. */
  private watch(
    worker: Worker,
    on: { answer: (answer: ThreadAnswer) => void; fail: (error: AppError) => void },
  ): () => void {
    const onError = (error: Error) => {
      if ((error as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY')
        on.fail(
          new AppError(
            'BACKTEST_TOO_LARGE',
            `The backtest needed more than ${this.maxHeapMb} MiB in a thread; it was stopped.`,
          ),
        );
      else on.fail(new AppError('INTERNAL', 'The backtest worker failed.', { cause: error }));
    };
    const onExit = () => on.fail(new AppError('INTERNAL', 'The backtest worker stopped.'));
    worker.on('message', on.answer);
    worker.on('error', onError);
    worker.on('exit', onExit);
    worker.ref(); // a running backtest keeps the process until it answers
    return () => {
      worker.off('message', on.answer);
      worker.off('error', onError);
      worker.off('exit', onExit);
    };
  }
}
