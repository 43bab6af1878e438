/**
 * A circuit's stored history decoded once for every replay of it (issue 31, replay.ts): the
 * entries of a range, as parallel arrays; texts `decodeEntry` cannot read are skipped and counted.
 */
import { decodeEntry, type HistoryManual, type StoredEntry } from '../domain/history.js';
import type { CircuitPolicy } from '../domain/policy.js';
import type { EpochMs, Outcome, Transition } from '../domain/types.js';

/** Entry types of a decoded history (`DecodedHistory.types`). */
export const OUTCOME = 0;
export const MANUAL = 1;
export const TRANSITION = 2;

/**
 * A history decoded once for every replay of it, as parallel arrays (a million entries
 * cost a few bytes each beyond their payload; identical outcome texts share one object).
 */
export interface DecodedHistory {
  readonly circuit: string;
  /** Per entry: OUTCOME, MANUAL or TRANSITION. */
  readonly types: Uint8Array;
  /** Per entry: its `t`, epoch ms. */
  readonly times: Float64Array;
  /** Per entry: the outcome, the manual action or the transition. */
  readonly items: readonly (Outcome | HistoryManual | Transition)[];
  /** Outcome entries among them. */
  readonly outcomes: number;
  /** Stored texts `decodeEntry` could not read: skipped. */
  readonly skipped: number;
  readonly from: EpochMs;
  readonly to: EpochMs;
  /** `created`: the range starts with the circuit's first entry; else the start is assumed closed and empty. */
  readonly start: 'created' | 'assumed_closed';
}

/** Outcome texts remembered while decoding (identical texts share one object). */
const DECODE_CACHE_MAX = 4_096;

/** The stored entries with `from <= t < to`, decoded (undecodable ones skipped and counted). */
export function decodeHistory(
  circuit: string,
  entries: readonly StoredEntry[],
  from: EpochMs,
  to: EpochMs,
  createdAt?: EpochMs,
): DecodedHistory {
  let n = 0;
  for (const e of entries) if (e.t >= from && e.t < to) n++;
  const types = new Uint8Array(n);
  const times = new Float64Array(n);
  const items: (Outcome | HistoryManual | Transition)[] = new Array(n);
  const cache = new Map<string, Outcome>();
  let k = 0;
  let outcomes = 0;
  let skipped = 0;
  for (const { t, text } of entries) {
    if (!(t >= from && t < to)) continue;
    const cached = cache.get(text);
    if (cached !== undefined) {
      types[k] = OUTCOME;
      times[k] = t;
      items[k++] = cached;
      outcomes++;
      continue;
    }
    const e = decodeEntry(t, text);
    if (e === null) {
      skipped++;
      continue;
    }
    times[k] = t;
    if (e.type === 'outcome') {
      types[k] = OUTCOME;
      items[k++] = e.outcome;
      outcomes++;
      // An outcome with `at` is stored relative to its t: only others read the same at any t.
      if (e.outcome.at === undefined && cache.size < DECODE_CACHE_MAX) cache.set(text, e.outcome);
    } else if (e.type === 'manual') {
      types[k] = MANUAL;
      items[k++] = e;
    } else {
      types[k] = TRANSITION;
      items[k++] = e.transition;
    }
  }
  const first = items[0] as HistoryManual | undefined;
  const createdHere =
    k > 0 &&
    ((createdAt !== undefined && times[0] === createdAt) ||
      (types[0] === MANUAL && first!.action === 'configure' && first!.before === null));
  return {
    circuit,
    types: types.subarray(0, k),
    times: times.subarray(0, k),
    items: k === n ? items : items.slice(0, k),
    outcomes,
    skipped,
    from,
    to,
    start: createdHere ? 'created' : 'assumed_closed',
  };
}

/** The live policy at the range's start: the `before` of its first policy change, else the current one. */
export function startPolicy(history: DecodedHistory, current: CircuitPolicy): CircuitPolicy {
  for (let i = 0; i < history.types.length; i++) {
    if (history.types[i] !== MANUAL) continue;
    const m = history.items[i] as HistoryManual;
    if (m.action === 'configure') return m.before ?? m.after ?? current;
  }
  return current;
}
