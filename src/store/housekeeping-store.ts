import type { MaybePromise } from './maybe-promise.js';

/** How far a pass over a table got: resume after `cursor`; `done` once it reached the end. */
export interface PassProgress {
  readonly cursor: number;
  readonly done: boolean;
}

/** One batch of the per-circuit trim: rows deleted, and where the pass is. */
export interface TrimProgress extends PassProgress {
  readonly deleted: number;
}

/** One batch of the idle-circuit pass: the circuits deleted, and where the pass is. */
export interface IdleProgress extends PassProgress {
  readonly deleted: readonly string[];
}

/**
 * What the housekeeping job (src/service/housekeeping.ts) needs of a store: each call does
 * one small, bounded batch of work (about `batch` rows looked at or deleted; the job sizes
 * `batch` so that a call takes a couple of milliseconds), so that a request waits behind at
 * most one batch.
 */
export interface HousekeepingStore {
  /** Delete up to `batch` of the oldest transitions older than `before` (epoch ms); how many went. */
  trimByAge(before: number, batch: number): MaybePromise<number>;
  /** Keep each circuit's newest `max` transitions (and none older than `before`), one batch after `cursor`. */
  trimPerCircuit(max: number, before: number, cursor: number, batch: number): MaybePromise<TrimProgress>;
  /**
   * Delete up to `batch` circuits after `cursor` (one window of ids) that are not `keep`-listed
   * and idle by `isIdleCircuit(c, before, now)` (domain/idle.ts: closed, not forced, unchanged
   * since before `before`, no isolated caller, probe lease or throttle); each is checked and
   * deleted atomically.
   */
  deleteIdle(
    before: number,
    now: number,
    keep: (name: string) => boolean,
    cursor: number,
    batch: number,
  ): MaybePromise<IdleProgress>;
  /**
   * The outcome history's age bound for circuits the write path does not trim (issue 31: a
   * circuit that stopped receiving writes): delete up to `batch` entries older than `before`,
   * the oldest of each circuit after `cursor` first. Absent: the store bounds it otherwise.
   */
  trimHistory?(before: number, cursor: number, batch: number): MaybePromise<TrimProgress>;
}
