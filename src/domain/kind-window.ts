/**
 * The kinds of the outcomes in a circuit's window (issue 29: `window_stats.kinds`, so an
 * operator sees why a circuit did or did not trip). Kept inside the window's state, so it is
 * emptied with it at every state change, and only once an outcome named a kind: a circuit whose
 * outcomes never did keeps the state it always had, and its kinds read from its counts. A count
 * window keeps the kinds of its last `size` outcomes, ignored ones included (one digit per
 * outcome); a time window per-second buckets `[epochSecond, ...one count per kind]`.
 */
import { OUTCOME_KINDS, type OutcomeKind } from './outcome-kind.js';
import type { WindowPolicy } from './policy.js';

export type KindCounts = Record<OutcomeKind, number>;

/** Per-second kinds: `[epochSecond, success, failure, rejected, throttled, caller_deadline, cancelled]`. */
export type KindBucket = readonly [number, number, number, number, number, number, number];

/**
 * The members of a window's state (`window.ts`' WindowState) this file reads, by shape: the
 * window's own outcomes (to seed the kinds from) and the kinds once kept.
 */
export type KindState =
  | { readonly type: 'count'; readonly outcomes: string; readonly kinds?: string }
  | {
      readonly type: 'time';
      readonly buckets: readonly (readonly number[])[];
      readonly kindBuckets?: readonly KindBucket[];
    };

const INDEX: Readonly<Record<OutcomeKind, number>> = Object.fromEntries(OUTCOME_KINDS.map((k, i) => [k, i])) as Record<
  OutcomeKind,
  number
>;
const CODE_0 = '0'.charCodeAt(0);
const FAILURE_CODE = String(INDEX.failure);
const SUCCESS_CODE = String(INDEX.success);

const none = (): KindCounts => ({
  success: 0,
  failure: 0,
  rejected: 0,
  throttled: 0,
  caller_deadline: 0,
  cancelled: 0,
});

/** A count window's kinds as its outcomes say them (before any kind was named: success or failure). */
function seededCodes(state: KindState | null): string {
  if (state?.type !== 'count') return '';
  if (state.kinds !== undefined) return state.kinds;
  let out = '';
  for (let i = 0; i < state.outcomes.length; i++)
    out += (state.outcomes.charCodeAt(i) - CODE_0) & 1 ? FAILURE_CODE : SUCCESS_CODE;
  return out;
}

/** A time window's kind buckets as its buckets say them (before any kind was named). */
function seededBuckets(state: KindState | null): KindBucket[] {
  if (state?.type !== 'time') return [];
  if (state.kindBuckets !== undefined) return [...state.kindBuckets];
  return state.buckets.map((b) => [b[0]!, b[1]! - b[2]!, b[2]!, 0, 0, 0, 0] as KindBucket);
}

/** The count window's kind digits after one more outcome of `kind`: the last `size`. */
export function nextKindCodes(size: number, state: KindState | null, kind: OutcomeKind): string {
  const codes = seededCodes(state) + String(INDEX[kind]);
  return codes.length > size ? codes.slice(codes.length - size) : codes;
}

/** The time window's kind buckets after one more outcome of `kind` at `now` (expired seconds dropped). */
export function nextKindBuckets(size: number, state: KindState | null, kind: OutcomeKind, now: number): KindBucket[] {
  const second = Math.floor(now / 1000);
  const buckets = seededBuckets(state).filter((b) => b[0] > second - size);
  const last = buckets.at(-1);
  const at = INDEX[kind] + 1;
  if (last !== undefined && last[0] >= second) {
    const next = [...last] as number[];
    next[at]! += 1;
    buckets[buckets.length - 1] = next as unknown as KindBucket;
  } else {
    const fresh = [second, 0, 0, 0, 0, 0, 0];
    fresh[at] = 1;
    buckets.push(fresh as unknown as KindBucket);
  }
  return buckets;
}

/** The kinds in the window at `now`: every kind, 0 when none. */
export function kindCounts(window: WindowPolicy, state: KindState | null, now: number): KindCounts {
  const out = none();
  if (window.type === 'count') {
    const codes = seededCodes(state);
    for (let i = 0; i < codes.length; i++) out[OUTCOME_KINDS[codes.charCodeAt(i) - CODE_0]!] += 1;
    return out;
  }
  const first = Math.floor(now / 1000) - window.size + 1;
  for (const b of seededBuckets(state)) {
    if (b[0] < first) continue;
    OUTCOME_KINDS.forEach((k, i) => {
      out[k] += b[i + 1]!;
    });
  }
  return out;
}
