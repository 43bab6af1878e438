import type { CircuitState } from '../domain/circuit.js';
import type { ForcedState, RampPolicy, WindowPolicy } from '../domain/policy.js';
import type { ThrottlePolicy, ThrottleState } from '../domain/throttle.js';
import type { WindowState } from '../domain/window.js';

/** One circuit as the state gauges read it: typed values, whichever store holds it. */
export interface GaugeCircuit {
  readonly id: number;
  readonly name: string;
  /** The state a GET would show now: an open circuit past `openUntil` reads half_open. */
  readonly state: CircuitState;
  readonly forcedState: ForcedState | null;
  readonly window: WindowPolicy | null;
  readonly windowState: WindowState | null;
  readonly throttle: ThrottlePolicy | null;
  readonly throttleState: ThrottleState | null;
  /** Callers a quorum circuit isolates now (issue 17); null without a quorum. */
  readonly isolatedCallers: number | null;
  /** The slow start's policy and end (issue 29); absent or null: none. */
  readonly ramp?: RampPolicy | null;
  readonly rampUntil?: number | null;
}

export type StateCounts = Record<CircuitState, number>;

/**
 * Where the `max_circuits` cap ends: with at least `limit` circuits, the id of the
 * `limit`-th by creation (`full`); with fewer, the newest id (every circuit is inside).
 * A circuit is inside the cap when its id is at most `lastId`.
 */
export interface CapCutoff {
  readonly lastId: number;
  readonly full: boolean;
}

/** The circuits as the state gauges read them (SQLite table, or the Redis store's mirror). */
export interface SnapshotReader {
  /** Null while the counts are not known yet (a Redis host still reading its mirror at start). */
  stateCounts(now: number): StateCounts | null;
  first(limit: number, now: number): GaugeCircuit[];
  /** Reads at most `limit` ids (an index walk), never the whole table. */
  capCutoff(limit: number): CapCutoff;
}
