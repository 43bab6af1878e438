/**
 * The policy lab's replay (issue 31, docs/policy-lab.md): a circuit's recorded history run
 * again through the domain's own pure state machine, with the policy that was live or a
 * proposed one, and what each did. Signatures first; the engine follows.
 */
import type { HistoryEntry, StoredEntry } from '../domain/history.js';
import type { CircuitPolicy } from '../domain/policy.js';
import type { EpochMs } from '../domain/types.js';
import type { Fidelity, RunFigures } from './backtest-types.js';

/** A history decoded once for every replay of it. */
export interface DecodedHistory {
  readonly circuit: string;
  readonly entries: readonly HistoryEntry[];
  /** Outcome entries among `entries`. */
  readonly outcomes: number;
  /** Stored texts `decodeEntry` could not read: skipped. */
  readonly skipped: number;
  readonly from: EpochMs;
  readonly to: EpochMs;
  /** `created`: the range starts with the circuit's first entry; else the start is assumed closed and empty. */
  readonly start: 'created' | 'assumed_closed';
}

/** How one replay runs: with the live policy (and its recorded changes), or one proposed policy throughout. */
export type ReplayPlan =
  | { readonly kind: 'live'; readonly current: CircuitPolicy }
  | { readonly kind: 'proposed'; readonly policy: CircuitPolicy; readonly live: ReplayRun };

/** One replay's figures, and per outcome (in order) whether it refused the call. */
export interface ReplayRun {
  readonly figures: RunFigures;
  readonly refused: Uint8Array;
}

export function decodeHistory(
  _circuit: string,
  _entries: readonly StoredEntry[],
  _from: EpochMs,
  _to: EpochMs,
  _createdAt?: EpochMs,
): DecodedHistory {
  throw new Error('not implemented yet');
}

export function replay(_history: DecodedHistory, _plan: ReplayPlan): ReplayRun {
  throw new Error('not implemented yet');
}

export function fidelity(_history: DecodedHistory, _live: ReplayRun): Fidelity {
  throw new Error('not implemented yet');
}
