/**
 * The sliding window of recent outcomes: pure functions over a JSON-friendly state.
 * A count window keeps one character per outcome; a time window keeps per-second buckets.
 */
import { nextKindBuckets, nextKindCodes, type KindBucket } from './kind-window.js';
import type { OutcomeKind } from './outcome-kind.js';
import { minimumCalls, type WindowPolicy } from './policy.js';

/** One outcome as the window sees it. */
export interface WindowOutcome {
  readonly failure: boolean;
  readonly slow: boolean;
  /** The kind it was reported as (issue 29), when it named one: then the window keeps kinds (`kind-window.ts`). */
  readonly kind?: OutcomeKind;
}

/** Per-second bucket: `[epochSecond, calls, failures, slowCalls]`. */
export type Bucket = readonly [number, number, number, number];

export type { KindBucket } from './kind-window.js';

/**
 * What a window holds. `count`: `outcomes` has one character per outcome, oldest first
 * ('0' + 1 for a failure + 2 for a slow call), with the failure and slow totals alongside
 * so each outcome costs O(1) to count. `time`: buckets of the seconds that had outcomes,
 * oldest first.
 */
export type WindowState =
  | {
      readonly type: 'count';
      readonly outcomes: string;
      readonly failures: number;
      readonly slowCalls: number;
      /** Issue 29: one digit per outcome of the last `size` reported, by kind; absent until one named a kind. */
      readonly kinds?: string;
    }
  | {
      readonly type: 'time';
      readonly buckets: readonly Bucket[];
      /** Issue 29: the kinds per second; absent until an outcome named a kind. */
      readonly kindBuckets?: readonly KindBucket[];
    };

/** The window's live figures; rates in percent, rounded to 2 decimals (0 without calls). */
export interface WindowFigures {
  readonly calls: number;
  readonly failures: number;
  readonly slowCalls: number;
  readonly failureRate: number;
  readonly slowCallRate: number;
}

export type WindowTrip = 'failure_rate_exceeded' | 'slow_call_rate_exceeded';

const FAILURE = 1;
const SLOW = 2;
const CODE_0 = '0'.charCodeAt(0);

/** Whether an outcome of `durationMs` is slow under `window`. */
export function isSlow(window: WindowPolicy, durationMs: number | undefined): boolean {
  return window.slowCallDurationMs !== null && durationMs !== undefined && durationMs >= window.slowCallDurationMs;
}

/** The state after one more outcome at `now`; `state` null (or of another type) is an empty window. */
export function addOutcome(
  window: WindowPolicy,
  state: WindowState | null,
  outcome: WindowOutcome,
  now: number,
): WindowState {
  const next =
    window.type === 'count' ? addToCount(window.size, state, outcome) : addToTime(window.size, state, outcome, now);
  return keptKinds(window, state, next, outcome, now);
}

/** `next` with the kinds kept (`kind-window.ts`) once any outcome named one; as it is before that. */
function keptKinds(
  window: WindowPolicy,
  state: WindowState | null,
  next: WindowState,
  outcome: WindowOutcome,
  now: number,
): WindowState {
  const tracked = state !== null && (state.type === 'count' ? state.kinds : state.kindBuckets) !== undefined;
  if (!tracked && outcome.kind === undefined) return next;
  const kind = outcome.kind ?? (outcome.failure ? 'failure' : 'success');
  if (next.type === 'count') return { ...next, kinds: nextKindCodes(window.size, state, kind) };
  return { ...next, kindBuckets: nextKindBuckets(window.size, state, kind, now) };
}

function addToCount(size: number, state: WindowState | null, outcome: WindowOutcome): WindowState {
  const code = (outcome.failure ? FAILURE : 0) + (outcome.slow ? SLOW : 0);
  let outcomes = state?.type === 'count' ? state.outcomes : '';
  let failures = state?.type === 'count' ? state.failures : 0;
  let slowCalls = state?.type === 'count' ? state.slowCalls : 0;
  // After a smaller size was set the window would be emptied; trimming in a loop is still exact.
  while (outcomes.length >= size) {
    const dropped = outcomes.charCodeAt(0) - CODE_0;
    failures -= dropped & FAILURE;
    slowCalls -= (dropped & SLOW) >> 1;
    outcomes = outcomes.slice(1);
  }
  return {
    type: 'count',
    outcomes: outcomes + String.fromCharCode(CODE_0 + code),
    failures: failures + (outcome.failure ? 1 : 0),
    slowCalls: slowCalls + (outcome.slow ? 1 : 0),
  };
}

/** The first epoch second still inside a time window of `size` seconds at `now`. */
function firstLiveSecond(size: number, now: number): number {
  return Math.floor(now / 1000) - size + 1;
}

function addToTime(size: number, state: WindowState | null, outcome: WindowOutcome, now: number): WindowState {
  const from = firstLiveSecond(size, now);
  const buckets = (state?.type === 'time' ? state.buckets : []).filter((b) => b[0] >= from);
  const second = Math.floor(now / 1000);
  const last = buckets.at(-1);
  const f = outcome.failure ? 1 : 0;
  const s = outcome.slow ? 1 : 0;
  // A clock stepping back lands in the newest bucket rather than reordering the buckets.
  if (last !== undefined && last[0] >= second) {
    buckets[buckets.length - 1] = [last[0], last[1] + 1, last[2] + f, last[3] + s];
  } else {
    buckets.push([second, 1, f, s]);
  }
  return { type: 'time', buckets };
}

const rate = (part: number, calls: number) => (calls === 0 ? 0 : Math.round((part / calls) * 10_000) / 100);

/** The window's figures at `now`: time buckets that have expired no longer count. */
export function windowFigures(window: WindowPolicy, state: WindowState | null, now: number): WindowFigures {
  let calls = 0;
  let failures = 0;
  let slowCalls = 0;
  if (window.type === 'count' && state?.type === 'count') {
    calls = state.outcomes.length;
    failures = state.failures;
    slowCalls = state.slowCalls;
  } else if (window.type === 'time' && state?.type === 'time') {
    const from = firstLiveSecond(window.size, now);
    for (const b of state.buckets) {
      if (b[0] < from) continue;
      calls += b[1];
      failures += b[2];
      slowCalls += b[3];
    }
  }
  return { calls, failures, slowCalls, failureRate: rate(failures, calls), slowCallRate: rate(slowCalls, calls) };
}

/**
 * Whether the figures open the circuit: only with at least the minimum calls, when the
 * failure rate reaches its threshold, or (slow calls judged) the slow-call rate reaches
 * its own. Compared as `part * 100 >= threshold * calls`, so no rounding decides.
 */
export function windowTrip(window: WindowPolicy, figures: WindowFigures): WindowTrip | null {
  if (figures.calls === 0 || figures.calls < minimumCalls(window)) return null;
  if (figures.failures * 100 >= window.failureRateThreshold * figures.calls) return 'failure_rate_exceeded';
  if (window.slowCallDurationMs !== null && figures.slowCalls * 100 >= window.slowCallRateThreshold * figures.calls) {
    return 'slow_call_rate_exceeded';
  }
  return null;
}

/** Epoch ms of the oldest moment a time window still counts at `now`; null for a count window (no span). */
export function windowStartMs(window: WindowPolicy, now: number): number | null {
  return window.type === 'time' ? firstLiveSecond(window.size, now) * 1000 : null;
}

/**
 * The window's state with an outcome that counts as nothing (ignored, or a cool-down) noted
 * among its kinds only: the rates do not see it.
 */
export function noteKind(window: WindowPolicy, state: WindowState | null, kind: OutcomeKind, now: number): WindowState {
  if (window.type === 'count') {
    const base = state?.type === 'count' ? state : { type: 'count' as const, outcomes: '', failures: 0, slowCalls: 0 };
    return { ...base, kinds: nextKindCodes(window.size, state, kind) };
  }
  const base = state?.type === 'time' ? state : { type: 'time' as const, buckets: [] };
  return { ...base, kindBuckets: nextKindBuckets(window.size, state, kind, now) };
}
