/**
 * The backtest worker thread's entry (node:worker_threads; `backtest-worker.ts` starts it):
 * each message is one job, its history packed (`packChunk`): a backtest, or a grid's share of
 * candidates (the runner ranks the shares of all its threads); the answer is the result or the
 * error, as plain data.
 */
import { parentPort } from 'node:worker_threads';
import { AppError } from '../domain/errors.js';
import { backtest, evaluateCandidates } from './backtest.js';
import { type ThreadAnswer, type ThreadJob, unpackEntries } from './backtest-job.js';

function run(job: ThreadJob): ThreadAnswer {
  try {
    const input = { ...job.input, entries: unpackEntries(job.packed) };
    const result =
      job.share === null ? backtest(input, job.id) : evaluateCandidates(input, job.share.start, job.share.end);
    return { ok: true, result };
  } catch (error) {
    if (error instanceof AppError)
      return { ok: false, code: error.code, message: error.message, fields: error.options.fields ?? null };
    return {
      ok: false,
      code: 'INTERNAL',
      message: error instanceof Error ? error.message : String(error),
      fields: null,
    };
  }
}

parentPort?.on('message', (job: ThreadJob) => {
  parentPort!.postMessage(run(job));
});
