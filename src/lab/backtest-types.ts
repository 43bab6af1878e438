/**
 * The policy lab's contract (issue 31, docs/policy-lab.md): what a backtest is asked and what
 * it answers, as JSON (snake_case, times as epoch ms). The engine (`replay.ts`, `backtest.ts`)
 * is pure and runs in a worker thread (`backtest-worker.ts`); the route, the command line and
 * the dashboard's "what if" panel all answer these shapes.
 */
import type { StoredEntry } from '../domain/history.js';
import type { CircuitPolicy } from '../domain/policy.js';
import type { EpochMs } from '../domain/types.js';

/** One backtest's input: the stored history and the policies to replay it with. */
export interface BacktestInput {
  readonly circuit: string;
  /** The circuit's history in write order (`CircuitStore.history`), as stored. */
  readonly entries: readonly StoredEntry[];
  /** The live policy now (before any change in `entries` after `from`, the replay reads the policy in force from the manual entries). */
  readonly current: CircuitPolicy;
  /** Candidates to replay besides the live policy: one for a backtest, up to 100 for a grid. */
  readonly proposed: readonly CircuitPolicy[];
  /** The range replayed: entries with `from <= t < to`. */
  readonly from: EpochMs;
  readonly to: EpochMs;
  /** Grid mode's objective: an outage counts as caught when a candidate opens within this many seconds of its start. */
  readonly detectWithinSeconds?: number;
  /** The circuit's `createdAt`: a range whose first entry is at it starts from the circuit's creation (`start: 'created'`). */
  readonly createdAt?: EpochMs;
}

/** A transition as the lab answers it. */
export interface LabTransition {
  readonly from: string;
  readonly to: string;
  readonly reason: string;
  readonly at: EpochMs;
}

/** One minute of a replay (the picture's and the dashboard's data). */
export interface MinuteFigures {
  /** The minute's start, epoch ms. */
  readonly t: EpochMs;
  readonly outcomes: number;
  readonly failures: number;
  /** Recorded outcomes this policy would have refused in that minute. */
  readonly refused: number;
  /** Milliseconds of the minute the replayed circuit spent open (or half-open). */
  readonly open_ms: number;
  readonly half_open_ms: number;
}

/** What one policy did over the replayed history. */
export interface RunFigures {
  openings: number;
  time_open_ms: number;
  longest_open_ms: number;
  /** Recorded outcomes that arrived while this replay refused calls: counted, not fed to the machine. */
  refused_calls: number;
  /** Openings within one open time of the previous closing. */
  flaps: number;
  /** Per opening (the first 10,000): ms from the first failure of the burst that caused it to the opening. */
  detection_ms: number[];
  /** The replay's transitions, oldest first (at most 10,000; `transitions_total` counts all). */
  transitions: LabTransition[];
  transitions_total: number;
  series: MinuteFigures[];
  /** How long each point of `series` covers: a minute, or several when the range holds more than a week of minutes. */
  series_bucket_ms: number;
}

/** How faithfully the live policy's replay reproduced what was recorded. */
export interface Fidelity {
  /** Recorded transitions (outside manual actions' own) the replay reproduced with the same time, states and reason. */
  readonly matched: number;
  readonly recorded: number;
  /** matched / recorded, 1 when nothing was recorded. */
  readonly ratio: number;
  /** The first recorded transition the replay did not reproduce, and what the replay did instead; null: none. */
  readonly first_mismatch: { readonly recorded: LabTransition | null; readonly replayed: LabTransition | null } | null;
  readonly manual_actions: number;
}

export interface BacktestResult {
  readonly id: string;
  readonly circuit: string;
  readonly from: EpochMs;
  readonly to: EpochMs;
  readonly outcomes: number;
  /** `created`: the range starts at the circuit's creation; `assumed_closed`: it starts mid-history, closed and empty assumed. */
  readonly start: 'created' | 'assumed_closed';
  /** Stored entries that could not be decoded: skipped. */
  readonly skipped: number;
  readonly current: RunFigures;
  readonly proposed: RunFigures;
  readonly fidelity: Fidelity;
}

/** A grid's candidate: the values it set, its figures (without series and transitions) and its place. */
export interface GridCandidate {
  readonly values: Readonly<Record<string, number>>;
  readonly figures: Omit<RunFigures, 'series' | 'transitions'>;
  /** Outages (recorded openings that lasted over one open time) it opened on within `detect_within_seconds`. */
  readonly outages_caught: number;
  readonly meets_objective: boolean;
  readonly rank: number;
}

export interface GridResult {
  readonly id: string;
  readonly circuit: string;
  readonly from: EpochMs;
  readonly to: EpochMs;
  readonly outcomes: number;
  /** `created`: the range starts at the circuit's creation; `assumed_closed`: it starts mid-history, closed and empty assumed. */
  readonly start: 'created' | 'assumed_closed';
  /** Stored entries that could not be decoded: skipped. */
  readonly skipped: number;
  readonly objective: string;
  readonly outages: number;
  readonly current: Omit<RunFigures, 'series' | 'transitions'>;
  readonly candidates: readonly GridCandidate[];
}
