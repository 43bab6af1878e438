/**
 * Backtests off the event loop: one worker thread per process (node:worker_threads), one
 * backtest at a time (a second one is refused with BACKTEST_BUSY), each within a time limit
 * (BACKTEST_TIMEOUT). Signatures first; the pool follows.
 */
import type { BacktestInput, BacktestResult, GridResult } from './backtest-types.js';

export interface BacktestRunnerOptions {
  /** Longest a backtest or grid may run before its worker is stopped. */
  readonly timeoutMs?: number;
}

/** A grid job: the input's `proposed` are the candidates, `values[i]` names candidate i. */
export interface GridJob {
  readonly input: BacktestInput;
  readonly values: readonly Readonly<Record<string, number>>[];
}

export class BacktestRunner {
  constructor(readonly options: BacktestRunnerOptions = {}) {}

  /** Runs `backtest` in the worker; rejects with AppError BACKTEST_BUSY or BACKTEST_TIMEOUT. */
  backtest(_input: BacktestInput): Promise<BacktestResult> {
    return Promise.reject(new Error('not implemented yet'));
  }

  /** Runs `grid` in the worker; rejects with AppError BACKTEST_BUSY or BACKTEST_TIMEOUT. */
  grid(_job: GridJob): Promise<GridResult> {
    return Promise.reject(new Error('not implemented yet'));
  }

  /** Stops the worker (tests, shutdown). */
  async close(): Promise<void> {}
}
